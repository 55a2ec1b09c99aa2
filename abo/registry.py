"""Name → strategy, filled by a decorator so the service and third parties can add their own.

Example:
    >>> from abo.registry import strategies
    >>> "random" in strategies()
    True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from abo.exceptions import UnknownStrategyError

T = TypeVar("T")


@dataclass(frozen=True)
class _Entry:
    factory: Callable[..., Any]
    description: str


_STRATEGIES: dict[str, _Entry] = {}


def register_strategy(name: str, description: str) -> Callable[[T], T]:
    """Class decorator: make a strategy buildable by ``name``."""

    def wrap(factory: T) -> T:
        _STRATEGIES[name] = _Entry(factory, description)  # type: ignore[arg-type]
        return factory

    return wrap


def _load_builtins() -> None:
    import abo.acquisitions  # noqa: F401 - registers the built-in strategies


def strategies() -> dict[str, str]:
    """Every registered strategy name with a one-line description."""
    _load_builtins()
    return {name: e.description for name, e in sorted(_STRATEGIES.items())}


def check_strategy(name: str) -> str:
    """``name`` if it is registered, else ``UnknownStrategyError`` listing the valid names."""
    _load_builtins()
    if not isinstance(name, str) or name not in _STRATEGIES:
        raise UnknownStrategyError(
            f"strategy: unknown strategy {name!r}; choose one of {', '.join(sorted(_STRATEGIES))}"
        )
    return name


def make_strategy(name: str, **options: Any) -> Any:
    """Build the strategy called ``name`` with its options."""
    check_strategy(name)
    try:
        return _STRATEGIES[name].factory(**options)
    except TypeError as exc:
        raise UnknownStrategyError(f"strategy_options: {name} does not accept them: {exc}") from exc
