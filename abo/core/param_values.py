"""What parameters' values may be (kinds, exact bounds, grid tolerance) and the normalised form of
a parameter's condition (``when=``), the lowest layer of a search space."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from abo.core.exceptions import SearchSpaceError
from abo.core.outcomes import shown

Choice = str | int | float | bool
ParamValue = float | int | str | bool

MAX_INT = 2**53
"""Largest integer bound (in absolute value): every integer up to it is an exact float."""
GRID_TOL = 1e-9
"""Relative tolerance of "a whole multiple of step" and of "on the grid"."""


def is_real(value: Any) -> bool:
    # numbers.Real admits numpy scalars (np.int64, np.float32), which users pass all the time
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_whole(value: Any) -> bool:
    """True for a real that is a whole number (exact for ints of any size, no overflow)."""
    if isinstance(value, numbers.Integral):
        return not isinstance(value, bool)
    return is_real(value) and math.isfinite(value) and float(value).is_integer()


def kind_of(value: Any) -> str | None:
    """What a categorical choice is, ignoring numpy's scalar types: bool, int, float or str."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, numbers.Integral):
        return "int"
    if isinstance(value, numbers.Real):
        return "float"
    if isinstance(value, str):
        return "str"
    return None


def plain(value: Any) -> Choice:
    """A choice as the plain Python value JSON stores (np.int64(3) -> 3)."""
    return {"bool": bool, "int": int, "float": float, "str": str}[kind_of(value) or "str"](value)


def is_finite(value: Any) -> bool:
    """True for a real that is finite as a float (an int too large for a float is not)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def exact_decimal(value: float | int) -> Decimal:
    """The decimal a user wrote for ``value`` (``0.1`` -> ``Decimal('0.1')``, not its binary)."""
    if isinstance(value, numbers.Integral):
        return Decimal(int(value))
    return Decimal(repr(float(value)))  # float(): numpy's repr is "np.float64(0.1)"


Condition = tuple[tuple[str, tuple[Choice, ...]], ...]
"""A parameter's ``when``, normalised: ``((parent, allowed values), ...)``, all must hold."""


def parse_when(when: Any, kind: str) -> Condition:
    """``when`` as given (``{parent: value or [values]}``) in its normalised form."""
    if when is None or when == ():
        return ()
    if isinstance(when, tuple) and all(isinstance(c, tuple) and len(c) == 2 for c in when):
        when = {parent: list(values) for parent, values in when}  # already normalised
    if not isinstance(when, Mapping) or not when:
        raise SearchSpaceError(
            f"{kind}: when must map parent parameters to their values, such as "
            f"{{'optimizer': 'sgd'}}, got {shown(when)}"
        )
    out = []
    for parent, values in when.items():
        if not isinstance(parent, str) or not parent:
            raise SearchSpaceError(f"{kind}: when's keys must be parameter names, got {parent!r}")
        listed = list(values) if isinstance(values, list | tuple) else [values]
        if not listed:
            raise SearchSpaceError(f"{kind}: when[{parent!r}] lists no value")
        for v in listed:
            if kind_of(v) is None:
                raise SearchSpaceError(
                    f"{kind}: when[{parent!r}] values must be str, int, float or bool, "
                    f"got {shown(v)}"
                )
        out.append((parent, tuple(plain(v) for v in listed)))
    return tuple(out)


def with_when(out: dict[str, Any], when: Condition) -> dict[str, Any]:
    """A parameter's JSON form with its condition (left out when it has none)."""
    if when:
        out["when"] = {parent: list(values) for parent, values in when}
    return out
