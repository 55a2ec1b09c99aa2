"""abo studies to and from Optuna's storage, so Optuna's tools open abo studies and an Optuna
study's results start an abo one.

``to_optuna(study, storage)`` writes an abo study's finished trials into an Optuna storage (any
URL Optuna takes: ``sqlite:///optuna.db``, PostgreSQL, ...), as an Optuna study of the same
name; ``optuna-dashboard sqlite:///optuna.db`` and ``optuna.visualization`` then show it:

* the space: ``Float`` -> ``FloatDistribution`` (log, step), ``Int`` -> ``IntDistribution``
  (log, step), ``Categorical`` -> ``CategoricalDistribution``;
* the objectives: their directions, and ``set_metric_names`` with their names; outcome
  constraints as Optuna's constraints (a value ``<= 0`` holds: ``value - bound`` for
  ``<=``, ``bound - value`` for ``>=``);
* the states: ``done`` -> ``COMPLETE``, ``failed`` -> ``FAIL``, ``stopped`` -> ``PRUNED``
  with its last value; reports at whole-number steps -> intermediate values; ``running`` and
  ``lost`` trials are not written (a lost trial's parameters live on in its retry);
* creation and end times, and the user attributes ``abo_id``, ``abo_state``,
  ``abo_worker``, ``abo_retry_of``, ``abo_reason``, ``abo_strategy`` and the trial's
  metadata under its own keys.

``from_optuna(name, storage, ...)`` creates (or continues) an abo study from an Optuna study:
the space from the distributions of its complete trials (one distribution per parameter
name, or an error naming the parameter whose distributions differ), the objectives from its
directions and metric names, and every ``COMPLETE`` trial added as a known result
(``study.add``, so importing again adds nothing twice). Failed, pruned and running trials are
not results and are counted, not imported.

Optuna is an optional dependency (``pip install optuna``); without it these raise
``ImportError`` saying so.
"""

from __future__ import annotations

import datetime
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from abo.exceptions import AboError
from abo.space import Categorical, Float, Int, Parameter, Space
from abo.trial import Trial, TrialState


def _optuna() -> Any:
    try:
        import optuna
    except ImportError:
        raise ImportError(
            "Optuna interop: needs optuna (pip install optuna); abo itself does not"
        ) from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def distribution(param: Parameter) -> Any:
    """The Optuna distribution of an abo parameter."""
    d = _optuna().distributions
    if isinstance(param, Categorical):
        return d.CategoricalDistribution(list(param.choices))
    if isinstance(param, Int):
        return d.IntDistribution(param.low, param.high, log=param.log, step=param.step)
    return d.FloatDistribution(param.low, param.high, log=param.log, step=param.step)


def parameter(name: str, dist: Any) -> Parameter:
    """The abo parameter of an Optuna distribution (``AboError`` naming an unknown kind)."""
    d = _optuna().distributions
    if isinstance(dist, d.CategoricalDistribution):
        return Categorical(list(dist.choices))
    if isinstance(dist, d.IntDistribution):
        return Int(dist.low, dist.high, log=dist.log, step=dist.step)
    if isinstance(dist, d.FloatDistribution):
        return Float(dist.low, dist.high, log=dist.log, step=dist.step)
    raise AboError(f"{name}: Optuna distribution {type(dist).__name__} has no abo parameter",
                   field=name)  # fmt: skip


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
    optuna = _optuna()
    name = name or study.name
    spec = study.spec
    existing = [s.study_name for s in optuna.study.get_all_study_summaries(storage)]
    if name in existing:
        if not overwrite:
            raise AboError(
                f"name: an Optuna study {name!r} exists in {storage}; pass overwrite=True "
                "(--overwrite) to replace it",
                field="name",
            )
        optuna.delete_study(study_name=name, storage=storage)
    objectives = spec.objectives
    target = optuna.create_study(
        study_name=name, storage=storage, directions=[o.direction for o in objectives]
    )
    with warnings.catch_warnings():  # experimental in Optuna since 3.2, and stable in use
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        target.set_metric_names([o.name for o in objectives])
    target.set_user_attr("abo_spec", spec.to_json())
    dists = {n: distribution(p) for n, p in spec.space.items()}
    reports = study.reports()
    counts = {"complete": 0, "failed": 0, "pruned": 0, "skipped": 0}
    state_of = {
        TrialState.DONE: optuna.trial.TrialState.COMPLETE,
        TrialState.FAILED: optuna.trial.TrialState.FAIL,
        TrialState.STOPPED: optuna.trial.TrialState.PRUNED,
    }
    frozen = []
    for t in study.trials:
        state = state_of.get(t.state)
        if state is None:
            counts["skipped"] += 1
            continue
        frozen.append(_frozen(optuna, t, state, spec, dists, reports.get(t.id, [])))
        counts[{"COMPLETE": "complete", "FAIL": "failed", "PRUNED": "pruned"}[state.name]] += 1
    target.add_trials(frozen)
    return Exported(name, counts["complete"], counts["failed"], counts["pruned"], counts["skipped"])


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


@dataclass(frozen=True)
class Imported:
    """What ``from_optuna`` did: the abo study, results added, and trials not imported."""

    study: Any
    added: int
    already: int
    not_complete: int


def from_optuna(
    optuna_study: str, optuna_storage: str, storage: str | None = None,
    name: str | None = None, **options: Any,
) -> Imported:  # fmt: skip
    """Create (or continue) the abo study ``name`` (default: the Optuna study's) in ``storage``
    from the complete trials of the Optuna study ``optuna_study`` in ``optuna_storage``;
    ``options`` are ``abo.create_study``'s (strategy, seed, ...).

    Raises:
        AboError: the Optuna study has no complete trial, or a parameter has two different
            distributions (the field names it).
    """
    import abo

    optuna = _optuna()
    source = optuna.load_study(study_name=optuna_study, storage=optuna_storage)
    complete = [t for t in source.trials if t.state == optuna.trial.TrialState.COMPLETE]
    if not complete:
        raise AboError(f"optuna_study: {optuna_study!r} has no complete trial to import",
                       field="optuna_study")  # fmt: skip
    dists: dict[str, Any] = {}
    for t in complete:
        for key, dist in t.distributions.items():
            if key in dists and dists[key] != dist:
                raise AboError(
                    f"{key}: its distribution changed within the Optuna study ({dists[key]} and "
                    f"{dist}); abo's space has one per parameter",
                    field=key,
                )
            dists[key] = dist
    space = Space({k: parameter(k, d) for k, d in dists.items()})
    names = source.metric_names or (
        ["value"] if len(source.directions) == 1 else
        [f"value_{i}" for i in range(len(source.directions))]
    )  # fmt: skip
    outcomes = {
        n: "minimize" if d == optuna.study.StudyDirection.MINIMIZE else "maximize"
        for n, d in zip(names, source.directions, strict=True)
    }
    study = abo.create_study(space, name=name or optuna_study, storage=storage,
                             outcomes=outcomes, load_if_exists=True, **options)  # fmt: skip
    added = already = 0
    for t in complete:
        if set(t.params) != set(space):
            continue  # a trial of another space (the study grew): not this one's result
        values = dict(zip(names, (float(v) for v in t.values), strict=True))
        if not all(math.isfinite(v) for v in values.values()):
            continue
        before = len(study)
        study.add(dict(t.params), values if len(values) > 1 else values[names[0]],
                  metadata={"optuna_number": t.number})  # fmt: skip
        if len(study) > before:
            added += 1
        else:
            already += 1
    return Imported(study, added, already, len(source.trials) - len(complete))
