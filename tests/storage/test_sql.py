"""What only the SQL backend has: its schema version, a file's identity and writability,
error messages without SQL, and the row cache (the contract itself: ``test_contract``)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import sqlalchemy as sa

import abo
from abo import StorageError, TrialState
from abo.storage import SCHEMA_VERSION, QueuedPoint, SQLStorage, lifecycle

from .conftest import points, record, v


@pytest.fixture()
def store(storage_url: str) -> SQLStorage:
    s = SQLStorage(storage_url)
    yield s
    s.dispose()


def test_delete_study_leaves_no_orphaned_rows(store: SQLStorage) -> None:
    doomed = store.create_study(record("doomed"))
    kept = store.create_study(record("kept"))
    lifecycle.start(store, doomed, points(3), [None] * 3)
    lifecycle.enqueue(store, doomed, QueuedPoint(points(1)[0]))
    lifecycle.start(store, kept, points(2), [None] * 2)
    store.delete_study("doomed")
    with store._engine.connect() as conn:
        n_trials = conn.execute(sa.text("SELECT COUNT(*) FROM abo_trials")).scalar_one()
        n_queue = conn.execute(sa.text("SELECT COUNT(*) FROM abo_queue")).scalar_one()
    assert (n_trials, n_queue) == (2, 0)
    assert {k[1] for k in store._row_cache} <= {"kept"}  # no decoded copies of its trials


def test_reading_trials_twice_reuses_unchanged_ones_and_sees_changes(store: SQLStorage) -> None:
    study = store.create_study(record("cache"))
    lifecycle.start(store, study, points(2), [None] * 2)
    first = store.trials(study)
    second = store.trials(study)
    assert all(a is b for a, b in zip(first, second, strict=True))  # no decoding again
    lifecycle.finish(store, study, first[0].id, TrialState.DONE, v(1.5))
    third = store.trials(study)
    assert third[0].state is TrialState.DONE and third[0].value == 1.5  # a change is seen
    assert third[1] is first[1]


def test_in_memory_sqlite_keeps_the_same_contract() -> None:
    store = SQLStorage("sqlite://")
    study = store.create_study(record())
    lifecycle.start(store, study, points(3), [None] * 3)
    lifecycle.finish(store, study, 2, TrialState.DONE, v(0.5))
    assert [t.id for t in store.trials(study, [TrialState.DONE])] == [2]


@pytest.mark.parametrize("stored", ["999", "not-a-number"])
def test_schema_version_is_recorded_and_checked(storage_url: str, stored: str) -> None:
    SQLStorage(storage_url).dispose()
    engine = sa.create_engine(storage_url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        version = conn.execute(
            sa.text("SELECT value FROM abo_meta WHERE key = 'schema_version'")
        ).scalar_one()
        assert version == str(SCHEMA_VERSION)
        conn.execute(
            sa.text("UPDATE abo_meta SET value = :v WHERE key = 'schema_version'"), {"v": stored}
        )
    engine.dispose()
    with pytest.raises(
        StorageError,
        match=f"schema version {stored!r}" if not stored.isdigit() else f"schema version {stored}",
    ):
        SQLStorage(storage_url)


def test_a_file_that_is_not_a_database_raises_storage_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("these are my notes, not a database\n" * 200)
    with pytest.raises(StorageError, match="storage"):
        SQLStorage(f"sqlite:///{path}")


def test_non_string_url_raises_storage_error() -> None:
    with pytest.raises(StorageError, match="storage"):
        SQLStorage(42)  # type: ignore[arg-type]


def test_in_memory_url_is_one_shared_database_across_threads() -> None:

    storage = SQLStorage("sqlite://")
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            storage.list_studies()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_storage_errors_never_carry_sql(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    SQLStorage(f"sqlite:///{path}").dispose()
    read_only = SQLStorage(f"sqlite:///file:{path}?mode=ro&uri=true")
    assert read_only.list_studies() == []  # reading a read-only database works
    with pytest.raises(StorageError) as info:
        read_only.check_writable()
    message = str(info.value)
    assert "readonly" in message.replace("-", "").replace(" ", "").lower(), message
    for sql in ("UPDATE", "SELECT", "INSERT", "[SQL", "abo_meta"):
        assert sql not in message
    with pytest.raises(StorageError) as info:
        read_only.create_study(record("x"))
    assert "INSERT" not in str(info.value) and "[SQL" not in str(info.value)
    read_only.dispose()


def test_a_database_file_deleted_while_open_refuses_every_call(tmp_path: Path) -> None:
    path = tmp_path / "abo.db"
    store = SQLStorage(f"sqlite:///{path}")
    study = store.create_study(record())
    (trial,) = lifecycle.start(store, study, points(1), [None])
    store.check_writable()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    for call in (
        lambda: lifecycle.finish(store, study, trial.id, TrialState.DONE, v(1.0)),
        store.check_writable,
        lambda: store.trials(study),
        store.list_studies,
    ):
        with pytest.raises(StorageError, match="was deleted while abo had it open"):
            call()
    SQLStorage(f"sqlite:///{path}").dispose()  # a new, empty file at the same path...
    with pytest.raises(StorageError, match="deleted"):
        store.check_writable()  # ...does not revive the old storage: what it held is gone


def test_a_database_file_replaced_while_open_refuses_every_call(tmp_path: Path) -> None:
    path = tmp_path / "abo.db"
    store = SQLStorage(f"sqlite:///{path}")
    study = store.create_study(record())
    spare = tmp_path / "spare.db"
    SQLStorage(f"sqlite:///{spare}").dispose()
    spare.replace(path)
    with pytest.raises(StorageError, match="replaced by another file"):
        lifecycle.start(store, study, points(1), [None])
    with pytest.raises(StorageError, match="replaced"):
        store.check_writable()


_IMMUTABLE_SCRIPT = r"""
import subprocess, sys
import abo
from abo.storage import SQLStorage
url, path, mode = sys.argv[1:]
files = [path, path + "-wal", path + "-shm"]
study = abo.create_study(abo.Space({"x": abo.Float(0, 1)}), name="s", storage=url,
                         strategy="random", seed=0)
t = study.ask(); study.tell(t.id, 1.0)
subprocess.run(["chattr", "+i", *files], check=True)
try:
    study.ask()
    print("ASKED")
except abo.StorageError as exc:
    print("REFUSED", exc)
try:
    SQLStorage(url)
    print("OPENED")
except abo.StorageError as exc:
    print("OPEN-REFUSED", exc)
if mode == "restore":
    subprocess.run(["chattr", "-i", *files], check=True)
    t = study.ask(); study.tell(t.id, 2.0)
    print("RECOVERED", len(study))
print("EXITING", flush=True)
"""


@pytest.mark.parametrize("mode", ["restore", "exit-immutable"])
def test_immutable_files_are_refused_without_crashing(tmp_path: Path, mode: str) -> None:
    """SQLite faults (SIGBUS) on a memory-mapped index whose file turned immutable: abo must
    refuse before SQLite touches it, and leave such connections open at exit."""
    import subprocess
    import sys

    probe = tmp_path / "probe"
    probe.write_text("")
    tried = subprocess.run(["chattr", "+i", str(probe)], capture_output=True, text=True)
    if tried.returncode != 0:
        pytest.skip(f"chattr +i is not available here (needs root and ext4): {tried.stderr}")
    subprocess.run(["chattr", "-i", str(probe)], check=True)
    path = tmp_path / "abo.db"
    script = tmp_path / "immutable.py"
    script.write_text(_IMMUTABLE_SCRIPT)
    try:
        out = subprocess.run(
            [sys.executable, str(script), f"sqlite:///{path}", str(path), mode],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        for suffix in ("", "-wal", "-shm"):
            if Path(f"{path}{suffix}").exists():
                subprocess.run(["chattr", "-i", f"{path}{suffix}"], check=True)
    assert out.returncode == 0, (out.returncode, out.stdout, out.stderr)  # -7 would be SIGBUS
    lines = out.stdout.splitlines()
    refused = next(line for line in lines if line.startswith("REFUSED"))
    assert "cannot be written (read-only or immutable)" in refused
    assert "SELECT" not in refused and "[SQL" not in refused
    assert any(line.startswith("OPEN-REFUSED") for line in lines)
    assert lines[-1] == "EXITING"
    expected = 2 if mode == "restore" else 1
    if mode == "restore":
        assert f"RECOVERED {expected}" in lines
    done = [t.value for t in abo.load_study("s", storage=f"sqlite:///{path}").trials]
    assert done == [1.0, 2.0][:expected]
