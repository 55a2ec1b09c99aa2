"""Shared fixtures: real storages (a SQLite file, PostgreSQL on 127.0.0.1:5432)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import torch

# One intra-op thread for the tests' own torch work, as abo uses for its own (abo.model.threads):
# the tests' GPs are small, and two threads on a 2-core machine running Dask workers are slower.
torch.set_num_threads(1)

PG_ADMIN_URL = os.environ.get(
    "ABO_TEST_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def _pg_reachable() -> str | None:
    """``None`` when PostgreSQL answers, else the reason it does not."""
    try:
        import sqlalchemy as sa

        engine = sa.create_engine(PG_ADMIN_URL, connect_args={"connect_timeout": 3})
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
        engine.dispose()
        return None
    except Exception as exc:  # noqa: BLE001
        return f"PostgreSQL at {PG_ADMIN_URL} is unreachable: {type(exc).__name__}"


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session, dropped afterwards."""
    reason = _pg_reachable()
    if reason is not None:
        if os.environ.get("ABO_REQUIRE_POSTGRES"):
            pytest.fail(f"{reason} (ABO_REQUIRE_POSTGRES is set: these tests must run)")
        pytest.skip(reason)
    import sqlalchemy as sa

    name = f"abo_test_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    url = sa.engine.make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    yield url
    with admin.connect() as conn:
        conn.exec_driver_sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{name}' AND pid <> pg_backend_pid()"
        )
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}"')
    admin.dispose()


@pytest.fixture()
def pg_url(postgres_url: str) -> Iterator[str]:
    """The session's PostgreSQL database, emptied of abo's tables after the test."""
    yield postgres_url
    import sqlalchemy as sa

    engine = sa.create_engine(postgres_url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "DROP TABLE IF EXISTS abo_proposers, abo_reports, abo_queue, abo_trials, abo_studies, "
            "abo_meta"
        )
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def storage_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """Each storage backend in turn: a SQLite file, and a PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'abo.db'}"
    return request.getfixturevalue("pg_url")
