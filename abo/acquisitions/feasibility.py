"""What a strategy knows about where evaluations are feasible: one GP per outcome constraint,
and the classifier of where evaluations fail (``abo.model.failures``).

A study's outcome constraints (``"stress <= 250"``) are modelled by one GP each, of the
constraint's *slack* (``bound - value`` for ``<=``, ``value - bound`` for ``>=``: non-negative
where it holds), fitted on the done trials beside the objective's GP. A strategy reads them
through ``ProposalContext.feasibility``:

* ``log_prob(X)``: the log probability that every constraint holds at ``X``, the product of
  the marginal probabilities ``Phi(mu / sigma)`` of the slack GPs (independent models), as in
  BoTorch's constrained expected improvement (Gardner et al. 2014), times the probability
  that the evaluation succeeds (``log_success``); differentiable in ``X``. EI-family
  strategies add it to their log acquisition.
* ``observed``: which rows of ``ctx.X`` were feasible, so an incumbent is the best *feasible*
  point.
* ``models``: the GPs themselves, for strategies that sample them (Thompson) or hand them to
  BoTorch's Monte-Carlo constraints (``qlognei``); ``success`` the classifier's latent GP
  (the log-odds of success: an evaluation succeeds where it is positive).

``FeasibleBound`` is the constrained form of a confidence bound (``ucb``) or of the posterior
mean (``aegis``'s exploit arm): a value that can be negative is made positive by a softplus on
the standardised scale (monotone, so the unconstrained maximiser would not move) and multiplied
by the probability of feasibility, in log space. ``likely_feasible`` keeps the candidates of a
sampled arm (``aegis``'s Pareto and random arms) that are more likely feasible than not.
``ConstrainedImprovement`` ranks a posterior sample's points for the sampling strategies of
several objectives (``thompson``, ``parego``): the inner value where the sampled slacks
(``slack_paths``) all hold, minus the sampled violation elsewhere, so every feasible point of
the sample ranks above every infeasible one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, cast

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.models.model import Model
from botorch.sampling.pathwise import draw_matheron_paths
from botorch.utils.probability.utils import log_ndtr
from botorch.utils.transforms import t_batch_mode_transform
from torch import Tensor

from abo.acquisitions.optimize import (
    PosteriorMoments,
    latent_mean_std,
    log_softplus,
    outcome_scale,
    standardized_posterior,
)

LIKELY = math.log(0.5)  # a candidate is likely feasible above this log probability


def slack_moments(model: Model, X: Tensor, grad: bool = True) -> tuple[Tensor, Tensor]:
    """Mean and standard deviation of a slack GP at ``k x d`` points, on the slack's own scale.

    The exact GPs abo fits take ``latent_mean_std``'s one matrix product; any other model its
    posterior.
    """
    fast = latent_mean_std(model, X, grad=grad)
    if fast is not None:
        mean, std = fast
        tf = getattr(model, "outcome_transform", None)
        if tf is not None:
            loc, scale = tf.means.reshape(()), tf.stdvs.reshape(())
            mean, std = loc + scale * mean, scale * std
        return mean, std
    with torch.set_grad_enabled(grad and torch.is_grad_enabled()):
        post = cast(PosteriorMoments, model.posterior(X.unsqueeze(-2)))
        return post.mean.reshape(-1), post.variance.reshape(-1).clamp_min(1e-16).sqrt()


def log_success(model: Model, X: Tensor, grad: bool = True) -> Tensor:
    """``k``: log probability that an evaluation at each of ``k x d`` points succeeds, from
    the classifier's latent log-odds GP (``abo.model.failures``) by the probit approximation of the
    logistic-normal integral."""
    mean, std = slack_moments(model, X, grad=grad)
    return torch.nn.functional.logsigmoid(mean / torch.sqrt(1.0 + math.pi * std.pow(2) / 8.0))


@dataclass(frozen=True)
class Feasibility:
    """The outcome constraints' models and the observed feasibility (see the module docstring).

    Attributes:
        names: the constraints, in declaration order.
        models: one GP per constraint, of its slack (``>= 0`` where it holds).
        observed: ``n`` booleans, one per row of ``ctx.X``: whether that trial was feasible (a
            failed trial is not).
        success: the failure classifier's latent GP (``None`` while no trial failed, or when
            failed trials are modelled at the worst value instead).
    """

    names: tuple[str, ...]
    models: tuple[Model, ...]
    observed: Tensor
    success: Model | None = None

    def log_prob(self, X: Tensor) -> Tensor:
        """``k``: log probability that every constraint holds at ``k x d`` points and that an
        evaluation there succeeds."""
        total = X.new_zeros(X.shape[0])
        for model in self.models:
            mean, std = slack_moments(model, X)
            total = total + log_ndtr(mean / std)
        if self.success is not None:
            total = total + log_success(self.success, X)
        return total

    def log_success(self, X: Tensor) -> Tensor:
        """``k``: log probability that an evaluation succeeds (0 without a classifier)."""
        if self.success is None:
            return X.new_zeros(X.shape[0])
        return log_success(self.success, X)

    @property
    def sampled(self) -> tuple[Model, ...]:
        """The GPs whose sampled outputs must be non-negative for a feasible success: every
        constraint's slack, then the classifier's log-odds."""
        return (*self.models, *((self.success,) if self.success is not None else ()))

    @property
    def any_feasible(self) -> bool:
        """Whether some observed trial satisfied every constraint."""
        return bool(self.observed.any())

    def feasible_rows(self, X: Tensor, Y: Tensor) -> tuple[Tensor, Tensor]:
        """The rows of ``X, Y`` (``ctx.X``, ``ctx.Y``) that were feasible."""
        mask = self.observed.to(torch.bool)
        return X[mask], Y[mask]


class FeasibleBound(AcquisitionFunction):
    """``log softplus(mu + kappa sigma) + log P(feasible and success)`` on the standardised
    scale: the posterior mean (``kappa = 0``) or an upper confidence bound weighted by the
    probability of feasibility (see the module docstring)."""

    def __init__(self, model: Model, feasibility: Feasibility, kappa: float = 0.0) -> None:
        super().__init__(model)
        self.feasibility = feasibility
        self.kappa = float(kappa)

    # BoTorch types the decorator for a plain AcquisitionFunction self, not a subclass's
    @t_batch_mode_transform(expected_q=1)  # type: ignore[arg-type]
    def forward(self, X: Tensor) -> Tensor:
        """``b x 1 x d`` -> ``b`` log values."""
        X = X.squeeze(-2)
        mean, std = standardized_posterior(self.model, X)
        return log_softplus(mean + self.kappa * std) + self.feasibility.log_prob(X)


def likely_feasible(feasibility: Feasibility, candidates: Tensor, least: int = 1) -> Tensor:
    """The rows of ``candidates`` more likely feasible than not; while fewer than ``least``
    are, the ``least`` most likely ones (so an arm always has somewhere to go, and heads for
    the feasible region)."""
    with torch.no_grad():
        logp = feasibility.log_prob(candidates)
    keep = logp > LIKELY
    if int(keep.sum()) >= least:
        return candidates[keep]
    return candidates[logp.topk(min(least, candidates.shape[0])).indices]


def slack_paths(feasibility: Feasibility, seed: int) -> tuple[list[Any], list[float]]:
    """One pathwise sample of every slack GP (and the classifier's log-odds), seeded from
    ``seed``, and each GP's outcome scale (to weigh violations of different units alike)."""
    paths = []
    for i, model in enumerate(feasibility.sampled):
        with torch.random.fork_rng():
            torch.manual_seed(seed + 1 + i)
            paths.append(draw_matheron_paths(model, sample_shape=torch.Size([1])))
    return paths, violation_scales(feasibility)


def violation_scales(feasibility: Feasibility) -> list[float]:
    """The outcome scale of every sampled GP (``Feasibility.sampled``, floored at 1e-12), by
    which the sampling strategies divide a sampled violation so that slacks in different
    units weigh alike."""
    return [max(float(outcome_scale(m)[1]), 1e-12) for m in feasibility.sampled]


CHEBYSHEV_OFFSET = 10.0
"""Below the Chebyshev scalarisation (``get_chebyshev_scalarization``: values normalised by the
observed range, so within ``[-1, 0]`` there) of any sample value less than ten observed ranges
below the data: an infeasible point scores under every feasible one short of that."""


def sampled_violation(paths: list[Any], scales: list[float], X: Tensor) -> Tensor:
    """``k``: the summed violation of the slack paths at ``k x d`` points, each over its scale
    (0 where the sample is feasible)."""
    total = X.new_zeros(X.shape[0])
    for path, scale in zip(paths, scales, strict=True):
        total = total + path(X).reshape(-1).neg().clamp_min(0.0) / scale
    return total


class ConstrainedImprovement(AcquisitionFunction):
    """A sample's improvement where its constraints hold, minus its violation elsewhere:
    ``b x 1 x d`` to ``b`` (see the module)."""

    def __init__(
        self,
        inner: AcquisitionFunction,
        slacks: list[Any],
        scales: list[float],
        offset: float = 0.0,
    ) -> None:
        super().__init__(model=inner.model)
        self.inner = inner
        self.slacks, self.scales = slacks, scales
        self.offset = offset  # below the inner value's least: a scalarisation's is negative

    def forward(self, X: Tensor) -> Tensor:
        violation = sampled_violation(self.slacks, self.scales, X.reshape(-1, X.shape[-1]))
        violation = violation.reshape(X.shape[:-2])
        return torch.where(violation > 0, -violation - self.offset, self.inner(X))
