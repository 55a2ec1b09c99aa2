"""``Reaper``: expired leases reaped before a study's calls, but not before every one."""

from __future__ import annotations

from abo.storage.base import Storage, StudyRecord
from abo.storage.lifecycle import reap


class Reaper:
    """``reap`` before a study's calls, at most once per ``min(1 s, lease / 4)`` of the
    storage clock in this process: a lease lasts minutes, and a reap per tell cost a third
    of each tell's time (``benchmarks/replicas_load.py``)."""

    def __init__(self, storage: Storage, study: StudyRecord) -> None:
        self.storage, self.study = storage, study
        self.every = min(1.0, study.spec.lease_seconds / 4)
        self.last: float | None = None

    def __call__(self) -> None:
        now = self.storage.clock()
        if self.last is not None and 0.0 <= now - self.last < self.every:
            return
        self.last = now
        reap(self.storage, self.study)
