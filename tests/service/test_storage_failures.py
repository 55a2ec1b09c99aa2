"""The service when its storage fails under it: a SQLite file deleted while serving, files made
immutable while serving, and storage that cannot be written at start (read-only PostgreSQL,
immutable SQLite files). Real servers, real files, real ``chattr`` (skipped where it fails).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

import abo
from abo.service.app import create_app

from .conftest import SPACE, Server, make_study, objective

SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE FROM|WHERE|PRAGMA|BEGIN)\b|\[SQL")


def _files(db: Path) -> list[Path]:
    return [p for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists()]


def _chattr(flag: str, paths: list[Path]) -> None:
    subprocess.run(["chattr", flag, *map(str, paths)], check=True, capture_output=True)


@pytest.fixture()
def immutable(tmp_path: Path) -> Iterator[list[Path]]:
    """Paths the test makes immutable; always made mutable again afterwards."""
    probe = tmp_path / "probe"
    probe.write_text("x")
    try:
        _chattr("+i", [probe])
        _chattr("-i", [probe])
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"chattr +i does not work here (needs root and ext4): {exc}")
    paths: list[Path] = []
    try:
        yield paths
    finally:
        subprocess.run(["chattr", "-i", *map(str, paths)], capture_output=True)


def _storage_error(r: httpx.Response) -> str:
    assert r.status_code == 503, r.text
    error = r.json()["error"]
    assert error["code"] == "storage_unavailable"
    assert not SQL.search(r.text), r.text  # never a statement in a response
    return error["message"]


@pytest.mark.slow
def test_a_database_deleted_while_serving_acknowledges_nothing_after(tmp_path: Path) -> None:
    db = tmp_path / "gone.db"
    srv = Server(f"sqlite:///{db}", tmp_path / "gone.log").start()
    try:
        with httpx.Client(base_url=srv.url + "/api/v1", timeout=60) as api:
            make_study(api, "gone")
            trials = api.post("/studies/gone/ask", json={"count": 6}).json()["trials"]
            for t in trials[:3]:
                told = api.post(f"/studies/gone/trials/{t['id']}/tell", json={"value": 1.0})
                assert told.status_code == 200
            for path in _files(db):
                path.unlink()
            after = [
                api.post(f"/studies/gone/trials/{t['id']}/tell", json={"value": 2.0})
                for t in trials[3:]
            ]
            again = f"/studies/gone/trials/{trials[0]['id']}/tell"  # a repeat of a stored tell
            after.append(api.post(again, json={"value": 1.0}))
            messages = [_storage_error(r) for r in after]  # every tell after it: 503
            assert "was deleted" in messages[0]
            assert _storage_error(api.post("/studies/gone/ask", json={}))
            assert _storage_error(api.get("/studies/gone/trials"))
            assert _storage_error(api.post("/studies/other/ask", json={}))  # not 404: unknown
            ready = httpx.get(srv.url + "/readyz")
            assert "was deleted" in _storage_error(ready)
            assert httpx.get(srv.url + "/healthz").status_code == 200  # the process is alive
        srv.stop()
        srv.start()  # the same path: a new, empty database
        with httpx.Client(base_url=srv.url + "/api/v1", timeout=60) as api:
            assert api.get("/studies/gone").status_code == 404
            assert api.get("/studies").json()["studies"] == []
            assert httpx.get(srv.url + "/readyz").status_code == 200
    finally:
        srv.stop()


@pytest.mark.slow
def test_immutable_files_while_serving_are_503_then_recover_and_stop_cleanly(
    tmp_path: Path, immutable: list[Path]
) -> None:
    db = tmp_path / "frozen.db"
    srv = Server(f"sqlite:///{db}", tmp_path / "frozen.log").start()
    try:
        api = httpx.Client(base_url=srv.url + "/api/v1", timeout=60)
        make_study(api, "frozen")
        t = api.post("/studies/frozen/ask", json={}).json()["trials"][0]
        api.post(f"/studies/frozen/trials/{t['id']}/tell", json={"value": objective(t["params"])})
        running = api.post("/studies/frozen/ask", json={}).json()["trials"][0]
        immutable += _files(db)
        assert len(immutable) == 3  # the file, its -wal and -shm
        _chattr("+i", immutable)
        assert "cannot be written" in _storage_error(api.post("/studies/frozen/ask", json={}))
        _storage_error(
            api.post(f"/studies/frozen/trials/{running['id']}/tell", json={"value": 1.0})
        )
        _storage_error(api.get("/studies/frozen/trials"))
        _storage_error(httpx.get(srv.url + "/readyz"))
        assert httpx.get(srv.url + "/healthz").status_code == 200

        _chattr("-i", immutable)  # writable again: everything works again
        assert httpx.get(srv.url + "/readyz").status_code == 200
        told = api.post(f"/studies/frozen/trials/{running['id']}/tell", json={"value": 1.0})
        assert told.status_code == 200 and told.json()["state"] == "done"
        assert api.post("/studies/frozen/ask", json={}).status_code == 200
        api.close()

        _chattr("+i", immutable)  # stopped while immutable: a clean exit, not SIGBUS (-7)
        srv.stop()
        assert srv.proc is not None
        # uvicorn shuts down, then re-raises the SIGTERM it caught: -15 is its clean exit
        assert srv.proc.returncode == -signal.SIGTERM, (srv.proc.returncode, srv.log.read_text())
        assert f"Finished server process [{srv.proc.pid}]" in srv.log.read_text()
    finally:
        srv.stop()
    _chattr("-i", immutable)
    local = abo.load_study("frozen", storage=f"sqlite:///{db}")
    assert [tr.state for tr in local.trials][:2] == [abo.TrialState.DONE] * 2


@pytest.mark.slow
def test_create_app_and_serve_refuse_immutable_storage(
    tmp_path: Path, immutable: list[Path]
) -> None:
    db = tmp_path / "ro.db"
    abo.create_study(SPACE, name="ro", storage=f"sqlite:///{db}", strategy="random")
    immutable += _files(db)
    _chattr("+i", immutable)
    with pytest.raises(abo.StorageError, match="cannot be written") as info:
        create_app(f"sqlite:///{db}")
    assert str(db) in str(info.value) and not SQL.search(str(info.value))
    env = {k: v for k, v in os.environ.items() if k != "ABO_TOKEN"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "abo.cli.main",
            "serve",
            "--storage",
            f"sqlite:///{db}",
            "--port",
            "0",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert "cannot be written" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_a_study_collected_while_its_files_are_immutable_does_not_fault(
    tmp_path: Path, immutable: list[Path]
) -> None:
    db = tmp_path / "collected.db"
    code = f"""
import gc, os, subprocess, abo
study = abo.create_study(abo.Space({{"x": abo.Float(0, 1)}}), name="c",
                         storage="sqlite:///{db}", strategy="random")
study.tell(study.ask().id, 1.0)  # connections open, -shm mapped and written
files = [p for p in ("{db}", "{db}-wal", "{db}-shm") if os.path.exists(p)]
print(*files, sep="\\n", flush=True)
subprocess.run(["chattr", "+i", *files], check=True)
del study
gc.collect()  # closing those connections now would fault the process (SIGBUS)
print("alive")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = proc.stdout.split()
    immutable += [Path(p) for p in lines if p != "alive"]  # made mutable again by the fixture
    assert proc.returncode == 0 and lines[-1:] == ["alive"], (proc.returncode, proc.stderr)


@pytest.mark.postgres
def test_create_app_refuses_a_read_only_postgres(pg_url: str) -> None:
    abo.create_study(SPACE, name="replica", storage=pg_url, strategy="random")
    read_only = sa.engine.make_url(pg_url).update_query_dict(
        {"options": "-c default_transaction_read_only=on"}
    )
    url = read_only.render_as_string(hide_password=False)
    with pytest.raises(abo.StorageError, match="service needs storage it can write") as info:
        create_app(url)
    assert "read-only" in str(info.value)
    assert "[SQL" not in str(info.value)
    create_app(pg_url)  # the same database, writable: fine
