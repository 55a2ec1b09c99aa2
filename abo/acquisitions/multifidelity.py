"""``multifidelity``: a point by LogEI at the target fidelity, and the fidelity to evaluate it at
by what that evaluation teaches about the target per unit of cost.

The GP models the objective over the parameters *and* the fidelity (the fidelity's columns of
the unit cube are inputs like any other, with their own lengthscale: how fast values change
with the fidelity is learned, not assumed). Every observation is at its own fidelity: trials
at the fidelity they ran at, and, for a numeric fidelity, the reports of training runs at the
step they reached (``abo.core.fidelity``). Each point is then chosen in two steps:

1. **Where**: the kriging believer's LogEI (``believer``) on the model's prediction *at the
   target fidelity*: busy points are believed at their own fidelities (a cheap evaluation
   running nearby shrinks the target's uncertainty only as far as the fidelities are
   correlated), and the incumbent is the best posterior mean at the target over the observed
   and busy points.
2. **At which fidelity**: for each fidelity ``s`` it could run at, the reduction of the
   target's posterior variance at that point that an observation at ``s`` would bring,
   ``cov(s, target)^2 / (var(s) + noise)``, divided by the cost of ``s``. A lower fidelity
   wins only if it teaches ``RESULT_FACTOR`` times as much per unit cost as the target (an
   evaluation at the target is also a result, the only kind that can become the study's
   best: a fidelity just below it, nearly as informative and nearly as dear, would cost a
   result for little), and only while its own posterior std there is at least ``threshold``
   times the prior std: once the cheap fidelity is known near a point, only the target can
   say more (the rule of Kandasamy et al.'s MF-GP-UCB, which keeps a study from refining
   cheap evaluations for ever and makes sure the promising points are evaluated where they
   count).

Several points in one call are chosen greedily, each joining the busy points at its fidelity.
Without a fidelity in the study it is ``believer``.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from abo.acquisitions.base import (
    FidelityLevels,
    Proposal,
    ProposalContext,
    register_strategy,
)
from abo.acquisitions.believer import BelieverStrategy, believe, plug_in
from abo.acquisitions.optimize import (
    Believed,
    FastLogEI,
    OptimizerBudget,
    best_observed,
    posterior_mean,
)
from abo.acquisitions.quiet import quiet_proposal
from abo.acquisitions.seeded import seeded_maximize

RESULT_FACTOR = 2.0
"""How many times the target's information per unit cost a lower fidelity must offer to be
chosen instead (see the module)."""
THRESHOLD = 0.1
"""A lower fidelity competes while its posterior std at the point is at least this share of the
prior std (see the module)."""


def fidelity_scores(
    model: Any, busy: Tensor, x: Tensor, fid: FidelityLevels, threshold: float = THRESHOLD
) -> tuple[Tensor, Tensor]:
    """``L`` scores (variance reduction at the target per unit cost) of evaluating the ``1 x d``
    point ``x`` at each level, and which levels may compete, with ``busy`` believed."""
    points = torch.cat([fid.at(x, level) for level in range(fid.levels.shape[0])])
    if Believed.supported(model, points):
        cov = Believed(model, busy).covariance(points)
        noise = model.likelihood.noise.detach().reshape(()).to(cov)
    else:  # any other model: its fantasy model's joint posterior
        fantasy, _ = believe(model, busy)
        with torch.no_grad():
            post: Any = fantasy.posterior(points)
            cov = post.mvn.covariance_matrix
        noise = torch.zeros((), dtype=cov.dtype)
    t = fid.target
    var = cov.diagonal().clamp_min(0.0)
    reduction = cov[:, t].pow(2) / (var + noise).clamp_min(1e-12)
    scores = reduction / fid.costs.to(reduction)
    with torch.no_grad():
        Xt = model.transform_inputs(points) if hasattr(model, "transform_inputs") else points
        covar = getattr(model, "covar_module", None)
        prior = covar(Xt, diag=True) if covar is not None else var.new_ones(var.shape)
    eligible = var.sqrt() >= threshold * prior.clamp_min(0.0).sqrt()
    eligible[t] = True
    return scores, eligible


def choose_level(
    scores: Tensor, eligible: Tensor, target: int, factor: float = RESULT_FACTOR
) -> int:
    """The eligible level of the highest score, if it beats ``factor`` times the target's
    (else the target)."""
    best, bar = target, float(scores[target]) * factor
    for level in range(scores.shape[0]):
        if level != target and eligible[level] and float(scores[level]) > bar:
            best, bar = level, float(scores[level])
    return best


@register_strategy(
    "multifidelity",
    "a study with a fidelity: LogEI at the target fidelity (busy points believed at theirs), "
    "then the fidelity that teaches most about the target per unit of cost",
    constraints="single",
    fidelity=True,
)
class MultiFidelityStrategy:
    """LogEI at the target fidelity, then the most informative fidelity per cost (see the
    module).

    Args:
        raw_samples, num_restarts: acquisition optimiser budget per point.
        threshold: a lower fidelity competes while its posterior std at the point is at
            least this share of the prior std.
    """

    name = "multifidelity"
    needs_model = True

    def __init__(self, raw_samples: int = 512, num_restarts: int = 6, threshold: float = THRESHOLD):
        if not (isinstance(threshold, int | float) and 0.0 <= threshold < 1.0):
            raise TypeError(f"threshold: expected a number in [0, 1), got {threshold!r}")
        self.budget = OptimizerBudget(raw_samples=raw_samples, num_restarts=num_restarts)
        self.threshold = float(threshold)
        self.single = BelieverStrategy(raw_samples=raw_samples, num_restarts=num_restarts)

    @quiet_proposal
    def propose(self, ctx: ProposalContext, n: int) -> Proposal:
        fid = ctx.fidelity
        if fid is None:  # one fidelity: the believer it is built on
            inner = self.single.propose(ctx, n)
            return Proposal(inner.X, [{**i, "strategy": self.name} for i in inner.info])
        assert ctx.model is not None
        model = ctx.model
        feas = ctx.feasibility
        target = fid.target
        X_t = fid.at(ctx.X, target)  # the observed points, at the target fidelity
        # the search rounds and stops there: its X are projections onto the target, which a
        # discrete climb (``optimize.climb``) would avoid as repeats, yet promoting a point
        # seen at a lower fidelity to the target is what this strategy is for
        search = replace(ctx, X=X_t, bounds=fid.bounds_at_target(ctx.bounds), neighbours=None)
        if feas is None:
            observed = plug_in(model, best_observed(X_t, ctx.Y))
        elif feas.any_feasible:
            X_f, Y_f = feas.feasible_rows(ctx.X, ctx.Y)
            observed = plug_in(model, best_observed(fid.at(X_f, target), Y_f))
        else:  # nothing feasible yet: any improvement on the worst counts, feasibility leads
            observed = plug_in(model, X_t).min().reshape(1)
        busy = ctx.X_pending.to(torch.double)
        chosen: list[Tensor] = []
        infos: list[dict[str, Any]] = []
        for _ in range(n):
            busy_t = fid.at(busy, target)
            believed = posterior_mean(model, busy_t) if busy.shape[0] else busy.new_zeros(0)
            if feas is not None and busy.shape[0]:
                with torch.no_grad():
                    likely = feas.log_prob(busy_t) > math.log(0.5)
                believed = believed[likely] if feas.any_feasible else believed[:0]
            best_f = torch.cat([observed, believed]).max()
            if Believed.supported(model, busy):
                acq = FastLogEI(
                    model, best_f=best_f, believed=Believed(model, busy), feasibility=feas
                )
            else:
                acq = FastLogEI(believe(model, busy)[0], best_f=best_f, feasibility=feas)
            x, _ = seeded_maximize(acq, search, self.budget)
            x = ctx.round(fid.at(x, target))
            scores, eligible = fidelity_scores(model, busy, x, fid, self.threshold)
            level = choose_level(scores, eligible, target)
            point = ctx.round(fid.at(x, level))
            chosen.append(point)
            busy = torch.cat([busy, point])
            infos.append(
                {
                    "strategy": self.name,
                    "at_target": level == target,
                    "cost": round(float(fid.costs[level]), 6),
                    "incumbent": round(float(best_f), 6),
                }
            )
        return Proposal(torch.cat(chosen), infos)
