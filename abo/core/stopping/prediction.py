"""A rule that predicts a run's end, with its uncertainty, from the curves that went to the end."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

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


def _features(
    level: float, slope: float, centre: Sequence[float], scale: Sequence[float]
) -> list[float]:
    return [1.0, (level - centre[0]) / scale[0], (slope - centre[1]) / scale[1]]


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """``a x = b`` for a small symmetric positive definite ``a`` (Gaussian elimination)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for i in range(n):
        pivot = max(range(i, n), key=lambda r: abs(m[r][i]))
        m[i], m[pivot] = m[pivot], m[i]
        for r in range(i + 1, n):
            f = m[r][i] / m[i][i]
            for c in range(i, n + 1):
                m[r][c] -= f * m[i][c]
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (m[i][n] - sum(m[i][c] * x[c] for c in range(i + 1, n))) / m[i][i]
    return x


def predict_end(
    level: float, slope: float, seen: Sequence[tuple[float, float, float]]
) -> tuple[float, float]:
    """The mean and standard deviation of a run's end given its ``level`` and ``slope`` now,
    from ``seen``: ``(level, slope, end)`` of the finished curves at the same steps. A linear
    regression of the end on level and slope (standardised, slightly ridged), whose
    predictive spread is the residuals' times the run's leverage: wide where the finished
    curves disagree about where such a run ends, and for a run unlike any of them."""
    n = len(seen)
    cols = [[s[0] for s in seen], [s[1] for s in seen]]
    centre = [sum(c) / n for c in cols]
    spread = [
        math.sqrt(sum((v - m) ** 2 for v in c) / n) for c, m in zip(cols, centre, strict=True)
    ]
    # a feature every finished curve shared (up to rounding) explains nothing: unscaled, the
    # ridge keeps its weight at zero
    scale = [s if s > 1e-9 * (1.0 + abs(m)) else 1.0 for s, m in zip(spread, centre, strict=True)]
    rows = [_features(s[0], s[1], centre, scale) for s in seen]
    ends = [s[2] for s in seen]
    gram = [
        [sum(r[i] * r[j] for r in rows) + (RIDGE if i == j else 0.0) for j in range(3)]
        for i in range(3)
    ]
    weights = _solve(
        gram, [sum(r[i] * e for r, e in zip(rows, ends, strict=True)) for i in range(3)]
    )
    residuals = [
        e - sum(w * x for w, x in zip(weights, r, strict=True))
        for r, e in zip(rows, ends, strict=True)
    ]
    noise = sum(r * r for r in residuals) / max(n - 3, 1)
    x = _features(level, slope, centre, scale)
    leverage = sum(a * b for a, b in zip(x, _solve(gram, x), strict=True))
    mean = sum(w * v for w, v in zip(weights, x, strict=True))
    return mean, math.sqrt(max(noise * (1.0 + leverage), 0.0))


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
