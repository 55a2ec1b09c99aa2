"""Silence every warning raised on the current thread inside a block, and only there.

``warnings.catch_warnings`` is process-wide and not thread-safe: a thread leaving it restores
the filter list another thread is still relying on (dropping a user's filters, or leaving an
"ignore everything" in place for good). abo fits GPs in several threads at once (the service's
ask threads, the background refit thread), so the GP fit's own optimiser notes and a background
refit's fallback note are silenced with one filter installed once, which matches only while the
current thread is inside ``silenced()``. Other threads, and the user's code, see every warning.

Example:
    >>> import warnings
    >>> with silenced():
    ...     warnings.warn("not shown")
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from re import Match
from typing import Any, cast

_local = threading.local()
_install_lock = threading.Lock()


class _OnThisThread:
    """A filter's message pattern that matches any message, on a silenced thread only."""

    def match(self, text: str) -> Match[str] | bool | None:
        return getattr(_local, "depth", 0) > 0

    def __repr__(self) -> str:
        return "<abo: any message on a silenced thread>"


_FILTER = ("ignore", _OnThisThread(), Warning, None, 0)


def _install() -> None:
    """Put the filter first (later filters go in front of older ones and would win)."""
    filters = cast(list[Any], warnings.filters)  # a list at runtime; typeshed says Sequence
    if filters and filters[0] is _FILTER:
        return
    with _install_lock:
        while _FILTER in filters:
            filters.remove(_FILTER)
        filters.insert(0, _FILTER)
        mutated = getattr(warnings, "_filters_mutated", None)
        if mutated is not None:
            mutated()


@contextmanager
def silenced() -> Iterator[None]:
    """Ignore every warning raised on this thread inside the block (nests)."""
    _install()
    _local.depth = getattr(_local, "depth", 0) + 1
    try:
        yield
    finally:
        _local.depth -= 1
