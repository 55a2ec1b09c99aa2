"""The real-task suite's scores (``benchmarks/real_report.py``): Bayesmark's normalised score
and the grids' significance marks, on hand-made runs whose answers are known."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import real_report as rr
from benchmarks import real_tasks as rt


def _run(method: str, seed: int, final: float, problem: str = "t") -> dict[str, Any]:
    return {"method": method, "problem": problem, "k": 4, "seed": seed, "regret": [9.0, final],
            "ask_seconds": [0.1]}  # fmt: skip


def test_normalised_scores_are_zero_at_random_median_and_one_at_the_best() -> None:
    runs = [_run("random", 0, 0.6), _run("random", 1, 0.4), _run("random", 2, 0.5),
            _run("auto", 0, 0.3), _run("auto", 1, 0.1), _run("optuna-tpe", 0, 0.5)]  # fmt: skip
    scores = rr.normalised_scores(runs)[("t", 4)]
    assert scores["optuna-tpe"] == pytest.approx(0.0)  # random's median final loss
    assert scores["auto"] == pytest.approx((0.5 + 1.0) / 2)  # (0.5-0.3)/0.4 and (0.5-0.1)/0.4
    assert scores["random"] == pytest.approx(0.0)
    assert rr.normalised_scores([_run("auto", 0, 0.3)]) == {}  # no random search: no zero


def test_the_table_marks_the_best_the_tied_and_who_beats_the_bar() -> None:
    seeds = range(8)
    runs = [_run("random", s, 1.0 + 0.01 * s) for s in seeds]
    runs += [_run("auto", s, 0.10 + 0.001 * s) for s in seeds]  # best on every seed
    runs += [_run("ax", s, 0.30 + 0.001 * s) for s in seeds]  # worse than auto on every seed
    runs += [_run("tpe", s, 0.10 + 0.001 * s + (0.002 if s % 2 else -0.002)) for s in seeds]
    table = rr.score_table(runs, order=("auto", "ax", "random"))
    lines = table.splitlines()
    assert lines[0] == "| task | k | auto | ax | random | tpe |"  # order, then the rest
    split = [[part.strip() for part in line.strip("|").split("|")] for line in lines]
    cell = split[2][2:]  # auto, ax, random, tpe
    assert cell[0].startswith("**") and cell[3].startswith("**")  # auto best, tpe tied
    assert not cell[1].startswith("**") and not cell[2].startswith("**")
    rows = {parts[0]: parts[2:] for parts in split[3:]}
    assert rows["best or tied (cells)"][:2] == ["1 / 1", "0 / 1"]
    assert rows["vs ax: better / worse"][:3] == ["1 / 0", "(bar)", "0 / 1"]
    assert rows["seeds"][0] == "8"


def test_the_suite_has_one_table_per_worker_count_and_one_of_the_common_seeds() -> None:
    runs = [{**_run(m, s, 0.5 - 0.1 * (m == "auto") + 0.01 * s), "k": k}
            for k in (4, 16) for m in ("random", "auto", "hebo") for s in range(4)
            if not (m == "hebo" and (k == 16 or s > 1))]  # fmt: skip
    text = rt.score_table(runs)
    heads = [line for line in text.splitlines() if line.startswith("k = ")]
    assert heads == ["k = 4:", "k = 4, seeds 0, 1 alone (those every method ran of every task):",
                     "k = 16:"]  # fmt: skip
    tables = text.split("k = ")[1:]
    assert "hebo" in tables[0] and "hebo" in tables[1] and "hebo" not in tables[2]
    seeds = [line for line in tables[1].splitlines() if line.startswith("| seeds")]
    assert seeds == ["| seeds | | 2 | 2 | 2 |"]  # auto, random and hebo on seeds 0-1 alone
