"""Name → strategy, filled by a decorator so the service and third parties can add their own.

The decorator and the table live beside the Strategy protocol (``abo.acquisitions.base``);
this module looks names up, loading the built-in strategies first.

Example:
    >>> from abo.acquisitions.registry import strategies
    >>> "random" in strategies()
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from abo.acquisitions.base import REGISTRY, register_strategy
from abo.core.exceptions import AboError, UnknownStrategyError

__all__ = [
    "check_fits",
    "check_strategy",
    "make_strategy",
    "register_strategy",
    "strategies",
    "supports_constraints",
]


def _load_builtins() -> None:
    import abo.acquisitions  # noqa: F401 - registers the built-in strategies


def strategies(objectives: int | None = None) -> dict[str, str]:
    """Every registered strategy name with a one-line description; with ``objectives``, only
    those that propose for a study of that many objectives (``1``: one objective)."""
    _load_builtins()
    return {
        name: e.description
        for name, e in sorted(REGISTRY.items())
        if objectives is None or e.fits(objectives)
    }


def check_fits(
    name: str,
    objective_names: Sequence[str],
    constraint_names: Sequence[str] = (),
    fidelity: str | None = None,
) -> None:
    """``AboError`` (field ``strategy``) when strategy ``name`` does not propose for a study of
    these objectives (and outcome constraints, and a fidelity parameter), listing the
    strategies that do."""
    check_strategy(name)
    n = len(objective_names)
    if fidelity is not None and not REGISTRY[name].fidelity:
        able = ", ".join(sorted(k for k, e in REGISTRY.items() if e.fidelity))
        raise AboError(
            f"strategy: {name!r} does not choose a fidelity ({fidelity!r}); strategies that "
            f"do: {able}",
            field="strategy",
        )
    if REGISTRY[name].fits(n):
        if not constraint_names or REGISTRY[name].fits_constraints(n):
            return
        able = ", ".join(
            sorted(k for k, e in REGISTRY.items() if e.fits(n) and e.fits_constraints(n))
        )
        what = "one objective" if n == 1 else f"{n} objectives"
        raise AboError(
            f"strategy: {name!r} does not handle outcome constraints "
            f"({', '.join(constraint_names)}) in a study of {what}; "
            + (f"strategies that do: {able}" if able else "no strategy does yet"),
            field="strategy",
        )
    fitting = ", ".join(strategies(n))
    names = ", ".join(objective_names)
    if n > 1:
        message = (
            f"strategy: {name!r} models one objective and this study has {n} ({names}); "
            f"strategies for several objectives: {fitting}"
        )
    else:
        message = (
            f"strategy: {name!r} is for several objectives and this study has one ({names}); "
            f"strategies for one objective: {fitting}"
        )
    raise AboError(message, field="strategy")


def supports_constraints(name: str, n_objectives: int) -> bool:
    """Whether strategy ``name`` reads ``ctx.feasibility`` in a study of ``n_objectives``."""
    check_strategy(name)
    return REGISTRY[name].fits_constraints(n_objectives)


def check_strategy(name: str) -> str:
    """``name`` if it is registered, else ``UnknownStrategyError`` listing the valid names."""
    _load_builtins()
    if not isinstance(name, str) or name not in REGISTRY:
        raise UnknownStrategyError(
            f"strategy: unknown strategy {name!r}; choose one of {', '.join(sorted(REGISTRY))}"
        )
    return name


def make_strategy(name: str, **options: Any) -> Any:
    """Build the strategy called ``name`` with its options."""
    check_strategy(name)
    try:
        return REGISTRY[name].factory(**options)
    except TypeError as exc:
        raise UnknownStrategyError(f"strategy_options: {name} does not accept them: {exc}") from exc
    except ValueError as exc:  # an option the strategy accepts, with a value it refuses
        raise AboError(f"strategy_options: {name}: {exc}", field="strategy_options") from exc
