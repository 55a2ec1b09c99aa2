"""``from_optuna``: an abo study made (or continued) from an Optuna study's complete trials,
read read-only, planned in full before anything is written (see ``abo.interop``)."""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from abo.core.exceptions import AboError, AboWarning, StudyNotFoundError
from abo.core.space import Space
from abo.interop._common import distribution, optuna_module, parameter
from abo.interop.conditions import infer
from abo.interop.source import Source, read_study

SHOWN_SKIPPED = 10
"""Skipped trials an error message names one by one (the rest are counted)."""


@dataclass(frozen=True)
class Skipped:
    """A complete Optuna trial that could not be imported: its number, and why."""

    number: int
    reason: str


@dataclass(frozen=True)
class Imported:
    """What ``from_optuna`` did: the abo study, results added, results it had already, trials
    that are not results (failed, pruned, running), and complete trials it could not place
    (only with ``partial=True``; otherwise they are an error)."""

    study: Any
    added: int
    already: int
    not_complete: int
    skipped: tuple[Skipped, ...] = ()


@dataclass(frozen=True)
class _Plan:
    """An import worked out before anything is written: the space, the outcomes, each
    placeable trial's (number, params, values) and the complete trials that are not."""

    space: Space
    outcomes: dict[str, str]
    rows: list[tuple[int, dict[str, Any], dict[str, float]]]
    skipped: list[Skipped]
    not_complete: int


def from_optuna(
    optuna_study: str, optuna_storage: str, storage: str | None = None,
    name: str | None = None, *, partial: bool = False, **options: Any,
) -> Imported:  # fmt: skip
    """Create (or continue) the abo study ``name`` (default: the Optuna study's) in ``storage``
    from the complete trials of the Optuna study ``optuna_study`` in ``optuna_storage``, which
    is only read; ``options`` are ``abo.create_study``'s (strategy, seed, ...).

    A define-by-run study's parameters that only some trials have become conditional
    (``abo.interop.conditions``). A complete trial that cannot be placed in the space (a
    parameter no condition explains, a value abo refuses) fails the import, naming each such
    trial and why, before anything is written; ``partial=True`` imports the others, warns
    (``AboWarning``) and lists the skipped ones in ``Imported.skipped``.

    Raises:
        AboError: the source is not an Optuna storage or lacks the study, the study has no
            complete trial, a parameter has two different distributions, a trial cannot be
            placed (without ``partial``), or an option is invalid (the field names which).
    """
    from abo.spec.study_spec import StudySpec
    from abo.storage import open_storage
    from abo.study.study import create_study, delete_study

    source = read_study(optuna_study, optuna_storage)  # first: a bad source opens no target
    name = name or optuna_study
    store = open_storage(storage)
    existing = _existing_space(store, name)
    plan = _plan(source, existing)
    if not plan.rows:
        raise AboError(f"optuna_study: {optuna_study!r} has no complete trial to import"
                       f"{_why(plan.skipped)}", field="optuna_study")  # fmt: skip
    if plan.skipped and not partial:
        raise AboError(
            f"optuna_study: {len(plan.skipped)} of {len(plan.skipped) + len(plan.rows)} "
            f"complete trials of {optuna_study!r} cannot be imported{_why(plan.skipped)}; "
            f"nothing was imported (partial=True, or abo import --partial, imports the other "
            f"{len(plan.rows)})",
            field="optuna_study",
        )
    StudySpec.create(plan.space, outcomes=plan.outcomes, **options)  # options checked first
    study = create_study(plan.space, name=name, storage=store, outcomes=plan.outcomes,
                             load_if_exists=True, **options)  # fmt: skip
    try:
        added, already = _add(study, plan)
    except BaseException:
        if existing is None:  # a failed import leaves no half-made study behind
            with contextlib.suppress(AboError):  # the first error is the one to see
                delete_study(name, store)
        raise
    if plan.skipped:
        warnings.warn(
            f"from_optuna: {len(plan.skipped)} complete trials of {optuna_study!r} were not "
            f"imported{_why(plan.skipped)}",
            AboWarning,
            stacklevel=2,
        )
    return Imported(study, added, already, plan.not_complete, tuple(plan.skipped))


def _existing_space(store: Any, name: str) -> Space | None:
    """The space of the abo study ``name`` the import continues, ``None`` when it is new."""
    try:
        return store.load_study(name).space
    except StudyNotFoundError:
        return None


def _add(study: Any, plan: _Plan) -> tuple[int, int]:
    """Add each planned trial as a known result: (added, already there)."""
    added = already = 0
    for number, params, values in plan.rows:
        before = len(study)
        study.add(params, values, metadata={"optuna_number": number})
        if len(study) > before:
            added += 1
        else:
            already += 1
    return added, already


def _why(skipped: list[Skipped]) -> str:
    """``: trial 3: reason; trial 5: ...`` for an error message (the first few, then a count)."""
    if not skipped:
        return ""
    shown = "; ".join(f"trial {s.number}: {s.reason}" for s in skipped[:SHOWN_SKIPPED])
    more = len(skipped) - SHOWN_SKIPPED
    return f": {shown}" + (f"; and {more} more" if more > 0 else "")


def _plan(source: Source, existing: Space | None) -> _Plan:
    """The whole import worked out from what was read (into the abo study of space
    ``existing`` when it continues one), nothing written."""
    optuna = optuna_module()
    complete = [t for t in source.trials if t.state == optuna.trial.TrialState.COMPLETE]
    if not complete:
        raise AboError(f"optuna_study: {source.name!r} has no complete trial to import",
                       field="optuna_study")  # fmt: skip
    space, unexplained = _space(source, complete, existing)
    names = _metric_names(source)
    outcomes = {
        n: "minimize" if d == optuna.study.StudyDirection.MINIMIZE else "maximize"
        for n, d in zip(names, source.directions, strict=True)
    }
    rows, skipped = [], []
    expected = {n: distribution(p) for n, p in space.items()}
    for t in complete:
        reason = _misfit(space, expected, unexplained, t, names)
        if reason is None:
            values = dict(zip(names, (float(v) for v in t.values), strict=True))
            rows.append((t.number, space.validate(t.params), values))
        else:
            skipped.append(Skipped(t.number, reason))
    return _Plan(space, outcomes, rows, skipped, len(source.trials) - len(complete))


def _metric_names(source: Source) -> list[str]:
    """The outcomes' names: the study's metric names when there is one distinct name per
    direction, else ``value`` (``value_0``, ``value_1``, ... for several)."""
    n = len(source.directions)
    given = source.metric_names
    if given and len(given) == n and len(set(given)) == n and all(isinstance(m, str) and m
                                                                  for m in given):  # fmt: skip
        return list(given)
    return ["value"] if n == 1 else [f"value_{i}" for i in range(n)]


def _misfit(space: Space, expected: Mapping[str, Any], unexplained: Mapping[str, str],
            trial: Any, names: list[str]) -> str | None:  # fmt: skip
    """Why a complete trial cannot be an abo result of ``space`` (whose parameters have the
    Optuna distributions ``expected``), or ``None`` when it can."""
    params, values = trial.params, trial.values
    for name, why in unexplained.items():
        if name not in params:
            return f"it has no {name!r} ({why})"
    for name, dist in trial.distributions.items():
        if name in expected and expected[name] != dist:
            return f"{name}: drawn from {dist}, but the study's is {expected[name]}"
    try:
        space.validate(params)
    except AboError as exc:
        return str(exc)
    if values is None or len(values) != len(names):
        return f"it has {0 if values is None else len(values)} values, not {len(names)}"
    for n, v in zip(names, values, strict=True):
        if not math.isfinite(float(v)):
            return f"its {n} is {float(v)} (abo keeps only finite results)"
    return None


def _space(source: Source, complete: list[Any], existing: Space | None
           ) -> tuple[Space, dict[str, str]]:  # fmt: skip
    """The abo space of the complete trials: the continued study's or the one an ``abo
    export`` stored, when every trial fits it, else one parameter per name with the
    conditions the trials show. A continued study keeps its space (abo's is fixed): the
    trials that do not fit it are named."""
    if existing is not None:
        return existing, {}
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
    stored = _stored_space(source.user_attrs.get("abo_spec"))
    if stored is not None and _fits(stored, dists, complete):
        return stored, {}
    params = {k: parameter(k, d) for k, d in dists.items()}
    return infer(params, [t.params for t in complete])


def _stored_space(data: Any) -> Space | None:
    """The space of the abo spec an export stored with the study, if it reads as one."""
    if not isinstance(data, Mapping):
        return None
    from abo.spec.study_spec import StudySpec

    try:
        return StudySpec.from_json(data).space
    except Exception:  # noqa: BLE001 - an attribute edited or written by another tool
        return None


def _fits(space: Space, dists: Mapping[str, Any], complete: list[Any]) -> bool:
    """Whether every trial's parameters and distributions are those of ``space``."""
    if any(k not in space or distribution(space[k]) != d for k, d in dists.items()):
        return False
    try:
        for t in complete:
            space.validate(t.params)
    except AboError:
        return False
    return True
