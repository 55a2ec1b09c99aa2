"""``aegis`` and ``aegis-rs``: asynchronous epsilon-greedy BO (De Ath et al., UAI 2021).

Per free worker, with ``eps_c`` the exploration rate and ``t`` the number of proposals this
strategy made before (counted from the end of the initial design):

* **exploit** — maximise the posterior mean — when ``t == 0`` (and ``eps_c < 0.5``), or when
  ``t > k`` (all ``k`` workers were filled once) and ``U < 1 - 2 eps_c``;
* otherwise, with probability ``eta``, **thompson** — maximise a posterior sample path;
* else **pareto** — a uniform member of the non-dominated set of (mean, std) over Sobol
  candidates (``aegis``), or a uniform **random** point (``aegis-rs``).

Busy points are not modelled: diversity comes from the random arms, from the model changing
after every completion, and from never exploiting twice while the workers first fill. The
default ``eps_c = min(1 / sqrt(max(d, 4)), 0.5)`` means that for ``d <= 4`` only ``t = 0``
exploits. The rule is stateless: ``t`` is derived from the context, so proposals are
reproducible from the study seed.

With outcome constraints or a failure classifier (``ctx.feasibility``) every arm weighs
feasibility: exploit maximises the posterior mean times the probability of feasibility
(``FeasibleBound``), the Thompson arm takes the best feasible point of a joint sample of the
objective and the constraints (``constrained_thompson_points``), and the Pareto and random
arms choose among the candidates more likely feasible than not (``likely_feasible``: the most
likely ones while none is).

Several points in one call share the work of their arms: the posterior-mean maximiser and the
Pareto set are computed once per call (a second exploit in one call would repeat the first and
samples a path instead, as before), all Thompson arms draw their paths in one batch and climb
them together (``thompson_points``), and the Pareto arms take distinct members of one front.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, cast

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.acquisition.analytic import PosteriorMean
from botorch.models.model import Model
from botorch.utils.multi_objective.pareto import is_non_dominated
from torch import Tensor

from abo.acquisitions.base import DUPLICATE_TOL, Proposal, ProposalContext, register_strategy
from abo.acquisitions.feasibility import FeasibleBound, likely_feasible
from abo.acquisitions.optimize import OptimizerBudget, PosteriorMoments, latent_mean_std
from abo.acquisitions.quiet import quiet_proposal
from abo.acquisitions.seeded import seeded_maximize
from abo.acquisitions.thompson import constrained_thompson_points, sobol_points, thompson_points
from abo.core.exceptions import AboError

EPSILON_SCHEDULES = ("sqrtd", "inverse_d", "log")


def epsilon_for(schedule: float | str, d: int) -> float:
    """``eps_c`` for a ``d``-dimensional space: a constant or a named schedule, at most 0.5."""
    if isinstance(schedule, str):
        if schedule == "sqrtd":
            value = 1.0 / math.sqrt(max(d, 4))
        elif schedule == "inverse_d":
            value = 1.0 / d
        elif schedule == "log":
            value = 1.0 / math.log(d + 3)
        else:
            raise AboError(
                f"epsilon: expected a number in [0, 0.5] or one of {EPSILON_SCHEDULES}, "
                f"got {schedule!r}"
            )
        return min(value, 0.5)
    return float(schedule)


def choose_arm(t: int, k: int, eps_c: float, eta: float, u: float, u2: float) -> str:
    """The AEGiS decision for proposal ``t`` with ``k`` workers, given two uniforms.

    Returns ``"exploit"``, ``"thompson"`` or ``"pareto"``.
    """
    if (t == 0 and eps_c < 0.5) or (t > k and u < 1.0 - 2.0 * eps_c):
        return "exploit"
    return "thompson" if u2 < eta else "pareto"


def pareto_set(model: Model, candidates: Tensor) -> Tensor:
    """The members of ``n x d`` ``candidates`` whose (mean, std) no other candidate dominates.

    Both the posterior mean (utility) and the std are maximised; a constant observation noise
    would not change the set, so the latent std is used. On an exact GP both come from one
    matrix product on the standardised scale (``latent_mean_std``), whose affine map to the
    utility scale leaves the set unchanged.
    """
    fast = latent_mean_std(model, candidates)
    if fast is not None:
        mean, std = fast
    else:
        with torch.no_grad():
            post = cast(PosteriorMoments, model.posterior(candidates.unsqueeze(-2)))
            mean = post.mean.reshape(-1)
            std = post.variance.reshape(-1).clamp_min(0).sqrt()
    mask = is_non_dominated(torch.stack([mean, std], dim=-1), deduplicate=True)
    return candidates[mask]


class _AegisBase:
    """The decision rule and the three arms; subclasses choose the third arm."""

    name = ""
    needs_model = True
    third_arm = "pareto"

    def __init__(
        self,
        epsilon: float | str = "sqrtd",
        eta: float = 0.5,
        n_initial: int | None = None,
        raw_samples: int = 512,
        num_restarts: int = 6,
        n_candidates: int | None = None,
    ) -> None:
        if isinstance(epsilon, bool) or not isinstance(epsilon, str | int | float):
            raise AboError(f"epsilon: expected a number or a schedule name, got {epsilon!r}")
        if isinstance(epsilon, str):
            epsilon_for(epsilon, 1)  # checks the name
        elif not 0.0 <= float(epsilon) <= 0.5:
            raise AboError(f"epsilon: a constant must lie in [0, 0.5], got {epsilon!r}")
        if isinstance(eta, bool) or not isinstance(eta, int | float) or not 0.0 <= eta <= 1.0:
            raise AboError(f"eta: expected a probability in [0, 1], got {eta!r}")
        if n_initial is not None and (not isinstance(n_initial, int) or n_initial < 0):
            raise AboError(f"n_initial: expected a non-negative integer, got {n_initial!r}")
        self.epsilon = epsilon
        self.eta = float(eta)
        self.n_initial = n_initial
        self.budget = OptimizerBudget(raw_samples=raw_samples, num_restarts=num_restarts)
        self.n_candidates = n_candidates

    # -- the schedule ---------------------------------------------------------------------------
    def first_t(self, ctx: ProposalContext) -> int:
        """``t`` of the first point of this call: trials made minus the initial design.

        The design size is ``n_initial`` if given, else the context's ``n_initial`` when it has
        one, else the study's default ``max(2, 2 d)`` (exact for spaces without categoricals;
        an overestimate only delays exploitation).
        """
        n_design = self.n_initial
        if n_design is None:
            n_design = getattr(ctx, "n_initial", None)
        if n_design is None:
            n_design = max(2, 2 * ctx.dim)
        made = max(ctx.n_trials, ctx.X.shape[0] + ctx.X_pending.shape[0])
        return made - n_design

    # -- the arms -------------------------------------------------------------------------------
    def exploit(self, ctx: ProposalContext) -> Tensor:
        """``1 x d`` maximiser of the posterior mean (times the probability of feasibility)."""
        assert ctx.model is not None
        if ctx.feasibility is None:
            acq: AcquisitionFunction = PosteriorMean(ctx.model)
        else:
            acq = FeasibleBound(ctx.model, ctx.feasibility)
        x, _ = seeded_maximize(acq, ctx, self.budget)
        return x

    def pareto_front(self, ctx: ProposalContext) -> Tensor:
        """The approximate (mean, std) Pareto set over fresh Sobol candidates."""
        assert ctx.model is not None
        n = self.n_candidates or min(1000 * ctx.dim, 5000)
        candidates = sobol_points(ctx, n, ctx.seed())
        if ctx.feasibility is not None:
            candidates = likely_feasible(ctx.feasibility, candidates, least=max(1, n // 20))
        return pareto_set(ctx.model, candidates)

    def pareto(self, ctx: ProposalContext) -> Tensor:
        """``1 x d`` uniform member of the approximate (mean, std) Pareto set."""
        return self.pareto_members(ctx, 1)

    def pareto_members(self, ctx: ProposalContext, m: int) -> Tensor:
        """``m x d`` distinct uniform members of one approximate Pareto set.

        A front with fewer than ``m`` members is topped up from a front over new candidates.
        """
        picked: list[Tensor] = []
        while m > 0:
            front = self.pareto_front(ctx)
            k = min(m, front.shape[0])
            idx = torch.randperm(front.shape[0], generator=ctx.generator)[:k]
            picked.append(front[idx])
            m -= k
        return torch.cat(picked)

    def random(self, ctx: ProposalContext) -> Tensor:
        """``1 x d`` uniform point (with constraints: uniform among the likely feasible)."""
        if ctx.feasibility is None:
            return ctx.uniform(1)
        pool = likely_feasible(ctx.feasibility, sobol_points(ctx, 1024, ctx.seed()), least=16)
        pick = torch.randint(pool.shape[0], (1,), generator=ctx.generator)
        return pool[pick]

    def arms(self, ctx: ProposalContext, n: int) -> list[str]:
        """The decisions for the next ``n`` points: ``"exploit"``, ``"thompson"`` or ``"pareto"``.

        Draws its uniforms from ``ctx.generator`` first, before any arm runs, so the decisions
        depend only on the seed and ``t`` (``propose`` calls this).
        """
        eps_c = epsilon_for(self.epsilon, ctx.dim)
        k = ctx.n_workers or ctx.X_pending.shape[0] + 1
        t0 = self.first_t(ctx)
        u = torch.rand(n, 2, generator=ctx.generator, dtype=torch.double).tolist()
        return [choose_arm(t0 + i, k, eps_c, self.eta, u1, u2) for i, (u1, u2) in enumerate(u)]

    @quiet_proposal
    def propose(self, ctx: ProposalContext, n: int) -> Proposal:
        seen = torch.cat([ctx.X, ctx.X_pending]).to(torch.double)
        points: list[Tensor | None] = [None] * n
        infos: list[dict[str, Any]] = [{"strategy": self.name} for _ in range(n)]
        arms = self.arms(ctx, n)
        exploited: Tensor | None = None
        for i, arm in enumerate(arms):
            if arm != "exploit":
                continue
            x = ctx.round(self.exploit(ctx)) if exploited is None else exploited
            if (seen.shape[0] and torch.cdist(x, seen).min() <= DUPLICATE_TOL) or (
                exploited is not None
            ):
                # no new data since the last exploit: sample a path instead of repeating it
                arms[i], infos[i]["replaced"] = "thompson", "exploit"
            else:
                exploited = points[i] = x
        thompson = [i for i, arm in enumerate(arms) if arm == "thompson"]
        if thompson:
            if ctx.feasibility is None:
                X, extras = thompson_points(ctx, len(thompson), self.budget, avoid=exploited)
            else:  # the exploited point is busy for the joint samples
                busy = ctx.X_pending if exploited is None else torch.cat([ctx.X_pending, exploited])
                X, extras = constrained_thompson_points(
                    replace(ctx, X_pending=busy.to(ctx.X_pending)), len(thompson), self.budget
                )
            for j, i in enumerate(thompson):
                points[i], infos[i] = X[j : j + 1], {**infos[i], **extras[j]}
        third = [i for i, arm in enumerate(arms) if arm == "pareto"]
        if third:
            if self.third_arm == "pareto":
                X = ctx.round(self.pareto_members(ctx, len(third)))
            else:
                X = ctx.round(torch.cat([self.random(ctx) for _ in third]))
            for j, i in enumerate(third):
                arms[i] = self.third_arm
                points[i] = X[j : j + 1]
        for info, arm in zip(infos, arms, strict=True):
            info["arm"] = arm
        return Proposal(torch.cat([p for p in points if p is not None]), infos)


@register_strategy(
    "aegis",
    "AEGiS: epsilon-greedy over posterior-mean, Thompson and Pareto arms",
    constraints="single",
)
class AegisStrategy(_AegisBase):
    """AEGiS (De Ath et al. 2021).

    Args:
        epsilon: ``eps_c`` as a constant in ``[0, 0.5]`` or a schedule in ``d``: ``"sqrtd"``
            (default, ``min(1/sqrt(max(d, 4)), 0.5)``), ``"inverse_d"`` or ``"log"``.
        eta: probability of the Thompson arm among the exploratory ones.
        n_initial: size of the initial design, when it differs from the study's default.
        raw_samples, num_restarts: optimiser budget of the exploit and Thompson arms.
        n_candidates: Sobol candidates for the Pareto set (default ``min(1000 d, 5000)``).
    """

    name = "aegis"
    third_arm = "pareto"


@register_strategy(
    "aegis-rs",
    "AEGiS-RS: AEGiS with a uniform random point as the third arm",
    constraints="single",
)
class AegisRSStrategy(_AegisBase):
    """AEGiS-RS: the Pareto arm replaced by a uniform random point (same options as AEGiS)."""

    name = "aegis-rs"
    third_arm = "random"
