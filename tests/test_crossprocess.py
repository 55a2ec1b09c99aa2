"""Several Python processes sharing one study: no duplicate ids, no lost tells, one reap."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import abo
from abo import Float, Int, Space, TrialState

SPACE = Space({"x": Float(0.0, 1.0), "n": Int(1, 9)})
ROOT = Path(__file__).resolve().parents[1]

# Every worker: load the study, say "ready", wait for the go file, then do its part and print
# one JSON line of what it did.
WORKER = """
import json, os, sys, time
import abo

url, name, go, mode, tag, n = sys.argv[1:7]
study = abo.load_study(name, storage=url)
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.001)
if mode == "reap":
    out = [t.id for t in study.reap()]
else:
    out = []
    for _ in range(int(n)):
        t = study.ask()
        value = t.params["x"] * 1000 + t.params["n"] + int(tag) / 10
        study.tell(t.id, value)
        out.append([t.id, value])
print(json.dumps(out), flush=True)
"""


def run_workers(tmp_path: Path, url: str, name: str, mode: str, n: int, k: int = 2) -> list[Any]:
    """Start ``k`` worker processes, release them at once, and return what each did."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    go = tmp_path / f"go-{mode}"
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), url, name, str(go), mode, str(tag), str(n)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in range(k)
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline()
            assert line.strip() == "ready", p.stderr.read() if p.stderr else ""
        go.touch()
        results = []
        for p in procs:
            out, err = p.communicate(timeout=240)
            assert p.returncode == 0, err
            results.append(json.loads(out.strip().splitlines()[-1]))
        return results
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def check_concurrent_tells(
    url: str, name: str, results: list[list], per_worker: int, k: int = 2
) -> None:
    told = {tid: value for result in results for tid, value in result}
    assert sum(len(r) for r in results) == len(told) == k * per_worker  # no id handed out twice
    study = abo.load_study(name, storage=url)
    trials = study.trials
    assert [t.id for t in trials] == list(range(1, k * per_worker + 1))
    for t in trials:
        assert t.state is TrialState.DONE
        assert t.value == told[t.id]
        assert t.value == pytest.approx(t.params["x"] * 1000 + t.params["n"], abs=0.25)


@pytest.mark.slow
def test_two_processes_ask_and_tell_one_sqlite_study(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    abo.create_study(SPACE, name="shared", storage=url, strategy="random", seed=0)
    results = run_workers(tmp_path, url, "shared", "tell", 15)
    check_concurrent_tells(url, "shared", results, 15)


@pytest.mark.slow
@pytest.mark.postgres
def test_two_processes_ask_and_tell_one_postgres_study(tmp_path: Path, pg_url: str) -> None:
    abo.create_study(SPACE, name="shared", storage=pg_url, strategy="random", seed=0)
    results = run_workers(tmp_path, pg_url, "shared", "tell", 15)
    check_concurrent_tells(pg_url, "shared", results, 15)


@pytest.mark.slow
def test_two_processes_with_the_model_strategy(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'gp.db'}"
    abo.create_study(
        SPACE,
        name="gp",
        storage=url,
        seed=0,
        n_initial=3,
        strategy_options={"mc_samples": 32, "raw_samples": 64, "num_restarts": 2},
    )
    results = run_workers(tmp_path, url, "gp", "tell", 5)
    check_concurrent_tells(url, "gp", results, 5)
    assert any(t.proposal.strategy == "auto" for t in abo.load_study("gp", url).trials)


@pytest.mark.slow
def test_two_processes_reaping_at_once_lose_each_trial_once(
    tmp_path: Path, storage_url: str
) -> None:
    study = abo.create_study(
        SPACE, name="reap", storage=storage_url, strategy="random", seed=0, lease_seconds=0.5
    )
    started = study.ask_batch(6)
    time.sleep(0.7)  # every lease has expired; nobody has reaped yet
    assert all(t.state is TrialState.RUNNING for t in study.trials)
    results = run_workers(tmp_path, storage_url, "reap", "reap", 0)
    reaped = [tid for r in results for tid in r]
    assert sorted(reaped) == [t.id for t in started]  # each lost exactly once
    assert all(t.state is TrialState.LOST for t in study.trials)
    queue = study.storage.queued(study.record)
    assert sorted(q.retry_of for q in queue) == [t.id for t in started]  # re-queued once
    retries = study.ask_batch(6)
    assert sorted(t.retry_of for t in retries) == [t.id for t in started]
    assert study.storage.queued(study.record) == []
    by_id = {t.id: t.params for t in started}
    assert all(t.params == by_id[t.retry_of] and t.attempt == 1 for t in retries)
