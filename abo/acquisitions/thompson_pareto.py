"""Thompson sampling for several objectives (TSEMO-style): ``thompson`` on a study of 2-4.

Each point draws one pathwise posterior sample per objective (BoTorch's Matheron paths on the
``ModelListGP``) and maximises the hypervolume that the sample's value at the point would add
to the sample's own front: the non-dominated sample values at the observed points, over the
study's reference point. The improvement is exact and differentiable (the front's
non-dominated region split into boxes by BoTorch's ``FastNondominatedPartitioning``; a point's
improvement is the volume of its dominated part inside those boxes), so one L-BFGS-B search
from Sobol starts and from the observed front climbs the sample's Pareto set towards its most
improving point, which is TSEMO's selection rule without a genetic search.

Busy points are not conditioned on: as in single-objective asynchronous Thompson sampling, the
randomness of the sample keeps in-flight points apart, so the cost of a point does not grow
with the workers. Where the sample promises no improvement anywhere (its front already covers
every searched point), the point maximises a random Chebyshev scalarisation of the same sample
instead (ParEGO's step), which still lands on the sample's Pareto set. A point that repeats an
evaluated, busy or just proposed point is replaced by a fresh draw (up to 8).

With outcome constraints or a failure classifier (``ctx.feasibility``) the sample also draws
a path of every constraint's slack (and of the classifier's log-odds): the front is that of
the observed *feasible* points, and a point the sample calls infeasible scores minus its
sampled violation (each slack over its GP's scale), below every feasible one, so the search
climbs into the sample's feasible region and then along its front; while no observed point
is feasible the front is empty and the least sampled violation leads.
"""

from __future__ import annotations

from typing import Any

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.sampling.pathwise import draw_matheron_paths
from botorch.utils.multi_objective.box_decompositions.non_dominated import (
    FastNondominatedPartitioning,
)
from botorch.utils.multi_objective.scalarization import get_chebyshev_scalarization
from torch import Tensor

from abo.acquisitions.base import Proposal, ProposalContext
from abo.acquisitions.feasibility import CHEBYSHEV_OFFSET, ConstrainedImprovement, slack_paths
from abo.acquisitions.optimize import OptimizerBudget, sobol_points
from abo.acquisitions.parego import ScalarisedSample, distinct_draws, simplex_weights
from abo.acquisitions.seeded import seeded_maximize
from abo.core.pareto import pareto_mask


def sample_values(paths: Any, X: Tensor) -> Tensor:
    """``k x m``: every objective's sample path at ``k x d`` points."""
    return torch.stack([v.reshape(-1) for v in paths(X)], dim=-1)


class SampleImprovement(AcquisitionFunction):
    """The hypervolume one point's sample values add to a front: ``b x 1 x d`` to ``b``.

    ``cells`` is ``2 x K x m``: the lower and upper corners of the boxes that make up the
    region the front does not dominate (above the reference point).
    """

    def __init__(self, model: Any, paths: Any, cells: Tensor) -> None:
        super().__init__(model=model)
        self.paths = paths
        self.lower, self.upper = cells[0], cells[1]

    def forward(self, X: Tensor) -> Tensor:
        values = sample_values(self.paths, X.reshape(-1, X.shape[-1]))  # k x m
        edges = (torch.minimum(values.unsqueeze(-2), self.upper) - self.lower).clamp_min(0)
        return edges.prod(dim=-1).sum(dim=-1).reshape(X.shape[:-2])


def front_cells(front: Tensor, ref: Tensor) -> Tensor:
    """``2 x K x m`` boxes of the region above ``ref`` that no row of ``front`` dominates."""
    partitioning = FastNondominatedPartitioning(ref_point=ref, Y=front)
    return partitioning.get_hypercell_bounds()


def pareto_sample_point(
    ctx: ProposalContext, budget: OptimizerBudget, ref: Tensor, alpha: float = 0.05
) -> tuple[Tensor, dict[str, Any]]:
    """One rounded point for a fresh sample: its largest hypervolume improvement, and info."""
    assert ctx.model is not None
    with torch.random.fork_rng():
        torch.manual_seed(ctx.seed())
        paths = draw_matheron_paths(ctx.model, sample_shape=torch.Size([1]))
    with torch.no_grad():
        observed = sample_values(paths, ctx.X.to(torch.double))
    feas = ctx.feasibility
    if feas is not None:  # the front of the feasible observations only
        observed = observed[feas.observed.to(torch.bool)]
    on_front = pareto_mask(observed)
    acq: AcquisitionFunction = SampleImprovement(
        ctx.model, paths, front_cells(observed[on_front], ref)
    )
    slacks: list[Any] = []
    scales: list[float] = []
    if feas is not None:
        slacks, scales = slack_paths(feas, ctx.seed())
        acq = ConstrainedImprovement(acq, slacks, scales)
    raw = sobol_points(ctx, budget.raw_samples, ctx.seed()).unsqueeze(1)
    with torch.no_grad():  # a sample that improves nowhere it is looked at skips the search
        scores = acq(raw)
        hopeful = bool((scores > 0).any())
    info: dict[str, Any]
    if feas is not None and not bool((scores >= 0).any()):  # infeasible wherever searched
        x, score = seeded_maximize(acq, ctx, budget)  # the least sampled violation
        info = {"improvement": 0.0, "sample_feasible": bool(score >= 0)}
        return ctx.round(x), info
    x, improvement = seeded_maximize(acq, ctx, budget) if hopeful else (ctx.X[:1], 0.0)
    info = {"improvement": float(f"{improvement:.6g}")}
    if not improvement > 0:  # nothing the sample promises beats its own front
        weights = simplex_weights(ctx.Y.shape[-1], ctx.generator).to(ctx.Y.device)
        scalarise = get_chebyshev_scalarization(weights, ctx.Y, alpha=alpha)
        scalar: AcquisitionFunction = ScalarisedSample(ctx.model, paths, scalarise)
        if feas is not None:  # feasible points first, then the scalarisation among them
            scalar = ConstrainedImprovement(scalar, slacks, scales, offset=CHEBYSHEV_OFFSET)
        x, _ = seeded_maximize(scalar, ctx, budget)
        info["fallback"] = "chebyshev"
        info["weights"] = [round(float(w), 6) for w in weights]
    return ctx.round(x), info


def pareto_sample_points(ctx: ProposalContext, n: int, budget: OptimizerBudget) -> Proposal:
    """``n`` points, each from its own fresh sample, none repeating a seen point if avoidable."""
    if ctx.Y.shape[-1] < 2:
        raise ValueError("pareto_sample_points: needs several objectives; ctx.Y has one column")
    ref = ctx.reference()
    said = [round(float(v), 6) for v in ref]

    def draw() -> tuple[Tensor, dict[str, Any]]:
        x, info = pareto_sample_point(ctx, budget, ref)
        return x, {**info, "ref_point": said}

    return distinct_draws(ctx, n, draw)
