"""``seeded_maximize``: ``optimize.maximize`` made a function of the context alone.

BoTorch picks the starting points of its local searches by Boltzmann sampling
(``initialize_q_batch`` calls ``torch.multinomial``) and samples around the incumbent with torch's
*global* generator, outside the seed ``maximize`` passes. A study seeds that generator before
every proposal, but a strategy called directly (or twice within one proposal) would not be
reproducible; drawing the global seed from ``ctx.seed()`` fixes both.
"""

from __future__ import annotations

from botorch.acquisition import AcquisitionFunction
from torch import Tensor

from abo.acquisitions.base import ProposalContext
from abo.acquisitions.optimize import OptimizerBudget, maximize


def seeded_maximize(
    acq: AcquisitionFunction, ctx: ProposalContext, budget: OptimizerBudget
) -> tuple[Tensor, float]:
    """``maximize(acq, ctx, budget)`` with torch's global generator seeded from ``ctx``."""
    with ctx.torch_seed():
        return maximize(acq, ctx, budget)
