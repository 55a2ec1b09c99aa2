"""The conditions of a define-by-run space, inferred from its trials.

In a define-by-run Optuna study a parameter that only some trials have was suggested in a
branch (``if optimizer == "sgd": momentum = trial.suggest_float(...)``). ``infer`` turns each
such parameter into an abo conditional one, ``when={parent: values}``: the parent is a
categorical parameter (or an integer one of at most ``MAX_INT_PARENT_VALUES`` values) such
that the parameter is present in exactly the trials where the parent is present and takes one
of those values; when no single parent decides it, two parents together (both must hold). A
parent's values that no trial took leave the parameter inactive. A parameter nothing decides
stays unconditional, and ``infer`` says why, so the trials without it can be named.

Example:
    >>> from abo.core.space import Categorical, Float
    >>> rows = [{"opt": "sgd", "m": 0.9}, {"opt": "adam"}, {"opt": "sgd", "m": 0.1}]
    >>> params = {"opt": Categorical(["sgd", "adam"]), "m": Float(0.0, 1.0)}
    >>> space, unexplained = infer(params, rows)
    >>> space["m"].when, unexplained
    ((('opt', ('sgd',)),), {})
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from abo.core.space import Categorical, Int, Parameter, Space

MAX_INT_PARENT_VALUES = 32
"""The most values an integer parameter may take to decide another (``n_layers``): a wider
one names too few of its values in any study to say what the others decide."""
MAX_PAIR_PARENTS = 40
"""Pairs of parents are tried among at most this many candidates (``n * (n - 1) / 2``)."""

Condition = dict[str, list[Any]]
Row = Mapping[str, Any]


def infer(params: Mapping[str, Parameter], rows: Sequence[Row]) -> tuple[Space, dict[str, str]]:
    """The space of ``params`` (unconditional, in the order a trial suggests them) with the
    conditions ``rows`` (each trial's parameters) show, and for each parameter some trials
    lack that no condition explains, why.

    Raises:
        SearchSpaceError: the conditions found do not form a space (not expected).
    """
    order = list(params)
    when: dict[str, Condition] = {}
    unexplained: dict[str, str] = {}
    for name in order:
        present = [name in r for r in rows]
        if all(present) or not any(present):
            continue
        found = _decider(name, params, rows, present, when)
        if found is None:
            unexplained[name] = (
                f"{name!r} is in {sum(present)} of {len(rows)} complete trials and no "
                "categorical or integer parameter decides when"
            )
        else:
            when[name] = found
    space = Space({n: _conditional(p, when.get(n)) for n, p in params.items()})
    return space, unexplained


def _conditional(param: Parameter, when: Condition | None) -> Parameter:
    if not when:
        return param
    if isinstance(param, Categorical):
        return Categorical(list(param.choices), when=when)
    return dataclasses.replace(param, when=when)


def _candidates(name: str, params: Mapping[str, Parameter],
                when: Mapping[str, Condition]) -> list[str]:  # fmt: skip
    """The parameters that may decide ``name``: categorical or narrow integer ones that do not
    depend on it already (no cycle), in suggestion order."""
    out = []
    for parent, p in params.items():
        if parent == name or name in _ancestors(parent, when):
            continue
        if isinstance(p, Categorical):
            out.append(parent)
        elif isinstance(p, Int) and len(range(p.low, p.high + 1, p.step)) <= MAX_INT_PARENT_VALUES:
            out.append(parent)
    return out


def _ancestors(name: str, when: Mapping[str, Condition]) -> set[str]:
    seen: set[str] = set()
    todo = list(when.get(name, {}))
    while todo:
        parent = todo.pop()
        if parent not in seen:
            seen.add(parent)
            todo.extend(when.get(parent, {}))
    return seen


def _decider(name: str, params: Mapping[str, Parameter], rows: Sequence[Row],
             present: list[bool], when: Mapping[str, Condition]) -> Condition | None:  # fmt: skip
    """The condition on one parent (or else two) under which ``name`` is present in exactly
    the trials that have it: the parents with fewest ancestors first, then a parent some of
    whose values leave it out over one merely present with it, then the earliest (``min``
    keeps the first of equals, and candidates come in suggestion order)."""
    candidates = _candidates(name, params, when)
    values = {p: _values_with(p, rows, present) for p in candidates}
    singles = [p for p in candidates if _explains(rows, present, {p: values[p]})]
    if singles:
        best = min(singles, key=lambda p: (len(_ancestors(p, when)),
                                          not _narrows(p, rows, values[p])))  # fmt: skip
        return {best: values[best]}
    for a, b in itertools.combinations(candidates[:MAX_PAIR_PARENTS], 2):
        pair = {a: values[a], b: values[b]}
        if _explains(rows, present, pair):
            return pair
    return None


def _values_with(parent: str, rows: Sequence[Row], present: list[bool]) -> list[Any]:
    """The values ``parent`` takes in the trials that have the child, first seen first."""
    out: list[Any] = []
    for r, here in zip(rows, present, strict=True):
        if here and parent in r and not any(_same(r[parent], v) for v in out):
            out.append(r[parent])
    return out


def _same(a: Any, b: Any) -> bool:
    """Equal as parameter values: ``True`` is not ``1`` (a categorical may hold both)."""
    return type(a) is type(b) and a == b


def _narrows(parent: str, rows: Sequence[Row], allowed: list[Any]) -> bool:
    """Whether ``parent`` takes some value outside ``allowed`` in a trial (it decides by its
    value, not only by being there)."""
    return any(parent in r and not any(_same(r[parent], v) for v in allowed) for r in rows)


def _explains(rows: Sequence[Row], present: list[bool], condition: Condition) -> bool:
    """Whether the child is present in exactly the trials where every parent of ``condition``
    is present and takes one of its values."""
    if any(not values for values in condition.values()):
        return False
    for r, here in zip(rows, present, strict=True):
        holds = all(
            p in r and any(_same(r[p], v) for v in values) for p, values in condition.items()
        )
        if holds != here:
            return False
    return True
