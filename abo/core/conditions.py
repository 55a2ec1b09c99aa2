"""Conditional spaces: which parameters a ``when=`` makes active, checked over a whole space."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import Any

from abo.core.exceptions import SearchSpaceError
from abo.core.param_values import Choice, is_real
from abo.core.params import Categorical, Int, Parameter


def _check_parents(params: Mapping[str, Parameter]) -> None:
    """Every condition's parent exists, is a ``Categorical`` or an ``Int``, and takes the values
    the condition names."""
    for name, p in params.items():
        for parent, values in p.when:
            if parent == name:
                raise SearchSpaceError(f"{name}: when names the parameter itself")
            if parent not in params:
                raise SearchSpaceError(
                    f"{name}: when names {parent!r}, which is not a parameter "
                    f"(space has {list(params)})"
                )
            q = params[parent]
            if not isinstance(q, Categorical | Int):
                raise SearchSpaceError(
                    f"{name}: when's parent {parent!r} must be a Categorical or an Int "
                    "(a condition on a real value would hold on a set of measure zero)"
                )
            for v in values:
                try:
                    q.check(parent, v)
                except SearchSpaceError as exc:
                    raise SearchSpaceError(f"{name}: when[{parent!r}]: {exc}") from None


def parents_first(params: Mapping[str, Parameter]) -> list[str]:
    """The parameters with every parent before its children (conditions checked: parents
    exist, are a ``Categorical`` or an ``Int``, the values are theirs, no cycle)."""
    _check_parents(params)
    order: list[str] = []
    state: dict[str, int] = {}  # 1: being visited, 2: done

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            cycle = " -> ".join([*path[path.index(name) :], name])
            raise SearchSpaceError(f"{name}: its conditions form a cycle ({cycle})")
        state[name] = 1
        for parent, _ in params[name].when:
            visit(parent, [*path, name])
        state[name] = 2
        order.append(name)

    for name in params:
        visit(name, [])
    return order


def holds(parent: Parameter, value: Any, values: tuple[Choice, ...]) -> bool:
    """Whether ``parent`` taking ``value`` is one of the ``values`` a condition lists."""
    if isinstance(parent, Categorical):
        index = parent._index(value)
        return index is not None and index in {parent._index(v) for v in values}
    return is_real(value) and any(float(value) == float(v) for v in values)


def active(
    params: Mapping[str, Parameter], order: list[str], values: Mapping[str, Any]
) -> dict[str, bool]:
    """Whether each parameter is active given ``values`` (a parameter is active when every
    parent is active and takes one of the values its ``when`` lists); ``order`` is
    ``parents_first(params)``."""
    out: dict[str, bool] = {}
    for name in order:
        out[name] = all(
            out[parent] and parent in values and holds(params[parent], values[parent], allowed)
            for parent, allowed in params[name].when
        )
    return out


def count_max_active(params: Mapping[str, Parameter], order: list[str]) -> int:
    """The most parameters one configuration has: over every combination of the parents'
    values that a condition names (and one value none names), or ``len(params)`` beyond 4096."""
    parents = sorted({parent for p in params.values() for parent, _ in p.when})
    domains: list[list[Any]] = []
    for parent in parents:
        q = params[parent]
        named = [v for p in params.values() for par, vs in p.when if par == parent
                 for v in vs]  # fmt: skip
        options = list(q.choices) if isinstance(q, Categorical) else sorted(set(named))
        if isinstance(q, Int):  # and an integer no condition names, if there is one
            other = next((v for v in range(q.low, q.high + 1, q.step) if v not in named), None)
            options += [] if other is None else [other]
        domains.append(options)
    if math.prod(len(d) for d in domains) > 4096:
        return len(params)
    best = 0
    for combo in itertools.product(*domains):
        values = dict(zip(parents, combo, strict=True))
        best = max(best, sum(active(params, order, values).values()))
    return best


def condition_text(param: Parameter) -> str:
    """A parameter's condition in words (``"optimizer is 'sgd'"``), for error messages."""
    parts = []
    for parent, values in param.when:
        shown = repr(values[0]) if len(values) == 1 else f"one of {list(values)}"
        parts.append(f"{parent} is {shown}")
    return " and ".join(parts)
