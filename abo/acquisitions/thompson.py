"""``thompson``: asynchronous Thompson sampling (Kandasamy et al., AISTATS 2018).

Each proposed point maximises its own fresh sample path of the GP posterior. Busy points are
ignored on purpose: the randomness of the draws is what keeps the in-flight points apart, and
a path conditioned on all completed data is exactly the asyTS rule. The paths are BoTorch's
pathwise (Matheron) samples — random Fourier features plus a data update — so they are smooth
functions that L-BFGS-B can climb.

Asked for ``n`` points at once, the ``n`` paths are drawn in one batch (one solve against the
training covariance for all of them) and optimised together: the same Sobol raw samples are
evaluated under every path (the kernel between them and the training data is computed once),
each path starts its local searches at its own best raw samples, and one batched L-BFGS-B run
climbs the separable sum ``sum_j path_j(x_j)``, so each ``x_j`` still maximises only its own
path. If the pathwise draw fails (a model it does not support), an exact joint posterior sample
over Sobol candidates (``MaxPosteriorSampling``) takes its place, and the proposal says so in one
``AboWarning``. An L-BFGS-B search that ends in an abnormal line search keeps the best point it
reached, so BoTorch's ``OptimizationWarning`` about it is recorded, not shown
(``abo.acquisitions.quiet``).

With outcome constraints or a failure classifier (``ctx.feasibility``) each point draws a path
of every constraint's slack GP (and of the classifier's log-odds of success) beside the
objective's and maximises the objective's path where the sampled slacks
are all non-negative (the sample's feasibility): the local searches climb the objective's path
minus a steep penalty on sampled violation, and a point is kept only if the sample says it is
feasible; when the sample is feasible nowhere the searches found, the point with the least
sampled violation is taken, which heads for the feasible region.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.generation.gen import gen_candidates_scipy
from botorch.generation.sampling import MaxPosteriorSampling
from torch import Tensor

from abo.acquisitions.base import DUPLICATE_TOL, Proposal, ProposalContext, register_strategy
from abo.acquisitions.feasibility import violation_scales
from abo.acquisitions.optimize import OptimizerBudget, incumbent, outcome_scale, sobol_points
from abo.acquisitions.paths import DrawnPaths
from abo.acquisitions.quiet import degraded, quiet_proposal, search_warnings
from abo.acquisitions.thompson_pareto import pareto_sample_points


def draw_paths(ctx: ProposalContext, n: int, seed: int) -> DrawnPaths:
    """``n`` independent posterior sample paths in one batch, fixed by ``seed``.

    The acquisition's ``q``-th input point is evaluated on the ``q``-th path, and its value is
    the sum over the ``q`` points, so maximising it over ``b x n x d`` maximises each path.
    Paths of abo's GP are evaluated in closed form (``abo.acquisitions.paths``).
    """
    assert ctx.model is not None
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        acq = DrawnPaths(ctx.model)
        acq.redraw(batch_size=n)
        acq.batch_size = n
    return acq


def path_values(acq: DrawnPaths, X: Tensor) -> Tensor:
    """``b x n`` values of path ``j`` at ``X[..., j, :]`` for ``b x n x d`` points."""
    return acq.path_values(X)


def maximize_paths(
    acq: DrawnPaths, ctx: ProposalContext, budget: OptimizerBudget
) -> tuple[Tensor, Tensor]:
    """Local maxima of every path: ``r x n x d`` points and their ``r x n`` path values.

    Row ``i`` holds the end of each path's ``i``-th local search: the ``num_restarts`` best
    of ``raw_samples`` shared Sobol points under that path, then the incumbent.
    """
    assert acq.batch_size is not None and acq.samples is not None  # drawn by redraw()
    n = acq.batch_size
    raw = sobol_points(ctx, budget.raw_samples, ctx.seed())
    with torch.no_grad():
        raw_values = acq.everywhere(raw)  # every path at every raw point: n x raw
    k = min(budget.num_restarts, raw.shape[0])
    starts = raw[raw_values.topk(k, dim=-1).indices].transpose(0, 1)  # k x n x d
    if ctx.X.shape[0]:
        starts = torch.cat([starts, incumbent(ctx).to(starts).expand(1, n, -1)])
    X = climb(starts, acq, ctx, budget)
    with torch.no_grad():
        return X, path_values(acq, X)


def climb(
    starts: Tensor, acq: AcquisitionFunction, ctx: ProposalContext, budget: OptimizerBudget
) -> Tensor:
    """The ends of batched local searches of ``acq`` from ``k x n x d`` ``starts`` inside the
    cube (and the study's parameter constraints)."""
    with search_warnings():  # an abnormal line search still ends at its best point
        X, _ = gen_candidates_scipy(
            starts,
            acq,
            lower_bounds=ctx.bounds[0].to(starts),
            upper_bounds=ctx.bounds[1].to(starts),
            options={"maxiter": budget.maxiter},
            inequality_constraints=ctx.inequality_constraints,
        )
    return X.detach()


def _pick(candidates: Tensor, values: Tensor, chosen: list[Tensor], ctx: ProposalContext):
    """The best of ``k x d`` ``candidates`` (by ``values``) that rounds to no ``chosen`` point."""
    for i in values.argsort(descending=True).tolist():
        x = ctx.round(candidates[i : i + 1])
        if not chosen or torch.cdist(x, torch.cat(chosen)).min() > DUPLICATE_TOL:
            return x
    return None


def thompson_points(
    ctx: ProposalContext,
    n: int,
    budget: OptimizerBudget,
    n_candidates: int = 1024,
    avoid: Tensor | None = None,
) -> tuple[Tensor, list[dict[str, Any]]]:
    """``n x d`` rounded maximisers of ``n`` independent posterior paths, and info per point.

    The paths and Sobol points come from ``ctx.seed()``, so a seeded context gives the same
    points. A path's best local maximum is used unless it rounds onto an earlier point of this
    call (or a row of ``avoid``); then its next best maximum, then its best raw sample that is
    new, is.
    """
    assert ctx.model is not None
    seed = ctx.seed()
    chosen: list[Tensor] = [] if avoid is None or not avoid.numel() else [avoid.to(torch.double)]
    try:
        acq = draw_paths(ctx, n, seed)
        X, values = maximize_paths(acq, ctx, budget)
        raw = sobol_points(ctx, budget.raw_samples, seed)
        points = []
        for j in range(n):
            x = _pick(X[:, j], values[:, j], chosen, ctx)
            if x is None:  # every local maximum repeats a point: the path's best new raw point
                x = _pick(raw, acq.everywhere(raw)[j], chosen, ctx)
            x = ctx.round(X[0, j : j + 1]) if x is None else x
            points.append(x)
            chosen.append(x)
        return torch.cat(points), [{} for _ in range(n)]
    except Exception as exc:  # noqa: BLE001 - any model the pathwise sampler cannot handle
        candidates = sobol_points(ctx, n_candidates, seed)
        with torch.random.fork_rng(), torch.no_grad():
            torch.manual_seed(seed)
            x = MaxPosteriorSampling(ctx.model, replacement=False)(candidates, num_samples=n)
        info = {"fallback": f"max_posterior_sampling ({type(exc).__name__})"}
        degraded(
            f"the pathwise posterior sample failed ({type(exc).__name__}: {exc}); "
            f"proposed the maximisers of an exact joint sample over {n_candidates} Sobol "
            "candidates instead"
        )
        return ctx.round(x.reshape(n, -1)), [dict(info) for _ in range(n)]


def thompson_point(
    ctx: ProposalContext,
    budget: OptimizerBudget,
    n_candidates: int = 1024,
    avoid: Tensor | None = None,
) -> tuple[Tensor, dict[str, Any]]:
    """The ``1 x d`` maximiser of one posterior sample path, and info about how it was found."""
    X, infos = thompson_points(ctx, 1, budget, n_candidates, avoid)
    return X, infos[0]


def replace_duplicates(
    ctx: ProposalContext, X: Tensor, budget: OptimizerBudget
) -> tuple[Tensor, list[dict[str, Any] | None]]:
    """Rounded ``X`` with each row that repeats a seen point replaced by a Thompson point.

    A row repeats when it lies within ``DUPLICATE_TOL`` of an evaluated or busy point or of an
    earlier row (a rounded or flat search can land there); its replacement avoids them all.
    Returns the points and, per row, the replacement's info (``None`` where the row was kept),
    so a strategy built on another's search never proposes a repeat. Of several objectives
    the replacement is the Thompson rule for them (``thompson_pareto``); with outcome
    constraints, the best feasible point of a joint sample (``constrained_thompson_points``).
    """
    X = ctx.round(X)
    seen = torch.cat([ctx.X, ctx.X_pending]).to(X)
    rows: list[Tensor] = []
    replaced: list[dict[str, Any] | None] = []
    for i in range(X.shape[0]):
        x, extra = X[i : i + 1], None
        if seen.shape[0] and torch.cdist(x, seen).min() <= DUPLICATE_TOL:
            busy = torch.cat([ctx.X_pending.to(X), *rows]) if rows else ctx.X_pending
            if ctx.Y.shape[-1] > 1:  # several objectives: the sample's best improvement
                found = pareto_sample_points(replace(ctx, X_pending=busy), 1, budget)
                x, extra = found.X, found.info[0]
            elif ctx.feasibility is not None:  # the best feasible point of a joint sample
                found_X, infos = constrained_thompson_points(
                    replace(ctx, X_pending=busy), 1, budget
                )
                x, extra = found_X, infos[0]
            else:
                x, extra = thompson_point(ctx, budget, avoid=seen)
            x = ctx.round(x)
        rows.append(x)
        replaced.append(extra)
        seen = torch.cat([seen, x])
    return torch.cat(rows), replaced


class ConstrainedPaths(AcquisitionFunction):
    """``n`` objective paths minus a steep penalty on each point's sampled constraint
    violation: the sum over ``j`` of ``f_j(x_j) - w * sum_i max(0, -s_ij(x_j)) / scale_i``,
    separable in the points like ``DrawnPaths`` (``b x n x d -> b``)."""

    def __init__(
        self,
        objective: DrawnPaths,
        slacks: list[DrawnPaths],
        weights: list[float],
    ) -> None:
        super().__init__(model=objective.model)
        self.objective = objective
        self.slacks = slacks
        self.weights = weights

    def parts(self, X: Tensor) -> tuple[Tensor, Tensor]:
        """``b x n`` objective path values and ``b x n`` weighted sampled violations."""
        value = path_values(self.objective, X)
        violation = torch.zeros_like(value)
        for acq, w in zip(self.slacks, self.weights, strict=True):
            violation = violation + w * path_values(acq, X).neg().clamp_min(0.0)
        return value, violation

    def parts_everywhere(self, P: Tensor) -> tuple[Tensor, Tensor]:
        """``parts`` of every path at every one of ``r x d`` points (``r x n`` each)."""
        value = self.objective.everywhere(P).T
        violation = torch.zeros_like(value)
        for acq, w in zip(self.slacks, self.weights, strict=True):
            violation = violation + w * acq.everywhere(P).T.neg().clamp_min(0.0)
        return value, violation

    def forward(self, X: Tensor) -> Tensor:
        value, violation = self.parts(X)
        return (value - violation).sum(-1)


def constrained_thompson_points(
    ctx: ProposalContext, n: int, budget: OptimizerBudget
) -> tuple[Tensor, list[dict[str, Any]]]:
    """``n x d`` points, each the best feasible point of its own joint sample of the objective
    and every constraint's slack (see the module docstring), and info per point."""
    assert ctx.model is not None and ctx.feasibility is not None
    feas = ctx.feasibility
    seed = ctx.seed()
    objective = draw_paths(ctx, n, seed)
    sampled = feas.sampled  # every constraint's slack, then the failure classifier's log-odds
    slacks = [draw_paths(replace(ctx, model=m), n, seed + 1 + i) for i, m in enumerate(sampled)]
    scale = float(outcome_scale(ctx.model)[1])
    weights = [100.0 * scale / s for s in violation_scales(feas)]
    acq = ConstrainedPaths(objective, slacks, weights)
    raw = sobol_points(ctx, budget.raw_samples, ctx.seed())
    wide = raw.unsqueeze(1).expand(-1, n, -1)  # every raw point under every path
    raw_value, raw_violation = acq.parts_everywhere(raw)  # r x n each
    raw_values = (raw_value - raw_violation).transpose(0, 1)  # n x r
    k = min(budget.num_restarts, raw.shape[0])
    starts = raw[raw_values.topk(k, dim=-1).indices].transpose(0, 1)  # k x n x d
    X_ok, _ = feas.feasible_rows(ctx.X, ctx.Y)
    if X_ok.shape[0]:
        best = X_ok[ctx.Y[feas.observed.to(torch.bool)].reshape(-1).argmax()]
        starts = torch.cat([starts, best.to(starts).expand(1, n, -1)])
    climbed = climb(starts, acq, ctx, budget)
    candidates = torch.cat([climbed, wide])  # (k + r) x n x d: local maxima, then raw
    with torch.no_grad():
        top, top_violation = acq.parts(climbed)
    values = torch.cat([top, raw_value])
    violation = torch.cat([top_violation, raw_violation])
    points: list[Tensor] = []
    infos: list[dict[str, Any]] = []
    for j in range(n):
        ok = violation[:, j] <= 0
        score = torch.where(ok, values[:, j], -torch.inf)
        if not bool(ok.any()):  # feasible nowhere in this sample: the least violation
            score = -violation[:, j]
        seen = torch.cat([ctx.X, ctx.X_pending.to(ctx.X), *points]).to(candidates)
        x = _pick(candidates[:, j], score, [seen] if seen.shape[0] else [], ctx)
        x = ctx.round(candidates[score.argmax(), j].unsqueeze(0)) if x is None else x
        points.append(x)
        infos.append({"sample_feasible": bool(ok.any())})
    return torch.cat(points), infos


@register_strategy(
    "thompson",
    "asynchronous Thompson sampling: maximise a fresh posterior path (of several objectives: "
    "the sample's largest hypervolume improvement)",
    objectives="any",
    constraints="any",
)
class ThompsonStrategy:
    """Asynchronous Thompson sampling: one independent posterior path per proposed point.

    In a study of several objectives, one path per objective and the point where they add the
    most hypervolume to their own front (``abo.acquisitions.thompson_pareto``).

    Args:
        raw_samples, num_restarts: optimiser budget per path (the raw samples are shared).
        n_candidates: Sobol candidates of the fallback sampler (exact, ``O(n^3)``).
    """

    name = "thompson"
    needs_model = True

    def __init__(self, raw_samples: int = 512, num_restarts: int = 6, n_candidates: int = 1024):
        self.budget = OptimizerBudget(raw_samples=raw_samples, num_restarts=num_restarts)
        self.n_candidates = n_candidates

    @quiet_proposal
    def propose(self, ctx: ProposalContext, n: int) -> Proposal:
        if ctx.Y.shape[-1] > 1:
            proposal = pareto_sample_points(ctx, n, self.budget)
            return Proposal(proposal.X, [{"strategy": self.name, **i} for i in proposal.info])
        if ctx.feasibility is not None:
            X, infos = constrained_thompson_points(ctx, n, self.budget)
        else:
            X, infos = thompson_points(ctx, n, self.budget, self.n_candidates)
        return Proposal(X, [{"strategy": self.name, **info} for info in infos])
