"""Fast exact-GP posterior pieces: cached training solves, latent means and stds, kernels."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Protocol, cast

import torch
from botorch.models.model import Model
from botorch.models.transforms.outcome import Standardize
from gpytorch.kernels import Kernel
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood, GaussianLikelihood
from gpytorch.models import ExactGP
from linear_operator.operators import LinearOperator
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor

from abo.acquisitions.moments import MaternMoments

SIGMA_FLOOR = 1e-8  # the least standardised posterior std (keeps ratios and logs finite)


def kernel(module: Kernel, A: Tensor, B: Tensor | None = None, diag: bool = False) -> Tensor:
    """The dense kernel matrix ``k(A, B)`` (``B`` defaults to ``A``), or its diagonal.

    The kernel's own ``forward`` (its math, and its gradient: the same numbers) without
    ``Kernel.__call__``'s lazily evaluated tensor and checks, an overhead paid on each of an
    acquisition search's many small evaluations. A kernel restricted to ``active_dims`` at
    the top takes the full call, which applies them.
    """
    B = A if B is None else B
    if getattr(module, "active_dims", None) is not None:
        out = module(A, B, diag=diag)
    else:
        out = module.forward(A, B, diag=diag)
    return out.to_dense() if isinstance(out, LinearOperator) else out


class PosteriorMoments(Protocol):
    """The marginal moments abo reads from ``model.posterior``: BoTorch's ``Posterior`` does not
    declare them, but the posteriors of the models abo fits (GPyTorch and transformed ones) have
    them."""

    @property
    def mean(self) -> Tensor: ...

    @property
    def variance(self) -> Tensor: ...


def outcome_scale(model: Model) -> tuple[Tensor | float, Tensor | float]:
    """``(shift, scale)`` that map the model's outputs to its standardised scale."""
    tf = getattr(model, "outcome_transform", None)
    if isinstance(tf, Standardize):
        return tf.means.reshape(-1)[0], tf.stdvs.reshape(-1)[0]
    return 0.0, 1.0


def _plain_exact_gp(model: Model) -> bool:
    """Whether ``model`` is a plain single-output exact GP whose outcome transform is
    ``Standardize`` or none, so that the latent GP is the model on its standardised scale."""
    tf = getattr(model, "outcome_transform", None)
    return (
        isinstance(model, ExactGP)
        and model.num_outputs == 1
        and getattr(model, "batch_shape", None) == torch.Size([])
        and (tf is None or isinstance(tf, Standardize))
        and model.train_inputs[0].dim() == 2
    )


def _exact_gp_ready(model: Model, X: Tensor) -> bool:
    """Whether ``model`` is a ``_plain_exact_gp``, with its prediction caches built."""
    if not _plain_exact_gp(model):
        return False
    gp = cast(ExactGP, model)  # what _plain_exact_gp checked
    if gp.training or gp.prediction_strategy is None:
        with torch.no_grad():
            model.posterior(X[:1].detach())  # evaluation mode and the prediction caches
    return gp.prediction_strategy.mean_cache.dim() == 1


@dataclass(frozen=True)
class Solves:
    """An exact GP's training solves on its standardised scale: the lower Cholesky factor ``L``
    of ``K + noise`` over the training points, and ``alpha = (K + noise)^-1 (y - m)``.

    A posterior variance ``k(x, x) - ||L^-1 k(X, x)||^2`` is then one triangular solve per
    point, half the flops of the product with GPyTorch's dense inverse root (which costs
    another cubic inversion to build on every new model), and no ``model.posterior`` call is
    needed to get here.
    """

    L: Tensor
    alpha: Tensor

    def project(self, cross: Tensor) -> Tensor:
        """``L^-1 k(X, x)`` for ``k x n`` kernel rows: ``n x k``, differentiable in them."""
        return torch.linalg.solve_triangular(self.L, cross.transpose(-1, -2), upper=False)

    @cached_property
    def Linv(self) -> Tensor:
        """``L^-1``, explicit (once per model): ``MaternMoments``' products."""
        eye = torch.eye(self.L.shape[0], dtype=self.L.dtype, device=self.L.device)
        return torch.linalg.solve_triangular(self.L, eye, upper=False)

    def moments(self, gp: ExactGP) -> MaternMoments | None:
        """``gp``'s ``MaternMoments`` on its training points (once per model), or ``None``
        where its kernel is not abo's."""
        if "_moments" not in self.__dict__:  # a frozen dataclass: cache beside the fields
            train = gp.train_inputs[0]
            found = MaternMoments.of(gp, train, self.Linv.to(train), self.alpha.to(train))
            self.__dict__["_moments"] = found
        return cast("MaternMoments | None", self.__dict__["_moments"])


def _key(gp: ExactGP) -> tuple[tuple[int, ...], Tensor]:
    """What a model's solves depend on: its training tensors (by identity and in-place
    version) and its parameters' values (a refit may write them through ``.data``, which no
    version counter sees)."""
    data = tuple(v for t in (gp.train_inputs[0], gp.train_targets) for v in (id(t), t._version))
    params = [p.detach().reshape(-1) for p in gp.parameters()]
    return data, torch.cat(params) if params else torch.zeros(0, device=gp.train_targets.device)


def solves(model: Model) -> Solves | None:
    """The model's ``Solves`` (computed once per model and data), or ``None`` where the model
    is not a ``_plain_exact_gp`` with a Gaussian likelihood."""
    if not _plain_exact_gp(model):
        return None
    gp = cast(ExactGP, model)  # what _plain_exact_gp checked
    if not isinstance(gp.likelihood, GaussianLikelihood | FixedNoiseGaussianLikelihood):
        return None
    if gp.training:
        gp.eval()  # BoTorch stores the transformed training inputs in evaluation mode
    key = _key(gp)
    cached = getattr(gp, "_abo_solves", None)
    if cached is not None and cached[0][0] == key[0] and torch.equal(cached[0][1], key[1]):
        return cast(Solves, cached[1])
    with torch.no_grad():
        train = gp.train_inputs[0]
        n = train.shape[0]
        noise = gp.likelihood.noise.detach().reshape(-1).to(train)
        if noise.numel() not in (1, n):
            return None
        K = kernel(gp.covar_module, train) + torch.diag(noise.expand(n))
        L = psd_safe_cholesky(K)
        resid = (gp.train_targets - gp.mean_module(train)).unsqueeze(-1)
        alpha = torch.cholesky_solve(resid, L).squeeze(-1)
    out = Solves(L=L.detach(), alpha=alpha.detach())
    gp._abo_solves = (key, out)  # one model's cache (a torch Module takes attributes)
    return out


def latent_mean(model: Model, X: Tensor) -> Tensor | None:
    """Standardised posterior mean at ``k x d`` points, without any posterior variance.

    For a single-output exact GP (``Standardize`` or no outcome transform) it is the latent
    mean ``m(x) + k(x, X_train) K^-1 (y - m)``: one kernel row per point against the solved
    ``K^-1 (y - m)`` (``solves``), differentiable in ``X``. ``model.posterior`` would also
    solve for every point's variance (``O(n^2)`` each). ``None`` for any other model: use
    ``model.posterior``.
    """
    sol = solves(model)
    if sol is None:
        return None
    gp = cast(ExactGP, model)  # what solves checked
    Xt = gp.transform_inputs(X)
    cross = kernel(gp.covar_module, Xt, gp.train_inputs[0])  # k x n
    return gp.mean_module(Xt) + cross @ sol.alpha.to(cross)


def posterior_mean(model: Model, X: Tensor) -> Tensor:
    """The posterior mean at ``k x d`` points on the model's original scale (``k``), without
    gradients: ``latent_mean``'s one kernel row per point where it applies (no variances, no
    per-point posterior objects), else ``model.posterior`` point by point."""
    with torch.no_grad():
        fast = latent_mean(model, X)
        if fast is not None:
            tf = getattr(model, "outcome_transform", None)
            if tf is not None:
                fast = tf.means.reshape(()) + tf.stdvs.reshape(()) * fast
            return fast.reshape(-1)
        return cast(PosteriorMoments, model.posterior(X.unsqueeze(-2))).mean.reshape(-1)


def latent_mean_std(model: Model, X: Tensor, grad: bool = False) -> tuple[Tensor, Tensor] | None:
    """Marginal latent mean and std at ``k x d`` points, from the model's ``solves``.

    The standardised-scale posterior of ``latent_mean``'s models: ``var = k(x, x) - ||L^-1
    k(X_train, x)||^2``, the same numbers as ``model.posterior`` without its per-point batch
    overhead (which dominates an acquisition search's many small evaluations). ``grad=True``
    keeps the graph to ``X`` (the solves are constants), for gradient-based acquisition
    search: abo's own GPs then take ``MaternMoments``' closed-form gradient. ``None`` for
    other models.
    """
    with torch.set_grad_enabled(grad and torch.is_grad_enabled()):
        sol = solves(model)
        if sol is None:
            return None
        gp = cast(ExactGP, model)  # what solves checked
        fast = sol.moments(gp) if grad else None
        if fast is not None:
            return fast(X)
        Xt = gp.transform_inputs(X)
        cross = kernel(gp.covar_module, Xt, gp.train_inputs[0])
        mean = gp.mean_module(Xt) + cross @ sol.alpha.to(cross)
        prior = kernel(gp.covar_module, Xt, diag=True)
        var = prior - sol.project(cross).pow(2).sum(-2)
        # with gradients, a floor keeps d sqrt(var) finite where the variance vanishes
        return mean, var.clamp_min(1e-16 if grad else 0.0).sqrt()


# -- the standardised posterior ---------------------------------------------------------------
def standardized_posterior(model: Model, X: Tensor) -> tuple[Tensor, Tensor]:
    """Marginal posterior mean and std at ``... x d`` points, on the standardised scale.

    Exact GPs take ``latent_mean_std``'s one matrix product (differentiable), several times
    faster per call than ``model.posterior`` over a batch of single points.
    """
    if X.dim() == 2:
        fast = latent_mean_std(model, X, grad=True)
        if fast is not None:
            mean, std = fast
            return mean, std.clamp_min(SIGMA_FLOOR)
    shift, scale = outcome_scale(model)
    post = cast(PosteriorMoments, model.posterior(X.unsqueeze(-2)))  # one point per batch
    mean = (post.mean.squeeze(-1).squeeze(-1) - shift) / scale
    std = post.variance.squeeze(-1).squeeze(-1).clamp_min(SIGMA_FLOOR**2).sqrt() / scale
    return mean, std
