"""Durable storage of studies and trials: the interface and its SQLAlchemy implementation.

The contract every backend keeps:

* **Durable before acknowledged.** A method that changes state returns only after its
  transaction committed; a process killed right after it returned loses nothing.
* **Process- and thread-safe.** Many threads and processes (and hosts, on PostgreSQL) may share
  one study. Every change is one transaction serialised per study (SQLite: ``BEGIN IMMEDIATE``
  on a WAL database; PostgreSQL: ``SELECT ... FOR UPDATE`` on the study row), so trial ids are
  unique and gap-free per study, a tell is stored exactly once, and expired leases are marked
  ``lost`` exactly once even when two processes reap at the same moment.
* **Snapshots out.** Returned ``Trial`` and ``StudyRecord`` objects are frozen copies; changing
  the storage never changes them.
* **Who owns a running trial.** Whoever asked for it, until its lease expires. A heartbeat
  extends the lease; an expired lease makes the trial ``lost`` and re-queues its parameters
  (``retry_of``) while its attempt is below the study's ``max_retries``.
* **Only finite values.** Callers validate; the storage never holds NaN or infinity, so no
  listing can fail on a stored value.
* **A record is checked before use.** Every call that takes a ``StudyRecord`` first checks
  that the study it names still exists as it was opened (same id *and* creation time); a
  study deleted, or deleted and created again under the same name, by another process raises
  ``StudyNotFoundError`` instead of reading or writing the wrong study.
* **Refuse rather than lose.** A SQLite file deleted or replaced while open makes every later
  call raise ``StorageError`` (writes would go to a file nobody will ever read again); files
  that turned read-only or immutable make calls raise ``StorageError`` until they are
  writable again (never a crash: SQLite would fault on its memory-mapped index otherwise).
  ``check_writable`` says whether a write would succeed now. Error messages never carry SQL.

``storage=None`` is an in-memory SQLite database: the same code, nothing on disk.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import math
import os
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

from abo.exceptions import (
    AboError,
    DuplicatedStudyError,
    StorageError,
    StudyNotFoundError,
    TrialNotFoundError,
    TrialStateError,
)
from abo.space import ParamValue, Space
from abo.trial import Trial, TrialState

SCHEMA_VERSION = 1
MAX_ID = 2**31  # trial numbers are 32-bit INTEGER columns


@dataclass(frozen=True)
class StudyConfig:
    """Per-study settings that change how trials are proposed and kept.

    Attributes:
        n_initial: quasi-random (scrambled Sobol) points before the GP takes over; ``None``
            means ``2 * d``.
        lease_seconds: how long a running trial may go without a heartbeat before it is lost.
        max_retries: how many times a lost trial's parameters are re-queued.
        noise: ``"auto"`` learns the observation noise; ``"deterministic"`` fixes it near zero.
        strategy_options: keyword arguments for the strategy.
        refit: ``"sync"`` or ``"background"`` (see ``abo.refit``).
        max_staleness: observations the proposing hyperparameters may lag (background only;
            ``None``: 20, and a tenth of the data past 50 observations).
        max_exact: most observations the GP is fitted on; above it, a subset (``abo.surrogate``).
    """

    n_initial: int | None = None
    lease_seconds: float = 24 * 3600.0
    max_retries: int = 1
    noise: str = "auto"
    strategy_options: dict[str, Any] = field(default_factory=dict)
    refit: str = "sync"
    max_staleness: int | None = None
    max_exact: int = 500  # abo.surrogate.MAX_EXACT (this module stays free of torch)

    def to_json(self) -> dict[str, Any]:
        return {
            "n_initial": self.n_initial,
            "lease_seconds": self.lease_seconds,
            "max_retries": self.max_retries,
            "noise": self.noise,
            "strategy_options": dict(self.strategy_options),
            "refit": self.refit,
            "max_staleness": self.max_staleness,
            "max_exact": self.max_exact,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StudyConfig:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class StudyRecord:
    """What the storage knows of a study; ``id`` is ``0`` until it has been created."""

    name: str
    space: Space
    direction: str
    strategy: str
    seed: int
    config: StudyConfig
    id: int = 0
    created_at: float = 0.0


@dataclass(frozen=True)
class QueuedPoint:
    """Parameters waiting to be handed out by the next ask (enqueued, or a lost trial's retry)."""

    params: dict[str, ParamValue]
    retry_of: int | None = None
    attempt: int = 0
    info: dict[str, Any] = field(default_factory=dict)


class Storage(ABC):
    """Where studies and trials live; see the module docstring for the contract."""

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
    def reap(self, study: StudyRecord, now: float | None = None) -> list[Trial]:
        """Mark running trials with expired leases ``lost`` (once) and re-queue their params."""

    @abstractmethod
    def mark_lost(self, study: StudyRecord, trial_id: int, reason: str) -> Trial:
        """Mark one running trial ``lost`` (the infrastructure failed) and re-queue it.

        Idempotent for a trial already lost; ``TrialStateError`` for a done or failed one.
        """

    @abstractmethod
    def start_queued(self, study: StudyRecord, n: int, info: dict[str, Any]) -> list[Trial]:
        """Turn up to ``n`` queued points into running trials, oldest first."""

    @abstractmethod
    def start_trials(
        self, study: StudyRecord, params: Sequence[dict[str, ParamValue]], infos: Sequence[dict]
    ) -> list[Trial]:
        """Create running trials with fresh ids and leases."""

    @abstractmethod
    def finish(
        self,
        study: StudyRecord,
        trial_id: int,
        state: TrialState,
        value: float | None = None,
        reason: str | None = None,
        user: dict[str, Any] | None = None,
        info: dict[str, Any] | None = None,
    ) -> Trial:
        """Move a running trial to ``done`` / ``failed``; idempotent for an identical repeat."""

    @abstractmethod
    def add_done(
        self,
        study: StudyRecord,
        params: dict[str, ParamValue],
        value: float,
        info: dict[str, Any],
        user: dict[str, Any],
        unique: bool = False,
    ) -> Trial:
        """Record a known result as a finished trial; with ``unique``, a done trial of equal
        parameters and value is returned instead (checked in the same transaction)."""

    @abstractmethod
    def heartbeat(self, study: StudyRecord, trial_id: int) -> Trial:
        """Extend a running trial's lease by the study's ``lease_seconds``."""

    @abstractmethod
    def enqueue(self, study: StudyRecord, point: QueuedPoint, unique: bool = False) -> bool:
        """Queue parameters to be handed out by the next ask; ``False`` when ``unique`` and
        the study already has them (queued, or a trial that is not lost)."""

    @abstractmethod
    def queued(self, study: StudyRecord) -> list[QueuedPoint]:
        """Points waiting in the queue, oldest first."""

    @abstractmethod
    def trials(self, study: StudyRecord, states: Sequence[TrialState] | None = None) -> list[Trial]:
        """Trials of the study in id order, optionally only those in ``states``."""

    @abstractmethod
    def trial(self, study: StudyRecord, trial_id: int) -> Trial:
        """One trial; ``TrialNotFoundError`` if the study has no such id."""

    @abstractmethod
    def count(self, study: StudyRecord) -> int:
        """Number of trials in the study."""


# --------------------------------------------------------------------------------------------
# SQLAlchemy implementation

_md = sa.MetaData()
_meta = sa.Table(
    "abo_meta",
    _md,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)
_studies = sa.Table(
    "abo_studies",
    _md,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    sa.Column("space", sa.Text, nullable=False),
    sa.Column("direction", sa.String(16), nullable=False),
    sa.Column("strategy", sa.String(64), nullable=False),
    sa.Column("seed", sa.BigInteger, nullable=False),
    sa.Column("config", sa.Text, nullable=False),
    sa.Column("n_trials", sa.Integer, nullable=False, default=0),
    sa.Column("created_at", sa.Float, nullable=False),
)
_trials = sa.Table(
    "abo_trials",
    _md,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "study_id", sa.Integer, sa.ForeignKey("abo_studies.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("number", sa.Integer, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("params", sa.Text, nullable=False),
    sa.Column("value", sa.Float(precision=53), nullable=True),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("retry_of", sa.Integer, nullable=True),
    sa.Column("attempt", sa.Integer, nullable=False, default=0),
    sa.Column("info", sa.Text, nullable=False),
    sa.Column("user_attrs", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float(precision=53), nullable=False),
    sa.Column("finished_at", sa.Float(precision=53), nullable=True),
    sa.Column("lease_expires_at", sa.Float(precision=53), nullable=True),
    sa.UniqueConstraint("study_id", "number", name="uq_trial_number"),
    sa.Index("ix_trials_study_state", "study_id", "state"),
)
_queue = sa.Table(
    "abo_queue",
    _md,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "study_id", sa.Integer, sa.ForeignKey("abo_studies.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("params", sa.Text, nullable=False),
    sa.Column("retry_of", sa.Integer, nullable=True),
    sa.Column("attempt", sa.Integer, nullable=False, default=0),
    sa.Column("info", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float(precision=53), nullable=False),
)


def _clean(obj: Any) -> Any:
    """Make ``obj`` strict-JSON safe: non-finite floats become ``None``, unknowns ``str``."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, str | int):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    try:
        as_float = float(obj)
    except (TypeError, ValueError):
        return str(obj)
    return as_float if math.isfinite(as_float) else None


def dumps(obj: Any) -> str:
    """Strict JSON (no NaN / Infinity) of ``obj``, coercing what JSON cannot hold."""
    return json.dumps(_clean(obj), allow_nan=False, separators=(",", ":"))


def _describe(exc: BaseException) -> str:
    """What went wrong, in one line and without the SQL statement SQLAlchemy appends."""
    orig = getattr(exc, "orig", None) or exc
    lines = [ln.strip() for ln in str(orig).splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    if first.startswith("(") and ") " in first:  # SQLAlchemy's "(module.Error) text" form
        first = first.split(") ", 1)[1]
    if "[SQL:" in first:
        first = first.split("[SQL:", 1)[0].strip()
    return f"{type(orig).__name__}: {first}" if first else type(orig).__name__


class _FileGuard:
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

    def pin(self) -> None:
        """Keep every connection open for good (see the class docstring)."""
        for conn in self.connections:
            if id(conn) not in self._pinned:
                ctypes.pythonapi.Py_IncRef(ctypes.py_object(conn))
                self._pinned.add(id(conn))


_GUARDS: weakref.WeakSet[SQLStorage] = weakref.WeakSet()


@atexit.register
def _pin_unwritable_at_exit() -> None:
    """At exit, leave open the connections of files that cannot be written (no SIGBUS)."""
    for storage in list(_GUARDS):
        guard = storage._guard
        if guard is not None and guard.broken is None and guard._unwritable():
            guard.pin()


def _redact(url: str) -> str:
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - only for error messages
        return "<unparsable URL>"


def _normalise_url(url: str) -> str:
    """Pick the psycopg 3 driver for a plain ``postgresql://`` URL (the one abo installs)."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


class SQLStorage(Storage):
    """The ``Storage`` on SQLAlchemy: SQLite files (WAL) and PostgreSQL by URL.

    Args:
        url: ``sqlite:///path.db``, ``postgresql+psycopg://user@host/db``, or ``None`` for an
            in-memory database.

    Example:
        >>> storage = SQLStorage(None)
        >>> storage.list_studies()
        []
    """

    def __init__(self, url: str | None = None) -> None:
        self.url = url
        self._guard: _FileGuard | None = None
        self._engine = self._make_engine(url)
        self._sqlite = self._engine.dialect.name == "sqlite"
        database = self._engine.url.database if self._sqlite else None
        if database and database != ":memory:" and not database.startswith("file:"):
            self._guard = _FileGuard(os.path.abspath(database))
            guard = self._guard

            @event.listens_for(self._engine, "connect")
            def _track(dbapi_conn: Any, _record: Any) -> None:
                guard.connections.append(dbapi_conn)

            _GUARDS.add(self)
        # SQLite serialises writers itself; this lock only spares threads of one process
        # from queueing on its busy timeout (and guards the single in-memory connection).
        self._lock: threading.RLock | None = threading.RLock() if self._sqlite else None
        self._row_cache: dict[tuple[int, str, int], tuple[tuple[Any, ...], Trial]] = {}
        self._init_schema()

    # -- engine and schema ------------------------------------------------------------------
    @staticmethod
    def _make_engine(url: str | None) -> Engine:
        try:
            if url is None or (
                isinstance(url, str) and url.strip() in ("sqlite://", "sqlite:///:memory:")
            ):  # one shared connection: each new in-memory connection is an empty database
                engine = sa.create_engine(
                    "sqlite://",
                    poolclass=StaticPool,
                    connect_args={"check_same_thread": False},
                )
            else:
                if not isinstance(url, str):
                    raise StorageError(f"storage: expected a URL string, got {url!r}")
                url = _normalise_url(url)
                parsed = sa.engine.make_url(url)
                if parsed.get_backend_name() == "sqlite":
                    path = parsed.database
                    if path and path != ":memory:" and not path.startswith("file:"):
                        folder = os.path.dirname(os.path.abspath(path))
                        if not os.path.isdir(folder):
                            raise StorageError(
                                f"storage: cannot open {_redact(url)}: "
                                f"folder {folder} does not exist"
                            )
                    engine = sa.create_engine(
                        url, connect_args={"check_same_thread": False, "timeout": 60}
                    )
                else:
                    engine = sa.create_engine(url, pool_pre_ping=True)
        except StorageError:
            raise
        except Exception as exc:  # noqa: BLE001 - ArgumentError, missing drivers, ...
            raise StorageError(f"storage: cannot open {_redact(str(url))}: {exc}") from exc
        if engine.dialect.name == "sqlite":
            in_memory = url is None or engine.url.database in (None, "", ":memory:")

            @event.listens_for(engine, "connect")
            def _on_connect(dbapi_conn: Any, _record: Any) -> None:
                dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
                cur = dbapi_conn.cursor()
                if not in_memory:
                    cur.execute("PRAGMA journal_mode=WAL")
                    cur.execute("PRAGMA synchronous=FULL")
                cur.execute("PRAGMA busy_timeout=60000")
                cur.execute("PRAGMA foreign_keys=ON")
                cur.close()

            @event.listens_for(engine, "begin")
            def _on_begin(conn: Connection) -> None:
                conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine

    def _init_schema(self) -> None:
        if self._guard is not None and os.path.exists(self._guard.path):
            self._guard.check()  # never let SQLite open files it cannot write (SIGBUS)
        try:
            for attempt in range(5):
                try:
                    with self._tx() as conn:
                        _md.create_all(conn)
                        row = conn.execute(
                            sa.select(_meta.c.value).where(_meta.c.key == "schema_version")
                        ).first()
                        if row is None:
                            conn.execute(
                                _meta.insert().values(
                                    key="schema_version", value=str(SCHEMA_VERSION)
                                )
                            )
                        elif row[0] != str(SCHEMA_VERSION):  # a garbled value is a mismatch too
                            raise StorageError(
                                f"storage: schema version {row[0]} in {_redact(str(self.url))}, "
                                f"this abo reads version {SCHEMA_VERSION}"
                            )
                    break
                except IntegrityError:
                    if attempt == 4:  # two processes creating the schema at once
                        raise
                    time.sleep(0.1 * (attempt + 1))
        except StorageError:
            raise
        except SQLAlchemyError as exc:
            raise StorageError(
                f"storage: cannot open {_redact(str(self.url))}: {_describe(exc)}"
            ) from exc
        if self._guard is not None:
            self._guard.arm()

    @contextmanager
    def _tx(self, study: StudyRecord | None = None, lock: bool = True) -> Iterator[Connection]:
        """One committed transaction, serialised per study (see the module docstring).

        With a ``study``, the transaction first checks that the study is still the one that
        record was read from (``StudyNotFoundError`` otherwise); ``lock=False`` (reads) does
        not take PostgreSQL's row lock on it.
        """
        with self._lock if self._lock is not None else nullcontext():
            if self._guard is not None and self._guard.identity is not None:
                self._guard.check()  # not before the file exists (a new database)
            try:
                with self._engine.begin() as conn:
                    if study is not None:
                        self._check_study(conn, study, lock and not self._sqlite)
                    yield conn
            except (AboError, IntegrityError):
                raise
            except SQLAlchemyError as exc:
                raise StorageError(f"storage: {_describe(exc)}") from exc

    @staticmethod
    def _check_study(conn: Connection, study: StudyRecord, lock: bool) -> None:
        query = sa.select(_studies.c.id).where(
            _studies.c.id == study.id, _studies.c.created_at == study.created_at
        )
        if conn.execute(query.with_for_update() if lock else query).first() is not None:
            return
        again = conn.execute(sa.select(_studies.c.id).where(_studies.c.name == study.name)).first()
        raise StudyNotFoundError(
            f"name: study {study.name!r} was deleted"
            + (" and created again" if again is not None else "")
            + " since it was opened"
            + ("; load it again to use the new one" if again is not None else "")
        )

    def check_writable(self) -> None:
        """Raise ``StorageError`` unless a write would succeed now (a real, empty write)."""
        with self._tx() as conn:
            conn.execute(
                _meta.update().where(_meta.c.key == "schema_version").values(value=_meta.c.value)
            )

    def dispose(self) -> None:
        """Close every pooled connection (the storage is unusable afterwards).

        Connections to files that cannot be written stay open (see ``_FileGuard``)."""
        if self._guard is not None and self._guard._unwritable():
            self._guard.pin()
            return
        self._engine.dispose()

    # -- conversion -------------------------------------------------------------------------
    @staticmethod
    def _study_from_row(row: Any) -> StudyRecord:
        return StudyRecord(
            id=row.id,
            name=row.name,
            space=Space.from_json(json.loads(row.space)),
            direction=row.direction,
            strategy=row.strategy,
            seed=int(row.seed),
            config=StudyConfig.from_json(json.loads(row.config)),
            created_at=row.created_at,
        )

    def _trial_from_row(self, study: StudyRecord, row: Any) -> Trial:
        """The trial of a row; unchanged rows reuse the trial built last time (no JSON
        decoding), which keeps reading a study of thousands of trials cheap on every ask."""
        key = (study.id, study.name, row.number)
        raw = tuple(row)
        cached = self._row_cache.get(key)
        if cached is not None and cached[0] == raw:
            return cached[1]
        trial = self._build_trial(study, row)
        self._row_cache[key] = (raw, trial)
        return trial

    @staticmethod
    def _build_trial(study: StudyRecord, row: Any) -> Trial:
        return Trial(
            id=row.number,
            study=study.name,
            params=json.loads(row.params),
            state=TrialState(row.state),
            value=row.value,
            reason=row.reason,
            retry_of=row.retry_of,
            attempt=row.attempt,
            info=json.loads(row.info),
            user=json.loads(row.user_attrs),
            created_at=row.created_at,
            finished_at=row.finished_at,
            lease_expires_at=row.lease_expires_at,
        )

    # -- studies ----------------------------------------------------------------------------
    def create_study(self, record: StudyRecord) -> StudyRecord:
        now = time.time()
        try:
            with self._tx() as conn:
                result = conn.execute(
                    _studies.insert().values(
                        name=record.name,
                        space=dumps(record.space.to_json()),
                        direction=record.direction,
                        strategy=record.strategy,
                        seed=record.seed,
                        config=dumps(record.config.to_json()),
                        n_trials=0,
                        created_at=now,
                    )
                )
                study_id = result.inserted_primary_key[0]
        except IntegrityError:
            raise DuplicatedStudyError(
                f"name: a study called {record.name!r} exists already "
                "(load it, or pass load_if_exists=True)"
            ) from None
        return replace(record, id=int(study_id), created_at=now)

    def load_study(self, name: str) -> StudyRecord:
        with self._tx() as conn:
            row = conn.execute(sa.select(_studies).where(_studies.c.name == name)).first()
        if row is None:
            names = [s.name for s in self.list_studies()]
            hint = f"; studies here: {', '.join(names[:10])}" if names else "; the storage is empty"
            raise StudyNotFoundError(f"name: no study called {name!r}{hint}")
        return self._study_from_row(row)

    def list_studies(self) -> list[StudyRecord]:
        with self._tx() as conn:
            rows = conn.execute(sa.select(_studies).order_by(_studies.c.id)).all()
        return [self._study_from_row(r) for r in rows]

    def delete_study(self, name: str, expected: StudyRecord | None = None) -> None:
        study = self.load_study(name) if expected is None else expected
        with self._tx(study) as conn:
            conn.execute(_trials.delete().where(_trials.c.study_id == study.id))
            conn.execute(_queue.delete().where(_queue.c.study_id == study.id))
            conn.execute(_studies.delete().where(_studies.c.id == study.id))
        for key in [k for k in self._row_cache if k[0] == study.id and k[1] == study.name]:
            self._row_cache.pop(key, None)  # its trials are gone: keep no decoded copies

    # -- trials -----------------------------------------------------------------------------
    def _next_numbers(self, conn: Connection, study: StudyRecord, n: int) -> range:
        conn.execute(
            _studies.update()
            .where(_studies.c.id == study.id)
            .values(n_trials=_studies.c.n_trials + n)
        )
        total = conn.execute(
            sa.select(_studies.c.n_trials).where(_studies.c.id == study.id)
        ).scalar_one()
        return range(total - n + 1, total + 1)

    def _insert_trials(
        self,
        conn: Connection,
        study: StudyRecord,
        rows: Sequence[dict[str, Any]],
    ) -> list[Trial]:
        if not rows:
            return []
        now = time.time()
        numbers = self._next_numbers(conn, study, len(rows))
        values = []
        for number, row in zip(numbers, rows, strict=True):
            state = row.get("state", TrialState.RUNNING.value)
            values.append(
                {
                    "study_id": study.id,
                    "number": number,
                    "state": state,
                    "params": dumps(row["params"]),
                    "value": row.get("value"),
                    "reason": None,
                    "retry_of": row.get("retry_of"),
                    "attempt": row.get("attempt", 0),
                    "info": dumps(row.get("info", {})),
                    "user_attrs": dumps(row.get("user", {})),
                    "created_at": now,
                    "finished_at": now if state != TrialState.RUNNING.value else None,
                    "lease_expires_at": (
                        now + study.config.lease_seconds
                        if state == TrialState.RUNNING.value
                        else None
                    ),
                }
            )
        conn.execute(_trials.insert(), values)
        return self._select(conn, study, numbers=list(numbers))

    def _select(
        self,
        conn: Connection,
        study: StudyRecord,
        numbers: Sequence[int] | None = None,
        states: Sequence[TrialState] | None = None,
    ) -> list[Trial]:
        q = sa.select(_trials).where(_trials.c.study_id == study.id)
        if numbers is not None:
            q = q.where(_trials.c.number.in_(list(numbers)))
        if states is not None:
            q = q.where(_trials.c.state.in_([s.value for s in states]))
        rows = conn.execute(q.order_by(_trials.c.number)).all()
        return [self._trial_from_row(study, r) for r in rows]

    def _lose(
        self, conn: Connection, study: StudyRecord, trials: Sequence[Trial], reason: str
    ) -> list[Trial]:
        """Mark running ``trials`` lost (compare-and-set) and re-queue them within retries."""
        lost: list[Trial] = []
        now = time.time()
        for t in trials:
            result = conn.execute(
                _trials.update()
                .where(
                    _trials.c.study_id == study.id,
                    _trials.c.number == t.id,
                    _trials.c.state == TrialState.RUNNING.value,
                )
                .values(state=TrialState.LOST.value, reason=reason, finished_at=now)
            )
            if result.rowcount != 1:
                continue
            lost.append(t)
            if t.attempt < study.config.max_retries:
                conn.execute(
                    _queue.insert().values(
                        study_id=study.id,
                        params=dumps(t.params),
                        retry_of=t.id,
                        attempt=t.attempt + 1,
                        info=dumps({}),
                        created_at=now,
                    )
                )
        return self._select(conn, study, numbers=[t.id for t in lost]) if lost else []

    def reap(self, study: StudyRecord, now: float | None = None) -> list[Trial]:
        now = time.time() if now is None else now
        with self._tx(study) as conn:
            rows = conn.execute(
                sa.select(_trials).where(
                    _trials.c.study_id == study.id,
                    _trials.c.state == TrialState.RUNNING.value,
                    _trials.c.lease_expires_at < now,
                )
            ).all()
            if not rows:
                return []
            expired = [self._trial_from_row(study, r) for r in rows]
            return self._lose(conn, study, expired, "lease expired")

    def mark_lost(self, study: StudyRecord, trial_id: int, reason: str) -> Trial:
        with self._tx(study) as conn:
            trial = self._get(conn, study, trial_id)
            if trial.state in (TrialState.DONE, TrialState.FAILED):
                raise TrialStateError(
                    f"trial_id: trial {trial_id} is already {trial.state}; "
                    "only a running trial can be lost"
                )
            if trial.state is TrialState.RUNNING:
                self._lose(conn, study, [trial], reason)
            return self._get(conn, study, trial_id)

    def start_queued(self, study: StudyRecord, n: int, info: dict[str, Any]) -> list[Trial]:
        if n <= 0:
            return []
        with self._tx(study) as conn:
            rows = conn.execute(
                sa.select(_queue)
                .where(_queue.c.study_id == study.id)
                .order_by(_queue.c.id)
                .limit(n)
            ).all()
            if not rows:
                return []
            conn.execute(_queue.delete().where(_queue.c.id.in_([r.id for r in rows])))
            return self._insert_trials(
                conn,
                study,
                [
                    {
                        "params": json.loads(r.params),
                        "retry_of": r.retry_of,
                        "attempt": r.attempt,
                        "info": {**info, **json.loads(r.info)},  # the queue's record wins
                    }
                    for r in rows
                ],
            )

    def start_trials(
        self, study: StudyRecord, params: Sequence[dict[str, ParamValue]], infos: Sequence[dict]
    ) -> list[Trial]:
        with self._tx(study) as conn:
            return self._insert_trials(
                conn, study, [{"params": p, "info": i} for p, i in zip(params, infos, strict=True)]
            )

    def add_done(
        self,
        study: StudyRecord,
        params: dict[str, ParamValue],
        value: float,
        info: dict[str, Any],
        user: dict[str, Any],
        unique: bool = False,
    ) -> Trial:
        with self._tx(study) as conn:
            if unique:
                wanted = json.loads(dumps(params))
                for t in self._select(conn, study, states=[TrialState.DONE]):
                    if t.params == wanted and t.value == value:
                        return t
            return self._insert_trials(
                conn,
                study,
                [{"params": params, "info": info, "user": user, "value": value, "state": "done"}],
            )[0]

    def _get(self, conn: Connection, study: StudyRecord, trial_id: int) -> Trial:
        # ids beyond the INTEGER column overflow the driver (OverflowError, DataError): no such id
        found = self._select(conn, study, numbers=[trial_id]) if 0 < trial_id < MAX_ID else []
        if not found:
            raise TrialNotFoundError(f"trial_id: study {study.name!r} has no trial {trial_id}")
        return found[0]

    def finish(
        self,
        study: StudyRecord,
        trial_id: int,
        state: TrialState,
        value: float | None = None,
        reason: str | None = None,
        user: dict[str, Any] | None = None,
        info: dict[str, Any] | None = None,
    ) -> Trial:
        if state not in (TrialState.DONE, TrialState.FAILED):
            raise TrialStateError(f"state: can only finish a trial as done or failed, not {state}")
        with self._tx(study) as conn:
            trial = self._get(conn, study, trial_id)
            if trial.state is TrialState.RUNNING:
                conn.execute(
                    _trials.update()
                    .where(
                        _trials.c.study_id == study.id,
                        _trials.c.number == trial_id,
                        _trials.c.state == TrialState.RUNNING.value,
                    )
                    .values(
                        state=state.value,
                        value=value,
                        reason=reason,
                        finished_at=time.time(),
                        lease_expires_at=None,
                        info=dumps({**(info or {}), **trial.info}),  # never overrides
                        user_attrs=dumps({**trial.user, **(user or {})}),
                    )
                )
                return self._get(conn, study, trial_id)
            return self._repeat(conn, study, trial, state, value, info)

    def _repeat(
        self,
        conn: Connection,
        study: StudyRecord,
        trial: Trial,
        state: TrialState,
        value: float | None,
        info: dict[str, Any] | None,
    ) -> Trial:
        """A finish for a trial that is no longer running: no-op, late result, or an error."""
        if trial.state is TrialState.LOST:
            if state is TrialState.DONE and trial.value is None:
                # A late result from a superseded attempt: kept on the lost trial for the
                # record, never modelled (its retry carries the parameters on).
                conn.execute(
                    _trials.update()
                    .where(_trials.c.study_id == study.id, _trials.c.number == trial.id)
                    .values(value=value, info=dumps({**(info or {}), **trial.info, "late": True}))
                )
                return self._get(conn, study, trial.id)
            if state is TrialState.DONE and trial.value != value:
                raise TrialStateError(
                    f"value: trial {trial.id} was lost and already holds a late value "
                    f"{trial.value}, not {value}"
                )
            if state is TrialState.FAILED:
                raise TrialStateError(
                    f"trial_id: trial {trial.id} is already lost ({trial.reason}); a failure "
                    "reported after that is not recorded"
                )
            return trial
        if state is trial.state and (state is TrialState.FAILED or trial.value == value):
            return trial  # an identical repeat (a retried request): nothing changes
        if trial.state is TrialState.DONE and state is TrialState.DONE:
            raise TrialStateError(
                f"value: trial {trial.id} was already told {trial.value}; "
                f"refusing a different value {value}"
            )
        raise TrialStateError(f"trial_id: trial {trial.id} is already {trial.state}")

    def heartbeat(self, study: StudyRecord, trial_id: int) -> Trial:
        with self._tx(study) as conn:
            trial = self._get(conn, study, trial_id)
            if trial.state is not TrialState.RUNNING:
                raise TrialStateError(
                    f"trial_id: trial {trial_id} is {trial.state}; only running trials heartbeat"
                )
            conn.execute(
                _trials.update()
                .where(_trials.c.study_id == study.id, _trials.c.number == trial_id)
                .values(lease_expires_at=time.time() + study.config.lease_seconds)
            )
            return self._get(conn, study, trial_id)

    def enqueue(self, study: StudyRecord, point: QueuedPoint, unique: bool = False) -> bool:
        with self._tx(study) as conn:
            if unique and self._has_params(conn, study, json.loads(dumps(point.params))):
                return False
            conn.execute(
                _queue.insert().values(
                    study_id=study.id,
                    params=dumps(point.params),
                    retry_of=point.retry_of,
                    attempt=point.attempt,
                    info=dumps(point.info),
                    created_at=time.time(),
                )
            )
            return True

    def _has_params(self, conn: Connection, study: StudyRecord, params: dict[str, Any]) -> bool:
        """Whether ``params`` are queued, or the parameters of a trial that is not lost."""
        rows = conn.execute(sa.select(_queue.c.params).where(_queue.c.study_id == study.id))
        if any(json.loads(r.params) == params for r in rows):
            return True
        live = [TrialState.RUNNING, TrialState.DONE, TrialState.FAILED]
        return any(t.params == params for t in self._select(conn, study, states=live))

    def queued(self, study: StudyRecord) -> list[QueuedPoint]:
        with self._tx(study, lock=False) as conn:
            rows = conn.execute(
                sa.select(_queue).where(_queue.c.study_id == study.id).order_by(_queue.c.id)
            ).all()
        return [
            QueuedPoint(json.loads(r.params), r.retry_of, r.attempt, json.loads(r.info))
            for r in rows
        ]

    def trials(self, study: StudyRecord, states: Sequence[TrialState] | None = None) -> list[Trial]:
        with self._tx(study, lock=False) as conn:
            return self._select(conn, study, states=states)

    def trial(self, study: StudyRecord, trial_id: int) -> Trial:
        with self._tx(study, lock=False) as conn:
            return self._get(conn, study, trial_id)

    def count(self, study: StudyRecord) -> int:
        with self._tx(study, lock=False) as conn:
            return int(
                conn.execute(
                    sa.select(sa.func.count()).where(_trials.c.study_id == study.id)
                ).scalar_one()
            )


def open_storage(storage: str | Storage | None) -> Storage:
    """A ``Storage`` from a URL, an existing storage, or ``None`` (in memory)."""
    if isinstance(storage, Storage):
        return storage
    return SQLStorage(storage)
