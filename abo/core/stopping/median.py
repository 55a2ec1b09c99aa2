"""The median stopping rule (Golovin et al., 2017)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from abo.core.stopping.base import GO_ON, Decision, Reports, number, step_text


@dataclass(frozen=True)
class MedianRule:
    """From ``warmup_steps`` on, a trial stops when its best value so far is worse than the
    median, over the other trials that reached the same step (at least ``min_trials`` of
    them), of their best values up to that step."""

    warmup_steps: float = 0.0
    min_trials: int = 5
    rule: str = "median"

    @classmethod
    def parse(cls, settings: dict[str, Any]) -> MedianRule:
        """The rule from its settings, each checked (``AboError`` naming the one that is wrong)."""
        return cls(
            warmup_steps=number(settings.get("warmup_steps", 0.0), "warmup_steps", 0.0),
            min_trials=number(settings.get("min_trials", 5), "min_trials", 1, integer=True),
        )

    def decide(self, trial_id: int, reports: Reports, sign: float) -> Decision:
        mine = reports[trial_id]
        step = mine[-1].step
        if step < self.warmup_steps:
            return GO_ON
        best = max(sign * r.value for r in mine)
        others: list[float] = []
        for other, theirs in reports.items():
            if other == trial_id or theirs[-1].step < step:
                continue
            upto = [sign * r.value for r in theirs if r.step <= step]
            if upto:
                others.append(max(upto))
        if len(others) < self.min_trials:
            return GO_ON
        median = statistics.median(others)
        if best < median:
            return Decision(
                True,
                f"stopped by median at step {step_text(step)}: best so far {sign * best:g} is "
                f"worse than the median {sign * median:g} of {len(others)} trials there",
            )
        return GO_ON
