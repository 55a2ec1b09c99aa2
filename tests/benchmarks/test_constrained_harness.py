"""Constrained and crashing benchmark problems: regions, the feasible-regret curve, methods."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.constrained_methods import (  # noqa: E402
    AboConstrainedMethod,
    OptunaConstrainedMethod,
)
from benchmarks.constrained_problems import (  # noqa: E402
    CONSTRAINED_PROBLEMS,
    HARTMANN6_OPTIMUM,
    get_constrained_problem,
)
from benchmarks.harness import simulate_run, suite_cells  # noqa: E402
from benchmarks.report import INFEASIBLE, _band, cell_table, log_regret  # noqa: E402
from benchmarks.simulator import sample_durations  # noqa: E402
from benchmarks.suites import SUITES, get_problem  # noqa: E402


def test_crash_regions_spare_the_optimum_and_cover_the_documented_share() -> None:
    branin = get_constrained_problem("branin-crash")
    middle = np.array([(np.pi + 5) / 15, 2.275 / 15])  # Branin's middle optimum on the cube
    value, _ = branin(middle)
    assert value == pytest.approx(branin.optimum, abs=1e-5)
    assert branin(np.array([0.35, 0.9])) is None  # the band
    assert branin(np.array([0.60, 0.22])) is None  # the ball's centre, next to the optimum
    assert branin.failure_share == pytest.approx(0.115, abs=0.005)
    hartmann = get_constrained_problem("hartmann6-crash")
    assert hartmann(HARTMANN6_OPTIMUM)[0] == pytest.approx(hartmann.optimum, abs=1e-4)
    assert hartmann(np.r_[HARTMANN6_OPTIMUM[:5], 0.9]) is None
    assert hartmann.failure_share == pytest.approx(0.145, abs=0.005)


def test_constraint_values_are_botorchs_slack_negated() -> None:
    from botorch.test_functions.synthetic import ConstrainedGramacy

    p = get_constrained_problem("gramacy")
    x = np.array([0.1954, 0.4044])  # near the known optimum, feasible
    value, c = p(x)
    slack = (
        ConstrainedGramacy()
        .evaluate_slack_true(torch.from_numpy(x).unsqueeze(0))
        .reshape(-1)
        .numpy()
    )
    assert np.allclose(c, -slack) and p.feasible((value, c))
    assert value == pytest.approx(p.optimum, abs=1e-3)
    assert not p.feasible(p(np.array([0.9, 0.9])))  # outside the feasible pieces
    assert not p.feasible(None)
    with pytest.raises(ValueError, match="x: expected 2 values"):
        p(np.array([1.5, 0.2]))
    assert set(CONSTRAINED_PROBLEMS) <= set(SUITES["constrained"].budgets) | set(
        SUITES["crash"].budgets
    )


def test_the_curve_is_the_best_feasible_regret_and_failures_are_counted() -> None:
    budget, k = 24, 2
    run = simulate_run(get_problem("branin-crash"), "random", k=k, budget=budget, seed=3)
    p = get_constrained_problem("branin-crash")
    regret = run["regret"]
    assert len(regret) == budget and run["first_feasible"] is not None
    first = run["first_feasible"] - 1
    assert all(r is None for r in regret[:first]) and regret[first] is not None
    finite = [r for r in regret if r is not None]
    assert np.all(np.diff(finite) <= 0)
    own = budget - run["n_initial"]
    assert 0 < run["failures"] <= own
    assert run["wasted"] == pytest.approx(run["failures"] / own, abs=1e-4)
    assert 0 < run["wasted_time"] < 1
    # random search's share of failures is about the region's share of the square
    many = [simulate_run(p, "random", k=k, budget=budget, seed=s)["wasted"] for s in range(6)]
    assert np.mean(many) == pytest.approx(p.failure_share, abs=0.08)
    # the durations of the failed evaluations are what ``wasted_time`` adds up
    taus = sample_durations("halfnormal", budget, np.random.default_rng([3, 2]))
    assert run["wasted_time"] <= run["failures"] * taus.max() / taus[run["n_initial"] :].sum()


def test_a_problem_without_a_feasible_point_yet_reports_inf_as_the_worst() -> None:
    run = simulate_run(get_problem("tensioncompression"), "random", k=2, budget=8, seed=0)
    assert run["regret"] == [None] * 8 and run["first_feasible"] is None
    assert log_regret(None) == INFEASIBLE
    q1, med, q3 = _band(np.array([[INFEASIBLE, -1.0], [INFEASIBLE, -2.0], [-1.0, -3.0]]))
    assert np.isinf(med[0]) and med[1] == -2.0  # no interpolated value between inf and a run

    def member(method: str, seed: int, final: float | None, first: int | None) -> dict:
        return {
            "method": method, "seed": seed, "workers": 2, "utilization": 0.9,
            "duplicate_rate": 0.0, "proposal_seconds": [0.1], "times": [0.0, 1.0, 2.0],
            "regret": [None, None, final], "first_feasible": first, "wasted": 0.25,
        }  # fmt: skip

    members = [member("finds", s, 1e-3, 3) for s in range(8)]
    members += [member("never", s, None, None) for s in range(8)]
    rows = {r.split("|")[1].strip(): r.split("|") for r in cell_table(members, 2, 3).splitlines()}
    assert rows["never"][4].strip() == "inf [inf, inf]" and rows["never"][5].strip() == ""
    assert rows["finds"][5].strip() == "best"
    assert [c.strip() for c in rows["finds"][-4:-1]] == ["0.00", "1.00", "0.250"]  # t = 1.5: none


def test_abo_tells_failures_as_failed_trials_and_optuna_as_fail() -> None:
    import optuna

    import abo

    p = get_constrained_problem("branin-crash")
    inside, outside = np.array([0.35, 0.5]), np.array([0.9, 0.2])
    for method in (
        AboConstrainedMethod(p, seed=0, k=2, n_initial=4, strategy="random"),
        OptunaConstrainedMethod(p, seed=0, k=2, n_initial=4, sampler="tpe"),
    ):
        method.add(inside, None)
        method.add(outside, p(outside))
        handle, x = method.ask()
        method.tell(handle, None)
        if isinstance(method, AboConstrainedMethod):
            states = [t.state for t in method.study.trials]
            assert states == [abo.TrialState.FAILED, abo.TrialState.DONE, abo.TrialState.FAILED]
            assert method.study.trials[0].params["x0"] == pytest.approx(0.35)
        else:
            states = [t.state for t in method.study.trials]
            fail, done = optuna.trial.TrialState.FAIL, optuna.trial.TrialState.COMPLETE
            assert states == [fail, done, fail]


def test_optuna_sees_constraint_values_of_added_and_told_trials() -> None:
    from optuna.study._constrained_optimization import _CONSTRAINTS_KEY

    p = get_constrained_problem("gramacy")
    m = OptunaConstrainedMethod(p, seed=0, k=2, n_initial=2, sampler="gp")
    x = np.array([0.1954, 0.4044])
    m.add(x, p(x))
    handle, y = m.ask()
    m.tell(handle, p(y))
    for trial, point in zip(m.study.trials, (x, y), strict=True):
        assert np.allclose(trial.system_attrs[_CONSTRAINTS_KEY], p(point)[1])


def test_abo_studies_declare_one_constraint_per_problem_constraint() -> None:
    import abo

    p = get_constrained_problem("pressurevessel")
    m = AboConstrainedMethod(p, seed=0, k=2, n_initial=8)
    kinds = [(o.name, type(o).__name__) for o in m.study.spec.outcomes]
    assert kinds == [("f", "Objective")] + [(f"c{i}", "Constraint") for i in range(1, 5)]
    x = np.full(4, 0.5)
    m.add(x, p(x))
    (t,) = m.study.trials
    assert abo.core.outcomes.feasible(t.values, m.study.spec.outcomes) == p.feasible(p(x))


def test_worst_value_imputation_runs_only_where_evaluations_fail() -> None:
    crash = {c[0] for c in suite_cells(SUITES["crash"], seeds=1)}
    constrained = {c[0] for c in suite_cells(SUITES["constrained"], seeds=1)}
    assert "auto+worst" in crash and "auto+worst" not in constrained
    assert {"optuna-gp", "optuna-tpe", "random", "auto"} <= crash & constrained
