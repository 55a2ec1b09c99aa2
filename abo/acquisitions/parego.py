"""``parego``: a fresh random Chebyshev scalarisation per point (ParEGO), maximised on a
posterior sample, for studies of several objectives.

Each point draws weights uniformly from the simplex (from the context's generator) and
maximises the augmented Chebyshev scalarisation (BoTorch's ``get_chebyshev_scalarization``,
on utilities normalised by the observed range) of one pathwise posterior sample of every
objective's GP. Busy points are handled as in ``thompson``: not conditioned on, but kept apart
by the randomness of the weights and of the sample. That is the cheap choice, and why it was
made: a believer would condition every objective's GP on every busy point for each point
(a fantasy model per point, its cost growing with the workers), and a Chebyshev
scalarisation of Gaussian posteriors is not Gaussian, so even the believed model would need
Monte-Carlo expected improvement; a sample costs one draw and a search, however many trials
run. A point that lands on an evaluated, busy or just proposed point is replaced by another
draw, with new weights (up to 8 draws).

With outcome constraints or a failure classifier (``ctx.feasibility``) the sample also draws a
path of every constraint's slack, and the scalarisation is maximised over the points the
sample calls feasible (``ConstrainedImprovement``: an infeasible point scores minus its
sampled violation, below every feasible one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.sampling.pathwise import draw_matheron_paths
from botorch.utils.multi_objective.scalarization import get_chebyshev_scalarization
from torch import Tensor

from abo.acquisitions.base import DUPLICATE_TOL, Proposal, ProposalContext, register_strategy
from abo.acquisitions.feasibility import CHEBYSHEV_OFFSET, ConstrainedImprovement, slack_paths
from abo.acquisitions.optimize import OptimizerBudget
from abo.acquisitions.quiet import quiet_proposal
from abo.acquisitions.seeded import seeded_maximize

MAX_DRAWS = 8
"""Fresh draws tried for one point before a repeat is accepted (a discrete space may be full)."""


class ScalarisedSample(AcquisitionFunction):
    """A Chebyshev scalarisation of one posterior sample path per objective: ``b x 1 x d`` to
    ``b`` values (larger is better), differentiable in the points."""

    def __init__(self, model: Any, paths: Any, scalarise: Any) -> None:
        super().__init__(model=model)
        self.paths = paths
        self.scalarise = scalarise

    def forward(self, X: Tensor) -> Tensor:
        flat = X.reshape(-1, X.shape[-1])
        values = torch.stack([v.reshape(-1) for v in self.paths(flat)], dim=-1)  # k x m
        return self.scalarise(values).reshape(X.shape[:-2])


def simplex_weights(m: int, generator: torch.Generator) -> Tensor:
    """``m`` weights uniform on the simplex (normalised exponentials: Dirichlet(1, ..., 1))."""
    u = torch.rand(m, generator=generator, dtype=torch.double).clamp_min(1e-12)
    e = -u.log()
    return e / e.sum()


@register_strategy(
    "parego",
    "ParEGO: a fresh random Chebyshev scalarisation per point on a posterior sample "
    "(several objectives)",
    objectives="multi",
    constraints="any",
)
class ParEGOStrategy:
    """Random Chebyshev scalarisations maximised on pathwise posterior samples.

    Args:
        raw_samples, num_restarts: optimiser budget per point.
        alpha: weight of the augmentation term (the weighted sum) beside the maximum.
    """

    name = "parego"
    needs_model = True

    def __init__(self, raw_samples: int = 512, num_restarts: int = 4, alpha: float = 0.05):
        if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not alpha >= 0:
            raise ValueError(f"alpha: expected a non-negative number, got {alpha!r}")
        self.alpha = float(alpha)
        self.budget = OptimizerBudget(raw_samples=raw_samples, num_restarts=num_restarts)

    def _point(self, ctx: ProposalContext) -> tuple[Tensor, list[float]]:
        """One rounded point for fresh weights and a fresh sample, and the weights."""
        assert ctx.model is not None
        weights = simplex_weights(ctx.Y.shape[-1], ctx.generator).to(ctx.Y.device)
        scalarise = get_chebyshev_scalarization(weights, ctx.Y, alpha=self.alpha)
        with torch.random.fork_rng():
            torch.manual_seed(ctx.seed())
            paths = draw_matheron_paths(ctx.model, sample_shape=torch.Size([1]))
        acq: AcquisitionFunction = ScalarisedSample(ctx.model, paths, scalarise)
        if ctx.feasibility is not None:
            slacks, scales = slack_paths(ctx.feasibility, ctx.seed())
            acq = ConstrainedImprovement(acq, slacks, scales, offset=CHEBYSHEV_OFFSET)
        x, _ = seeded_maximize(acq, ctx, self.budget)
        return ctx.round(x), [round(float(w), 6) for w in weights]

    @quiet_proposal
    def propose(self, ctx: ProposalContext, n: int) -> Proposal:
        if ctx.Y.shape[-1] < 2:
            raise ValueError("parego: proposes for several objectives; ctx.Y has one column")

        def draw() -> tuple[Tensor, dict[str, Any]]:
            x, weights = self._point(ctx)
            return x, {"strategy": self.name, "weights": weights}

        return distinct_draws(ctx, n, draw)


def distinct_draws(
    ctx: ProposalContext, n: int, draw: Callable[[], tuple[Tensor, dict[str, Any]]]
) -> Proposal:
    """``n`` points, each from fresh calls of ``draw`` (a random ``1 x d`` point and its info),
    redrawn while it repeats an evaluated, busy or earlier point, up to ``MAX_DRAWS`` times (a
    discrete space may have no other point left); each info records its ``draws``."""
    seen = torch.cat([ctx.X, ctx.X_pending]).to(torch.double)
    points: list[Tensor] = []
    infos: list[dict[str, Any]] = []
    for _ in range(n):
        draws = 0
        while True:
            x, info = draw()
            draws += 1
            new = not seen.shape[0] or torch.cdist(x, seen).min() > DUPLICATE_TOL
            if new or draws >= MAX_DRAWS:
                break
        points.append(x)
        infos.append({**info, "draws": draws})
        seen = torch.cat([seen, x])
    return Proposal(torch.cat(points), infos)
