"""The warm-start and conditional-space harnesses (``benchmarks/warm_start.py``,
``benchmarks/conditional.py``): their problems' optima, and what a run records."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import conditional, warm_start


def test_the_shifted_problem_is_the_original_moved_and_rescaled() -> None:
    prob = warm_start.WARM_PROBLEMS["hartmann6-shift"]()
    x_star = np.array([0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573])
    assert prob.original(x_star) == pytest.approx(prob.optimum, abs=1e-4)
    assert prob.regret(prob.target(x_star + 0.05)) == pytest.approx(0.0, abs=1e-3)
    assert prob.regret(prob.target(x_star)) > 0.5  # the old optimum is not the new one


def test_a_warm_run_starts_from_the_sources_and_a_pooled_one_holds_them() -> None:
    cold = warm_start.simulate_warm("branin-shift", "cold", k=2, budget=4, seed=0)
    warm = warm_start.simulate_warm("branin-shift", "warm", k=2, budget=4, seed=0)
    assert cold["evals"] == warm["evals"] == [1, 2, 3, 4]
    assert all(r >= 0 for r in warm["regret"]) and warm["regret"] == sorted(warm["regret"])[::-1]
    # the sources' best points first: on a slightly shifted problem, near its optimum already
    assert warm["regret"][1] < cold["regret"][1]
    with pytest.raises(ValueError, match="unknown 'nope'"):
        warm_start.cells(["nope"])


def test_the_conditional_problems_optimum_is_in_branch_b_and_runs_record_branches() -> None:
    prob = conditional.Branches()
    levy_min = (1.0 + 10.0) / 20.0  # Levy's optimum, x = 1 on [-10, 10]
    best_b = prob({"branch": "b", "b_x1": levy_min, "b_x2": levy_min, "b_x3": levy_min})
    assert best_b == pytest.approx(0.0, abs=1e-9)
    best_c = prob({"branch": "c", "c_depth": 4, **{f"c_x{i}": levy_min for i in range(1, 5)}})
    assert best_c == pytest.approx(0.1, abs=1e-9)
    flat = {n: 0.5 for n in conditional.FLAT} | {"branch": "a", "c_depth": 3}
    assert prob(flat) >= 0.25  # the flat form: the other branches' parameters are ignored
    run = conditional.simulate("random", k=4, budget=8, seed=0)
    assert len(run["regret"]) == 8 and set(run["branches"]) <= {"a", "b", "c"}
    tpe = conditional.simulate("optuna-tpe", k=2, budget=4, seed=0)
    assert tpe["evals"] == [1, 2, 3, 4]
