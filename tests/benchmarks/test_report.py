"""The report's statistics: best and statistically tied methods, Holm correction, time curves."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.report import _holm, cell_table, mark_best, regret_at_time, versus  # noqa: E402


def _values(offset: float, seeds: int = 20, scale: float = 0.1, seed: int = 0) -> dict[int, float]:
    rng = np.random.default_rng(seed)
    return {s: offset + scale * float(rng.standard_normal()) for s in range(seeds)}


def test_a_clearly_better_method_is_best_and_no_other_is_tied() -> None:
    marks = mark_best(
        {"good": _values(-5.0, seed=1), "bad": _values(-1.0, seed=2), "worse": _values(0.0, seed=3)}
    )
    assert marks == {"good": "best", "bad": "", "worse": ""}


def test_identical_methods_are_tied() -> None:
    same = _values(-3.0, seed=4)
    marks = mark_best({"a": same, "b": dict(same), "c": _values(2.0, seed=5)})
    assert marks["a"] == "best" and marks["b"] == "tied" and marks["c"] == ""


def test_overlapping_noisy_methods_are_tied() -> None:
    x = _values(0.0, scale=1.0, seed=6)
    jitter = _values(0.0, scale=0.01, seed=7)  # differences centred on zero
    marks = mark_best({"x": x, "y": {s: v + jitter[s] for s, v in x.items()}})
    assert sorted(marks.values()) == ["best", "tied"]


def test_too_few_seeds_cannot_separate_methods() -> None:
    # 5 paired seeds: the smallest two-sided Wilcoxon p is 0.0625 > 0.05, so no difference shows
    marks = mark_best({"good": _values(-5.0, seeds=5), "bad": _values(0.0, seeds=5, seed=9)})
    assert marks == {"good": "best", "bad": "tied"}


def test_holm_adjusts_step_down() -> None:
    assert _holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert _holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def test_regret_at_time_is_the_best_completed_by_then() -> None:
    run = {"times": [0.0, 0.0, 1.5, 2.0], "regret": [3.0, 2.0, 1.0, 0.5]}
    assert regret_at_time(run, 0.0) == 2.0
    assert regret_at_time(run, 1.9) == 1.0
    assert regret_at_time(run, 99.0) == 0.5


def test_cell_table_marks_the_winner() -> None:
    def run(method: str, seed: int, final: float) -> dict[str, object]:
        return {
            "method": method, "seed": seed, "workers": 2, "utilization": 0.9,
            "duplicate_rate": 0.0, "proposal_seconds": [0.1],
            "times": [0.0, 1.0, 2.0], "regret": [1.0, 1.0, final],
        }  # fmt: skip

    members = [run("good", s, 1e-6 * (1 + s)) for s in range(12)]
    members += [run("poor", s, 0.5 + 0.01 * s) for s in range(12)]
    table = cell_table(members, k=2, budget=3)
    rows = {line.split("|")[1].strip(): line.split("|") for line in table.splitlines()[2:]}
    assert rows["good"][5].strip() == "best" and rows["poor"][5].strip() == ""  # at N
    assert rows["poor"][8].strip() == "tied"  # at t = N/k = 1.5 both still have regret 1


def test_versus_the_bar_says_better_worse_or_same() -> None:
    bar = _values(-3.0, seed=10)
    out = versus(
        {
            "optuna-gp": bar,
            "up": _values(-6.0, seed=11),
            "down": _values(0.0, seed=12),
            "twin": dict(bar),
        }  # fmt: skip
    )
    assert out == {"optuna-gp": "(bar)", "up": "better", "down": "worse", "twin": "same"}
    assert versus({"a": bar}) == {"a": ""}  # no bar in the cell: nothing to say
