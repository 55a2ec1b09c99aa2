"""What a strategy knows about where evaluations are feasible: one GP per outcome constraint,
and the classifier of where evaluations fail (``abo.failures``).

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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import torch
from botorch.models.model import Model
from botorch.utils.probability.utils import log_ndtr
from torch import Tensor

from abo.acquisitions.optimize import PosteriorMoments, latent_mean_std


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
    the classifier's latent log-odds GP (``abo.failures``) by the probit approximation of the
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
