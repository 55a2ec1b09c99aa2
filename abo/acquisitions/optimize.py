"""Acquisition optimisation shared by the model-based strategies (and re-exported posterior pieces).

Quasi-random raw samples pick the starting points of a few L-BFGS-B searches (BoTorch's
``optimize_acqf``); one extra start sits at the best observed point, where the optimum of an
exploitative acquisition usually is (Optuna's GPSampler does the same, and it matters once the
model is good). In a space with integers, steps or categoricals the searches' ends are rounded
and climb by discrete moves among valid points that are not taken (``climb``). The fast
posterior pieces live in ``exact_posterior``, ``believed`` and
``logei``; they stay importable from here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.generation.gen import gen_candidates_scipy
from botorch.optim import optimize_acqf
from botorch.optim.initializers import gen_batch_initial_conditions
from torch import Tensor
from torch.quasirandom import SobolEngine

from abo.acquisitions.base import DUPLICATE_TOL, Proposal, ProposalContext
from abo.acquisitions.believed import Believed
from abo.acquisitions.exact_posterior import (
    SIGMA_FLOOR,
    PosteriorMoments,
    Solves,
    _exact_gp_ready,
    _plain_exact_gp,
    kernel,
    latent_mean,
    latent_mean_std,
    outcome_scale,
    posterior_mean,
    solves,
    standardized_posterior,
)
from abo.acquisitions.logei import FastLogEI, LogH, log_softplus

__all__ = [
    "MAX_INCUMBENTS",
    "SIGMA_FLOOR",
    "Believed",
    "FastLogEI",
    "LogH",
    "Maximizer",
    "OptimizerBudget",
    "PosteriorMoments",
    "Solves",
    "_exact_gp_ready",
    "_plain_exact_gp",
    "best_observed",
    "greedy_batch",
    "incumbent",
    "kernel",
    "latent_mean",
    "latent_mean_std",
    "log_softplus",
    "maximize",
    "outcome_scale",
    "posterior_mean",
    "sobol_points",
    "solves",
    "standardized_posterior",
]


@dataclass(frozen=True)
class OptimizerBudget:
    """How hard to search the acquisition surface (per point)."""

    raw_samples: int = 512
    num_restarts: int = 6
    maxiter: int = 100
    # L-BFGS-B stops when the relative change of the value falls below factr * 2.2e-16 (here
    # about 2e-6, scipy's default 2e-9): the same maxima to four digits on Hartmann-6, in a
    # quarter fewer evaluations
    factr: float = 1e10


def sobol_points(ctx: ProposalContext, n: int, seed: int) -> Tensor:
    """``n x d`` scrambled Sobol points inside ``ctx.bounds``."""
    unit = SobolEngine(ctx.dim, scramble=True, seed=seed).draw(n, dtype=torch.double)
    lo, hi = ctx.bounds.to(torch.double)
    return lo + (hi - lo) * unit.to(lo.device)


def incumbent(ctx: ProposalContext) -> Tensor:
    """``1 x d``: the observed point with the best utility; of several objectives, the one
    whose worst standardised utility is best (a balanced point of the Pareto front)."""
    Y = ctx.Y
    if Y.shape[-1] > 1:
        Z = (Y - Y.mean(dim=0)) / Y.std(dim=0).nan_to_num(1.0).clamp_min(1e-12)
        return ctx.X[Z.min(dim=-1).values.argmax()].unsqueeze(0)
    return ctx.X[Y.squeeze(-1).argmax()].unsqueeze(0)


def search_candidates(
    initial_conditions: Tensor, acquisition_function: AcquisitionFunction, *args: Any, **kwargs: Any
) -> tuple[Tensor, Tensor]:
    """BoTorch's SciPy search (``gen_candidates_scipy``), told that no feature is fixed.

    ``optimize_acqf`` hands its searches an empty dict of fixed features when there are none,
    and an empty dict (unlike ``None``) makes every evaluation of the acquisition rebuild its
    input one column at a time, forward and backward: in 100 dimensions that was about a
    third of an ask. Passed as ``optimize_acqf(..., gen_candidates=search_candidates)``; the
    points and values are the same.
    """
    if not kwargs.get("fixed_features"):
        kwargs["fixed_features"] = None
    return gen_candidates_scipy(initial_conditions, acquisition_function, *args, **kwargs)


def maximize(
    acq: AcquisitionFunction,
    ctx: ProposalContext,
    budget: OptimizerBudget = OptimizerBudget(),
    seed_points: Tensor | None = None,
) -> tuple[Tensor, float]:
    """Maximise a ``q = 1`` acquisition over the cube; return the ``1 x d`` best and its value.

    Args:
        acq: an acquisition taking ``b x 1 x d``.
        ctx: the proposal context (bounds, generator, observations).
        budget: raw samples, restarts and iterations.
        seed_points: ``k x d`` extra starting points (the incumbent is always one).
    """
    starts = gen_batch_initial_conditions(
        acq,
        ctx.bounds,
        q=1,
        num_restarts=budget.num_restarts,
        raw_samples=budget.raw_samples,
        options={"seed": ctx.seed()},
        inequality_constraints=ctx.inequality_constraints,  # None: none
    )
    extra = [incumbent(ctx)] if ctx.X.shape[0] else []
    if seed_points is not None and seed_points.numel():
        extra.append(seed_points)
    if extra:
        more = torch.cat(extra).to(starts)
        more = more[ctx.satisfies(more)]  # a search inside the constraints starts inside
        starts = torch.cat([starts, more.unsqueeze(1)], dim=0)
    options: dict[str, bool | float | int | str] = {"maxiter": budget.maxiter}
    if not ctx.inequality_constraints:
        options["factr"] = budget.factr  # L-BFGS-B's; SLSQP (with constraints) has no factr
    discrete = ctx.neighbours is not None
    X, value = optimize_acqf(
        acq,
        bounds=ctx.bounds,
        q=1,
        num_restarts=starts.shape[0],
        batch_initial_conditions=starts,
        options=options,
        retry_on_optimization_warning=False,
        inequality_constraints=ctx.inequality_constraints,
        return_best_only=not discrete,  # a discrete space climbs from every search's end
        gen_candidates=search_candidates,
    )
    assert value is not None  # optimize_acqf returns the values (return_acq_values=True)
    if discrete:
        return climb(acq, ctx, X.detach(), value.detach(), budget.num_restarts)
    return X.detach(), float(value.max())


CLIMB_MOVES = 32
"""The most discrete moves ``climb`` makes from each start."""
VALID_SAMPLES = 128
"""Valid (rounded) quasi-random points ``climb`` looks at for starts besides the searches'."""


def climb(
    acq: AcquisitionFunction,
    ctx: ProposalContext,
    ends: Tensor,
    relaxed: Tensor,
    n_valid: int = 6,
) -> tuple[Tensor, float]:
    """The best valid point near the searches' relaxed ends ``ends`` (``r x 1 x d``, their
    acquisition values ``relaxed``) or near the best ``n_valid`` of ``VALID_SAMPLES`` valid
    quasi-random points: each start moved to its best valid neighbour (``ctx.neighbours``)
    while that raises the acquisition; ``1 x d`` and its value.

    The relaxation peaks where no valid point is (between two integers' encodings, whose
    uncertainty the GP interpolates), and rounding that peak often lands on a point already
    evaluated or busy: in the real-task suite most of a k-NN study's late proposals did, and
    were replaced by random points. So points that repeat an evaluated or busy one
    (``DUPLICATE_TOL``) count as the worst, and each end climbs by discrete moves (an integer
    one step, another choice of a categorical) among the valid rest, as BoTorch's mixed
    optimisers do; the valid quasi-random starts reach configurations that a path of taken
    neighbours would cut off. When every start and its neighbours are taken, the best
    relaxed end is returned rounded (the proposer replaces a repeat).
    """
    assert ctx.neighbours is not None
    lo, hi = ctx.bounds[0] - 1e-9, ctx.bounds[1] + 1e-9
    taken = torch.cat([ctx.X, ctx.X_pending]).to(ends)
    with torch.no_grad():
        valid = ctx.round(sobol_points(ctx, VALID_SAMPLES, ctx.seed()))
        valid = valid[ctx.satisfies(valid)]
        scores = _valid_values(acq, valid, taken)
        top = valid[scores.topk(min(n_valid, scores.numel())).indices]
        C = torch.unique(torch.cat([ctx.round(ends.reshape(-1, ends.shape[-1])), top]), dim=0)
        V = _valid_values(acq, C, taken)
        moving = torch.arange(C.shape[0])  # a point that did not move has no better neighbour
        for _ in range(CLIMB_MOVES):
            near, owner = ctx.neighbours(C[moving])  # the moving points' moves in one call
            ok = ((near >= lo) & (near <= hi)).all(dim=-1) & ctx.satisfies(near)
            near, owner = near[ok], moving[owner[ok]]
            if not near.shape[0]:
                break
            values = _valid_values(acq, near, taken)
            moved = []
            for i in moving.tolist():
                n, v = near[owner == i], values[owner == i]
                if v.numel() and bool(v.max() > V[i]):
                    C[i], V[i] = n[v.argmax()], v.max()
                    moved.append(i)
            if not moved:
                break
            moving = torch.tensor(moved)
    best = int(V.argmax())
    if torch.isinf(V[best]):  # every end and its neighbours taken
        return ctx.round(ends[int(relaxed.argmax())]), float(relaxed.max())
    return C[best : best + 1], float(V[best])


def _valid_values(acq: AcquisitionFunction, P: Tensor, taken: Tensor) -> Tensor:
    """The acquisition at the ``k x d`` points ``P``, ``-inf`` at those that repeat ``taken``."""
    values = acq(P.unsqueeze(1)).to(torch.double)
    if taken.shape[0]:
        repeats = torch.cdist(P, taken).min(dim=-1).values <= DUPLICATE_TOL
        values = values.masked_fill(repeats, -math.inf)
    return values


Maximizer = Callable[[AcquisitionFunction, ProposalContext, OptimizerBudget], tuple[Tensor, float]]


def greedy_batch(
    ctx: ProposalContext,
    n: int,
    name: str,
    make_acq: Callable[[Tensor], AcquisitionFunction],
    maximizer: Maximizer,
    budget: OptimizerBudget,
) -> Proposal:
    """``n`` points chosen one at a time, each joining the busy set before the next.

    Args:
        make_acq: builds the acquisition for the current ``m x d`` busy points.
        maximizer: ``maximize`` or a seeded variant of it.
    """
    busy = ctx.X_pending.to(torch.double)
    chosen = []
    for _ in range(n):
        x, _ = maximizer(make_acq(busy), ctx, budget)
        x = ctx.round(x)
        chosen.append(x)
        busy = torch.cat([busy, x])
    return Proposal(torch.cat(chosen), [{"strategy": name} for _ in range(n)])


MAX_INCUMBENTS = 256
"""The most observed points a noisy incumbent is looked for among (the best by observed value)."""


def best_observed(X: Tensor, Y: Tensor, k: int = MAX_INCUMBENTS) -> Tensor:
    """The observed points a noisy incumbent may be: all of them up to ``k``, then the ``k``
    best observed (in their original order).

    qLogNEI's joint posterior over its baseline costs ``O(n^2)`` per sample and the believer's
    plug-in incumbent a posterior at every point: seconds an ask at thousands of results. The
    point with the best posterior mean is, short of extreme noise, among the best observed
    ones; studies with at most ``k`` results are unchanged.
    """
    if X.shape[0] <= k:
        return X
    return X[Y.reshape(-1).topk(k).indices.sort().values]
