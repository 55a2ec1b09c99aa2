"""How many trials a run adds: ``n_trials`` (this run's) and ``max_trials`` (the study's).

The two names mean the same everywhere (``Study.optimize``, ``Client``'s studies, the
``[study]`` table of an ``abo run`` file and its ``--n-trials``/``--max-trials`` flags):

``n_trials``
    how many trials *this* run finishes, whatever the study holds already;
``max_trials``
    the study's total: the run stops once the study holds that many *finished* trials,
    so running it again (``abo run --resume``) completes an interrupted budget and then has
    nothing left to do.

A finished trial is one that is ``done``, ``failed`` or ``stopped`` (by the stopping rule),
or ``lost`` with no retry to follow (its ``max_retries`` used up); a lost trial that is
retried counts through its retry. Given both, a run adds ``n_trials`` but stops at
``max_trials``. The study's count is taken when the run starts.

Example:
    >>> import abo
    >>> study = abo.create_study(abo.Space({"x": abo.Float(0, 1)}), strategy="random", seed=0)
    >>> study.tell(study.ask().id, 0.5).state.value
    'done'
    >>> trials_to_add(study, None, 4), trials_to_add(study, 10, 4), trials_to_add(study, 2, None)
    (3, 3, 2)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from abo.core.exceptions import AboError
from abo.core.trial import Trial, TrialState

COUNTED = (TrialState.DONE, TrialState.FAILED, TrialState.STOPPED)


def counts(trial: Trial, max_retries: int) -> bool:
    """Whether ``trial`` is finished for a budget: done, failed, stopped, or lost with no
    retry to follow (``attempt >= max_retries``)."""
    if trial.state in COUNTED:
        return True
    return trial.state is TrialState.LOST and trial.attempt >= max_retries


def finished(trials: Iterable[Trial], max_retries: int) -> int:
    """How many of ``trials`` are finished for a budget (``counts``)."""
    return sum(counts(t, max_retries) for t in trials)


def _check(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise AboError(f"{name}: expected a positive integer, got {value!r}", field=name)
    return value


def check(n_trials: Any, max_trials: Any) -> tuple[int | None, int | None]:
    """Both budgets checked (``AboError`` naming the bad one, or both when neither is given)."""
    n, m = _check(n_trials, "n_trials"), _check(max_trials, "max_trials")
    if n is None and m is None:
        raise AboError(
            "n_trials: give n_trials (the trials this run adds), max_trials (the study's "
            "total of finished trials), or both",
            field="n_trials",
        )
    return n, m


def trials_to_add(study: Any, n_trials: Any, max_trials: Any) -> int:
    """How many trials a run on ``study`` finishes: ``n_trials``, at most what ``max_trials``
    leaves (``0`` when the study holds that many finished trials already)."""
    n, m = check(n_trials, max_trials)
    if m is None:
        assert n is not None  # check: one of them is given
        return n
    retries = int(getattr(study.spec, "max_retries", 0))
    left = max(0, m - finished(study.trials, retries))
    return left if n is None else min(n, left)
