"""BoTorch's pathwise posterior samples of abo's GP, evaluated with their gradient in closed form.

``thompson`` climbs ``n`` sample paths together: every evaluation of a batched L-BFGS-B search
runs each path's random Fourier features and its kernel update through BoTorch's modules, and
autograd records and replays some forty operations (transforms, features, kernel), about two
thirds of a Thompson proposal's time. A path drawn by BoTorch for abo's GP (a scaled
Matern-5/2 kernel on the unit cube, a constant mean, ``Standardize``) is

    f_j(x) = mu + sigma (c + sqrt(s) a (sin(W z) . u_j + cos(W z) . v_j) + k(x, X) . w_j),

with ``z = x / l``, BoTorch's frequencies ``W``, feature scale ``a`` and weights ``u_j``,
``v_j``, ``w_j``, read from the drawn path itself; its gradient has a closed form (the
features' derivative, and the Matern kernel's as in ``abo.acquisitions.moments``).
``SamplePaths`` evaluates it so: the same values and gradients as BoTorch's path to rounding
(tested). Paths of any other shape (another kernel, a transform that is not the identity)
give ``None`` from ``SamplePaths.of``, and BoTorch's own path is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import torch
from botorch.acquisition.thompson_sampling import PathwiseThompsonSampling
from botorch.models.transforms import Standardize
from botorch.sampling.pathwise.features.maps import KernelEvaluationMap, KernelFeatureMap
from botorch.sampling.pathwise.paths import GeneralizedLinearPath
from botorch.sampling.pathwise.utils import (
    ChainedTransform,
    InverseLengthscaleTransform,
    OutputscaleTransform,
    SineCosineTransform,
)
from botorch.utils.transforms import t_batch_mode_transform
from gpytorch.models import ExactGP
from torch import Tensor

from abo.acquisitions.moments import SQRT5, identity_transform, matern52

CHUNK = 1 << 21  # the most feature values (points x paths x features) evaluated at once


@dataclass(frozen=True)
class SamplePaths:
    """``n`` drawn posterior paths of abo's GP (see the module), evaluated point ``j`` on path
    ``j``: ``values(X)`` maps ``b x n x d`` points to ``b x n`` path values, differentiable."""

    omega: Tensor  # F x d frequencies (in lengthscales)
    sin_w: Tensor  # n x F: sqrt(s) a u_j
    cos_w: Tensor  # n x F: sqrt(s) a v_j
    ell: Tensor  # d lengthscales
    scaled: Tensor  # N x d training inputs, in lengthscales
    update: Tensor  # n x N kernel weights w_j
    outputscale: Tensor  # s
    offset: Tensor  # mu + sigma c
    sigma: Tensor  # the outcome transform's scale

    @staticmethod
    @staticmethod
    def of(acq: PathwiseThompsonSampling) -> SamplePaths | None:
        """The closed form of ``acq``'s drawn paths, or ``None`` where they are not BoTorch's
        Matheron paths of abo's GP in the shape the module describes."""
        found = _matheron_paths(acq)
        if found is None:
            return None
        model, prior, update, features, evaluations = found
        pieces = matern52(model)
        assert pieces is not None  # what _matheron_paths checked
        ell, s, constant = pieces
        tf = cast(Standardize, model.outcome_transform)  # what _matheron_paths checked
        with torch.no_grad():
            omega = features.weight.detach()  # F x d
            F = omega.shape[0]
            scale = features.output_transform.transforms[1].scale
            scale = torch.ones(()) if scale is None else scale.detach()
            weights = prior.weight.detach() * scale.to(omega) * s.sqrt()  # n x 2F
            mu, sigma = tf.means.reshape(()), tf.stdvs.reshape(())
            points = evaluations.points.detach()
            if weights.dim() != 2 or weights.shape[-1] != 2 * F or points.dim() != 2:
                return None
            return SamplePaths(
                omega=omega,
                sin_w=weights[:, :F].contiguous(),
                cos_w=weights[:, F:].contiguous(),
                ell=ell.to(omega),
                scaled=(points / ell.to(points)).contiguous(),
                update=update.weight.detach().reshape(weights.shape[0], -1),
                outputscale=s.to(omega),
                offset=mu + sigma * constant,
                sigma=sigma,
            )

    def values(self, X: Tensor) -> Tensor:
        """``b x n`` values of path ``j`` at ``X[..., j, :]``, differentiable in ``X``."""
        if torch.is_grad_enabled() and X.requires_grad:
            return cast(Tensor, _Paths.apply(X, self))
        rows = max(1, CHUNK // max(1, X.shape[-2] * self.omega.shape[0]))
        flat = X.reshape(-1, *X.shape[-2:])
        with torch.no_grad():  # in pieces: b x n x F features for a large b are large
            parts = [
                _Paths.evaluate(flat[i : i + rows], self)[0] for i in range(0, len(flat), rows)
            ]
        return torch.cat(parts).reshape(X.shape[:-1])

    def everywhere(self, P: Tensor) -> Tensor:
        """``n x r``: every path at every one of ``r x d`` points, the features computed once
        per point (how raw samples are scored)."""
        with torch.no_grad():
            z = P / self.ell
            phase = z @ self.omega.T  # r x F
            prior = phase.sin() @ self.sin_w.T + phase.cos() @ self.cos_w.T  # r x n
            r = torch.cdist(z - z.mean(0), self.scaled - z.mean(0))
            kern = (
                self.outputscale * (1.0 + SQRT5 * r + (5.0 / 3.0) * r * r) * torch.exp(-SQRT5 * r)
            )
            return (self.offset + self.sigma * (prior + kern @ self.update.T)).T


def _matheron_paths(acq: PathwiseThompsonSampling) -> tuple[Any, Any, Any, Any, Any] | None:
    """``(model, prior, update, features, evaluations)`` of ``acq``'s drawn paths where the
    model is abo's GP (Matern-5/2, ``Standardize``, no input transform) and the paths are
    BoTorch's Matheron paths of it in the module's shape; else ``None``."""
    model = acq.model
    try:
        path: Any = getattr(acq.samples, "_path")  # noqa: B009 - BoTorch's private path
        prior = path.paths["prior_paths"]
        update = path.paths["update_paths"]
    except (AttributeError, KeyError, TypeError):
        return None
    if not isinstance(model, ExactGP) or getattr(model, "num_outputs", 0) != 1:
        return None
    if (
        matern52(model) is None
        or not isinstance(getattr(model, "outcome_transform", None), Standardize)
        or not identity_transform(getattr(model, "input_transform", None))
    ):
        return None
    if not (isinstance(prior, GeneralizedLinearPath) and isinstance(update, GeneralizedLinearPath)):
        return None
    features, evaluations = prior.feature_map, update.feature_map
    if not _features_match(model, prior, features, evaluations):
        return None
    transforms = (prior.input_transform, update.input_transform, evaluations.input_transform)
    if not all(identity_transform(t) for t in transforms) or update.bias_module is not None:
        return None
    if prior.output_transform is not None or update.output_transform is not None:
        return None
    return model, prior, update, features, evaluations


def _features_match(model: Any, prior: Any, features: Any, evaluations: Any) -> bool:
    """Whether the paths' random features and kernel evaluations are those of ``model``'s
    scaled kernel and its constant mean (BoTorch's defaults for it)."""
    if not isinstance(features, KernelFeatureMap) or features.bias is not None:
        return False
    if (
        not isinstance(evaluations, KernelEvaluationMap)
        or evaluations.kernel is not model.covar_module
    ):
        return False
    chain = features.output_transform
    return (
        isinstance(features.input_transform, InverseLengthscaleTransform)
        and isinstance(chain, ChainedTransform)
        and len(chain.transforms) == 2
        and isinstance(chain.transforms[0], OutputscaleTransform)
        and isinstance(chain.transforms[1], SineCosineTransform)
        and features.input_transform.kernel is model.covar_module.base_kernel
        and chain.transforms[0].kernel is model.covar_module
        and prior.bias_module is model.mean_module
    )


class _Paths(torch.autograd.Function):
    """``SamplePaths.values``'s forward pass, and its backward pass in closed form."""

    @staticmethod
    def forward(ctx: Any, X: Tensor, p: SamplePaths) -> Tensor:
        value, saved = _Paths.evaluate(X, p)
        ctx.p = p
        ctx.save_for_backward(*saved)
        return value

    @staticmethod
    def evaluate(X: Tensor, p: SamplePaths) -> tuple[Tensor, tuple[Tensor, ...]]:
        """The ``b x n`` values, and what the backward pass needs."""
        z = X.detach() / p.ell  # b x n x d
        phase = z @ p.omega.T  # b x n x F
        sin, cos = phase.sin(), phase.cos()
        prior = (sin * p.sin_w).sum(-1) + (cos * p.cos_w).sum(-1)
        flat = z.reshape(-1, z.shape[-1])
        shift = flat.mean(0)  # centred before the distances, as GPyTorch's kernels do
        r = torch.cdist(flat - shift, p.scaled - shift).reshape(*z.shape[:-1], -1)  # b x n x N
        e = torch.exp(-SQRT5 * r)
        kern = p.outputscale * (1.0 + SQRT5 * r + (5.0 / 3.0) * r * r) * e
        update = (kern * p.update).sum(-1)
        return p.offset + p.sigma * (prior + update), (z, sin, cos, r, e)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        p: SamplePaths = ctx.p
        z, sin, cos, r, e = ctx.saved_tensors
        g = (p.sigma * grad).unsqueeze(-1)  # b x n x 1
        # the features: d/dz sin(W z) = cos(W z) W, d/dz cos(W z) = -sin(W z) W
        grad_z = (g * (cos * p.sin_w - sin * p.cos_w)) @ p.omega
        # the kernel update: d k_i / dz = -5/3 s (1 + sqrt(5) r_i) exp(-sqrt(5) r_i) (z - z_i)
        beta = g * p.update * (-5.0 / 3.0) * p.outputscale * (1.0 + SQRT5 * r) * e
        grad_z = grad_z + beta.sum(-1, keepdim=True) * z - beta @ p.scaled
        return grad_z / p.ell, None


class DrawnPaths(PathwiseThompsonSampling):
    """BoTorch's ``PathwiseThompsonSampling`` (the separable sum ``sum_j path_j(x_j)`` over
    ``b x n x d`` points), its drawn paths evaluated by ``SamplePaths`` wherever they are abo's
    GP's, and by BoTorch's modules otherwise."""

    closed: SamplePaths | None = None

    def redraw(self, batch_size: int) -> None:
        super().redraw(batch_size)
        self.closed = SamplePaths.of(self)

    def path_values(self, X: Tensor) -> Tensor:
        """``b x n`` values of path ``j`` at ``X[..., j, :]`` for ``b x n x d`` points."""
        if self.closed is not None:
            return self.closed.values(X)
        assert self.samples is not None  # drawn by redraw()
        return self.samples(X.unsqueeze(-2)).reshape(X.shape[:-1])

    def everywhere(self, P: Tensor) -> Tensor:
        """``n x r``: every path at every one of ``r x d`` points."""
        if self.closed is not None:
            return self.closed.everywhere(P)
        assert self.samples is not None and self.batch_size is not None
        with torch.no_grad():
            return self.samples(P).reshape(self.batch_size, -1)

    @t_batch_mode_transform()  # type: ignore[arg-type]
    def forward(self, X: Tensor) -> Tensor:
        return self.path_values(X).sum(-1)
