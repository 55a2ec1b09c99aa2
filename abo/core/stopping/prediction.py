"""A rule that predicts a run's end, with its uncertainty, from the curves that went to the end."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from abo.core.exceptions import AboError
from abo.core.stopping.base import (
    FIELD,
    GO_ON,
    Decision,
    Reports,
    judged_against,
    number,
    optional_step,
    reached,
    step_text,
)

WINDOW = 3  # a curve's last reports: its level (the last) and its slope (last minus first)
RIDGE = 1e-3  # keeps the fit defined when every finished curve had the same level or slope


def predict_end(
    level: float, slope: float, seen: Sequence[tuple[float, float, float]]
) -> tuple[float, float]:
    """The mean and standard deviation of a run's end given its ``level`` and ``slope`` now,
    from ``seen``: ``(level, slope, end)`` of the finished curves at the same steps. A linear
    regression of the end on level and slope (standardised, slightly ridged), whose
    predictive spread is the residuals' times the run's leverage: wide where the finished
    curves disagree about where such a run ends, and for a run unlike any of them."""
    data = np.asarray(seen, dtype=float)
    features, ends = data[:, :2], data[:, 2]
    centre, spread = features.mean(axis=0), features.std(axis=0)
    # a feature every finished curve shared (up to rounding) explains nothing: unscaled, the
    # ridge keeps its weight at zero
    scale = np.where(spread > 1e-9 * (1.0 + np.abs(centre)), spread, 1.0)

    def design(x: np.ndarray) -> np.ndarray:
        return np.column_stack([np.ones(len(x)), (x - centre) / scale])

    rows = design(features)
    gram = rows.T @ rows + RIDGE * np.eye(3)
    weights = np.linalg.solve(gram, rows.T @ ends)
    residuals = ends - rows @ weights
    noise = float(residuals @ residuals) / max(len(ends) - 3, 1)
    x = design(np.array([[level, slope]]))[0]
    leverage = float(x @ np.linalg.solve(gram, x))
    return float(x @ weights), math.sqrt(max(noise * (1.0 + leverage), 0.0))


@dataclass(frozen=True)
class PredictRule:
    """Learning-curve prediction: the end of every curve that went to the end (``max_step``,
    or the furthest step any trial reported) is regressed on its level and slope at the
    running trial's last three steps; the trial stops when the probability that its own
    predicted end beats the best end so far is below ``probability``. Where level and slope
    say little about the end (curves that cross), the prediction is wide and runs go on;
    where they say much (curves that rank early), hopeless runs stop at once. Nothing stops
    before ``min_curves`` runs went to the end, or before ``warmup_steps``."""

    probability: float = 0.05
    min_curves: int = 6
    warmup_steps: float = 0.0
    max_step: float | None = None
    rule: str = "predict"

    @classmethod
    def parse(cls, settings: dict[str, Any]) -> PredictRule:
        """The rule from its settings, each checked (``AboError`` naming the one that is wrong)."""
        chance = number(settings.get("probability", 0.05), "probability", 0.0, above=True)
        if chance >= 1.0:
            raise AboError(
                f"{FIELD}.probability: expected a probability below 1, got {chance:g}",
                field=f"{FIELD}.probability",
            )
        return cls(
            probability=chance,
            min_curves=number(settings.get("min_curves", 6), "min_curves", 4, integer=True),
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
        seen = []
        for t in finished:
            at = [sign * reached(reports[t], s) for s in window]
            seen.append((at[-1], at[-1] - at[0], sign * reached(reports[t], end)))
        level, first = sign * mine[-1].value, sign * mine[-len(window)].value
        mean, sd = predict_end(level, level - first, seen)
        best = max(s[2] for s in seen)
        chance = 1.0 - NormalDist(mean, sd).cdf(best) if sd > 0 else float(mean >= best)
        if chance >= self.probability:
            return GO_ON
        return Decision(
            True,
            f"stopped by predict at step {step_text(step)}: predicted end {sign * mean:g} ± "
            f"{sd:.3g} from {len(finished)} finished curves, a {chance:.1%} chance of beating "
            f"the best end {sign * best:g}",
        )
