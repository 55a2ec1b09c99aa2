"""``Believed``: an exact GP's posterior with busy points believed at their mean."""

from __future__ import annotations

from typing import cast

import torch
from botorch.models.model import Model
from gpytorch.likelihoods import GaussianLikelihood
from gpytorch.models import ExactGP
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor

from abo.acquisitions.exact_posterior import kernel, solves
from abo.acquisitions.moments import MaternMoments


class Believed:
    """An exact GP's posterior as if ``m x d`` busy points had been observed at their posterior
    mean (the kriging believer's model), without building that model.

    Believing a point at its mean leaves the posterior mean unchanged everywhere; the variance
    loses what the busy points would explain: ``var(x) - c(x)^T S^-1 c(x)``, with ``c(x)`` the
    posterior covariance between ``x`` and the busy points and ``S`` theirs plus the
    observation noise (what ``condition_on_observations`` gives their fantasies). Everything
    comes from the GP's ``solves`` (``latent_mean_std``'s pieces), so an
    evaluation is one kernel row against the data and one against the busy points, and no
    fantasy model (a low-rank update of every cache) is made per proposal.
    """

    def __init__(self, model: Model, X_busy: Tensor) -> None:
        sol = solves(model)
        if sol is None or not isinstance(model.likelihood, GaussianLikelihood):
            raise TypeError(
                f"Believed: needs a single-output exact GP with one noise level, got "
                f"{type(model).__name__}"
            )
        self.gp = cast(ExactGP, model)
        self.solves = sol
        with torch.no_grad():
            self.busy = self.gp.transform_inputs(X_busy.to(sol.alpha))
            cross = kernel(self.gp.covar_module, self.busy, self.gp.train_inputs[0])
            self.busy_proj = sol.project(cross)  # n x m: L^-1 k(X, b)
            prior = kernel(self.gp.covar_module, self.busy)
            noise = self.gp.likelihood.noise.detach().reshape(())  # standardised scale
            S = prior - self.busy_proj.T @ self.busy_proj
            S = S + noise * torch.eye(S.shape[0], dtype=S.dtype, device=S.device)
            self.chol = psd_safe_cholesky(0.5 * (S + S.T))
        self.moments = self._moments()

    def _moments(self) -> MaternMoments | None:
        """``MaternMoments`` on the data and the busy points together (``None`` where the
        kernel is not abo's): the inverse Cholesky factor of both is the data's ``L^-1``
        bordered by ``C^-1 [-B L^-1, I]``, with ``B = (L^-1 k(X, b))^T`` and ``C`` the busy
        points' factor, ``chol``."""
        train = self.gp.train_inputs[0]
        if self.busy.shape[0] == 0:
            return self.solves.moments(self.gp)
        with torch.no_grad():
            Linv = self.solves.Linv.to(train)
            m = self.busy.shape[0]
            eye = torch.eye(m, dtype=train.dtype, device=train.device)
            Cinv = torch.linalg.solve_triangular(self.chol, eye, upper=False)
            lower = torch.cat([-Cinv @ (self.busy_proj.T @ Linv), Cinv], dim=1)
            upper = torch.cat([Linv, Linv.new_zeros(Linv.shape[0], m)], dim=1)
            both = torch.cat([train, self.busy.to(train)])
            return MaternMoments.of(
                self.gp, both, torch.cat([upper, lower]), self.solves.alpha.to(train)
            )

    @staticmethod
    def supported(model: Model, X: Tensor) -> bool:
        """Whether ``model`` is a GP ``Believed`` takes (else build the fantasy model)."""
        return (
            isinstance(model, ExactGP)
            and isinstance(model.likelihood, GaussianLikelihood)
            and (solves(model) is not None)
        )

    def mean_std(self, X: Tensor) -> tuple[Tensor, Tensor]:
        """Standardised latent mean and std at ``k x d`` points, differentiable in ``X``."""
        if self.moments is not None:
            return self.moments(X)
        gp = self.gp
        Xt = gp.transform_inputs(X)
        train = gp.train_inputs[0]
        n = train.shape[0]
        # one kernel call against the data and the busy points together
        both = kernel(gp.covar_module, Xt, torch.cat([train, self.busy.to(train)]))
        cross = both[..., :n]  # k x n
        proj = self.solves.project(cross)  # n x k
        mean = gp.mean_module(Xt) + cross @ self.solves.alpha.to(Xt)
        var = kernel(gp.covar_module, Xt, diag=True) - proj.pow(2).sum(-2)
        if self.busy.shape[0]:
            c = both[..., n:] - proj.transpose(-1, -2) @ self.busy_proj
            v = torch.linalg.solve_triangular(self.chol, c.transpose(-1, -2), upper=False)
            var = var - v.pow(2).sum(-2)  # v: m x k
        return mean, var.clamp_min(1e-16).sqrt()

    def covariance(self, X: Tensor) -> Tensor:
        """The standardised latent posterior covariance among ``k x d`` points (``k x k``),
        the busy points believed (what the multi-fidelity strategy weighs fidelities by)."""
        gp = self.gp
        with torch.no_grad():
            Xt = gp.transform_inputs(X.to(self.solves.alpha))
            train = gp.train_inputs[0]
            n = train.shape[0]
            both = kernel(gp.covar_module, Xt, torch.cat([train, self.busy.to(train)]))
            proj = self.solves.project(both[..., :n])  # n x k
            cov = kernel(gp.covar_module, Xt) - proj.T @ proj
            if self.busy.shape[0]:
                c = both[..., n:] - proj.T @ self.busy_proj
                v = torch.linalg.solve_triangular(self.chol, c.T, upper=False)  # m x k
                cov = cov - v.T @ v
        return cov
