"""Keeping a SQLite file honest: its identity and writability, checked before every call.

Also ``describe``: a database error in one line, without the SQL statement SQLAlchemy appends
(error messages reach users and HTTP responses).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import weakref
from typing import Any

from abo.core.exceptions import StorageError


def describe(exc: BaseException) -> str:
    """What went wrong, in one line and without the SQL statement SQLAlchemy appends."""
    orig = getattr(exc, "orig", None) or exc
    lines = [ln.strip() for ln in str(orig).splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    if first.startswith("(") and ") " in first:  # SQLAlchemy's "(module.Error) text" form
        first = first.split(") ", 1)[1]
    if "[SQL:" in first:
        first = first.split("[SQL:", 1)[0].strip()
    return f"{type(orig).__name__}: {first}" if first else type(orig).__name__


class FileGuard:
    """Watches the SQLite file of a storage: its identity and whether it can be written.

    A file deleted or replaced while open is final (``broken``): the open connections would
    keep writing to a file that is gone. Files that cannot be written (read-only, immutable)
    are refused until they can be again, *before* SQLite touches them: SQLite maps its
    ``-shm`` index into memory, and reading or closing a connection whose files became
    immutable faults the process (SIGBUS). For the same reason connections are never closed
    while the files are not writable (they are pinned: a few objects leak, the process lives).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.identity: tuple[int, int] | None = None
        self.broken: str | None = None
        self.connections: list[Any] = []
        self._pinned: set[int] = set()

    def arm(self) -> None:
        """Remember the file's identity (after it exists)."""
        st = os.stat(self.path)
        self.identity = (st.st_dev, st.st_ino)

    def _unwritable(self) -> list[str]:
        files = [self.path, self.path + "-wal", self.path + "-shm"]
        bad = [f for f in files if os.path.exists(f) and not os.access(f, os.W_OK)]
        folder = os.path.dirname(self.path) or "."
        if not os.path.exists(files[1]) and not os.access(folder, os.W_OK):
            bad.append(folder)  # SQLite must create its -wal and -shm files there
        return bad

    def check(self) -> None:
        """Raise ``StorageError`` unless the file is the one opened and can be written."""
        if self.broken is not None:
            raise StorageError(self.broken)
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self.broken = (
                f"storage: the database file {self.path} was deleted while abo had it open; "
                "abo refuses every call from now on, because what it wrote would be lost "
                "(restore the file, or restart on a new one)"
            )
            raise StorageError(self.broken) from None
        if self.identity is not None and (st.st_dev, st.st_ino) != self.identity:
            self.broken = (
                f"storage: the database file {self.path} was replaced by another file while "
                "abo had it open; abo refuses every call from now on (restart to use the new "
                "file)"
            )
            raise StorageError(self.broken)
        bad = self._unwritable()
        if bad:
            self.pin()
            raise StorageError(
                f"storage: {', '.join(bad)} cannot be written (read-only or immutable); abo "
                "refuses to read or write it until it can be written again"
            )

    def __del__(self) -> None:
        """Collected with its storage: a storage dropped while its files cannot be written
        must not close its connections either (the garbage collector would fault)."""
        try:
            if self._unwritable():
                self.pin()
        except Exception:  # never raise from a finalizer
            pass

    def pin(self) -> None:
        """Keep every connection open for good (see the class docstring)."""
        for conn in self.connections:
            if id(conn) not in self._pinned:
                ctypes.pythonapi.Py_IncRef(ctypes.py_object(conn))
                self._pinned.add(id(conn))


GUARDED: weakref.WeakSet[Any] = weakref.WeakSet()  # storages with a FileGuard


@atexit.register
def _pin_unwritable_at_exit() -> None:
    """At exit, leave open the connections of files that cannot be written (no SIGBUS)."""
    for storage in list(GUARDED):
        guard = storage._guard
        if guard is not None and guard.broken is None and guard._unwritable():
            guard.pin()
