"""``random``: independent uniform points (in the unit encoding); ignores model and busy points."""

from __future__ import annotations

from abo.acquisitions.base import Proposal, ProposalContext, register_strategy


@register_strategy(
    "random",
    "uniform random search: the baseline every model must beat",
    objectives="any",
    constraints="any",
    fidelity=True,
)
class RandomStrategy:
    """Uniform random search (log-scaled parameters are uniform in their logarithm; a study's
    fidelity too, like any other parameter)."""

    name = "random"
    needs_model = False

    def propose(self, ctx: ProposalContext, n: int) -> Proposal:
        return Proposal(ctx.uniform(n), [{"strategy": self.name} for _ in range(n)])
