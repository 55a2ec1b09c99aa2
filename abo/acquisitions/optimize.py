"""Acquisition optimisation shared by the model-based strategies.

Quasi-random raw samples pick the starting points of a few L-BFGS-B searches (BoTorch's
``optimize_acqf``); one extra start sits at the best observed point, where the optimum of an
exploitative acquisition usually is (Optuna's GPSampler does the same, and it matters once the
model is good).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.optim import optimize_acqf
from botorch.optim.initializers import gen_batch_initial_conditions
from torch import Tensor

from abo.acquisitions.base import Proposal, ProposalContext


@dataclass(frozen=True)
class OptimizerBudget:
    """How hard to search the acquisition surface (per point)."""

    raw_samples: int = 512
    num_restarts: int = 6
    maxiter: int = 100


def incumbent(ctx: ProposalContext) -> Tensor:
    """``1 x d``: the observed point with the best utility."""
    return ctx.X[ctx.Y.squeeze(-1).argmax()].unsqueeze(0)


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
    )
    extra = [incumbent(ctx)] if ctx.X.shape[0] else []
    if seed_points is not None and seed_points.numel():
        extra.append(seed_points)
    if extra:
        starts = torch.cat([starts, torch.cat(extra).unsqueeze(1).to(starts)], dim=0)
    X, value = optimize_acqf(
        acq,
        bounds=ctx.bounds,
        q=1,
        num_restarts=starts.shape[0],
        batch_initial_conditions=starts,
        options={"maxiter": budget.maxiter},
        retry_on_optimization_warning=False,
    )
    return X.detach(), float(value.max())


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
