"""Databases written by abo 0.1.0 (storage schema 1) are upgraded in place and continue.

The fixtures under ``tests/data`` were written by that release (see their README), on SQLite
and on PostgreSQL; the expected next proposal was made by that release too.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
import sqlalchemy as sa

import abo
from abo import StorageError, TrialState
from abo.storage import SCHEMA_VERSION, ProposerLease, SQLStorage

DATA = Path(__file__).resolve().parents[1] / "data"
NEXT = json.loads((DATA / "schema1-next.json").read_text())


def _objective(p: dict) -> float:
    return (p["x"] - 0.3) ** 2 + p["n"] / 10 + {"a": 0, "b": 0.2, "c": 0.5}[p["kind"]]


@pytest.fixture(params=["sqlite", "postgres"])
def schema1_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A copy of the schema-1 database on each backend."""
    if request.param == "sqlite":
        shutil.copy(DATA / "schema1.db", tmp_path / "old.db")
        return f"sqlite:///{tmp_path / 'old.db'}"
    url = request.getfixturevalue("pg_url")
    dump = (DATA / "schema1-postgres.sql").read_text()
    statements = "\n".join(ln for ln in dump.splitlines() if not ln.startswith("\\"))
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "DROP TABLE IF EXISTS abo_proposers, abo_reports, abo_queue, abo_trials, abo_studies, "
            "abo_meta"
        )
        conn.exec_driver_sql(statements)
        conn.exec_driver_sql("SET search_path TO public")  # the dump cleared it for its session
    engine.dispose()
    return url


def test_a_schema_1_database_is_upgraded_and_continues(
    schema1_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="abo"):
        storage = SQLStorage(schema1_url)
    assert "upgraded" in caplog.text and "from storage schema 1 to 2" in caplog.text
    assert "from storage schema 2 to 3" in caplog.text  # then on to this version
    engine = sa.create_engine(schema1_url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.connect() as conn:
        meta = dict(conn.execute(sa.text("SELECT key, value FROM abo_meta")).all())
    engine.dispose()
    assert meta["schema_version"] == str(SCHEMA_VERSION) and "upgraded_from_1" in meta
    assert "upgraded_from_2" in meta

    legacy = abo.load_study("legacy", storage=storage)
    assert legacy.direction == "minimize" and [o.name for o in legacy.outcomes] == ["value"]
    assert (legacy.strategy, legacy.seed, legacy.n_initial) == ("qlognei", 7, 4)
    assert legacy.spec.lease_seconds == 3600.0 and legacy.spec.max_retries == 1
    trials = legacy.trials
    assert [t.state for t in trials] == [
        *[TrialState.DONE] * 4, TrialState.FAILED, *[TrialState.DONE] * 4,
        TrialState.LOST, TrialState.RUNNING,
    ]  # fmt: skip
    assert trials[0].values == {"value": 1.25} and trials[0].user == {"note": "warm start"}
    assert [t.proposal.strategy for t in trials[:5]] == [
        "added", "enqueued", "sobol", "sobol", "qlognei",
    ]  # fmt: skip
    assert trials[5].proposal.model is not None  # the GP record that warm-starts the next fit
    assert trials[4].reason == "diverged" and trials[9].reason == "worker died"
    running = trials[10]
    assert running.retry_of == 10 and running.attempt == 1 and running.lease_expires_at
    assert legacy.best is not None and legacy.best.id == 9

    told = legacy.tell(running.id, _objective(running.params))
    assert told.value == NEXT["legacy_eleven"]
    nxt = legacy.ask()
    want = NEXT["current_next"]  # the old release's point until the discrete climb (data README)
    assert (nxt.params["n"], nxt.params["kind"]) == (want["n"], want["kind"])
    assert abs(nxt.params["x"] - want["x"]) < 1e-3
    assert nxt.proposal.strategy == "qlognei"

    maxi = abo.load_study("maxi", storage=storage)
    assert (maxi.direction, maxi.strategy, maxi.spec.refit) == (
        "maximize",
        "thompson",
        "background",
    )
    assert maxi.spec.max_staleness == 50 and maxi.spec.noise == "deterministic" and len(maxi) == 3
    assert maxi.best is not None and maxi.best.values["value"] <= 0.0
    storage.dispose()
    again = SQLStorage(schema1_url)  # a second open finds version 2: nothing to do
    assert len(abo.load_study("legacy", storage=again)) == 12
    again.dispose()


def test_a_database_newer_than_this_abo_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    SQLStorage(url).dispose()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"UPDATE abo_meta SET value = '{SCHEMA_VERSION + 1}' WHERE key = 'schema_version'"
        )
    engine.dispose()
    with pytest.raises(StorageError, match="written by a newer abo.*upgrade abo"):
        SQLStorage(url)
    engine = sa.create_engine(url)
    with engine.connect() as conn:  # refused, and left as it was
        stored = conn.exec_driver_sql("SELECT value FROM abo_meta").scalar_one()
    engine.dispose()
    assert stored == str(SCHEMA_VERSION + 1)


def test_a_schema_2_database_gets_the_reports_table_and_keeps_its_trials(
    storage_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Version 3 only adds ``abo_reports``: a version-2 database is a version-3 one without
    it, at version 2 (which is what this test makes, on each backend)."""
    study = abo.create_study({"x": abo.Float(0, 1)}, name="two", storage=storage_url, seed=3)
    running = study.ask()
    study.tell(study.ask().id, 0.5)
    study.storage.dispose()
    engine = sa.create_engine(storage_url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE abo_proposers")
        conn.exec_driver_sql("DROP TABLE abo_reports")
        conn.exec_driver_sql("UPDATE abo_meta SET value = '2' WHERE key = 'schema_version'")
    with caplog.at_level(logging.WARNING, logger="abo"):
        upgraded = abo.load_study("two", storage=storage_url)
    assert "from storage schema 2 to 3" in caplog.text
    with engine.connect() as conn:
        meta = dict(conn.execute(sa.text("SELECT key, value FROM abo_meta")).all())
    engine.dispose()
    assert meta["schema_version"] == str(SCHEMA_VERSION) and "upgraded_from_2" in meta
    assert [t.state for t in upgraded.trials] == [TrialState.RUNNING, TrialState.DONE]
    assert upgraded.report(running.id, 1, 0.25) is False
    assert [(r.step, r.value) for r in upgraded.reports(running.id)[running.id]] == [(1.0, 0.25)]
    upgraded.storage.dispose()


def test_a_schema_3_database_gets_the_proposers_table_and_keeps_its_trials(
    storage_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Version 4 only adds ``abo_proposers`` (the service replicas' proposer leases)."""
    study = abo.create_study({"x": abo.Float(0, 1)}, name="three", storage=storage_url, seed=3)
    study.tell(study.ask().id, 0.5)
    study.storage.dispose()
    engine = sa.create_engine(storage_url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE abo_proposers")
        conn.exec_driver_sql("UPDATE abo_meta SET value = '3' WHERE key = 'schema_version'")
    with caplog.at_level(logging.WARNING, logger="abo"):
        upgraded = abo.load_study("three", storage=storage_url)
    assert "from storage schema 3 to 4" in caplog.text
    with engine.connect() as conn:
        meta = dict(conn.execute(sa.text("SELECT key, value FROM abo_meta")).all())
        assert sa.inspect(conn).has_table("abo_proposers")
    engine.dispose()
    assert meta["schema_version"] == "4" and "upgraded_from_3" in meta
    assert [t.value for t in upgraded.trials] == [0.5]
    with upgraded.storage.transaction(upgraded.record) as tx:
        tx.set_proposer(ProposerLease("a", "http://h:1", 1, 10.0))
    with upgraded.storage.reading(upgraded.record) as tx:
        assert tx.proposer() == ProposerLease("a", "http://h:1", 1, 10.0)
    upgraded.storage.dispose()
