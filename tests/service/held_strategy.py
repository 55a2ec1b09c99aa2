"""A test strategy whose proposal rounds wait for a release file (loaded by the server).

Each ``propose`` call appends its ``n`` to ``$ABO_TEST_HOLD/rounds`` (so a test counts the
proposal rounds and their sizes) and the round's pace to ``$ABO_TEST_HOLD/paces``, then waits
until ``$ABO_TEST_HOLD/release`` exists (at most two minutes, so a broken test cannot hang the
server for good).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from abo.acquisitions.base import Proposal, ProposalContext
from abo.acquisitions.registry import register_strategy


@register_strategy("held", "tests only: each proposal round waits for a release file")
class HeldStrategy:
    """Uniform points, proposed only once the test releases them."""

    name = "held"
    needs_model = False

    def propose(self, ctx: ProposalContext, n: int) -> Proposal:
        folder = Path(os.environ["ABO_TEST_HOLD"])
        with (folder / "rounds").open("a") as out:
            out.write(f"{n}\n")
        with (folder / "paces").open("a") as out:
            out.write(f"{ctx.pace}\n")
        deadline = time.monotonic() + 120.0
        while not (folder / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        return Proposal(ctx.uniform(n), [{"strategy": self.name} for _ in range(n)])
