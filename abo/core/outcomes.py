"""What a study measures: its named outcomes, and how a told result is checked against them.

A study declares its outcomes once. An outcome is an ``Objective`` (a number to minimise or
maximise) or a ``Constraint`` (a number that must stay on one side of a bound, known only
after the run: ``"stress <= 250"``); the JSON form carries a ``kind`` so that fidelities can
join as another kind without changing how studies are stored. Every study has at least one
objective; a study of one outcome is told a plain number, otherwise a dict by name. A trial is
feasible when every constraint holds.

Example:
    >>> outcomes = parse_outcomes({"error": "minimize", "latency_ms": "minimize"})
    >>> [o.name for o in outcomes]
    ['error', 'latency_ms']
    >>> check_values({"error": 0.12, "latency_ms": 31}, outcomes)
    {'error': 0.12, 'latency_ms': 31.0}
    >>> outcomes = parse_outcomes({"loss": "minimize", "stress": "<= 250"})
    >>> [o.kind for o in outcomes], feasible({"loss": 0.3, "stress": 260.0}, outcomes)
    (['objective', 'constraint'], False)
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from abo.core.exceptions import AboError, InvalidValueError

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
        _check_name(self.name)
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


OPERATORS = ("<=", ">=")
_CONSTRAINT = re.compile(r"^\s*(<=|>=)\s*(\S+)\s*$")


@dataclass(frozen=True)
class Constraint:
    """A measured number that must satisfy ``value <= bound`` (``op="<="``) or ``>=``.

    Told with the objectives; a trial is feasible when every constraint holds. The model of a
    constraint is a GP of its slack (``bound - value`` for ``<=``, ``value - bound`` for
    ``>=``): non-negative where it holds.

    Example:
        >>> c = Constraint("stress", "<=", 250)
        >>> c.holds(249.0), c.slack(260.0), str(c)
        (True, -10.0, 'stress <= 250.0')
    """

    name: str
    op: str = "<="
    bound: float = 0.0

    kind = "constraint"

    def __post_init__(self) -> None:
        _check_name(self.name)
        if self.op not in OPERATORS:
            raise AboError(
                f"outcomes.{self.name}.op: expected '<=' or '>=', got {self.op!r}",
                field=f"outcomes.{self.name}.op",
            )
        bound = check_number(self.bound, f"outcomes.{self.name}.bound")
        object.__setattr__(self, "bound", bound)

    def slack(self, value: float) -> float:
        """How far ``value`` is inside the bound (negative: by how much it violates it)."""
        return self.bound - value if self.op == "<=" else value - self.bound

    def holds(self, value: float) -> bool:
        """Whether ``value`` satisfies the constraint (the bound itself does)."""
        return self.slack(value) >= 0.0

    def __str__(self) -> str:
        return f"{self.name} {self.op} {self.bound!r}"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "op": self.op, "bound": self.bound}


Outcome = Objective | Constraint  # fidelities may join as another kind


def _check_name(name: Any) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise AboError(
            f"outcomes: {name!r} is not a valid outcome name (1-64 letters, digits, "
            "'_', '.' or '-', starting with a letter or '_')",
            field="outcomes",
        )


def _parse_string(name: str, spec: str) -> Outcome:
    """``"minimize"``/``"maximize"`` (an objective) or ``"<= 250"``/``">= 0.9"`` (a constraint)."""
    if spec in DIRECTIONS:
        return Objective(name, spec)
    if not spec.lstrip().startswith(("<", ">")):
        raise AboError(
            f"outcomes.{name}.direction: expected 'minimize' or 'maximize' (or a constraint "
            f"such as '<= 250'), got {spec!r}",
            field=f"outcomes.{name}.direction",
        )
    match = _CONSTRAINT.match(spec)
    if match is None:
        raise AboError(
            f"outcomes.{name}: expected 'minimize', 'maximize' or a constraint such as "
            f"'<= 250' or '>= 0.9', got {spec!r}",
            field=f"outcomes.{name}",
        )
    try:
        bound = float(match.group(2))
    except ValueError:
        raise AboError(
            f"outcomes.{name}: the bound of {spec!r} is not a number", field=f"outcomes.{name}"
        ) from None
    return Constraint(name, match.group(1), bound)


def parse_outcomes(data: Any, direction: str | None = None) -> tuple[Outcome, ...]:
    """Outcomes from any accepted form, checked.

    Accepted: ``None`` (one objective called ``value``, minimised unless ``direction``
    says otherwise), a dict of name to direction or constraint (``{"error": "minimize",
    "memory_gb": "<= 40"}``), a list of ``Objective``/``Constraint`` objects or of their JSON
    dicts, or one ``Objective``.
    """
    if data is None:
        return (Objective(DEFAULT_NAME, direction or "minimize"),)
    if isinstance(data, Objective):
        items: list[Any] = [data]
    elif isinstance(data, Mapping):
        items = []
        for name, spec in data.items():
            if isinstance(spec, str):
                items.append(_parse_string(name, spec))
            elif isinstance(spec, Mapping):
                items.append(_from_json({"name": name, **spec}))
            else:
                raise AboError(
                    f"outcomes.{name}: expected a direction ('minimize' or 'maximize') or a "
                    f"constraint ('<= 250'), got {spec!r}",
                    field=f"outcomes.{name}",
                )
    elif isinstance(data, Sequence) and not isinstance(data, str | bytes):
        items = [o if isinstance(o, Objective | Constraint) else _from_json(o) for o in data]
    else:
        raise AboError(
            f"outcomes: expected a dict of name to direction or a list of objectives, "
            f"got {type(data).__name__}",
            field="outcomes",
        )
    if not any(o.kind == "objective" for o in items):
        raise AboError("outcomes: a study needs at least one objective", field="outcomes")
    if len(items) > MAX_OUTCOMES:
        raise AboError(f"outcomes: at most {MAX_OUTCOMES}, got {len(items)}", field="outcomes")
    names = [o.name for o in items]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        first = duplicated[0]
        raise AboError(f"outcomes.{first}: declared twice", field=f"outcomes.{first}")
    objs = [o for o in items if o.kind == "objective"]
    if direction is not None and (len(objs) != 1 or objs[0].direction != direction):
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
    keys = {
        "objective": ("name", "kind", "direction"),
        "constraint": ("name", "kind", "op", "bound"),
    }
    if kind not in keys:
        raise AboError(
            f"outcomes.{name}.kind: {kind!r} is not a known kind of outcome (known: "
            "objective, constraint)",
            field=f"outcomes.{name}.kind",
        )
    unknown = sorted(set(data) - set(keys[kind]))
    if unknown:
        raise AboError(
            f"outcomes.{name}.{unknown[0]}: unknown key (known: {', '.join(keys[kind])})",
            field=f"outcomes.{name}.{unknown[0]}",
        )
    if kind == "constraint":
        if "bound" not in data:
            raise AboError(f"outcomes.{name}.bound: missing", field=f"outcomes.{name}.bound")
        return Constraint(name, data.get("op", "<="), data["bound"])  # type: ignore[arg-type]
    return Objective(name, data.get("direction", "minimize"))  # type: ignore[arg-type]


def outcomes_to_json(outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
    return [o.to_json() for o in outcomes]


def objectives(outcomes: Sequence[Outcome]) -> tuple[Objective, ...]:
    """The outcomes that are objectives, in declaration order."""
    return tuple(o for o in outcomes if isinstance(o, Objective))


def constraints(outcomes: Sequence[Outcome]) -> tuple[Constraint, ...]:
    """The outcomes that are constraints, in declaration order."""
    return tuple(o for o in outcomes if isinstance(o, Constraint))


def feasible(values: Mapping[str, Any], outcomes: Sequence[Outcome]) -> bool:
    """Whether every constraint holds for the told ``values`` (a missing or non-finite
    constraint value does not hold); ``True`` for a study without constraints."""
    for c in constraints(outcomes):
        v = values.get(c.name)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            return False
        if not c.holds(float(v)):
            return False
    return True


def finite_float(value: Any) -> float | None:
    """``value`` as a finite float, or ``None`` when it is not a real number (bools and strings
    are not), is NaN or infinite, or is an integer beyond the float range (``10**400``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        out = float(value)
    except (OverflowError, TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def shown(value: Any) -> str:
    """``repr(value)`` for an error message, a huge integer as its size, long text shortened."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        n = abs(int(value))
        if n >= 10**30:
            try:
                return f"an integer of {len(str(n))} digits"
            except ValueError:  # beyond Python's limit on int-to-text (4300 digits by default)
                return f"an integer of about {int(n.bit_length() * math.log10(2))} digits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


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
            f"{field}: must be finite, got {shown(value)}", field=field
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
