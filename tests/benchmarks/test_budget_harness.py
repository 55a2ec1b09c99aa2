"""The multi-fidelity and learning-curve harnesses (``benchmarks/fidelity.py``,
``benchmarks/curves.py``) and their report: budgets, curves and what counts as a result."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from benchmarks import budget_report, curves, fidelity


def test_a_fidelity_run_spends_its_budget_and_counts_target_evaluations_only() -> None:
    run = fidelity.simulate_fidelity("augbranin", "auto", k=2, budget=5.0, seed=1)
    spent, regrets, levels = run["spent"], run["regret"], run["fidelities"]
    assert spent == sorted(spent) and 5.0 <= spent[-1] < 5.0 + 2 * fidelity.cost(1.0)
    assert math.isclose(spent[-1], sum(fidelity.cost(s) for s in levels), rel_tol=1e-4)
    first = levels.index(1.0) if 1.0 in levels else len(levels)
    assert all(r is None for r in regrets[:first])  # no result before a target evaluation
    assert all(r is not None and r >= 0 for r in regrets[first:])
    assert any(s < 1.0 for s in levels)  # the design spans the fidelities
    single = fidelity.simulate_fidelity("augbranin", "single", k=2, budget=5.0, seed=1)
    assert set(single["fidelities"]) == {1.0} and single["regret"][0] is not None


def test_the_augmented_problems_are_botorchs_at_the_target() -> None:
    hart = fidelity.aughartmann()
    x_star = np.array([0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573])
    assert hart(x_star, 1.0) == pytest.approx(hart.optimum, abs=1e-4)
    assert hart(x_star, 0.0) > hart(x_star, 1.0)  # the cheap fidelity is biased
    rosen = fidelity.augrosenbrock()
    assert rosen(np.full(4, 6.0 / 15.0), 1.0) == pytest.approx(0.0, abs=1e-12)  # x = 1
    with pytest.raises(ValueError, match="expected 2 values"):
        fidelity.augbranin()(np.zeros(3), 1.0)


def test_curves_stop_diverge_and_only_full_runs_are_results() -> None:
    problem = curves.synthetic()
    rng = np.random.default_rng(0)
    diverging = problem.curve(np.array([0.99, 0.5, 0.5, 0.5]), rng)
    assert len(diverging) < problem.max_step and diverging[-1] > curves.DIVERGED
    good = np.array([0.55, 0.65, 0.4, 0.5])
    assert problem.final(good) == pytest.approx(problem.optimum, abs=1e-3)
    run = curves.simulate_curves("curves", "random+asha", k=3, budget=200, seed=0)
    assert run["stopped"] > 0 and run["trials"] == run["stopped"] + run["full"] + run["failed"]
    assert run["steps"][-1] <= 200 + 3 * problem.max_step
    full_seen = [r is not None for r in run["regret"]]
    assert full_seen == sorted(full_seen)  # None until the first full run, then a value
    pruned = curves.simulate_curves("curves", "tpe+sh", k=3, budget=120, seed=0)
    assert pruned["stopped"] > 0


@pytest.mark.parametrize(
    "method", ["random+hyperband", "random+curve", "random+predict", "tpe+median"]
)
def test_the_new_rules_stop_some_runs_and_the_best_by_last_report_counts_stopped_runs(
    method: str,
) -> None:
    run = curves.simulate_curves("curves", method, k=3, budget=300, seed=1)
    assert run["stopped"] > 0 and run["full"] > 0
    assert len(run["regret_last"]) == len(run["regret"]) == len(run["steps"])
    first = [next(i for i, r in enumerate(run[key]) if r is not None)
             for key in ("regret_last", "regret")]  # fmt: skip
    assert first[0] <= first[1]  # a stopped run counts by its last report, a full one too
    assert all(r is None or r >= 0 for r in run["regret_last"])


@pytest.mark.parametrize("rule", ["asha", "hyperband", "curve", "predict"])
def test_the_aegis_variants_propose_with_aegis_under_their_rule(rule: str) -> None:
    opt = curves.METHODS[f"aegis+{rule}"](curves.synthetic(), 0, 3)
    assert opt.study.spec.strategy == "aegis"
    assert opt.study.spec.stopping is not None and opt.study.spec.stopping["rule"] == rule


def test_an_aegis_variant_stops_runs_on_a_real_trainer() -> None:
    run = curves.simulate_curves("gbm-cancer", "aegis+asha", k=3, budget=40, seed=0)
    assert run["stopped"] > 0 and run["trials"] == run["stopped"] + run["full"] + run["failed"]


def test_the_fidelity_curve_variant_declares_the_steps_a_fidelity_and_stops_by_curve() -> None:
    opt = curves.METHODS["auto+fidelity+curve"](curves.synthetic(), 0, 3)
    assert opt.study.spec.fidelity["parameter"] == "epochs"
    assert opt.study.spec.stopping["rule"] == "curve"
    trial_id, _, steps = opt.ask(27)
    assert steps == 27  # with a rule every run starts at the target


def test_the_budget_report_marks_the_best_and_the_budget_to_reach_a_reference(
    tmp_path: Path,
) -> None:
    def record(method: str, seed: int, regrets: list[float]) -> dict:
        steps = [10 * (i + 1) for i in range(len(regrets))]
        return {"method": method, "problem": "p", "k": 4, "budget": 40, "seed": seed,
                "steps": steps, "regret": regrets}  # fmt: skip

    runs = [record("slow", s, [1.0, 0.5, 0.2, 0.1]) for s in range(6)]
    runs += [record("fast", s, [0.2, 0.1, 0.01, 0.01]) for s in range(6)]
    text = budget_report.write(runs, "steps", "steps", tmp_path, "t", reference="slow")
    fast = next(line for line in text.splitlines() if line.startswith("| fast"))
    assert "**" in fast and fast.rstrip(" |").endswith("0.50")  # 0.1 reached at 20 of 40
    assert (tmp_path / "p-k4.png").stat().st_size > 0


def test_the_summary_table_has_the_page_s_columns_marks_shares_and_best_other() -> None:
    def record(method: str, seed: int, regrets: list[float]) -> dict:
        steps = [10 * (i + 1) for i in range(len(regrets))]
        return {"method": method, "problem": "p", "k": 4, "budget": 40, "seed": seed,
                "steps": steps, "regret": regrets}  # fmt: skip

    runs = [record("slow", s, [1.0, 0.5, 0.2, 0.1 + 0.001 * s]) for s in range(8)]
    runs += [record("fast", s, [0.2, 0.1, 0.01, 0.01]) for s in range(8)]
    runs += [record("peer", s, [1.0, 1.0, 0.0, 0.0]) for s in range(8)]  # regret 0: -12
    text = budget_report.summary_table(runs, "steps", "slow", ["slow", "fast"], "trainer, k")
    head, _, row = text.splitlines()
    assert head == "| trainer, k | `slow` | `fast` | best other method at the end |"
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[0] == "p, 4"
    assert cells[1] == "0.00↓ / -0.30↓ / -0.99↓"  # the slow one, significantly behind each time
    assert cells[2] == "**-0.70** / **-1.00** / -2.00↓ · 0.50"  # 0.1 reached at 20 of 40 steps
    assert cells[3] == "`peer` -12"


def test_against_time_measures_each_cell_by_its_reference_s_median_end_time() -> None:
    def record(method: str, k: int, seed: int, times: list[float]) -> dict:
        return {"method": method, "problem": "p", "k": k, "budget": 30, "seed": seed,
                "steps": [10, 20, 30], "times": times, "regret": [0.5, 0.2, 0.1]}  # fmt: skip

    runs = [record("auto", 4, s, [1.0, 2.0, end]) for s, end in enumerate([8.0, 10.0, 30.0])]
    runs += [record("auto+asha", 4, 0, [1.0, 4.0, 6.0]), record("auto+asha", 16, 0, [1, 2, 3])]
    timed = budget_report.against_time(runs, "auto")
    assert {(r["method"], r["k"]) for r in timed} == {("auto", 4), ("auto+asha", 4)}
    assert {r["budget"] for r in timed} == {10.0}  # the median of 8, 10 and 30
    asha = next(r for r in timed if r["method"] == "auto+asha")
    assert budget_report.regret_at(asha, "times", 0.5 * asha["budget"]) == 0.2  # at t = 5
    assert budget_report.needed(asha, "times", 0.1) == pytest.approx(0.6)  # 6 of 10
    assert asha["steps"] == runs[3]["steps"] and runs[3]["budget"] == 30  # a copy


def test_budget_runs_are_read_from_plain_and_gzipped_files_alike(tmp_path) -> None:
    import gzip
    import json

    from benchmarks import budget_runs

    record = {"method": "auto", "problem": "sgd", "k": 4, "budget": 80, "seed": 3,
              "steps": [20], "regret": [0.5]}  # fmt: skip
    plain, packed = tmp_path / "runs.jsonl", tmp_path / "more.jsonl.gz"
    plain.write_text(json.dumps(record) + "\n")
    packed.write_bytes(gzip.compress((json.dumps({**record, "seed": 4}) + "\n").encode()))
    runs = budget_runs.read([plain, packed])
    assert sorted(r["seed"] for r in runs) == [3, 4]
