"""Name → strategy, filled by a decorator so the service and third parties can add their own.

The decorator and the table live beside the Strategy protocol (``abo.acquisitions.base``);
this module looks names up, loading the built-in strategies first.

Example:
    >>> from abo.registry import strategies
    >>> "random" in strategies()
    True
"""

from __future__ import annotations

from typing import Any

from abo.acquisitions.base import REGISTRY, register_strategy
from abo.exceptions import UnknownStrategyError

__all__ = ["check_strategy", "make_strategy", "register_strategy", "strategies"]


def _load_builtins() -> None:
    import abo.acquisitions  # noqa: F401 - registers the built-in strategies


def strategies() -> dict[str, str]:
    """Every registered strategy name with a one-line description."""
    _load_builtins()
    return {name: e.description for name, e in sorted(REGISTRY.items())}


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
