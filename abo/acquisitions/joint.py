"""``JointPosterior``: the joint posterior of independent exact GPs in a few matrix products.

qLogNEHVI evaluates the posterior of every objective jointly over the candidate and its
baseline dozens of times per ask. Through GPyTorch each evaluation builds lazy kernel
operators and prediction objects per model (about two thirds of an ask's time at 300
results); the numbers themselves are a kernel block against the data and the GP's cached
solves, as in ``optimize.latent_mean_std``. ``JointPosterior`` computes that block directly:

    mean = m(x) + k(x, X) K^-1 (y - m),   cov = k(x, x') - k(x, X) R (k(x', X) R)^T,

with ``R R^T = K^-1`` the GP's cached root, per objective, on the GP's original scale (its
``Standardize`` transform undone), returned as the same ``MultitaskMultivariateNormal`` over
independent outputs that ``ModelListGP.posterior`` returns, so BoTorch's acquisitions (their
cached-Cholesky sampling included) take it unchanged.

Every evaluation is over the same baseline followed by the candidates. ``remember(B)`` keeps
the baseline's kernel rows, mean and covariance, so an evaluation whose points start with
``B`` computes only the candidates' rows and their covariance with ``B``: a batch of raw
samples is one kernel row per candidate, not one per baseline point as well.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

import torch
from botorch.models import ModelListGP
from botorch.models.gpytorch import GPyTorchModel
from botorch.models.model import Model
from botorch.posteriors import GPyTorchPosterior
from gpytorch.distributions import MultitaskMultivariateNormal, MultivariateNormal
from gpytorch.models import ExactGP
from linear_operator.operators import DenseLinearOperator
from torch import Tensor

from abo.acquisitions.optimize import _exact_gp_ready, kernel

Acq = TypeVar("Acq", bound=Any)  # an acquisition with an ``X_baseline``


class JointPosterior(GPyTorchModel):
    """The outputs of a ``ModelListGP`` of plain exact GPs (or of one), posterior by matrix
    products.

    Build it with ``JointPosterior.wrap(model, X)``, which returns ``model`` itself when one of
    its GPs is not a plain single-output exact GP (``latent_mean_std``'s condition).
    """

    _num_outputs: int

    def __init__(self, gps: list[ExactGP]) -> None:
        super().__init__()
        self.gps = gps  # a plain list: the GPs stay the caller's modules, not this one's
        self._num_outputs = len(gps)
        self._pieces = [self._cached(gp) for gp in gps]
        self._prefix: Tensor | None = None
        self._prefix_blocks: list[tuple[Tensor, Tensor, Tensor, Tensor, Tensor]] = []

    @staticmethod
    def wrap(model: Model, X: Tensor) -> Model:
        """``model`` (a ``ModelListGP``, or one GP) as a ``JointPosterior`` where every GP
        qualifies, else ``model``."""
        gps = list(model.models) if isinstance(model, ModelListGP) else [model]
        if not all(_exact_gp_ready(cast(Model, gp), X) for gp in gps):
            return model
        return JointPosterior([cast(ExactGP, gp) for gp in gps])

    @staticmethod
    def _cached(gp: ExactGP) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``K^-1 (y - m)``, the root ``R``, and the outcome transform's location and scale."""
        strategy = gp.prediction_strategy
        root = strategy.covar_cache
        root = (root.to_dense() if hasattr(root, "to_dense") else root).detach()
        alpha = strategy.mean_cache.detach()
        tf = getattr(gp, "outcome_transform", None)
        one = torch.ones((), dtype=alpha.dtype)
        loc = tf.means.reshape(()).detach() if tf is not None else 0 * one
        scale = tf.stdvs.reshape(()).detach() if tf is not None else one
        return alpha, root, loc, scale

    def remember(self, B: Tensor) -> None:
        """Keep the ``p x d`` baseline ``B``'s pieces for evaluations over ``B`` and more."""
        with torch.no_grad():
            self._prefix = B.detach()
            self._prefix_blocks = []
            for i, gp in enumerate(self.gps):
                alpha, root = self._pieces[i][:2]
                mean, cov, cr = self._moments(i, self._prefix)
                Bt = gp.transform_inputs(self._prefix)
                against = torch.cat([gp.train_inputs[0], Bt])  # one kernel call for both
                solves = torch.cat([alpha.unsqueeze(-1), root], dim=-1).to(cr)  # n x (1 + r)
                self._prefix_blocks.append((cr, mean, cov, against, solves))

    def _starts_with_prefix(self, X: Tensor) -> bool:
        P = self._prefix
        if P is None or X.shape[-2] <= P.shape[0] or X.shape[-1] != P.shape[-1]:
            return False
        return bool((X[..., : P.shape[0], :] == P.to(X)).all())

    @property
    def batch_shape(self) -> torch.Size:
        return torch.Size([])

    @property
    def num_outputs(self) -> int:
        return self._num_outputs

    def posterior(  # type: ignore[override]
        self,
        X: Tensor,
        output_indices: list[int] | None = None,
        observation_noise: bool | Tensor = False,
        posterior_transform: Any = None,
    ) -> GPyTorchPosterior:
        """The joint posterior over ``batch x t`` points and the outputs (latent, no noise)."""
        if observation_noise is not False or posterior_transform is not None:
            raise NotImplementedError("JointPosterior: the latent posterior only")
        known = self._starts_with_prefix(X)
        mvns = []
        for i in output_indices or range(self._num_outputs):
            mean, cov = self._after_prefix(i, X) if known else self._moments(i, X)[:2]
            loc, scale = self._pieces[i][2:]
            # a linear operator, not a tensor: torch's own MultivariateNormal would factor it
            mvns.append(MultivariateNormal(loc + scale * mean, DenseLinearOperator(scale**2 * cov)))
        if len(mvns) == 1:
            return GPyTorchPosterior(mvns[0])
        return GPyTorchPosterior(MultitaskMultivariateNormal.from_independent_mvns(mvns=mvns))

    def _moments(self, i: int, X: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Standardised joint mean and covariance of output ``i`` at ``batch x t x d``, and
        the points' kernel rows times the root (``k(x, X) R``, what ``remember`` keeps)."""
        gp, (alpha, root, _, _) = self.gps[i], self._pieces[i]
        Xt = gp.transform_inputs(X)
        cross = kernel(gp.covar_module, Xt, gp.train_inputs[0])  # b x t x n
        cr = cross @ root.to(cross)
        mean = gp.mean_module(Xt) + cross @ alpha.to(cross)
        cov = kernel(gp.covar_module, Xt) - cr @ cr.transpose(-1, -2)
        return mean, 0.5 * (cov + cov.transpose(-1, -2)), cr

    def _after_prefix(self, i: int, X: Tensor) -> tuple[Tensor, Tensor]:
        """``_moments`` for points that start with the remembered baseline: only the rows of
        the points after it are computed, the baseline's block is the remembered one."""
        assert self._prefix is not None
        gp = self.gps[i]
        cr_B, mean_B, cov_B, against, solves = self._prefix_blocks[i]
        p = cr_B.shape[0]
        n = against.shape[0] - p
        Xt = gp.transform_inputs(X[..., p:, :])  # b x q x d
        cross = kernel(gp.covar_module, Xt, against.to(X))  # b x q x (n + p)
        both = cross[..., :n] @ solves.to(X)  # the mean's solve and the root, in one product
        mean = gp.mean_module(Xt) + both[..., 0]
        cr = both[..., 1:]  # b x q x r
        cov_qB = cross[..., n:] - cr @ cr_B.to(X).T  # b x q x p
        if Xt.shape[-2] == 1:  # one candidate: its prior variance, no kernel matrix
            cov_qq = kernel(gp.covar_module, Xt, diag=True).unsqueeze(-1) - cr.pow(2).sum(-1, True)
        else:
            cov_qq = kernel(gp.covar_module, Xt) - cr @ cr.transpose(-1, -2)
            cov_qq = 0.5 * (cov_qq + cov_qq.transpose(-1, -2))
        cov_B, mean_B = cov_B.to(X), mean_B.to(X)
        batch = X.shape[:-2]
        top = torch.cat([cov_B.expand(*batch, p, p), cov_qB.transpose(-1, -2)], dim=-1)
        cov = torch.cat([top, torch.cat([cov_qB, cov_qq], dim=-1)], dim=-2)
        return torch.cat([mean_B.expand(*batch, p), mean], dim=-1), cov


def remembering(acq: Acq) -> Acq:
    """``acq`` (an acquisition with an ``X_baseline``), its ``JointPosterior`` (if its model is
    one) keeping the baseline's block: every evaluation is over that baseline followed by the
    candidates."""
    if isinstance(acq.model, JointPosterior):
        acq.model.remember(acq.X_baseline)
    return acq
