"""The wide-space suite's problems and its CMA-ES baseline (issue: long campaigns and wide
spaces): embedded problems read only their own coordinates, budgets follow the protocol,
and Optuna's CmaEsSampler runs in the asynchronous harness."""

from __future__ import annotations

import numpy as np

from benchmarks.harness import simulate_run, suite_cells
from benchmarks.suites import SUITES, get_problem


def test_an_embedded_problem_reads_its_own_coordinates_and_keeps_its_optimum() -> None:
    wide = get_problem("hartmann6-in-100")
    inner = get_problem("hartmann6")
    assert wide.dim == 100 and wide.optimum == inner.optimum
    x = np.random.default_rng(0).random(100)
    moved = x.copy()
    changed = [i for i in range(100) if wide(np.where(np.arange(100) == i, 1 - x, x)) != wide(x)]
    assert len(changed) == 6  # the six hidden coordinates, and only they, matter
    moved[changed] = [0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573]  # Hartmann-6's
    assert abs(wide(moved) - inner.optimum) < 1e-4  # minimiser, in its own order
    assert get_problem("branin-in-100").dim == 100


def test_the_wide_suite_follows_the_protocol() -> None:
    suite = SUITES["wide"]
    assert suite.ks == (8, 32) and suite.seeds == 10
    for name, budget in suite.budgets.items():
        assert budget == min(20 * get_problem(name).dim, 1000), name
    methods = {m for m, *_ in suite_cells(suite, seeds=1)}
    assert {"auto", "random", "optuna-cmaes", "optuna-tpe", "optuna-gp"} <= methods
    cmaes_problems = {c[1] for c in suite_cells(suite, seeds=1) if c[0] == "optuna-cmaes"}
    assert "dtlz2-20" not in cmaes_problems  # one objective only
    nsga2_problems = {c[1] for c in suite_cells(suite, seeds=1) if c[0] == "optuna-nsga2"}
    assert nsga2_problems == {"dtlz2-20"}  # several objectives only: CMA-ES's stand-in there


def test_cma_es_runs_in_the_asynchronous_harness() -> None:
    run = simulate_run(get_problem("ackley20"), "optuna-cmaes", k=4, budget=50, seed=0)
    curve = run["regret"]  # the best so far, after each result
    assert len(curve) == 50 and min(curve) >= 0.0
    assert all(b <= a for a, b in zip(curve, curve[1:], strict=False))
    assert len(run["proposal_seconds"]) == 50 - run["n_initial"]  # CMA-ES asked the rest


def test_the_design_size_study_runs_a_small_wide_problem() -> None:
    from benchmarks.wide_design import run

    out = run("hartmann6", dim=12, budget=24, busy=3, seed=0, design="default")
    assert out["n_initial"] == 20 and out["model_asks"] == 4  # the design, then the model
    assert out["regret"] == out["best"] + 3.32237 and out["regret"] > 0
    assert out["ask_p95"] >= out["ask_p50"] > 0
