"""A rule that stops a run when its curve's likely end cannot beat the best end so far."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from abo.core.stopping.base import (
    GO_ON,
    Decision,
    Reports,
    judged_against,
    number,
    optional_step,
    reached,
    step_text,
)

WINDOW = 3  # a curve's last reports that say where it is and how fast it moves


@dataclass(frozen=True)
class CurveRule:
    """Learning-curve matching: a running trial's last reports (its level and its slope) are
    compared with the curves of the runs that went to the end (``max_step``, or the furthest
    step any trial reported); the ``neighbours`` most similar ones say how much a curve like
    it still gains from this step. The trial stops when even the largest of those gains
    leaves its end short of the best end so far. A slow starter is matched with the slow
    starters that went on to end well, so crossing curves are not cut at the first rung; a
    diverging or overfitting curve is matched with the ones that ended worse than they were.
    Nothing stops before ``min_curves`` runs went to the end, or before ``warmup_steps``."""

    min_curves: int = 4
    neighbours: int = 5
    warmup_steps: float = 0.0
    max_step: float | None = None
    rule: str = "curve"

    @classmethod
    def parse(cls, settings: dict[str, Any]) -> CurveRule:
        """The rule from its settings, each checked (``AboError`` naming the one that is wrong)."""
        return cls(
            min_curves=number(settings.get("min_curves", 4), "min_curves", 1, integer=True),
            neighbours=number(settings.get("neighbours", 5), "neighbours", 1, integer=True),
            warmup_steps=number(settings.get("warmup_steps", 0.0), "warmup_steps", 0.0),
            max_step=optional_step(settings, "max_step"),
        )

    def decide(self, trial_id: int, reports: Reports, sign: float) -> Decision:
        judged = judged_against(
            trial_id, reports, self.max_step, self.warmup_steps, self.min_curves
        )
        if judged is None:
            return GO_ON
        end, finished = judged
        mine = reports[trial_id]
        step = mine[-1].step
        window = [r.step for r in mine[-WINDOW:]]
        own = [sign * r.value for r in mine[-WINDOW:]]
        matches: list[tuple[float, int, float]] = []  # (distance, trial, gain from here)
        ends: list[float] = []
        for t in finished:  # in id order (judged_against)
            theirs = reports[t]
            at = [sign * reached(theirs, s) for s in window]  # a finished curve reached all
            last = sign * reached(theirs, end)
            ends.append(last)
            distance = sum((a - b) ** 2 for a, b in zip(at, own, strict=True))
            matches.append((distance, t, last - at[-1]))
        matches.sort()
        near = matches[: self.neighbours]
        gain = max(m[2] for m in near)
        hope, best = own[-1] + gain, max(ends)
        if hope >= best:
            return GO_ON
        return Decision(
            True,
            f"stopped by curve at step {step_text(step)}: the {len(near)} most similar of "
            f"{len(finished)} finished curves went on to end at best {sign * hope:g} from "
            f"here, short of the best end {sign * best:g}",
        )
