"""Benchmarks of several objectives: problems, the hypervolume-gap curve, methods, the report."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.harness import _MOLoop, read_runs, simulate_run, suite_cells  # noqa: E402
from benchmarks.methods import MO_BASELINES, all_methods  # noqa: E402
from benchmarks.mo_latency import table  # noqa: E402
from benchmarks.mo_methods import OptunaMOMethod  # noqa: E402
from benchmarks.mo_problems import MO_PROBLEMS, get_mo_problem, hypervolume  # noqa: E402
from benchmarks.report import cell_table, write_report  # noqa: E402
from benchmarks.simulator import initial_design, sample_durations  # noqa: E402
from benchmarks.suites import SUITES  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", list(MO_PROBLEMS))
def test_problems_are_minimised_on_the_cube_below_their_best_hypervolume(name: str) -> None:
    from botorch.test_functions import multi_objective as mo

    problem = get_mo_problem(name)
    X = np.random.default_rng(0).random((300, problem.dim))
    if name == "dtlz2-20":  # at random in 20-D no point dominates the reference: stay near
        X[:, 1:] = 0.5 + 0.1 * (X[:, 1:] - 0.5)  # the front's distance variables (0.5)
    Y = np.array([problem(x) for x in X])
    assert Y.shape == (300, problem.num_objectives)
    # the values are BoTorch's negated maximisation problem, read on the native box
    fn = {
        "branincurrin": lambda: mo.BraninCurrin(negate=True),
        "dtlz2": lambda: mo.DTLZ2(6, negate=True),
        "dtlz2-20": lambda: mo.DTLZ2(20, negate=True),
        "zdt2": lambda: mo.ZDT2(6, negate=True),
        "vehiclesafety": lambda: mo.VehicleSafety(negate=True),
    }[name]()
    lo, hi = fn.bounds
    Z = lo + torch.as_tensor(X[:5]) * (hi - lo)
    assert np.allclose(Y[:5], -fn(Z).numpy())
    assert np.allclose(problem.ref_point, -fn.ref_point.numpy())  # sign-adjusted
    hv = hypervolume(Y, problem.ref_point)
    assert 0.0 < hv <= problem.max_hv  # the reference point is dominated, nothing beats the front
    assert problem.gap(Y) == pytest.approx(problem.max_hv - hv) and problem.gap(Y) > 0
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        problem(np.full(problem.dim, 1.5))


def test_the_known_fronts_reach_their_hypervolume_when_minimised() -> None:
    t = np.linspace(0.0, 1.0, 400)
    dtlz2 = get_mo_problem("dtlz2")  # front: x_2.. = 0.5, a quarter circle
    front = np.array([dtlz2(np.r_[v, np.full(5, 0.5)]) for v in t])
    assert np.allclose((front**2).sum(axis=1), 1.0)
    assert 0.995 * dtlz2.max_hv < hypervolume(front, dtlz2.ref_point) <= dtlz2.max_hv
    zdt2 = get_mo_problem("zdt2")  # front: x_2.. = 0, f2 = 1 - f1^2
    front = np.array([zdt2(np.r_[v, np.zeros(5)]) for v in t])
    assert 0.995 * zdt2.max_hv < hypervolume(front, zdt2.ref_point) <= zdt2.max_hv + 1e-9
    # values beyond the reference point add nothing
    assert hypervolume(front + 20.0, zdt2.ref_point) == 0.0


def test_a_short_run_records_a_non_increasing_gap_after_every_completion() -> None:
    problem, k, budget, seed = get_mo_problem("branincurrin"), 2, 14, 3
    n0 = 2 * problem.dim
    taus = sample_durations("halfnormal", budget, np.random.default_rng([seed, 2]))
    opt = OptunaMOMethod(problem, seed, k, n0, "tpe")
    loop = _MOLoop(problem, opt, k, budget, taus, np.random.default_rng(0), False)
    loop.run(initial_design(problem.dim, n0, seed))
    values = np.array(loop.Y)
    assert len(loop.regrets) == budget and values.shape == (budget, 2)
    expected = [problem.gap(values[: i + 1]) for i in range(budget)]
    assert loop.regrets == pytest.approx(expected)
    run = simulate_run(problem, "optuna-nsga2", k=2, budget=14, seed=3)
    gap = np.array(run["hypervolume_gap"])
    assert run["metric"] == "hypervolume_gap" and "regret" not in run and len(gap) == 14
    assert np.all(np.diff(gap) <= 0) and np.all(gap >= 0) and gap[0] <= problem.max_hv
    assert run["hypervolume"] == pytest.approx(problem.max_hv - gap[-1], abs=1e-5 * problem.max_hv)
    assert run["num_objectives"] == 2 and np.all(np.diff(run["times"]) >= 0)
    front = np.array(run["front"])
    assert front.shape[1] == 2 and 0 <= run["inside"] <= 14
    assert run["hypervolume"] == pytest.approx(hypervolume(front, problem.ref_point), rel=1e-4)


def test_abo_methods_build_studies_of_the_problems_objectives() -> None:
    specs = all_methods()
    assert specs["sync-qlognehvi"].synchronous and not specs["qlognehvi"].synchronous
    built = specs["sync-qlognehvi"].build(get_mo_problem("vehiclesafety"), 0, 2, 10, {})
    study = built.study  # type: ignore[attr-defined]
    assert study.strategy == "qlognehvi" and [o.name for o in study.outcomes] == ["f1", "f2", "f3"]
    options = {"raw_samples": 64, "num_restarts": 1}
    auto = specs["auto"].build(get_mo_problem("dtlz2"), 0, 2, 12, options).study  # type: ignore[attr-defined]
    assert auto.strategy == "auto" and len(auto.outcomes) == 2


def test_each_problem_gets_the_methods_for_its_number_of_objectives() -> None:
    import abo

    cells = suite_cells(SUITES["multiobjective"], seeds=1)
    for problem in SUITES["multiobjective"].budgets:
        m = get_mo_problem(problem).num_objectives
        names = {c[0] for c in cells if c[1] == problem}
        assert names == set(abo.strategies(objectives=m)) | set(MO_BASELINES)
        assert {"qlognehvi", "parego", "auto"} <= names and "believer" not in names
    assert {k for c in cells for k in [c[2]]} == {4, 16}
    smoke = {c[0] for c in suite_cells(SUITES["smoke"], seeds=1)}
    assert not smoke & {"qlognehvi", "parego", "sync-qlognehvi", "optuna-nsga2"}
    with pytest.raises(ValueError, match="fit"):
        suite_cells(SUITES["multiobjective"], ["believer"])


def test_the_report_tables_the_gap_beside_old_regret_runs(tmp_path: Path) -> None:
    problem = get_mo_problem("branincurrin")
    runs = [simulate_run(problem, m, 2, 8, s) for m in ("random", "optuna-tpe") for s in (0, 1)]
    old = [json.loads(line) for line in (ROOT / "docs/benchmarks/results/smoke.jsonl").open()]
    branin = [r for r in old if r["problem"] == "branin" and r["k"] == 4][:30]
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in runs + branin[:2]))
    text = write_report([path], tmp_path / "out", bar="random")
    assert "log10 hypervolume gap at N = 8" in text and "log10 regret at N = 60" in text
    assert "| random | 2 | 2 |" in text and "hypervolume gap (the known front" in text
    assert (tmp_path / "out" / "branincurrin-halfnormal-k2.png").read_bytes()[:4] == b"\x89PNG"
    # the existing regret results still read as before
    table_text = cell_table(branin, k=4, budget=60)
    assert "log10 regret at N = 60" in table_text and "hypervolume" not in table_text
    assert len(read_runs([path])) == len(runs) + 2
    only = write_report([path], tmp_path / "only", bar="random", methods=["random"])
    assert "| random |" in only and "optuna-tpe" not in only
    mo_only = write_report([path], tmp_path / "mo", bar="random", problems=["branincurrin"])
    assert "hypervolume gap" in mo_only and "log10 regret" not in mo_only


def test_the_speed_table_states_ratios_against_gpsampler() -> None:
    rows = [
        {"method": "auto", "asks": 20, "capped": False, "median_s": 0.5, "p95_s": 1.0},
        {"method": "optuna-gp", "asks": 5, "capped": True, "median_s": 2.0, "p95_s": 2.5},
    ]
    text = table(rows, 300)
    assert "| auto | 20 | 0.500 | 1.000 | 0.25x | 0.40x |" in text
    assert "| optuna-gp | 5 (capped) | 2.000 | 2.500 | 1.00x | 1.00x |" in text


def test_auto_ref_declares_the_problems_reference_point_and_runs_only_by_name() -> None:
    from benchmarks.methods import method_spec
    from benchmarks.suites import get_problem

    problem = get_mo_problem("zdt2")
    method = method_spec("auto+ref").build(problem, 0, 2, 4, {"raw_samples": 64})
    declared = dict(method.study.spec.reference_point)
    assert declared == {"f1": float(problem.ref_point[0]), "f2": float(problem.ref_point[1])}
    plain = method_spec("auto").build(problem, 0, 2, 4, {})
    assert plain.study.spec.reference_point is None  # the study's own rule
    with pytest.raises(ValueError, match="several objectives"):
        method_spec("auto+ref").build(get_problem("branin"), 0, 2, 4, {})
