"""Slow asks starve nothing: with asks held inside a proposal (a test strategy that waits for a
release file), health, readiness, heartbeats, tells and reads still answer; the waiting asks
share one proposal round; beyond ``max_waiting_asks`` an ask is 503 ``busy`` + Retry-After,
and the Python client waits what Retry-After says.

Structural, not timed: the held requests stay held until the test releases them, so anything
that queued behind them (as with the old plain-``def`` asks filling FastAPI's 40 threads)
would not answer at all before the release.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import abo.service.client as client_module
from abo.service import Client
from abo.service.asks import BUSY_ROUND_SECONDS

from .conftest import SPACE, Server

HELD = Path(__file__).with_name("held_strategy.py")
N_WAITING = 47  # asks waiting behind the held round: beyond 40 threads, at the limit below


def _wait_for(condition, what: str, seconds: float = 60.0) -> None:
    """Poll ``condition`` until it holds (a setup step, not an assertion on time)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


@pytest.fixture()
def held(tmp_path: Path) -> Iterator[tuple[Server, Path]]:
    hold = tmp_path / "hold"
    hold.mkdir()
    srv = Server(
        f"sqlite:///{tmp_path / 'held.db'}",
        tmp_path / "held.log",
        options={"max_waiting_asks": N_WAITING, "max_ask_batch": 64},
        plugins=[HELD],
        env={"ABO_TEST_HOLD": str(hold)},
    ).start()
    try:
        yield srv, hold
    finally:
        (hold / "release").touch()
        srv.stop()


def _rounds(hold: Path) -> list[int]:
    path = hold / "rounds"
    return [int(n) for n in path.read_text().split()] if path.exists() else []


@pytest.mark.slow
def test_held_asks_starve_nothing_share_a_round_and_overflow_to_503(
    held: tuple[Server, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    srv, hold = held
    base = srv.url + "/api/v1/studies/h"
    api = httpx.Client(timeout=30.0)
    body = {"name": "h", "space": SPACE.to_json(), "strategy": "held", "n_initial": 1, "seed": 0}
    assert api.post(srv.url + "/api/v1/studies", json=body).status_code == 201
    first = api.post(base + "/ask", json={}).json()["trials"][0]  # the design point: not held
    for x in (0.1, 0.2):
        point = {"x": x, "lr": 0.01, "n": 2, "opt": "adam"}
        assert api.post(base + "/enqueue", json={"params": point}).json() == {"queued": True}
    queued = api.post(base + "/ask", json={"count": 2}).json()["trials"]  # no proposal either
    running = [first["id"], *(t["id"] for t in queued)]
    assert _rounds(hold) == []

    answers: dict[str, httpx.Response] = {}

    def ask(client_id: str) -> None:
        with httpx.Client(timeout=120.0) as c:
            answers[client_id] = c.post(base + "/ask", json={"client_id": client_id})

    threads = [threading.Thread(target=ask, args=("c0",))]
    threads[0].start()
    _wait_for(lambda: _rounds(hold) == [1], "the first ask to be held inside its proposal")
    threads += [threading.Thread(target=ask, args=(f"c{i}",)) for i in range(1, N_WAITING + 1)]
    for th in threads[1:]:
        th.start()
    ready = lambda: api.get(srv.url + "/readyz").json()  # noqa: E731
    _wait_for(lambda: ready()["asks_waiting"] == N_WAITING, "every ask to be waiting")

    # 48 asks held: everything else still answers
    assert api.get(srv.url + "/healthz").json() == {"status": "ok"}
    assert ready() == {"status": "ready", "asks_waiting": N_WAITING}
    beat = api.post(f"{base}/trials/{running[0]}/heartbeat")
    assert beat.status_code == 200 and beat.json()["state"] == "running"
    told = api.post(f"{base}/trials/{running[1]}/tell", json={"value": 1.5})
    assert told.status_code == 200 and told.json()["state"] == "done"
    listing = api.get(base + "/trials", params={"state": "running"})
    assert [t["id"] for t in listing.json()["trials"]] == [running[0], running[2]]
    assert api.get(base).json()["n_trials"] == 3
    assert api.get(base + "/best").json()["trial"]["id"] == running[1]
    assert all(th.is_alive() for th in threads) and _rounds(hold) == [1]

    # one more is refused at once, with a Retry-After
    busy = api.post(base + "/ask", json={})
    assert busy.status_code == 503 and busy.json()["error"]["code"] == "busy"
    assert "max_waiting_asks" in busy.json()["error"]["message"]
    retry_after = busy.headers["retry-after"]
    assert retry_after.isdigit() and int(retry_after) >= 1

    # the Python client waits what Retry-After says (its own backoff would be 10 ms), and its
    # retry gets a trial once the held round is released
    slept: list[float] = []
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        (hold / "release").touch()
        real_sleep(seconds)

    monkeypatch.setattr(client_module.time, "sleep", sleep)
    with Client(srv.url, retries=3, backoff=0.01) as client:
        late = client.load_study("h").ask()
    assert slept and slept[0] == float(retry_after)
    for th in threads:
        th.join(120)

    assert sorted(answers) == sorted(f"c{i}" for i in range(N_WAITING + 1))
    assert all(r.status_code == 200 for r in answers.values())
    got = {cid: r.json()["trials"] for cid, r in answers.items()}
    ids = [t["id"] for trials in got.values() for t in trials]
    assert len(ids) == len(set(ids)) == N_WAITING + 1  # every asker its own trial
    assert not set(ids) & {*running, late.id}
    assert all(t["info"]["client_id"] == cid for cid, ts in got.items() for t in ts)
    # 48 asks, two proposal rounds: the held one, and one for all 47 that waited behind it
    assert _rounds(hold)[:2] == [1, N_WAITING]
    assert len(_rounds(hold)) == 3  # ... and the client's late ask
    # the round of many waiting askers was hurried (BUSY_ROUND_SECONDS over its points); a
    # round for one asker keeps no pace, so it stays reproducible
    paces = (hold / "paces").read_text().split()
    assert paces[0] == "None" and paces[2] == "None"
    assert float(paces[1]) == pytest.approx(BUSY_ROUND_SECONDS / N_WAITING)
    with Client(srv.url) as client:  # a retried ask (same client_id) gets its trial back
        again = api.post(base + "/ask", json={"client_id": "c5"}).json()["trials"]
        assert [t["id"] for t in again] == [t["id"] for t in got["c5"]]
        assert len(client.load_study("h").trials) == 3 + N_WAITING + 2
    assert _rounds(hold) == [1, N_WAITING, 1]  # that answer needed no proposal
    api.close()
