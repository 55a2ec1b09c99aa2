"""``n_trials`` is what one ``optimize`` adds; ``max_trials`` is the study's total of finished
trials (done, failed, stopped, or lost with no retry to follow), the same in every interface."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import abo
from abo import AboError, TrialState
from abo.executors import ThreadExecutor
from abo.run.budget import counts, finished, trials_to_add

SPACE = abo.Space({"x": abo.Float(0.0, 1.0)})


def _run(study: abo.Study, **budget: Any) -> abo.OptimizeResult:
    def objective(p: dict[str, Any]) -> float:
        if p["x"] > 0.8:
            raise RuntimeError("diverged")
        return p["x"]

    with ThreadExecutor(2) as ex:
        return study.optimize(objective, executor=ex, lookahead=0, verbosity=0, **budget)


def test_n_trials_adds_and_max_trials_stops_at_the_studys_total() -> None:
    study = abo.create_study(SPACE, strategy="random", seed=1, max_retries=0)
    _run(study, n_trials=3)
    assert len(study) == 3
    assert _run(study, n_trials=3) and len(study) == 6  # three more, not a total of 3
    first = study.ask()
    study.fail(first.id, "oom")  # a failed trial counts
    lost = study.ask()
    study.lose(lost.id, "node died")  # no retry (max_retries=0): it counts
    assert finished(study.trials, 0) == 8
    result = _run(study, max_trials=10)
    assert result.n_done + result.n_failed == 2 and finished(study.trials, 0) == 10
    nothing = _run(study, max_trials=10)
    assert nothing.trial_ids == [] and nothing.stopped == "max_trials=10 reached"
    capped = _run(study, n_trials=5, max_trials=12)  # whichever comes first
    assert len(capped.trial_ids) == 2 and finished(study.trials, 0) == 12


def test_a_retried_loss_counts_through_its_retry() -> None:
    study = abo.create_study(SPACE, strategy="random", seed=1, max_retries=1)
    trial = study.ask()
    study.lose(trial.id, "node died")
    assert finished(study.trials, 1) == 0  # its retry is queued
    retry = study.ask()
    assert retry.retry_of == trial.id
    study.tell(retry.id, 0.5)
    assert finished(study.trials, 1) == 1
    running = study.ask()
    assert trials_to_add(study, None, 5) == 4  # a running trial is not finished
    assert counts(dataclasses.replace(running, state=TrialState.STOPPED), 1)
    assert not counts(running, 1)


@pytest.mark.parametrize(
    ("budget", "field"),
    [
        ({}, "n_trials"),
        ({"n_trials": 0}, "n_trials"),
        ({"n_trials": True}, "n_trials"),
        ({"max_trials": 2.5}, "max_trials"),
        ({"n_trials": 2, "max_trials": -1}, "max_trials"),
    ],
)
def test_bad_budgets_are_refused_naming_the_field(budget: dict[str, Any], field: str) -> None:
    study = abo.create_study(SPACE, strategy="random", seed=1)
    with pytest.raises(AboError) as err:
        study.optimize(lambda p: p["x"], executor=ThreadExecutor(1), **budget)
    assert err.value.field == field and len(study) == 0
