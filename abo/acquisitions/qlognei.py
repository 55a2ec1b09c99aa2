"""``qlognei``: BoTorch's qLogNoisyExpectedImprovement with the busy points as ``X_pending``.

The Monte-Carlo acquisition is evaluated jointly over the candidate and every busy point, so it
integrates over the busy points' unknown outcomes (a principled fantasy). Several points at once
are chosen greedily: each chosen point joins ``X_pending`` before the next is optimised.
"""

from __future__ import annotations

import torch
from botorch.acquisition.logei import qLogNoisyExpectedImprovement
from botorch.sampling import SobolQMCNormalSampler

from abo.acquisitions.base import Proposal, ProposalContext
from abo.acquisitions.optimize import OptimizerBudget, maximize
from abo.registry import register_strategy


@register_strategy(
    "qlognei", "qLogNoisyExpectedImprovement with busy points as X_pending (BoTorch baseline)"
)
class QLogNEIStrategy:
    """Expected improvement integrated over the busy points' outcomes.

    Args:
        mc_samples: quasi-MC samples of the joint posterior.
        raw_samples, num_restarts: acquisition optimiser budget per point.
    """

    name = "qlognei"
    needs_model = True

    def __init__(self, mc_samples: int = 128, raw_samples: int = 512, num_restarts: int = 6):
        self.mc_samples = mc_samples
        self.budget = OptimizerBudget(raw_samples=raw_samples, num_restarts=num_restarts)

    def propose(self, ctx: ProposalContext, n: int) -> Proposal:
        assert ctx.model is not None
        pending = ctx.X_pending
        chosen = []
        for _ in range(n):
            acq = qLogNoisyExpectedImprovement(
                model=ctx.model,
                X_baseline=ctx.X,
                X_pending=pending if pending.shape[0] else None,
                sampler=SobolQMCNormalSampler(torch.Size([self.mc_samples]), seed=ctx.seed()),
                prune_baseline=True,
            )
            x, _ = maximize(acq, ctx, self.budget)
            x = ctx.round(x)
            chosen.append(x)
            pending = torch.cat([pending, x])
        return Proposal(torch.cat(chosen), [{"strategy": self.name} for _ in range(n)])
