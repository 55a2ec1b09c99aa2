"""The discrete-event simulator: clock, occupancy, common random numbers, real methods."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

# benchmarks/ lives at the repository root and is not part of the installed package.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.problems import branin, get_problem, hartmann6  # noqa: E402
from benchmarks.simulator import (  # noqa: E402
    DURATIONS,
    OptunaMethod,
    initial_design,
    sample_durations,
    simulate,
)


def _taus(seed: int, budget: int, kind: str = "halfnormal") -> np.ndarray:
    return sample_durations(kind, budget, np.random.default_rng([seed, 2]))


def test_problems_reach_their_known_optima() -> None:
    b, h = branin(), hartmann6()
    assert b.regret(b(np.array([(np.pi + 5) / 15, 2.275 / 15]))) < 1e-6
    h_star = np.array([0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573])
    assert h.regret(h(h_star)) < 1e-4
    assert b.regret(b(np.zeros(2))) > 1.0
    with pytest.raises(ValueError, match="problem: unknown"):
        get_problem("nope")


@pytest.mark.parametrize("kind", DURATIONS)
def test_durations_have_mean_one(kind: str) -> None:
    taus = sample_durations(kind, 200_000, np.random.default_rng(0))
    assert (taus >= 0).all()
    assert abs(taus.mean() - 1.0) < 0.02


def test_unknown_duration_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="durations: unknown"):
        sample_durations("gamma", 3, np.random.default_rng(0))


def test_clock_jumps_to_each_completion() -> None:
    # One worker: each job starts when the previous one ends, so completion times are the
    # running sums of the seeded durations, not of any real time.
    run = simulate(branin(), "random", k=1, budget=10, seed=3)
    n0 = run.n_initial
    times = [c.time for c in run.completions]
    assert times[:n0] == [0.0] * n0
    expected = np.cumsum(_taus(3, 10)[n0:])
    np.testing.assert_allclose(times[n0:], expected)


def test_k_evaluations_stay_in_flight_until_the_budget_runs_out() -> None:
    k, budget = 3, 12
    run = simulate(branin(), "random", k=k, budget=budget, seed=1)
    n0 = run.n_initial
    busy = [c.n_busy for c in run.completions[n0:]]
    # After each completion the other k - 1 are still running (then refilled) until nothing is
    # left to submit; then the tail drains.
    assert busy == [k - 1] * (budget - n0 - k + 1) + list(range(k - 2, -1, -1))
    times = [c.time for c in run.completions]
    assert times == sorted(times)
    # k workers finish the same jobs sooner than one worker does.
    assert times[-1] < simulate(branin(), "random", k=1, budget=budget, seed=1).completions[-1].time


def test_same_seed_same_run_other_seed_other_run() -> None:
    a = simulate(branin(), "random", k=4, budget=10, seed=7)
    b = simulate(branin(), "random", k=4, budget=10, seed=7)
    c = simulate(branin(), "random", k=4, budget=10, seed=8)
    key = [(x.time, x.value) for x in a.completions]
    assert key == [(x.time, x.value) for x in b.completions]
    assert key != [(x.time, x.value) for x in c.completions]
    np.testing.assert_array_equal(initial_design(2, 4, 7), initial_design(2, 4, 7))


def test_random_search_on_branin_completes_with_best_so_far_regret() -> None:
    run = simulate(get_problem("branin"), "random", k=4, budget=10, seed=0)
    assert [c.n_completed for c in run.completions] == list(range(1, 11))
    regrets = [c.regret for c in run.completions]
    assert all(r >= 0 for r in regrets)
    assert regrets == sorted(regrets, reverse=True)  # best so far never gets worse
    assert run.final_regret == pytest.approx(min(c.value for c in run.completions) - 0.397887)
    assert len(run.proposal_seconds) == 10 - run.n_initial


def test_qlognei_and_optuna_gp_run_through_the_same_simulator() -> None:
    for method in ("qlognei", "optuna-gp"):
        run = simulate(branin(), method, k=2, budget=7, seed=0)
        assert run.completions[-1].n_completed == 7
        # Same seed, same workers: the duration stream does not depend on the method.
        assert run.completions[run.n_initial].time == pytest.approx(
            min(_taus(0, 7)[run.n_initial : run.n_initial + 2])
        )


def test_optuna_sees_asked_trials_as_running() -> None:
    import optuna

    method = OptunaMethod(branin(), seed=0, k=2, n_initial=2, sampler="gp")
    method.add(np.array([0.1, 0.2]), 5.0)
    method.ask()
    method.ask()
    states = [t.state for t in method.study.trials]
    assert states.count(optuna.trial.TrialState.RUNNING) == 2


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="k: expected"):
        simulate(branin(), "random", k=0, budget=10, seed=0)
    with pytest.raises(ValueError, match="budget: must be at least"):
        simulate(branin(), "random", k=1, budget=3, seed=0)
    with pytest.raises(ValueError, match="method: unknown"):
        simulate(branin(), "nope", k=1, budget=10, seed=0)


def test_the_comparison_script_prints_a_markdown_table(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.gp_vs_optuna import main

    args = ["--problems", "branin", "--budget", "8", "--seeds", "2", "--methods", "random"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "| branin | 8 | random |" in out
    assert "Machine:" in out and "CPUs" in out
