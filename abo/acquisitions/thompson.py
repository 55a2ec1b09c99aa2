"""``thompson``: asynchronous Thompson sampling (Kandasamy et al., AISTATS 2018).

Each proposal maximises one fresh sample path of the GP posterior. Busy points are ignored on
purpose: the randomness of the draws is what keeps the in-flight points apart, and a path
conditioned on all completed data is exactly the asyTS rule. The path is BoTorch's pathwise
(Matheron) sample — random Fourier features plus a data update — so it is a smooth function
that L-BFGS-B can climb. If the pathwise draw fails (a model it does not support), an exact joint
posterior sample over Sobol candidates (``MaxPosteriorSampling``) takes its place.
"""

from __future__ import annotations

from typing import Any

import torch
from botorch.acquisition.thompson_sampling import PathwiseThompsonSampling
from botorch.generation.sampling import MaxPosteriorSampling
from torch import Tensor
from torch.quasirandom import SobolEngine

from abo.acquisitions.base import Proposal, ProposalContext
from abo.acquisitions.optimize import OptimizerBudget
from abo.acquisitions.seeded import seeded_maximize
from abo.registry import register_strategy


def sobol_points(ctx: ProposalContext, n: int, seed: int) -> Tensor:
    """``n x d`` scrambled Sobol points inside ``ctx.bounds``."""
    unit = SobolEngine(ctx.dim, scramble=True, seed=seed).draw(n, dtype=torch.double)
    lo, hi = ctx.bounds.to(torch.double)
    return lo + (hi - lo) * unit


def thompson_point(
    ctx: ProposalContext, budget: OptimizerBudget, n_candidates: int = 1024
) -> tuple[Tensor, dict[str, Any]]:
    """The ``1 x d`` maximiser of one posterior sample path, and info about how it was found.

    The path's random features come from ``ctx.seed()``, so a seeded context gives the same
    path; each call draws a new, independent path.
    """
    assert ctx.model is not None
    seed = ctx.seed()
    try:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            acq = PathwiseThompsonSampling(ctx.model)
            acq(ctx.bounds[:1].unsqueeze(0).to(torch.double))  # draws the path (q = 1) now
        x, _ = seeded_maximize(acq, ctx, budget)
        return x, {}
    except Exception as exc:  # noqa: BLE001 - any model the pathwise sampler cannot handle
        candidates = sobol_points(ctx, n_candidates, seed)
        with torch.random.fork_rng(), torch.no_grad():
            torch.manual_seed(seed)
            x = MaxPosteriorSampling(ctx.model, replacement=False)(candidates, num_samples=1)
        return x.reshape(1, -1), {"fallback": f"max_posterior_sampling ({type(exc).__name__})"}


@register_strategy("thompson", "asynchronous Thompson sampling: maximise a fresh posterior path")
class ThompsonStrategy:
    """Asynchronous Thompson sampling: one independent posterior path per proposed point.

    Args:
        raw_samples, num_restarts: optimiser budget per path.
        n_candidates: Sobol candidates of the fallback sampler (exact, ``O(n^3)``).
    """

    name = "thompson"
    needs_model = True

    def __init__(self, raw_samples: int = 512, num_restarts: int = 6, n_candidates: int = 1024):
        self.budget = OptimizerBudget(raw_samples=raw_samples, num_restarts=num_restarts)
        self.n_candidates = n_candidates

    def propose(self, ctx: ProposalContext, n: int) -> Proposal:
        points, infos = [], []
        for _ in range(n):
            x, info = thompson_point(ctx, self.budget, self.n_candidates)
            points.append(ctx.round(x))
            infos.append({"strategy": self.name, **info})
        return Proposal(torch.cat(points), infos)
