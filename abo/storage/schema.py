"""The SQL tables (schema version 4) and the in-place upgrade of older databases.

Version 4 adds to version 3 the table ``abo_proposers``: per study, which service replica
proposes for it and until when (``abo.service.proposers``). A version-3 database is upgraded
when first opened by creating that table and recording ``upgraded_from_3``.

Version 3 adds to version 2 the table ``abo_reports``: the intermediate values trials report
as they run (``study.report``), one row per trial and step. A version-2 database is upgraded
when first opened by creating that table (nothing is rewritten) and recording
``upgraded_from_2`` in ``abo_meta``.

Version 2 adds to version 1: the study's whole ``spec`` (JSON) beside the columns version 1
kept (space, direction, strategy, seed, config: still written, no longer read), and per trial
its ``outcomes`` (named values, JSON) and ``proposal`` (abo's own record, JSON), apart from
the caller's ``info``. A version-1 database is upgraded when first opened, in one transaction:
columns are added and filled from what version 1 stored (its one objective was called
``value``; its proposal records were keys of ``info``, which is left as it was), and the
upgrade is logged and recorded in ``abo_meta`` (``upgraded_from_1``). A database of a newer
version than this code is refused. Nothing else is ever rewritten.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from abo.core.exceptions import StorageError
from abo.storage.base import SCHEMA_VERSION

log = logging.getLogger("abo")

metadata = sa.MetaData()
meta = sa.Table(
    "abo_meta",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)
studies = sa.Table(
    "abo_studies",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    sa.Column("space", sa.Text, nullable=False),
    sa.Column("direction", sa.String(16), nullable=False),
    sa.Column("strategy", sa.String(64), nullable=False),
    sa.Column("seed", sa.BigInteger, nullable=False),
    sa.Column("config", sa.Text, nullable=False),
    sa.Column("n_trials", sa.Integer, nullable=False, default=0),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("spec", sa.Text, nullable=True),  # v2
)
trials = sa.Table(
    "abo_trials",
    metadata,
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
    sa.Column("outcomes", sa.Text, nullable=True),  # v2
    sa.Column("proposal", sa.Text, nullable=True),  # v2
    sa.UniqueConstraint("study_id", "number", name="uq_trial_number"),
    sa.Index("ix_trials_study_state", "study_id", "state"),
)
queue = sa.Table(
    "abo_queue",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "study_id", sa.Integer, sa.ForeignKey("abo_studies.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("params", sa.Text, nullable=False),
    sa.Column("retry_of", sa.Integer, nullable=True),
    sa.Column("attempt", sa.Integer, nullable=False, default=0),
    sa.Column("info", sa.Text, nullable=False),  # the queued point's proposal record
    sa.Column("created_at", sa.Float(precision=53), nullable=False),
)

reports = sa.Table(
    "abo_reports",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "study_id", sa.Integer, sa.ForeignKey("abo_studies.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("number", sa.Integer, nullable=False),  # the trial's number in its study
    sa.Column("step", sa.Float(precision=53), nullable=False),
    sa.Column("value", sa.Float(precision=53), nullable=False),
    sa.Column("created_at", sa.Float(precision=53), nullable=False),
    sa.UniqueConstraint("study_id", "number", "step", name="uq_report_step"),
)  # v3

proposers = sa.Table(
    "abo_proposers",
    metadata,
    sa.Column(
        "study_id",
        sa.Integer,
        sa.ForeignKey("abo_studies.id", ondelete="CASCADE"),
        primary_key=True,
        autoincrement=False,
    ),
    sa.Column("holder", sa.String(255), nullable=False),
    sa.Column("address", sa.Text, nullable=True),
    sa.Column("epoch", sa.Integer, nullable=False),
    sa.Column("expires_at", sa.Float(precision=53), nullable=False),
)  # v4

# keys version 1 kept in a trial's info that belong to abo's proposal record
V1_PROPOSAL_KEYS = (
    "strategy", "arm", "proposal_seconds", "fit_seconds", "n_observations", "gp_points",
    "fit_observations", "model", "deduplicated", "fallback", "joint", "beta",
)  # fmt: skip


def version(conn: Connection, lock: bool = False) -> int | None:
    """The stored schema version (``None`` for an empty database); ``lock`` holds the row
    (PostgreSQL) so that two processes upgrading at once take turns."""
    if not sa.inspect(conn).has_table("abo_meta"):
        return None
    query = sa.select(meta.c.value).where(meta.c.key == "schema_version")
    if lock and conn.dialect.name != "sqlite":
        query = query.with_for_update()
    row = conn.execute(query).first()
    if row is None:
        return None
    try:
        return int(row[0])
    except ValueError:
        raise StorageError(f"storage: unreadable schema version {row[0]!r}") from None


def initialise(conn: Connection, where: str) -> None:
    """Create the tables of an empty database, or upgrade an older one (one transaction)."""
    found = version(conn)
    if found is None:
        metadata.create_all(conn)
        conn.execute(meta.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))
        return
    if found > SCHEMA_VERSION:
        raise StorageError(
            f"storage: {where} has schema version {found}, written by a newer abo; this abo "
            f"reads versions up to {SCHEMA_VERSION} (upgrade abo to use it)"
        )
    if found not in (1, 2, 3, SCHEMA_VERSION):
        raise StorageError(f"storage: {where} has unknown schema version {found}")
    if found < SCHEMA_VERSION and version(conn, lock=True) == found:  # not upgraded meanwhile
        if found == 1:
            _upgrade_1_to_2(conn, where)
        if found <= 2:
            _upgrade_2_to_3(conn, where)
        _upgrade_3_to_4(conn, where)


def _set_version(conn: Connection, to: int, upgraded_from: int) -> None:
    conn.execute(meta.update().where(meta.c.key == "schema_version").values(value=str(to)))
    conn.execute(
        meta.insert().values(key=f"upgraded_from_{upgraded_from}", value=repr(time.time()))
    )


def _upgrade_2_to_3(conn: Connection, where: str) -> None:
    reports.create(conn)
    _set_version(conn, 3, 2)
    log.warning("abo: upgraded %s from storage schema 2 to 3 (a table for reports)", where)


def _upgrade_3_to_4(conn: Connection, where: str) -> None:
    proposers.create(conn)
    _set_version(conn, 4, 3)
    log.warning("abo: upgraded %s from storage schema 3 to 4 (a table for proposer leases)", where)


def _upgrade_1_to_2(conn: Connection, where: str) -> None:
    from abo.core.outcomes import DEFAULT_NAME, Objective, outcomes_to_json

    started = time.time()
    for table, column in (
        ("abo_studies", "spec"),
        ("abo_trials", "outcomes"),
        ("abo_trials", "proposal"),
    ):  # noqa: E501
        conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {column} TEXT")
    for row in conn.execute(sa.select(studies)).all():
        config = json.loads(row.config)
        spec: dict[str, Any] = {
            "space": json.loads(row.space),
            "outcomes": outcomes_to_json([Objective(DEFAULT_NAME, row.direction)]),
            "strategy": row.strategy,
            "seed": int(row.seed),
            **{k: v for k, v in config.items()},
        }
        conn.execute(studies.update().where(studies.c.id == row.id).values(spec=json.dumps(spec)))
    rows = conn.execute(sa.select(trials.c.id, trials.c.value, trials.c.info)).all()
    for row in rows:
        info = json.loads(row.info)
        record = {k: info[k] for k in V1_PROPOSAL_KEYS if k in info}
        changes: dict[str, Any] = {}
        if row.value is not None:
            changes["outcomes"] = json.dumps({DEFAULT_NAME: row.value})
        if "strategy" in record:
            changes["proposal"] = json.dumps(record, allow_nan=False)
        if changes:
            conn.execute(trials.update().where(trials.c.id == row.id).values(**changes))
    _set_version(conn, 2, 1)
    log.warning(
        "abo: upgraded %s from storage schema 1 to %d (%d studies, %d trials, %.1f s)",
        where,
        2,
        conn.execute(sa.select(sa.func.count()).select_from(studies)).scalar_one(),
        len(rows),
        time.time() - started,
    )
