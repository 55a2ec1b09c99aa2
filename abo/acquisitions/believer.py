"""``believer``: the kriging believer — pretend the busy points returned their posterior mean.

The model is conditioned on every busy point with its posterior mean as the outcome (no refit),
which collapses the posterior variance there, and LogEI on that model picks the next point.
For abo's exact GPs that model is never built: believing a point at its mean leaves the
posterior mean unchanged and only shrinks the variance, which ``optimize.Believed`` computes
from the GP's cached solves (the same LogEI as on the fantasy model, tested).
The believed outcomes count as data, so they also enter the incumbent ``best_f`` (Ginsbourger
et al. 2010); with ``best_f = max(Y)`` alone, a busy point believed better than every result
keeps its neighbourhood attractive and the believer proposes next to it again.
The observed part of the incumbent is the model's posterior mean at the observed points, not
the observations themselves (the "plug-in" incumbent of noisy EI, Picheny et al. 2013): for a
deterministic objective the GP interpolates, so the two agree; for a noisy one, a lucky
observation does not raise the bar every later point is measured against.
Several points in one call are chosen greedily: each chosen point is believed in turn.

With outcome constraints (``ctx.feasibility``) it is constrained LogEI: the log probability
that every constraint holds is added, the incumbent is the best *feasible* observed point
(and busy points believed more likely feasible than not), and while no trial has been
feasible the bar is the worst observed value, so the probability of feasibility leads.
"""

from __future__ import annotations

import math

import torch
from botorch.models.model import Model
from torch import Tensor

from abo.acquisitions.base import Proposal, ProposalContext, register_strategy
from abo.acquisitions.optimize import (
    Believed,
    FastLogEI,
    OptimizerBudget,
    best_observed,
    greedy_batch,
    posterior_mean,
)
from abo.acquisitions.quiet import quiet_proposal
from abo.acquisitions.seeded import seeded_maximize


def believe(model: Model, X_busy: Tensor) -> tuple[Model, Tensor]:
    """``model`` conditioned on ``m x d`` busy points at their posterior mean, and those means.

    ``condition_on_observations`` takes outcomes on the model's original scale (it applies the
    outcome transform itself), which is the scale the posterior mean is reported on.
    """
    if X_busy.shape[0] == 0:
        return model, X_busy.new_zeros(0, 1)
    mean = posterior_mean(model, X_busy).unsqueeze(-1)  # m x 1, original scale
    with torch.no_grad():
        model.posterior(X_busy[:1])  # the prediction caches the fantasy update starts from
    return model.condition_on_observations(X_busy, mean), mean


def plug_in(model: Model, X: Tensor) -> Tensor:
    """The posterior mean at the observed points (``n``): the observed part of the incumbent.

    One kernel row per point (``posterior_mean``), no ``n x n`` joint covariance: at 10,000
    observations that is milliseconds, not seconds.
    """
    if X.shape[0] == 0:
        return X.new_zeros(0)
    return posterior_mean(model, X)


@register_strategy(
    "believer",
    "kriging believer: busy points believed at their mean, then LogEI",
    constraints="single",
)
class BelieverStrategy:
    """Kriging believer with LogEI (``best_f``: the best observed or believed utility).

    Args:
        raw_samples, num_restarts: acquisition optimiser budget per point.
    """

    name = "believer"
    needs_model = True

    def __init__(self, raw_samples: int = 512, num_restarts: int = 6):
        self.budget = OptimizerBudget(raw_samples=raw_samples, num_restarts=num_restarts)

    @quiet_proposal
    def propose(self, ctx: ProposalContext, n: int) -> Proposal:
        assert ctx.model is not None
        model_0 = ctx.model
        feas = ctx.feasibility
        if feas is None:
            observed = plug_in(model_0, best_observed(ctx.X, ctx.Y))
        elif feas.any_feasible:
            observed = plug_in(model_0, best_observed(*feas.feasible_rows(ctx.X, ctx.Y)))
        else:  # nothing feasible yet: any improvement on the worst counts, feasibility leads
            observed = plug_in(model_0, ctx.X).min().reshape(1)
        incumbents: list[float] = []

        def bar(believed: Tensor, busy: Tensor) -> Tensor:
            if feas is not None:  # only busy points more likely feasible than not
                with torch.no_grad():
                    likely = feas.log_prob(busy) > math.log(0.5)
                believed = believed[likely] if feas.any_feasible else believed[:0]
            best_f = torch.cat([observed, believed]).max()
            incumbents.append(round(float(best_f), 6))
            return best_f

        def make_acq(busy: Tensor) -> FastLogEI:
            if Believed.supported(model_0, busy):  # the believed model's moments, unbuilt
                best_f = bar(posterior_mean(model_0, busy), busy)
                return FastLogEI(
                    model_0, best_f=best_f, believed=Believed(model_0, busy), feasibility=feas
                )
            model, means = believe(model_0, busy)
            return FastLogEI(model, best_f=bar(means.reshape(-1), busy), feasibility=feas)

        proposal = greedy_batch(ctx, n, self.name, make_acq, seeded_maximize, self.budget)
        for info, best in zip(proposal.info, incumbents, strict=True):
            info["incumbent"] = best  # the bar LogEI measured against (model scale, larger better)
        return proposal
