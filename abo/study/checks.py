"""The argument checks of a study's public methods (``abo.study.api``): each refuses a bad
argument with an ``AboError`` naming the field, before anything is stored or sent."""

from __future__ import annotations

import numbers
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from abo.core.exceptions import AboError, InvalidValueError
from abo.core.outcomes import Objective, check_number, finite_float, shown
from abo.core.userdata import check_mapping
from abo.spec.study_spec import StudySpec

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
MAX_REASON = 10_000  # characters of a failure's reason that are kept


def check_trial_id(trial_id: Any) -> int:
    """A trial id: an integer (Python's or NumPy's), not a bool."""
    if isinstance(trial_id, bool) or not isinstance(trial_id, numbers.Integral):
        raise AboError(f"trial_id: expected an integer, got {trial_id!r}", field="trial_id")
    return int(trial_id)


def check_count(n: Any) -> int:
    """An ask's ``n``: a positive integer."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise AboError(f"n: expected a positive integer, got {n!r}", field="n")
    return int(n)


def check_pace(pace: Any) -> float | None:
    """An ask's ``pace``: ``None`` or a positive, finite number of seconds."""
    if pace is None:
        return None
    seconds = finite_float(pace)  # None for 10**400 too (no OverflowError)
    if seconds is None or not seconds > 0:
        raise (InvalidValueError if seconds is None else AboError)(
            f"pace: expected a positive, finite number of seconds, got {shown(pace)}",
            field="pace",
        )
    return seconds


def check_infos(info: Any, n: int) -> dict[str, Any] | list[dict[str, Any]]:
    """One info dict for every new trial, or a list of one each."""
    if info is None or isinstance(info, Mapping):
        return check_mapping(info, "info")
    if isinstance(info, Sequence) and not isinstance(info, str | bytes):
        if len(info) != n:
            raise AboError(f"info: expected {n} dicts (one per trial), got {len(info)}")
        return [check_mapping(i, f"info[{k}]") for k, i in enumerate(info)]
    raise AboError(f"info: expected a dict or a list of dicts, got {type(info).__name__}")


def check_step(step: Any) -> float:
    """A report's ``step``: a finite, non-negative number."""
    checked = check_number(step, "step")
    if checked < 0:
        raise InvalidValueError(f"step: expected a non-negative number, got {step!r}", field="step")
    return checked


_SEVERAL = {  # why ``best`` and ``report`` need a study of one objective
    "best": "this study has {n} objectives ({names}); no single trial is best: use "
    "best_trials (the Pareto front) or hypervolume()",
    "report": "intermediate values are of a study's one objective; this one has {n} ({names})",
}


def check_one_objective(spec: StudySpec, what: str) -> Objective:
    """The study's one objective; ``AboError`` naming ``what`` (``best``, ``report``) for a
    study of several."""
    objectives = spec.objectives
    if len(objectives) != 1:
        names = ", ".join(o.name for o in objectives)
        why = _SEVERAL[what].format(n=len(objectives), names=names)
        raise AboError(f"{what}: {why}", field=what)
    return objectives[0]


def check_several(spec: StudySpec, what: str) -> tuple[Objective, ...]:
    """The study's objectives; ``AboError`` naming ``what`` for a study of one."""
    objectives = spec.objectives
    if len(objectives) < 2:
        raise AboError(
            f"{what}: this study has one objective ({objectives[0].name}); "
            "use best for its best trial",
            field=what,
        )
    return objectives


def check_name(name: str | None) -> str:
    """A study's name (a random one for ``None``): 1-128 letters, digits, '.', '_', '-'."""
    if name is None:
        return f"study-{uuid.uuid4().hex[:8]}"
    if not isinstance(name, str) or not _NAME.match(name):
        raise AboError(
            f"name: {name!r} is not a valid study name (1-128 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit)",
            field="name",
        )
    return name
