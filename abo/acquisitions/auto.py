"""``auto``: abo's default strategy — ``believer`` for exact observations, ``qlognei`` for noisy.

The benchmarks (``docs/benchmarks.md``) found no single strategy best everywhere, but a rule:
on deterministic objectives ``believer`` was the best or tied with the best in every smoke
cell (Branin and Hartmann-6, 4 and 16 workers), where ``qlognei`` fell behind at 16 workers;
on noisy ones ``qlognei``'s noisy expected improvement, which integrates over which observed
point is really the best, was significantly better (Hartmann-6 with noise). So each ask looks
at the fitted GP: when its observation noise is negligible (``noise="deterministic"``, or a
learned noise below ``NOISE_FREE_BELOW``, the same test ``qlognei`` uses to choose between
qLogEI and qLogNEI) ``believer`` proposes, otherwise ``qlognei``. The member is recorded as
the proposal's ``arm``.
"""

from __future__ import annotations

from typing import Any

from abo.acquisitions.base import Proposal, ProposalContext, register_strategy
from abo.acquisitions.believer import BelieverStrategy
from abo.acquisitions.qlognei import QLogNEIStrategy, is_noise_free


@register_strategy("auto", "abo's default: believer on exact observations, qlognei on noisy ones")
class AutoStrategy:
    """``believer`` when the GP's noise is negligible, else ``qlognei`` (see the module).

    Args:
        raw_samples, num_restarts: acquisition optimiser budget per point (both members).
        mc_samples: quasi-MC samples of ``qlognei``'s joint posterior.
    """

    name = "auto"
    needs_model = True

    def __init__(self, raw_samples: int = 512, num_restarts: int = 6, mc_samples: int = 128):
        self.believer = BelieverStrategy(raw_samples=raw_samples, num_restarts=num_restarts)
        self.qlognei = QLogNEIStrategy(
            mc_samples=mc_samples, raw_samples=raw_samples, num_restarts=num_restarts
        )

    def propose(self, ctx: ProposalContext, n: int) -> Proposal:
        assert ctx.model is not None
        member: Any = self.believer if is_noise_free(ctx.model) else self.qlognei
        inner = member.propose(ctx, n)
        infos = [{**info, "strategy": self.name, "arm": member.name} for info in inner.info]
        return Proposal(inner.X, infos)
