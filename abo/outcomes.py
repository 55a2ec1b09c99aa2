"""What a study measures: its named outcomes, and how a told result is checked against them.

A study declares its outcomes once. Today an outcome is an ``Objective`` (a number to minimise
or maximise); the JSON form carries a ``kind`` so that constraints and fidelities can join as
other kinds without changing how studies are stored. Every study has at least one objective;
a study of one objective is told a plain number, a study of several a dict by name.

Example:
    >>> outcomes = parse_outcomes({"error": "minimize", "latency_ms": "minimize"})
    >>> [o.name for o in outcomes]
    ['error', 'latency_ms']
    >>> check_values({"error": 0.12, "latency_ms": 31}, outcomes)
    {'error': 0.12, 'latency_ms': 31.0}
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from abo.exceptions import AboError, InvalidValueError

DIRECTIONS = ("minimize", "maximize")
DEFAULT_NAME = "value"
MAX_OUTCOMES = 16
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Objective:
    """A number the study minimises or maximises.

    Example:
        >>> Objective("accuracy", "maximize").sign
        1.0
    """

    name: str = DEFAULT_NAME
    direction: str = "minimize"

    kind = "objective"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise AboError(
                f"outcomes: {self.name!r} is not a valid outcome name (1-64 letters, digits, "
                "'_', '.' or '-', starting with a letter or '_')",
                field="outcomes",
            )
        if self.direction not in DIRECTIONS:
            raise AboError(
                f"outcomes.{self.name}.direction: expected 'minimize' or 'maximize', "
                f"got {self.direction!r}",
                field=f"outcomes.{self.name}.direction",
            )

    @property
    def sign(self) -> float:
        """``+1`` to turn the value into a utility (larger is better), ``-1`` when minimised."""
        return 1.0 if self.direction == "maximize" else -1.0

    def better(self, a: float, b: float) -> bool:
        """Whether value ``a`` is strictly better than ``b``."""
        return a < b if self.direction == "minimize" else a > b

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "direction": self.direction}


Outcome = Objective  # the one kind so far; constraints and fidelities join as other kinds


def parse_outcomes(data: Any, direction: str | None = None) -> tuple[Outcome, ...]:
    """Outcomes from any accepted form, checked.

    Accepted: ``None`` (one objective called ``value``, minimised unless ``direction``
    says otherwise), a dict of name to direction (``{"error": "minimize"}``), a list of
    ``Objective`` objects or of their JSON dicts, or one ``Objective``.
    """
    if data is None:
        return (Objective(DEFAULT_NAME, direction or "minimize"),)
    if isinstance(data, Objective):
        items: list[Any] = [data]
    elif isinstance(data, Mapping):
        items = []
        for name, spec in data.items():
            if isinstance(spec, str):
                items.append(Objective(name, spec))
            elif isinstance(spec, Mapping):
                items.append(_from_json({"name": name, **spec}))
            else:
                raise AboError(
                    f"outcomes.{name}: expected a direction ('minimize' or 'maximize'), "
                    f"got {spec!r}",
                    field=f"outcomes.{name}",
                )
    elif isinstance(data, Sequence) and not isinstance(data, str | bytes):
        items = [o if isinstance(o, Objective) else _from_json(o) for o in data]
    else:
        raise AboError(
            f"outcomes: expected a dict of name to direction or a list of objectives, "
            f"got {type(data).__name__}",
            field="outcomes",
        )
    if not items:
        raise AboError("outcomes: a study needs at least one objective", field="outcomes")
    if len(items) > MAX_OUTCOMES:
        raise AboError(f"outcomes: at most {MAX_OUTCOMES}, got {len(items)}", field="outcomes")
    names = [o.name for o in items]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        first = duplicated[0]
        raise AboError(f"outcomes.{first}: declared twice", field=f"outcomes.{first}")
    if direction is not None and (len(items) != 1 or items[0].direction != direction):
        raise AboError(
            "direction: give the direction of each objective in outcomes, not both",
            field="direction",
        )
    return tuple(items)


def _from_json(data: Any) -> Outcome:
    if not isinstance(data, Mapping):
        raise AboError(f"outcomes: expected an objective, got {data!r}", field="outcomes")
    name = data.get("name")
    kind = data.get("kind", "objective")
    if kind != "objective":
        raise AboError(
            f"outcomes.{name}.kind: {kind!r} is not a known kind of outcome (known: objective)",
            field=f"outcomes.{name}.kind",
        )
    unknown = sorted(set(data) - {"name", "kind", "direction"})
    if unknown:
        raise AboError(
            f"outcomes.{name}.{unknown[0]}: unknown key (known: name, kind, direction)",
            field=f"outcomes.{name}.{unknown[0]}",
        )
    return Objective(name, data.get("direction", "minimize"))  # type: ignore[arg-type]


def outcomes_to_json(outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
    return [o.to_json() for o in outcomes]


def objectives(outcomes: Sequence[Outcome]) -> tuple[Objective, ...]:
    """The outcomes that are objectives, in declaration order."""
    return tuple(o for o in outcomes if o.kind == "objective")


def check_number(value: Any, field: str = "value") -> float:
    """A finite float from ``value``, or ``InvalidValueError`` naming ``field``."""
    if isinstance(value, bool) or isinstance(value, str | bytes):
        raise InvalidValueError(f"{field}: expected a real number, got {value!r}", field=field)
    if hasattr(value, "numel") and hasattr(value, "item"):  # a torch tensor, without torch
        if value.numel() != 1:
            raise InvalidValueError(
                f"{field}: expected one number, got a tensor of {tuple(value.shape)}", field=field
            )
        value = value.item()
    if not isinstance(value, numbers.Real):
        try:
            value = float(value)  # numpy scalars and other real-likes
        except (TypeError, ValueError):
            raise InvalidValueError(
                f"{field}: expected a real number, got {value!r}", field=field
            ) from None
    try:
        out = float(value)
    except OverflowError:  # an int beyond the float range
        raise InvalidValueError(
            f"{field}: must be finite, got an integer of {int(value).bit_length()} bits",
            field=field,
        ) from None
    if not math.isfinite(out):
        raise InvalidValueError(f"{field}: must be finite, got {out!r}", field=field)
    return out


def check_values(value: Any, outcomes: Sequence[Outcome]) -> dict[str, float]:
    """The told outcome values by name, checked: every outcome present, finite, nothing else.

    A study of one objective also takes a plain number. Raises ``InvalidValueError`` naming
    the outcome for a missing, unknown, non-finite or non-numeric value.
    """
    if not isinstance(value, Mapping):
        if len(outcomes) != 1:
            names = ", ".join(o.name for o in outcomes)
            raise InvalidValueError(
                f"value: this study has {len(outcomes)} outcomes ({names}); tell a dict of "
                "them by name",
                field="value",
            )
        return {outcomes[0].name: check_number(value, "value")}
    known = {o.name for o in outcomes}
    for name in value:
        if name not in known:
            raise InvalidValueError(
                f"value.{name}: not an outcome of this study (outcomes: "
                f"{', '.join(o.name for o in outcomes)})",
                field=f"value.{name}",
            )
    out: dict[str, float] = {}
    for o in outcomes:
        if o.name not in value:
            raise InvalidValueError(f"value.{o.name}: missing", field=f"value.{o.name}")
        out[o.name] = check_number(value[o.name], f"value.{o.name}")
    return out


def split_result(result: Any, outcomes: Sequence[Outcome]) -> tuple[Any, dict[str, Any]]:
    """What an objective returned, as (outcome values, metadata).

    A number is the value of a study's one objective. In a dict, keys named after outcomes
    are outcomes and the other keys metadata; ``value`` also names the objective of a study
    of one objective (so ``{"value": 0.3, "epochs": 12}`` works whatever it is called).
    """
    if not isinstance(result, Mapping):
        return result, {}
    names = [o.name for o in outcomes]
    if len(names) == 1 and names[0] not in result and DEFAULT_NAME in result:
        values = {names[0]: result[DEFAULT_NAME]}
        return values, {str(k): v for k, v in result.items() if k != DEFAULT_NAME}
    values = {k: result[k] for k in names if k in result}  # a missing one: check_values says
    return values, {str(k): v for k, v in result.items() if k not in names}
