"""``SQLStorage``: the storage on SQLAlchemy, for SQLite files (WAL) and PostgreSQL by URL.

Serialisation per study: SQLite takes its write lock for every transaction (``BEGIN
IMMEDIATE`` on a WAL database; a process-local lock spares threads its busy timeout);
PostgreSQL takes ``SELECT ... FOR UPDATE`` on the study row. The tables and their upgrades are
in ``abo.storage.schema``; a SQLite file's identity and writability are watched by
``abo.storage.guard``.

Example:
    >>> storage = SQLStorage("sqlite://")
    >>> storage.list_studies()
    []
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

import abo.storage.schema as schema
from abo.core.exceptions import (
    AboError,
    DuplicatedStudyError,
    StorageError,
    StudyNotFoundError,
)
from abo.core.trial import Report, Trial
from abo.storage.base import Storage, StudyRecord, Transaction
from abo.storage.guard import GUARDED, FileGuard, describe
from abo.storage.sql_transaction import _build_trial, _SQLTransaction, dumps

_studies, _trials, _queue, _meta = schema.studies, schema.trials, schema.queue, schema.meta
_reports, _proposers = schema.reports, schema.proposers


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
        url: ``sqlite:///path.db``, ``postgresql+psycopg://user@host/db``, or ``sqlite://``
            for an in-memory SQLite database.
        clock: the time for leases and timestamps (tests inject one).
    """

    def __init__(self, url: str | None = None, clock: Callable[[], float] = time.time) -> None:
        self.url = url
        self.clock = clock
        self._guard: FileGuard | None = None
        self._engine = self._make_engine(url)
        self._sqlite = self._engine.dialect.name == "sqlite"
        database = self._engine.url.database if self._sqlite else None
        if database and database != ":memory:" and not database.startswith("file:"):
            self._guard = FileGuard(os.path.abspath(database))
            guard = self._guard

            @event.listens_for(self._engine, "connect")
            def _track(dbapi_conn: Any, _record: Any) -> None:
                guard.connections.append(dbapi_conn)

            GUARDED.add(self)
        # SQLite serialises writers itself; this lock only spares threads of one process
        # from queueing on its busy timeout (and guards the single in-memory connection).
        self._lock: threading.RLock | None = threading.RLock() if self._sqlite else None
        self._row_cache: dict[tuple[int, str, int], tuple[tuple[Any, ...], Trial]] = {}
        # per study: the last report row read, how many rows, and the reports by trial
        self._report_cache: dict[tuple[int, str], tuple[int, int, dict[int, list[Report]]]] = {}
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
            raise StorageError(
                f"storage: cannot open {_redact(str(url))}: {describe(exc)}"
            ) from exc
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
        where = _redact(str(self.url))
        try:
            for attempt in range(5):
                try:
                    with self._tx() as conn:
                        schema.initialise(conn, where)
                    break
                except IntegrityError:
                    if attempt == 4:  # two processes creating the schema at once
                        raise
                    time.sleep(0.1 * (attempt + 1))
        except StorageError:
            raise
        except SQLAlchemyError as exc:
            raise StorageError(f"storage: cannot open {where}: {describe(exc)}") from exc
        if self._guard is not None:
            self._guard.arm()

    @contextmanager
    def _tx(self, study: StudyRecord | None = None, lock: bool = True) -> Iterator[Connection]:
        """One committed transaction; with a ``study``, checked first (see ``Storage``).

        ``lock=False`` (reads) does not take PostgreSQL's row lock on the study.
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
                raise StorageError(f"storage: {describe(exc)}") from exc

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
            + ("; load it again to use the new one" if again is not None else ""),
            field="name",
        )

    @contextmanager
    def transaction(self, study: StudyRecord) -> Iterator[Transaction]:
        with self._tx(study) as conn:
            yield _SQLTransaction(self, conn, study, self.clock())

    @contextmanager
    def reading(self, study: StudyRecord) -> Iterator[Transaction]:
        with self._tx(study, lock=False) as conn:
            yield _SQLTransaction(self, conn, study, self.clock())

    def check_writable(self) -> None:
        """Raise ``StorageError`` unless a write would succeed now (a real, empty write)."""
        with self._tx() as conn:
            conn.execute(
                _meta.update().where(_meta.c.key == "schema_version").values(value=_meta.c.value)
            )

    def dispose(self) -> None:
        """Close every pooled connection (the storage is unusable afterwards).

        Connections to files that cannot be written stay open (see ``FileGuard``)."""
        if self._guard is not None and self._guard._unwritable():
            self._guard.pin()
            return
        self._engine.dispose()

    # -- studies ----------------------------------------------------------------------------
    @staticmethod
    def _study_from_row(row: Any) -> StudyRecord:
        from abo.spec.study_spec import StudySpec

        return StudyRecord(
            id=row.id,
            name=row.name,
            spec=StudySpec.from_json(json.loads(row.spec)),
            created_at=row.created_at,
        )

    def create_study(self, record: StudyRecord) -> StudyRecord:
        now = self.clock()
        spec = record.spec.to_json()
        legacy_config = {k: v for k, v in spec.items() if k not in ("space", "outcomes")}
        try:
            with self._tx() as conn:
                result = conn.execute(
                    _studies.insert().values(
                        name=record.name,
                        space=dumps(spec["space"]),
                        direction=record.spec.direction,
                        strategy=record.spec.strategy,
                        seed=record.spec.seed,
                        config=dumps(legacy_config),
                        n_trials=0,
                        created_at=now,
                        spec=dumps(spec),
                    )
                )
                key = result.inserted_primary_key
                assert key is not None
                study_id = key[0]
        except IntegrityError:
            raise DuplicatedStudyError(
                f"name: a study called {record.name!r} exists already "
                "(load it, or pass load_if_exists=True)",
                field="name",
            ) from None
        return replace(record, id=int(study_id), created_at=now)

    def load_study(self, name: str) -> StudyRecord:
        with self._tx() as conn:
            row = conn.execute(sa.select(_studies).where(_studies.c.name == name)).first()
        if row is None:
            names = [s.name for s in self.list_studies()]
            hint = f"; studies here: {', '.join(names[:10])}" if names else "; the storage is empty"
            raise StudyNotFoundError(f"name: no study called {name!r}{hint}", field="name")
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
            conn.execute(_reports.delete().where(_reports.c.study_id == study.id))
            conn.execute(_proposers.delete().where(_proposers.c.study_id == study.id))
            conn.execute(_studies.delete().where(_studies.c.id == study.id))
        for key in [k for k in self._row_cache if k[0] == study.id and k[1] == study.name]:
            self._row_cache.pop(key, None)  # its trials are gone: keep no decoded copies
        self._report_cache.pop((study.id, study.name), None)

    def count(self, study: StudyRecord) -> int:
        with self._tx(study, lock=False) as conn:
            query = sa.select(sa.func.count()).where(_trials.c.study_id == study.id)
            return int(conn.execute(query).scalar_one())

    # -- trials -----------------------------------------------------------------------------
    def trial_from_row(self, study: StudyRecord, row: Any) -> Trial:
        """The trial of a row; unchanged rows reuse the trial built last time (no JSON
        decoding), which keeps reading a study of thousands of trials cheap on every ask."""
        key = (study.id, study.name, row.number)
        raw = tuple(row)
        cached = self._row_cache.get(key)
        if cached is not None and cached[0] == raw:
            return cached[1]
        trial = _build_trial(study, row)
        self._row_cache[key] = (raw, trial)
        return trial

    def study_reports(self, conn: Connection, study: StudyRecord) -> dict[int, list[Report]]:
        """Every committed report of the study by trial, in step order. Reports are only ever
        appended (in id order, under the study's lock), so only rows past the last one read
        are fetched; a count that does not add up (a deleted study's rows) reads all again."""
        key = (study.id, study.name)
        last, count, by_trial = self._report_cache.get(key, (0, 0, {}))
        where = _reports.c.study_id == study.id
        total = int(conn.execute(sa.select(sa.func.count()).where(where)).scalar_one())
        if total == count:
            return by_trial
        if total < count:
            last, count, by_trial = 0, 0, {}
        rows = conn.execute(
            sa.select(_reports).where(where, _reports.c.id > last).order_by(_reports.c.id)
        ).all()
        if count + len(rows) != total:  # should not happen: read everything again
            rows = conn.execute(sa.select(_reports).where(where).order_by(_reports.c.id)).all()
            by_trial = {}
        fresh = {k: list(v) for k, v in by_trial.items()}
        for row in rows:
            fresh.setdefault(row.number, []).append(Report(row.step, row.value, row.created_at))
        for reports in fresh.values():
            reports.sort(key=lambda r: r.step)
        if rows:
            self._report_cache[key] = (rows[-1].id, total, fresh)
        return fresh
