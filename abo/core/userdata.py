"""The free-form dicts a trial carries (``metadata``, ``info``), checked at the API's edge.

They are stored as JSON, where ``NaN`` and infinities have no form (they would come back as
``null``), so a non-finite number anywhere inside is refused, naming the path to it
(``metadata.loss``, ``info.timings.2``): the same rule as the HTTP API's. ``storable`` is
for values abo did not get from the caller directly (what an objective returned beside its
outcomes): it keeps them, writing a non-finite number as its text (``"nan"``, ``"inf"``).

Example:
    >>> check_mapping({"note": "ok", "sizes": [1, 2.5]}, "metadata")
    {'note': 'ok', 'sizes': [1, 2.5]}
    >>> check_mapping({"loss": float("nan")}, "metadata")
    Traceback (most recent call last):
    ...
    abo.core.exceptions.InvalidValueError: metadata.loss: must be a finite number, got nan
"""

from __future__ import annotations

import logging
import numbers
from collections.abc import Iterator, Mapping
from typing import Any

from abo.core.exceptions import AboError, InvalidValueError
from abo.core.outcomes import finite_float, shown

log = logging.getLogger("abo")


def _non_finite(value: Any) -> bool:
    """A real number (Python's or NumPy's) that is NaN or infinite, or an integer beyond the
    float range (``10**400``: the HTTP API refuses it, and JSON clients read it as infinite)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    return finite_float(value) is None


def _shown(value: Any) -> str:
    """A non-finite number for a message: ``nan``/``inf`` (NumPy's too), a huge int's size."""
    return shown(value) if isinstance(value, numbers.Integral) else repr(float(value))


Path = tuple[Any, "Path"] | None  # (key, parent): built as text only when an error names it


def _text(path: Path, field: str) -> str:
    keys = []
    while path is not None:
        key, path = path
        keys.append(str(key))
    return ".".join([field, *reversed(keys)])


def _walk(value: Any) -> Iterator[tuple[Path, Any]]:
    """Every value nested in dicts, lists and tuples, with its path: iteratively (any depth)
    and each container once (a cycle ends)."""
    stack: list[tuple[Any, Path]] = [(value, None)]
    seen: set[int] = set()
    while stack:
        item, path = stack.pop()
        yield path, item
        if isinstance(item, Mapping | list | tuple):
            if id(item) in seen:
                continue
            seen.add(id(item))
        if isinstance(item, Mapping):
            stack += [(v, (k, path)) for k, v in item.items()]
        elif isinstance(item, list | tuple):
            stack += [(v, (i, path)) for i, v in enumerate(item)]


def check_mapping(value: Any, field: str) -> dict[str, Any]:
    """``value`` as a dict with string keys (``{}`` for ``None``).

    Raises:
        AboError: not a dict (the ``field`` is ``field``).
        InvalidValueError: a NaN or infinite number inside, its ``field`` the path to it.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise AboError(f"{field}: expected a dict, got {type(value).__name__}", field=field)
    out = {str(k): v for k, v in value.items()}
    for path, item in _walk(out):
        if _non_finite(item):
            where = _text(path, field)
            raise InvalidValueError(
                f"{where}: must be a finite number, got {_shown(item)}", field=where
            )
    return out


def _text_of(value: Any) -> str:
    """A non-finite number as text: ``"nan"``, ``"inf"``, a huge integer's digits (or its size
    beyond Python's limit on int-to-text)."""
    if not isinstance(value, numbers.Integral):
        return repr(float(value))
    try:
        return str(int(value))
    except ValueError:
        return shown(value)


def storable(value: Mapping[str, Any] | None, field: str) -> dict[str, Any] | None:
    """``value`` with every non-finite number written as text (``"nan"``, ``"inf"``), and a
    warning naming each one: for what an objective returned, which is kept, not refused."""
    if value is None:
        return None
    changed: list[str] = []

    def fix(item: Any, where: str) -> Any:
        if _non_finite(item):
            changed.append(where)
            return _text_of(item)
        if isinstance(item, Mapping):
            return {str(k): fix(v, f"{where}.{k}") for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [fix(v, f"{where}.{i}") for i, v in enumerate(item)]
        return item

    out = fix(dict(value), field)
    if changed:
        log.warning("%s: not finite, stored as text", ", ".join(changed))
    return out
