"""``/readyz`` follows the service's real writes, not only its probe: a PostgreSQL role that may
update (the probe) but not insert trials (every ask) makes the service unready, with the
reason, until its writes succeed again. A real server, a real PostgreSQL permission."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from abo.service.health import WriteHealth
from abo.storage import open_storage

from .conftest import Server, make_study


@pytest.fixture()
def limited_role(pg_url: str) -> Iterator[tuple[str, sa.Engine, str]]:
    """A login role owning nothing (so privileges apply to it), its URL, and an admin engine."""
    role = f"abo_ready_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE ROLE "{role}" LOGIN')
        conn.exec_driver_sql(f'GRANT ALL ON SCHEMA public TO "{role}"')
    url = sa.engine.make_url(pg_url).set(username=role, password=None)
    try:
        yield url.render_as_string(hide_password=False), admin, role
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP OWNED BY "{role}"')
            conn.exec_driver_sql(f'DROP ROLE IF EXISTS "{role}"')
        admin.dispose()


@pytest.mark.postgres
def test_readyz_is_503_while_most_writes_fail_though_its_probe_succeeds(
    pg_url: str, limited_role: tuple[str, sa.Engine, str], tmp_path: Path
) -> None:
    url, admin, role = limited_role
    open_storage(pg_url).dispose()  # the tables, owned by the admin
    with admin.connect() as conn:  # the role may use every table, as a deployment grants
        conn.exec_driver_sql(f'GRANT ALL ON ALL TABLES IN SCHEMA public TO "{role}"')
        conn.exec_driver_sql(f'GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO "{role}"')
    srv = Server(url, tmp_path / "ready.log").start()
    try:
        api = httpx.Client(base_url=srv.url + "/api/v1", timeout=60)
        make_study(api, "ready")
        assert api.post("/studies/ready/ask", json={}).status_code == 200
        assert httpx.get(srv.url + "/readyz").status_code == 200
        with admin.connect() as conn:  # a new trial cannot be written; the probe still can
            conn.exec_driver_sql(f'REVOKE INSERT ON abo_trials FROM "{role}"')
        for _ in range(4):
            r = api.post("/studies/ready/ask", json={})
            assert r.status_code == 503 and r.json()["error"]["code"] == "storage_unavailable"
        ready = httpx.get(srv.url + "/readyz")
        assert ready.status_code == 503, ready.text  # was 200: the probe alone decided
        error = ready.json()["error"]
        assert error["code"] == "storage_unavailable"
        assert "writes failed" in error["message"] and "permission denied" in error["message"]
        assert "[SQL" not in ready.text
        assert httpx.get(srv.url + "/healthz").status_code == 200  # alive, only not ready

        with admin.connect() as conn:
            conn.exec_driver_sql(f'GRANT INSERT ON abo_trials TO "{role}"')
        for _ in range(6):  # writes succeed again: ready once most recent ones did
            assert api.post("/studies/ready/ask", json={}).status_code == 200
        assert httpx.get(srv.url + "/readyz").status_code == 200
        api.close()
    finally:
        srv.stop()


def test_write_health_counts_recent_writes_only() -> None:
    now = [0.0]
    health = WriteHealth(size=10, window=60.0, min_failures=3, clock=lambda: now[0])
    for _ in range(2):
        health.failed("storage: disk full")
    assert health.problem() is None  # two failures are not an outage
    health.failed("storage: disk full")
    assert health.problem() == (
        "storage: 3 of the last 3 writes failed within 60 s (the latest: disk full)"
    )
    for _ in range(3):
        health.succeeded()
    assert health.problem() is not None  # half of the recent writes still failed
    health.succeeded()
    assert health.problem() is None
    health = WriteHealth(size=10, window=60.0, min_failures=3, clock=lambda: now[0])
    for _ in range(5):
        health.failed("storage: disk full")
    now[0] = 61.0  # forgotten after the window
    assert health.problem() is None
    for _ in range(20):
        health.failed("x")
    assert "10 of the last 10" in (health.problem() or "")  # only the latest ``size``
