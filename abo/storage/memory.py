"""``MemoryStorage``: the storage contract in this process's memory (``storage=None``).

For studies that need no persistence (tests, notebooks, a study driven start to finish by one
``optimize`` call). Transactions are serialised by one lock and work on a copy of the study's
state that replaces it only when the transaction ends without an error, so a failed
transaction changes nothing, as on a database. Nothing survives the process.

Example:
    >>> storage = MemoryStorage()
    >>> storage.list_studies()
    []
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from abo.core.exceptions import DuplicatedStudyError, StudyNotFoundError, TrialNotFoundError
from abo.core.trial import Report, Trial, TrialState
from abo.storage.base import (
    NewTrial,
    ProposerLease,
    QueuedPoint,
    Storage,
    StudyRecord,
    Transaction,
)


@dataclass
class _State:
    record: StudyRecord
    trials: dict[int, Trial] = field(default_factory=dict)
    queue: list[QueuedPoint] = field(default_factory=list)
    n_trials: int = 0
    reports: dict[int, tuple[Report, ...]] = field(default_factory=dict)
    proposer: ProposerLease | None = None

    def copy(self) -> _State:
        return _State(
            self.record,
            dict(self.trials),
            list(self.queue),
            self.n_trials,
            dict(self.reports),
            self.proposer,
        )


class MemoryStorage(Storage):
    """The ``Storage`` contract in memory (one process; threads share it safely)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.url = None
        self.clock = clock
        self._lock = threading.RLock()
        self._studies: dict[str, _State] = {}
        self._next_id = 1

    def create_study(self, record: StudyRecord) -> StudyRecord:
        with self._lock:
            if record.name in self._studies:
                raise DuplicatedStudyError(
                    f"name: a study called {record.name!r} exists already "
                    "(load it, or pass load_if_exists=True)",
                    field="name",
                )
            created = replace(record, id=self._next_id, created_at=self.clock())
            self._next_id += 1
            self._studies[record.name] = _State(created)
            return created

    def load_study(self, name: str) -> StudyRecord:
        with self._lock:
            state = self._studies.get(name)
            if state is None:
                names = list(self._studies)
                hint = (
                    f"; studies here: {', '.join(names[:10])}"
                    if names
                    else "; the storage is empty"
                )
                raise StudyNotFoundError(f"name: no study called {name!r}{hint}", field="name")
            return state.record

    def list_studies(self) -> list[StudyRecord]:
        with self._lock:
            return sorted((s.record for s in self._studies.values()), key=lambda r: r.id)

    def delete_study(self, name: str, expected: StudyRecord | None = None) -> None:
        with self._lock:
            study = self.load_study(name) if expected is None else expected
            self._current(study)
            del self._studies[name]

    def check_writable(self) -> None:
        """Memory can always be written."""

    def _current(self, study: StudyRecord) -> _State:
        state = self._studies.get(study.name)
        if state is None or state.record.id != study.id:
            again = state is not None
            raise StudyNotFoundError(
                f"name: study {study.name!r} was deleted"
                + (" and created again" if again else "")
                + " since it was opened"
                + ("; load it again to use the new one" if again else ""),
                field="name",
            )
        return state

    @contextmanager
    def transaction(self, study: StudyRecord) -> Iterator[Transaction]:
        with self._lock:
            current = self._current(study)
            work = current.copy()
            yield _MemoryTransaction(work, self.clock())
            self._studies[study.name] = work  # only reached without an error: commit


class _MemoryTransaction(Transaction):
    def __init__(self, state: _State, now: float) -> None:
        self.state, self.study, self.now = state, state.record, now

    def trial(self, trial_id: int) -> Trial:
        found = self.state.trials.get(trial_id) if isinstance(trial_id, int) else None
        if found is None:
            raise TrialNotFoundError(
                f"trial_id: study {self.study.name!r} has no trial {trial_id}", field="trial_id"
            )
        return found

    def trials(self, states: Sequence[TrialState] | None = None) -> list[Trial]:
        out = [self.state.trials[k] for k in sorted(self.state.trials)]
        return out if states is None else [t for t in out if t.state in states]

    def insert(self, rows: Sequence[NewTrial]) -> list[Trial]:
        out = []
        for row in rows:
            self.state.n_trials += 1
            running = row.state is TrialState.RUNNING
            trial = Trial(
                id=self.state.n_trials,
                study=self.study.name,
                params=dict(row.params),
                state=row.state,
                value=row.value,
                values=dict(row.values),
                retry_of=row.retry_of,
                attempt=row.attempt,
                proposal=row.proposal,
                info=dict(row.info),
                user=dict(row.user),
                created_at=self.now,
                finished_at=None if running else self.now,
                lease_expires_at=self.now + self.study.spec.lease_seconds if running else None,
            )
            self.state.trials[trial.id] = trial
            out.append(trial)
        return out

    def replace(self, old: Trial, new: Trial) -> bool:
        current = self.state.trials.get(old.id)
        if current is None or current.state is not old.state:
            return False
        self.state.trials[old.id] = new
        return True

    def reports(self, trial_ids: Sequence[int] | None = None) -> dict[int, list[Report]]:
        wanted = sorted(self.state.reports) if trial_ids is None else trial_ids
        return {i: list(self.state.reports[i]) for i in wanted if i in self.state.reports}

    def add_report(self, trial_id: int, step: float, value: float) -> Report:
        report = Report(float(step), float(value), self.now)
        self.state.reports[trial_id] = (*self.state.reports.get(trial_id, ()), report)
        return report

    def enqueue(self, point: QueuedPoint) -> None:
        self.state.queue.append(point)

    def queued(self) -> list[QueuedPoint]:
        return list(self.state.queue)

    def pop_queued(self, n: int) -> list[QueuedPoint]:
        taken, self.state.queue = self.state.queue[:n], self.state.queue[n:]
        return taken

    def proposer(self) -> ProposerLease | None:
        return self.state.proposer

    def set_proposer(self, lease: ProposerLease | None) -> None:
        self.state.proposer = lease
