"""``ucb``: plain upper confidence bound, refitted after every completion, busy points ignored.

The baseline of Riegler, Odgers and Fortuin (2026), "Standard acquisition is sufficient for
asynchronous BO": the model changes with every completion, and that alone may keep the workers
apart. ``beta`` follows the schedule of the AEGiS harness,
``beta_t = 2 log(d t^2 pi^2 / (6 delta))`` with ``delta = 0.01`` and ``t`` the number of
observations, unless a constant is given (``beta = 4`` is ``kappa = 2``). BoTorch's UCB is
``mu + sqrt(beta) sigma``.

Busy points never change the acquisition, but refitting alone does not keep UCB off them: its
maximum often sits on a corner of the cube, and a corner that is still running stays the
maximum after an unrelated result arrives. A proposal that would exactly repeat a busy or
evaluated point (within ``1e-6``) is therefore replaced by the maximiser of a posterior sample
and marked ``"replaced": "duplicate"``; so are the repeats within one call of several points,
which all come from the same model.

With outcome constraints or a failure classifier (``ctx.feasibility``) the bound is weighted
by the probability of feasibility (``abo.acquisitions.feasibility.FeasibleBound``: the bound
made positive by a softplus on the standardised scale, times the probability, in log space).
"""

from __future__ import annotations

import math

from botorch.acquisition import AcquisitionFunction
from botorch.acquisition.analytic import UpperConfidenceBound

from abo.acquisitions.base import Proposal, ProposalContext, register_strategy
from abo.acquisitions.feasibility import FeasibleBound
from abo.acquisitions.optimize import OptimizerBudget
from abo.acquisitions.quiet import quiet_proposal
from abo.acquisitions.seeded import seeded_maximize
from abo.acquisitions.thompson import replace_duplicates
from abo.core.exceptions import AboError

DELTA = 0.01


def beta_schedule(d: int, t: int, delta: float = DELTA) -> float:
    """``2 log(d t^2 pi^2 / (6 delta))`` for ``t >= 1`` observations in ``d`` dimensions."""
    return 2.0 * math.log(d * max(t, 1) ** 2 * math.pi**2 / (6.0 * delta))


@register_strategy(
    "ucb",
    "UCB refitted after every completion, busy points ignored (baseline)",
    constraints="single",
)
class UCBStrategy:
    """Upper confidence bound with no pending-point handling.

    Args:
        beta: a constant ``beta`` (``sqrt(beta)`` multiplies the std), or ``None`` for the
            schedule above.
        raw_samples, num_restarts: acquisition optimiser budget.
    """

    name = "ucb"
    needs_model = True

    def __init__(self, beta: float | None = None, raw_samples: int = 512, num_restarts: int = 6):
        if beta is not None and (
            isinstance(beta, bool) or not isinstance(beta, int | float) or not beta >= 0
        ):
            raise AboError(f"beta: expected a non-negative number or None, got {beta!r}")
        self.beta = beta
        self.budget = OptimizerBudget(raw_samples=raw_samples, num_restarts=num_restarts)

    @quiet_proposal
    def propose(self, ctx: ProposalContext, n: int) -> Proposal:
        assert ctx.model is not None
        beta = self.beta if self.beta is not None else beta_schedule(ctx.dim, ctx.X.shape[0])
        if ctx.feasibility is None:
            acq: AcquisitionFunction = UpperConfidenceBound(ctx.model, beta=beta)
        else:
            acq = FeasibleBound(ctx.model, ctx.feasibility, kappa=math.sqrt(beta))
        x, _ = seeded_maximize(acq, ctx, self.budget)
        info = {"strategy": self.name, "beta": round(float(beta), 6)}
        X, replaced = replace_duplicates(ctx, x.expand(n, -1), self.budget)
        infos = [
            dict(info) if extra is None else {**info, **extra, "replaced": "duplicate"}
            for extra in replaced
        ]
        return Proposal(X, infos)
