"""``to_optuna``: an abo study's finished trials written into an Optuna storage, so Optuna's
tools (``optuna-dashboard``, ``optuna.visualization``) open it (see ``abo.interop``)."""

from __future__ import annotations

import datetime
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from abo.core.exceptions import AboError
from abo.core.trial import Trial, TrialState
from abo.interop._common import distribution, optuna_module
from abo.interop.source import translated


def _when(seconds: float | None) -> datetime.datetime | None:
    if seconds is None:
        return None
    return datetime.datetime.fromtimestamp(seconds)


@dataclass(frozen=True)
class Exported:
    """What ``to_optuna`` wrote: the Optuna study's name and how many trials of each state."""

    name: str
    complete: int
    failed: int
    pruned: int
    skipped: int


def to_optuna(
    study: Any, storage: str, name: str | None = None, overwrite: bool = False
) -> Exported:
    """Write ``study`` (an ``abo.Study`` or ``RemoteStudy``) into the Optuna storage ``storage``
    as the Optuna study ``name`` (default: the abo study's). An Optuna study of that name is
    an error naming ``overwrite``, which deletes it first.

    Raises:
        AboError: the Optuna study exists and ``overwrite`` is false.
    """
    optuna = optuna_module()
    name = name or study.name
    finished = _Finished(study.spec, study.trials, study.reports())  # read before any write
    with translated("optuna_storage", storage):
        return _write(optuna, finished, storage, name, overwrite)


@dataclass(frozen=True)
class _Finished:
    """What an export writes, read from the abo study first (its own errors stay its own)."""

    spec: Any
    trials: list[Trial]
    reports: Mapping[int, list[Any]]


def _write(optuna: Any, finished: _Finished, storage: str, name: str, overwrite: bool
           ) -> Exported:  # fmt: skip
    """``to_optuna``'s work, its storage errors translated by the caller."""
    existing = [s.study_name for s in optuna.study.get_all_study_summaries(storage)]
    if name in existing:
        if not overwrite:
            raise AboError(
                f"name: an Optuna study {name!r} exists in {storage}; pass overwrite=True "
                "(--overwrite) to replace it",
                field="name",
            )
        optuna.delete_study(study_name=name, storage=storage)
    objectives = finished.spec.objectives
    target = optuna.create_study(
        study_name=name, storage=storage, directions=[o.direction for o in objectives]
    )
    try:
        counts = _fill(optuna, target, finished)
    except BaseException:  # no half-written study left behind
        optuna.delete_study(study_name=name, storage=storage)
        raise
    return Exported(name, counts["complete"], counts["failed"], counts["pruned"], counts["skipped"])


def _fill(optuna: Any, target: Any, finished: _Finished) -> dict[str, int]:
    """Write the abo study's metric names, spec and finished trials into the new Optuna study
    ``target``: how many trials of each state."""
    spec = finished.spec
    objectives = spec.objectives
    with warnings.catch_warnings():  # experimental in Optuna since 3.2, and stable in use
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        target.set_metric_names([o.name for o in objectives])
    target.set_user_attr("abo_spec", spec.to_json())
    dists = {n: distribution(p) for n, p in spec.space.items()}
    reports = finished.reports
    counts = {"complete": 0, "failed": 0, "pruned": 0, "skipped": 0}
    state_of = {
        TrialState.DONE: optuna.trial.TrialState.COMPLETE,
        TrialState.FAILED: optuna.trial.TrialState.FAIL,
        TrialState.STOPPED: optuna.trial.TrialState.PRUNED,
    }
    frozen = []
    for t in finished.trials:
        state = state_of.get(t.state)
        if state is None:
            counts["skipped"] += 1
            continue
        frozen.append(_frozen(optuna, t, state, spec, dists, reports.get(t.id, [])))
        counts[{"COMPLETE": "complete", "FAIL": "failed", "PRUNED": "pruned"}[state.name]] += 1
    target.add_trials(frozen)
    return counts


def _frozen(optuna: Any, t: Trial, state: Any, spec: Any, dists: Mapping[str, Any],
            reports: list[Any]) -> Any:  # fmt: skip
    objectives = spec.objectives
    values = None
    if state == optuna.trial.TrialState.COMPLETE:
        values = [float(t.values[o.name]) for o in objectives]
    intermediate = {int(r.step): float(r.value) for r in reports if float(r.step).is_integer()}
    if state == optuna.trial.TrialState.PRUNED and t.value is not None and not intermediate:
        intermediate = {0: float(t.value)}
    user: dict[str, Any] = {f"user_{k}" if k.startswith("abo_") else k: v
                            for k, v in t.user.items()}  # fmt: skip
    user.update(abo_id=t.id, abo_state=t.state.value)
    for key, field in (("abo_worker", t.info.get("worker")), ("abo_retry_of", t.retry_of),
                       ("abo_reason", t.reason),
                       ("abo_strategy", t.proposal.strategy if t.proposal else None)):  # fmt: skip
        if field is not None:
            user[key] = field
    constraints = None
    if spec.constraints and state == optuna.trial.TrialState.COMPLETE:
        constraints = [float(-c.slack(t.values[c.name])) for c in spec.constraints]
    made = optuna.trial.create_trial(
        state=state,
        values=values,
        params=dict(t.params),
        distributions={n: dists[n] for n in t.params},  # a conditional space: the active ones
        user_attrs=user,
        intermediate_values=intermediate,
        system_attrs={"constraints": constraints} if constraints is not None else None,
    )
    made.datetime_start = _when(t.created_at)
    made.datetime_complete = _when(t.finished_at)
    return made
