"""The real learning curves (``benchmarks/real_curves.py``): the trainers train for real, the
committed tables are what they produce, and the stopping benchmark runs on them."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from benchmarks import curves, real_curves

NAMES = list(real_curves.TRAINERS)


@pytest.mark.parametrize("name", NAMES)
def test_each_committed_table_holds_2048_configurations_of_the_trainers_space(name: str) -> None:
    trainer = real_curves.TRAINERS[name]
    U, losses = real_curves.read_table(name)
    assert U.shape == (2048, len(trainer.space))
    assert ((U >= 0) & (U <= 1)).all() and len({tuple(u) for u in U}) == 2048
    assert all(0 < len(c) <= real_curves.STEPS or len(c) == 0 for c in losses)
    assert all(math.isfinite(v) and v <= real_curves.DIVERGED for c in losses for v in c)
    full = [c for c in losses if len(c) == real_curves.STEPS]
    assert len(full) >= 1024  # most runs reach the end: a table of real training, not noise
    finals = sorted(c[-1] for c in full)
    assert finals[0] < 0.95 * finals[len(finals) // 2]  # the parameters matter


@pytest.mark.parametrize("name", ["linear-digits", "gbm-cancer", "torch-mlp-digits"])
def test_a_table_row_is_what_training_that_configuration_gives(name: str) -> None:
    """Regenerating a table gives the same curves: one row of three trainers trained again
    (float32 torch within 1e-4)."""
    trainer = real_curves.TRAINERS[name]
    U, losses = real_curves.read_table(name)
    row = 3
    params = real_curves.params_at(trainer, U[row])
    again = trainer.train(params, None)
    assert len(again) == len(losses[row])
    assert np.allclose(again, losses[row], rtol=1e-4, atol=1e-6)


def test_curves_cross_where_the_trainers_say_they_do() -> None:
    """Boosting with a large learning rate leads early and overfits: among the runs best at the
    second step, few are best at the end, and some curves rise after their minimum."""
    _, losses = real_curves.read_table("gbm-cancer")
    losses = tuple(c for c in losses if len(c) == real_curves.STEPS)
    early = np.argsort([c[1] for c in losses])[:25]
    late = set(np.argsort([c[-1] for c in losses])[:25].tolist())
    assert len(set(early.tolist()) & late) < 12
    rising = [c for c in losses if c[-1] > 1.2 * min(c)]
    assert len(rising) >= 10


def test_the_stopping_benchmark_runs_on_a_table_and_its_optimum_is_the_best_full_run() -> None:
    problem = curves.CURVE_PROBLEMS["gbm-cancer"]()
    U, losses = real_curves.read_table("gbm-cancer")
    best = min(c[-1] for c in losses if len(c) == real_curves.STEPS)
    assert problem.optimum == best and problem.max_step == real_curves.STEPS
    i = int(np.argmin([c[-1] if len(c) == real_curves.STEPS else math.inf for c in losses]))
    assert problem.final(U[i]) == best  # a tabulated point takes its own curve
    run = curves.simulate_curves("gbm-cancer", "random+asha", k=3, budget=200, seed=0)
    assert run["stopped"] > 0 and run["trials"] == run["stopped"] + run["full"] + run["failed"]
    assert all(r is None or r >= 0 for r in run["regret"])


def test_the_table_command_names_a_trainer_it_does_not_know() -> None:
    with pytest.raises(SystemExit, match="--problems: 'nope' is not a tabulated trainer"):
        curves.write_tables(["nope"], None, say=print)


@pytest.mark.slow
def test_a_trainer_runs_live_through_optimize_on_dask_workers_and_asha_stops_some(
    tmp_path: Path,
) -> None:
    """The same trainer, live: a study on a SQLite file, ``optimize`` on a local Dask cluster
    of worker processes, every epoch reported, ASHA stopping the runs behind."""
    import abo

    study = abo.create_study(
        real_curves.space("linear-digits"), seed=0, stopping="asha",
        storage=f"sqlite:///{tmp_path / 'live.db'}",
    )  # fmt: skip
    result = study.optimize(real_curves.Live("linear-digits"), n_trials=12, n_workers=2)
    assert result.n_done + result.n_stopped + result.n_failed == 12
    assert result.n_stopped > 0 and result.n_done > 0
    for trial in study.trials:
        reports = study.reports(trial.id)[trial.id]
        assert [r.step for r in reports] == list(range(1, len(reports) + 1))
        if trial.state is abo.TrialState.DONE:  # a full run reports every step, ends on the last
            assert len(reports) == real_curves.STEPS and trial.value == reports[-1].value
