"""The storage interface: records in, records out, and transactions with compare-and-set writes.

The contract every backend keeps (``tests/storage`` runs one suite over all of them):

* **Durable before acknowledged.** A transaction returns only after it committed; a process
  killed right after it returned loses nothing (the memory backend: as long as the process).
* **Process- and thread-safe.** Many threads and processes (and hosts, on PostgreSQL) may share
  one study. A ``transaction(study)`` is serialised per study, so trial ids are unique and
  gap-free per study, and a compare-and-set ``replace`` changes a trial only from the state it
  was read in: a tell is stored exactly once, an expired lease is lost exactly once.
* **Snapshots out.** Returned ``Trial`` and ``StudyRecord`` objects are frozen copies.
* **A record is checked before use.** Every transaction on a ``StudyRecord`` first checks that
  the study still exists as it was opened (same id *and* creation time): a study deleted, or
  deleted and created again under the same name by another process, is ``StudyNotFoundError``,
  never another study's rows.
* **Refuse rather than lose.** A backend that can no longer write where it will be read again
  (a SQLite file deleted, replaced, read-only or immutable) raises ``StorageError`` instead;
  ``check_writable`` says whether a write would succeed now. Messages never carry SQL.
* **Only finite values.** Callers validate; a backend never holds NaN or infinity.

What the transitions *are* (finish, lose and retry, leases, late results) is decided by
``abo.storage.lifecycle``, not here: a backend only stores, reads and compares-and-sets.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from abo.core.space import ParamValue, Space
from abo.core.trial import ProposalRecord, Report, Trial, TrialState

if TYPE_CHECKING:
    from abo.spec.study_spec import StudySpec

SCHEMA_VERSION = 4
MAX_ID = 2**31  # trial numbers are 32-bit INTEGER columns


@dataclass(frozen=True)
class StudyRecord:
    """What the storage knows of a study; ``id`` is ``0`` until it has been created."""

    name: str
    spec: StudySpec
    id: int = 0
    created_at: float = 0.0

    @property
    def space(self) -> Space:
        return self.spec.space

    @property
    def direction(self) -> str:
        return self.spec.direction

    @property
    def strategy(self) -> str:
        return self.spec.strategy

    @property
    def seed(self) -> int:
        return self.spec.seed

    @property
    def config(self) -> StudySpec:
        """The spec (its options were once called the study's config)."""
        return self.spec


@dataclass(frozen=True)
class QueuedPoint:
    """Parameters waiting to be handed out by the next ask (enqueued, or a lost trial's retry)."""

    params: dict[str, ParamValue]
    retry_of: int | None = None
    attempt: int = 0
    proposal: ProposalRecord | None = None


@dataclass(frozen=True)
class NewTrial:
    """A trial to insert: the storage gives it its id, its times and (running) its lease."""

    params: dict[str, ParamValue]
    state: TrialState = TrialState.RUNNING
    value: float | None = None
    values: dict[str, float] = field(default_factory=dict)
    retry_of: int | None = None
    attempt: int = 0
    proposal: ProposalRecord | None = None
    info: dict[str, Any] = field(default_factory=dict)
    user: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ProposerLease:
    """Which service replica proposes for a study until ``expires_at`` (storage clock).

    ``epoch`` grows by one each time the lease passes to another holder, so a round that
    began under an older epoch can be refused when it stores its trials (a fencing token)."""

    holder: str
    address: str | None
    epoch: int
    expires_at: float


class Transaction(ABC):
    """One committed unit of work on one study (see the contract above)."""

    study: StudyRecord
    now: float

    @abstractmethod
    def trial(self, trial_id: int) -> Trial:
        """One trial; ``TrialNotFoundError`` if the study has no such id."""

    @abstractmethod
    def trials(self, states: Sequence[TrialState] | None = None) -> list[Trial]:
        """Trials in id order, optionally only those in ``states``."""

    @abstractmethod
    def insert(self, rows: Sequence[NewTrial]) -> list[Trial]:
        """Insert trials with the next ids (running ones get a lease of the study's length)."""

    @abstractmethod
    def replace(self, old: Trial, new: Trial) -> bool:
        """Store ``new`` in place of ``old`` if the trial is still in ``old.state``."""

    @abstractmethod
    def reports(self, trial_ids: Sequence[int] | None = None) -> dict[int, list[Report]]:
        """Intermediate values by trial id (only trials that reported), each in step order;
        only ``trial_ids`` when given."""

    @abstractmethod
    def add_report(self, trial_id: int, step: float, value: float) -> Report:
        """Store one intermediate value of a trial (callers check the step is new)."""

    @abstractmethod
    def enqueue(self, point: QueuedPoint) -> None:
        """Queue a point (oldest first)."""

    @abstractmethod
    def queued(self) -> list[QueuedPoint]:
        """The queued points, oldest first."""

    @abstractmethod
    def pop_queued(self, n: int) -> list[QueuedPoint]:
        """Remove and return up to ``n`` queued points, oldest first."""

    @abstractmethod
    def proposer(self) -> ProposerLease | None:
        """The study's proposer lease as stored (expired or not), ``None`` if there is none."""

    @abstractmethod
    def set_proposer(self, lease: ProposerLease | None) -> None:
        """Store the study's proposer lease (``None`` removes it)."""


class Storage(ABC):
    """Where studies and trials live; see the module docstring for the contract.

    ``clock`` gives the time for leases and timestamps (``time.time``; tests inject one).
    """

    clock: Callable[[], float] = staticmethod(time.time)
    url: str | None = None

    # -- studies ----------------------------------------------------------------------------
    @abstractmethod
    def create_study(self, record: StudyRecord) -> StudyRecord:
        """Create a study; ``DuplicatedStudyError`` if the name is taken."""

    @abstractmethod
    def load_study(self, name: str) -> StudyRecord:
        """The study of that name; ``StudyNotFoundError`` if there is none."""

    @abstractmethod
    def list_studies(self) -> list[StudyRecord]:
        """Every study, oldest first."""

    @abstractmethod
    def delete_study(self, name: str, expected: StudyRecord | None = None) -> None:
        """Remove a study with its trials (only the very study ``expected``, when given)."""

    @abstractmethod
    def check_writable(self) -> None:
        """Raise ``StorageError`` saying why, unless a write would succeed now."""

    @abstractmethod
    def transaction(self, study: StudyRecord) -> AbstractContextManager[Transaction]:
        """A serialised, committed transaction on ``study`` (checked first, see above)."""

    def reading(self, study: StudyRecord) -> AbstractContextManager[Transaction]:
        """A transaction for reading only (backends may take no write lock)."""
        return self.transaction(study)

    def dispose(self) -> None:  # noqa: B027 - optional: only backends with connections
        """Release connections (the storage is unusable afterwards)."""

    # -- reads --------------------------------------------------------------------------------
    def trials(self, study: StudyRecord, states: Sequence[TrialState] | None = None) -> list[Trial]:
        """Trials of the study in id order, optionally only those in ``states``."""
        with self.reading(study) as tx:
            return tx.trials(states)

    def trial(self, study: StudyRecord, trial_id: int) -> Trial:
        """One trial; ``TrialNotFoundError`` if the study has no such id."""
        with self.reading(study) as tx:
            return tx.trial(trial_id)

    def count(self, study: StudyRecord) -> int:
        """Number of trials in the study."""
        return len(self.trials(study))

    def reports(
        self, study: StudyRecord, trial_ids: Sequence[int] | None = None
    ) -> dict[int, list[Report]]:
        """Intermediate values by trial id, each in step order (only ``trial_ids`` if given)."""
        with self.reading(study) as tx:
            return tx.reports(trial_ids)

    def queued(self, study: StudyRecord) -> list[QueuedPoint]:
        """Points waiting in the queue, oldest first."""
        with self.reading(study) as tx:
            return tx.queued()
