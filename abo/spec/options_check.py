"""Loading an existing study by creating it again: what was given must be what is stored.

``create_study(..., load_if_exists=True)`` (and the HTTP API's create, ``Client.create_study``
and ``abo run --resume``) validate every option first, as for a new study. The study of that
name is then loaded only if it is the same study: its space and outcomes are its identity
(another one is always an error), and each option given *explicitly* must equal the stored
one; an option not given is not compared (the study keeps what it has). A difference is an
``OptionsConflictError`` naming every option that differs, stored against given value, unless
the caller asks to keep the stored options (``load_if_exists="keep"``, ``abo run --resume
NAME --keep-stored-options``): the options given are then validated and otherwise ignored.

Example:
    >>> import abo
    >>> space = abo.Space({"x": abo.Float(0, 1)})
    >>> s = abo.create_study(space, name="opt", strategy="random", lease_seconds=60, seed=1)
    >>> stored, wanted = s.spec, s.spec.replace(lease_seconds=30)
    >>> differences(stored, wanted, ["lease_seconds", "strategy"])
    {'lease_seconds': (60, 30)}
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from abo.core.exceptions import AboError, OptionsConflictError, SearchSpaceError
from abo.spec.study_spec import StudySpec

KEEP = "keep"
LOAD_CHOICES = (False, True, KEEP)
HINT = "load_if_exists='keep' loads it with them"


def check_load_if_exists(value: Any) -> bool | str:
    """``load_if_exists``: ``False``, ``True`` or ``"keep"`` (``AboError`` otherwise)."""
    if value is True or value is False or value == KEEP:
        return value
    raise AboError(
        f"load_if_exists: expected False, True or 'keep' (load the study with its stored "
        f"options), got {value!r}",
        field="load_if_exists",
    )


def _comparable(spec: StudySpec, option: str) -> Any:
    """An option's value in a form equal for equal settings (JSON: tuples as lists, mappings
    as dicts; a warm start by its sources' names, as its snapshot is taken once)."""
    if option == "warm_start_from":
        return [e if isinstance(e, str) else e.get("study") for e in spec.warm_start_from]
    value = getattr(spec, option)
    if isinstance(value, Mapping):
        value = dict(value)
    return json.loads(json.dumps(value, default=str))


def differences(
    stored: StudySpec, wanted: StudySpec, given: Iterable[str]
) -> dict[str, tuple[Any, Any]]:
    """Each option in ``given`` whose value in ``wanted`` is not the ``stored`` one, as
    ``(stored, given)``, in ``given``'s order (space and outcomes are not options here)."""
    out = {}
    for option in given:
        if option in ("space", "outcomes", "direction"):
            continue
        old, new = _comparable(stored, option), _comparable(wanted, option)
        if old != new:
            out[option] = (old, new)
    return out


def check_identity(name: str, stored: StudySpec, wanted: StudySpec) -> None:
    """Refuse loading study ``name`` as ``wanted`` when its space or outcomes differ.

    Raises:
        SearchSpaceError: another space (``field`` ``"space"``).
        AboError: another direction (``"direction"``) or other outcomes (``"outcomes"``).
    """
    if stored.space != wanted.space:
        raise SearchSpaceError(
            f"space: study {name!r} exists with a different space ({stored.space.to_json()})",
            field="space",
        )
    if stored.outcomes == wanted.outcomes:
        return
    if len(stored.objectives) == 1 and len(wanted.objectives) == 1:
        if stored.objective.name == wanted.objective.name:
            raise AboError(
                f"direction: study {name!r} exists with direction {stored.direction!r}",
                field="direction",
            )
    shown = [o.to_json() for o in stored.outcomes]
    raise AboError(f"outcomes: study {name!r} exists with other outcomes {shown}", field="outcomes")


def check_options(
    name: str,
    stored: StudySpec,
    wanted: StudySpec,
    given: Iterable[str],
    load_if_exists: bool | str,
    hint: str = HINT,
) -> None:
    """Refuse loading study ``name`` when an option given differs from the stored one
    (unless ``load_if_exists`` is ``"keep"``).

    Raises:
        OptionsConflictError: naming every option that differs, stored against given; its
            ``field`` is the first of them and ``differences`` holds them all.
    """
    if load_if_exists == KEEP:
        return
    found = differences(stored, wanted, given)
    if not found:
        return
    listed = "; ".join(f"{k}: stored {old!r}, given {new!r}" for k, (old, new) in found.items())
    first = next(iter(found))
    raise OptionsConflictError(
        f"{first}: study {name!r} exists with other options ({listed}); give the stored "
        f"values, or {hint}",
        field=first,
        differences=found,
    )


def check_existing(
    name: str,
    stored: StudySpec,
    wanted: StudySpec,
    given: Iterable[str],
    load_if_exists: bool | str,
    hint: str = HINT,
) -> None:
    """``check_identity`` then ``check_options``: whether study ``name`` may be loaded."""
    check_identity(name, stored, wanted)
    check_options(name, stored, wanted, given, load_if_exists, hint)
