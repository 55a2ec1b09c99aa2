"""``playbook`` and ``lp``: local penalisation of the busy points (PLAyBOOK-HL and LP).

Instead of fantasising outcomes at the busy points, a positive base acquisition (UCB with
``kappa = 2`` on the standardised model, made positive by a softplus) is multiplied by one
penaliser per busy point ``x_j``. The penaliser's exclusion radius comes from a Lipschitz
argument: with ``M`` the best observed utility and ``L`` a Lipschitz constant of the posterior
mean, no point closer than ``r_j = |mu(x_j) - M| / L`` to ``x_j`` can beat ``M``, give or take
``s_j = sigma(x_j) / L``. Everything runs in log space.

With outcome constraints or a failure classifier (``ctx.feasibility``) the probability that a
point is feasible and succeeds is one more penaliser, of the infeasible region (added in log
space), and ``M`` is the best *feasible* utility.

* ``playbook`` (Alvi et al., ICML 2019, "PLAyBOOK-HL"): the *hard* penaliser
  ``phi = ((||x - x_j|| / (r_j + s_j))^p + 1)^(1/p)`` with ``p = -5`` — exactly 0 at the busy
  point, 1 far away — and a *local* Lipschitz constant per busy point (max of ``||grad mu||``
  in a box one lengthscale wide around it).
* ``lp`` (González et al., AISTATS 2016): the soft penaliser
  ``phi = Phi((||x - x_j|| - r_j) / s_j)`` with one global Lipschitz constant.

Several points in one call are chosen greedily: each chosen point becomes a busy point.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.models.model import Model
from botorch.utils.transforms import t_batch_mode_transform
from torch import Tensor

from abo.acquisitions.base import Proposal, ProposalContext, register_strategy
from abo.acquisitions.feasibility import Feasibility
from abo.acquisitions.lipschitz import (  # noqa: F401 (the first three re-exported)
    _LIPSCHITZ_CACHE,
    LIPSCHITZ_FALLBACK,
    LIPSCHITZ_FLOOR,
    estimate_lipschitz,
    kernel_lengthscale,
)
from abo.acquisitions.optimize import (
    SIGMA_FLOOR,
    OptimizerBudget,
    greedy_batch,
    log_softplus,
    outcome_scale,
    standardized_posterior,
)
from abo.acquisitions.quiet import quiet_proposal
from abo.acquisitions.seeded import seeded_maximize
from abo.core.exceptions import AboError

HLP_POWER = -5.0
RADIUS_FLOOR = 1e-12
LOG_PHI_FLOOR = math.log(1e-12)  # keeps log-penalties (and their gradients) finite

Penalizer = Literal["hlp", "lp"]


# -- penalisers ---------------------------------------------------------------------------------
def hlp_penalizer(dist: Tensor, r: Tensor, s: Tensor, p: float = HLP_POWER) -> Tensor:
    """Hard local penaliser ``((dist / (r + s))^p + 1)^(1/p)``: 0 at ``dist = 0``, 1 far away.

    Args:
        dist: ``... x m`` distances to the ``m`` busy points.
        r, s: ``m`` exclusion radii and their uncertainties (same units as ``dist``).
        p: a negative power; the factor is a smooth ``min(dist / (r + s), 1)``.
    """
    c = dist / (r + s).clamp_min(RADIUS_FLOOR)
    return (c.pow(p) + 1.0).pow(1.0 / p)


def log_hlp_penalizer(dist: Tensor, r: Tensor, s: Tensor, p: float = HLP_POWER) -> Tensor:
    """``log hlp_penalizer``, floored at ``log(1e-12)`` so it and its gradient stay finite."""
    log_c = dist.clamp_min(1e-300).log() - (r + s).clamp_min(RADIUS_FLOOR).log()
    out = torch.logaddexp(p * log_c, torch.zeros_like(log_c)) / p
    return out.clamp_min(LOG_PHI_FLOOR)


def lp_penalizer(dist: Tensor, r: Tensor, s: Tensor) -> Tensor:
    """Soft local penaliser ``Phi((dist - r) / s)`` of González et al. (2016), in ``(0, 1)``."""
    return torch.special.ndtr((dist - r) / s.clamp_min(SIGMA_FLOOR))


def log_lp_penalizer(dist: Tensor, r: Tensor, s: Tensor) -> Tensor:
    """``log lp_penalizer`` computed without underflow (strictly negative, finite)."""
    return torch.special.log_ndtr((dist - r) / s.clamp_min(SIGMA_FLOOR))


def standardize_utility(model: Model, y: Tensor) -> Tensor:
    """Utilities ``y`` on the model's standardised scale."""
    shift, scale = outcome_scale(model)
    return (y - shift) / scale


# -- the penalised acquisition ------------------------------------------------------------------
class LocallyPenalizedAcquisition(AcquisitionFunction):
    """``log softplus(UCB(x)) + sum_j log phi(x; x_j)`` on the standardised model.

    Args:
        model: a fitted single-output GP (utilities: larger is better).
        best_f: ``M``, the best observed utility (on the model's original scale).
        X_busy: ``m x d`` busy points (may be empty).
        bounds: ``2 x d`` search bounds (for the Lipschitz search).
        penalizer: ``"hlp"`` (hard, exactly 0 at a busy point) or ``"lp"`` (soft).
        lipschitz: ``"local"`` (one constant per busy point) or ``"global"``.
        kappa: UCB exploration weight on the standardised scale.
        p: the HLP power (negative).
        n_lipschitz_samples, lipschitz_maxiter: the Lipschitz search budget.

    Example:
        >>> acq = LocallyPenalizedAcquisition(model, Y.max(), X_busy, bounds)  # doctest: +SKIP
        >>> acq(X.unsqueeze(1))  # b x 1 x d -> b log-values  # doctest: +SKIP
    """

    # buffers (register_buffer): busy points, their Lipschitz constants, radii and scales
    X_busy: Tensor
    L: Tensor
    r: Tensor
    s: Tensor

    def __init__(
        self,
        model: Model,
        best_f: float | Tensor,
        X_busy: Tensor,
        bounds: Tensor,
        penalizer: Penalizer = "hlp",
        lipschitz: Literal["local", "global"] = "local",
        kappa: float = 2.0,
        p: float = HLP_POWER,
        n_lipschitz_samples: int = 128,
        lipschitz_maxiter: int = 10,
        feasibility: Feasibility | None = None,
    ) -> None:
        super().__init__(model=model)
        self.feasibility = feasibility  # outcome constraints and failures: one more penaliser
        if penalizer not in ("hlp", "lp"):
            raise AboError(f"penalizer: expected 'hlp' or 'lp', got {penalizer!r}")
        if lipschitz not in ("local", "global"):
            raise AboError(f"lipschitz: expected 'local' or 'global', got {lipschitz!r}")
        self.penalizer = penalizer
        self.kappa = float(kappa)
        self.p = float(p)
        d = bounds.shape[-1]
        X_busy = X_busy.detach().to(torch.double).reshape(-1, d)
        self.register_buffer("X_busy", X_busy)
        if X_busy.shape[0] == 0:
            r = s = L = torch.zeros(0, dtype=torch.double, device=X_busy.device)
        else:
            ls = kernel_lengthscale(model, d) if lipschitz == "local" else None
            if ls is None:
                L = estimate_lipschitz(
                    model, bounds, None, None, n_lipschitz_samples, lipschitz_maxiter
                ).expand(X_busy.shape[0])
            else:
                L = estimate_lipschitz(
                    model, bounds, X_busy, ls, n_lipschitz_samples, lipschitz_maxiter
                )
            with torch.no_grad():
                mu, sigma = standardized_posterior(model, X_busy)
                M = standardize_utility(model, torch.as_tensor(best_f).to(mu))
            r = (mu - M).abs() / L
            s = sigma / L
        self.register_buffer("L", L)
        self.register_buffer("r", r.detach())
        self.register_buffer("s", s.detach())

    def log_penalty(self, X: Tensor) -> Tensor:
        """``sum_j log phi(x; x_j)`` at ``b x d`` points (0 without busy points)."""
        if self.X_busy.shape[0] == 0:
            return torch.zeros(X.shape[:-1], dtype=X.dtype, device=X.device)
        diff = X.unsqueeze(-2) - self.X_busy  # b x m x d
        dist = diff.pow(2).sum(-1).clamp_min(1e-30).sqrt()
        if self.penalizer == "hlp":
            logs = log_hlp_penalizer(dist, self.r, self.s, self.p)
        else:
            logs = log_lp_penalizer(dist, self.r, self.s)
        return logs.sum(-1)

    # BoTorch types the decorator for a plain AcquisitionFunction self, not a subclass's
    @t_batch_mode_transform(expected_q=1)  # type: ignore[arg-type]
    def forward(self, X: Tensor) -> Tensor:
        """``b x 1 x d`` -> ``b`` penalised log-acquisition values."""
        X = X.squeeze(-2)
        mean, std = standardized_posterior(self.model, X)
        value = log_softplus(mean + self.kappa * std) + self.log_penalty(X)
        if self.feasibility is not None:  # the infeasible region penalised by its probability
            value = value + self.feasibility.log_prob(X.reshape(-1, X.shape[-1])).reshape(
                value.shape
            )
        return value


# -- the strategies -------------------------------------------------------------------------------
class _PenalizedStrategy:
    """Greedy penalised UCB: shared by ``playbook`` and ``lp``."""

    name = ""
    needs_model = True
    penalizer: Penalizer = "hlp"
    lipschitz: Literal["local", "global"] = "local"

    def __init__(
        self,
        kappa: float = 2.0,
        raw_samples: int = 512,
        num_restarts: int = 6,
        n_lipschitz_samples: int = 128,
        lipschitz_maxiter: int = 10,
    ) -> None:
        if not (isinstance(kappa, int | float) and math.isfinite(kappa) and kappa >= 0):
            raise AboError(f"kappa: expected a non-negative number, got {kappa!r}")
        self.kappa = float(kappa)
        self.budget = OptimizerBudget(raw_samples=raw_samples, num_restarts=num_restarts)
        self.n_lipschitz_samples = n_lipschitz_samples
        self.lipschitz_maxiter = lipschitz_maxiter

    def acquisition(self, ctx: ProposalContext, X_busy: Tensor) -> LocallyPenalizedAcquisition:
        """The penalised acquisition for ``ctx``'s model with ``X_busy`` busy."""
        assert ctx.model is not None
        feas = ctx.feasibility
        Y = feas.feasible_rows(ctx.X, ctx.Y)[1] if feas is not None else ctx.Y
        return LocallyPenalizedAcquisition(
            ctx.model,
            best_f=Y.max() if Y.numel() else ctx.Y.min(),
            X_busy=X_busy,
            bounds=ctx.bounds,
            penalizer=self.penalizer,
            lipschitz=self.lipschitz,
            kappa=self.kappa,
            n_lipschitz_samples=self.n_lipschitz_samples,
            lipschitz_maxiter=self.lipschitz_maxiter,
            feasibility=feas,
        )

    @quiet_proposal
    def propose(self, ctx: ProposalContext, n: int) -> Proposal:
        return greedy_batch(
            ctx,
            n,
            self.name,
            lambda busy: self.acquisition(ctx, busy),
            seeded_maximize,
            self.budget,
        )


@register_strategy(
    "playbook",
    "PLAyBOOK-HL: UCB times hard local penalisers with local Lipschitz constants",
    constraints="single",
)
class PlaybookStrategy(_PenalizedStrategy):
    """PLAyBOOK-HL (Alvi et al. 2019): hard penalisers, one Lipschitz constant per busy point."""

    name = "playbook"
    penalizer: Penalizer = "hlp"
    lipschitz: Literal["local", "global"] = "local"


@register_strategy(
    "lp",
    "local penalisation (Gonzalez et al. 2016): soft penalisers, global L",
    constraints="single",
)
class LocalPenalizationStrategy(_PenalizedStrategy):
    """Local penalisation (González et al. 2016): soft penalisers, one global constant."""

    name = "lp"
    penalizer: Penalizer = "lp"
    lipschitz: Literal["local", "global"] = "global"
