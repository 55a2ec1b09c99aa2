"""Silence warnings raised on the current thread inside a block, with standard filters only.

``warnings.catch_warnings`` is process-wide and not thread-safe: a thread leaving it restores
the filter list another thread is still relying on (dropping a user's filters, or leaving an
"ignore everything" in place for good). abo fits GPs in several threads at once (the service's
ask threads, the background refit thread), so a ``ThreadScope`` silences with ordinary
``("ignore", message, category, None, 0)`` entries of ``warnings.filters`` whose category is
private: a class whose subclass test (its metaclass's ``__subclasscheck__``) holds the warned
category only while the warning's thread is inside the scope. Other threads, and the user's
code, see every warning.

The entries are in ``warnings.filters`` only while some thread is inside a scope: the first
thread in puts them first, the last one out removes them, so the filters are exactly the
user's again after each ask, tell or ``optimize`` (other libraries, scikit-learn among them,
read and copy every entry as a standard filter). The last one out removes them from every list
they were put in, not only from the current one: a ``catch_warnings`` block entered on another
thread meanwhile (BoTorch's fits use one) replaces ``warnings.filters`` with a copy and, when
it ends, puts back the list it found, entries and all. Such a block can also end after the
last thread left (blocks on two threads that end in the other order than they began put back
a copy made while the entries were in): so every scope, on leaving, also sweeps the entries
of every other scope that no thread is inside out of the current list, and ``optimize`` sweeps
every scope's at its end (``sweep``). Removing an "ignore" entry needs no reset of the
modules' "already warned" registries (an ignored warning is never recorded there), so the
user's ``once`` and ``default`` warnings are not shown again.

Example:
    >>> import warnings
    >>> with silenced():
    ...     warnings.warn("not shown")
"""

from __future__ import annotations

import re
import sys
import threading
import warnings
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, cast


class _OnScopedThread(type):
    """Metaclass of a scoped category: it holds ``base`` and its subclasses only on a thread
    inside its scope (``warnings`` tests a filter's category with ``issubclass``)."""

    _base: type[Warning]
    _scope: ThreadScope

    def __subclasscheck__(cls, subclass: type) -> bool:
        return (
            cls._scope.active() and isinstance(subclass, type) and issubclass(subclass, cls._base)
        )


_SCOPES: list[ThreadScope] = []  # every scope made: each sweeps the others on leaving


class ThreadScope:
    """Ignore chosen warnings on a thread while it is inside ``scope()`` (nests, thread-safe).

    Args:
        name: names the private categories (``<name><Base>``, attributes of ``module``, so a
            copied filter list pickles, as joblib's workers do with scikit-learn's).
        rules: ``(category, message regex or None)`` pairs to ignore inside the scope.
        module: the module whose attributes the categories become.
    """

    def __init__(
        self, name: str, rules: Sequence[tuple[type[Warning], str | None]], module: Any
    ) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self._inside = 0  # threads inside the scope (a nested entry counts once per level)
        self._lists: list[list[Any]] = []  # the filter lists the entries were put in
        categories: dict[type[Warning], type[Warning]] = {}
        entries = []
        for base, pattern in rules:
            if base not in categories:
                label = f"{name}{base.__name__}"
                body = {"_base": base, "_scope": self, "__module__": module.__name__}
                scoped = cast(type[Warning], _OnScopedThread(label, (Warning,), body))
                scoped.__qualname__ = label
                setattr(module, label, scoped)
                categories[base] = scoped
            message = re.compile(pattern, re.I) if pattern is not None else None
            entries.append(("ignore", message, categories[base], None, 0))
        self.entries: tuple[tuple[Any, ...], ...] = tuple(entries)
        _SCOPES.append(self)

    def active(self) -> bool:
        """Whether the current thread is inside the scope."""
        return getattr(self._local, "depth", 0) > 0

    def _first(self, filters: list[Any]) -> bool:
        head = filters[: len(self.entries)]
        return len(head) == len(self.entries) and all(
            a is b for a, b in zip(head, self.entries, strict=True)
        )

    @contextmanager
    def scope(self) -> Iterator[None]:
        """Inside the block, the rules' warnings raised on this thread are ignored."""
        with self._lock:
            self._inside += 1
            filters = cast(list[Any], warnings.filters)  # a list at runtime
            # first, every time: a filter added since (or a catch_warnings block left on
            # another thread, restoring an older list) must not win inside the scope
            if not self._first(filters):
                self._remove(filters)
                filters[:0] = self.entries
            if not any(seen is filters for seen in self._lists):
                self._lists.append(filters)
        self._local.depth = getattr(self._local, "depth", 0) + 1
        try:
            yield
        finally:
            self._local.depth -= 1
            with self._lock:
                self._inside -= 1
                if self._inside == 0:
                    self._clear()
            for other in _SCOPES:
                if other is not self:
                    other.sweep()

    def sweep(self) -> None:
        """If no thread is inside the scope, take its entries out of the current filters (a
        list another thread's ``catch_warnings`` put back after the last thread left)."""
        with self._lock:
            if self._inside == 0:
                self._clear()

    def _clear(self) -> None:
        """Take the entries out of every list they were put in and the current one (locked)."""
        for filters in [*self._lists, cast(list[Any], warnings.filters)]:
            self._remove(filters)
        self._lists.clear()

    def _remove(self, filters: list[Any]) -> None:
        """Take every entry of this scope out of ``filters`` (by identity)."""
        for entry in self.entries:  # equal only to itself: its category is private
            while entry in filters:
                filters.remove(entry)


_EVERYTHING = ThreadScope("_Silenced", [(Warning, None)], sys.modules[__name__])


def sweep() -> None:
    """Take out of ``warnings.filters`` the entries of every scope no thread is inside: what a
    ``catch_warnings`` block that ended after them put back (``ThreadScope.sweep``)."""
    for scope in _SCOPES:
        scope.sweep()


def silenced() -> AbstractContextManager[None]:
    """Ignore every warning raised on this thread inside the block (nests)."""
    return _EVERYTHING.scope()
