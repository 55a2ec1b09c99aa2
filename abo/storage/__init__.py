"""Durable storage of studies and trials: the interface (``Storage``, its contract in
``abo.storage.base``), ``SQLStorage`` (SQLite files and PostgreSQL) and ``MemoryStorage``.

``import abo.storage`` loads neither torch nor Dask.
"""

from __future__ import annotations

from abo.storage.base import (
    MAX_ID,
    SCHEMA_VERSION,
    NewTrial,
    ProposerLease,
    QueuedPoint,
    Storage,
    StudyRecord,
    Transaction,
)
from abo.storage.memory import MemoryStorage
from abo.storage.sql import SQLStorage, dumps

__all__ = [
    "MAX_ID",
    "SCHEMA_VERSION",
    "MemoryStorage",
    "NewTrial",
    "ProposerLease",
    "QueuedPoint",
    "SQLStorage",
    "Storage",
    "StudyRecord",
    "Transaction",
    "dumps",
    "open_storage",
]


def open_storage(storage: str | Storage | None) -> Storage:
    """A ``Storage`` from a URL, an existing storage, or ``None`` (in this process's memory)."""
    if isinstance(storage, Storage):
        return storage
    if storage is None:
        return MemoryStorage()
    return SQLStorage(storage)
