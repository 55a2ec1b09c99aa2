"""Two ``abo serve`` replicas on one PostgreSQL are one service: clients spread over them,
the replica proposing for the study is killed with SIGKILL mid-run, and nothing is lost or
handed out twice, and a survivor takes the proposals over within the lease."""

from __future__ import annotations

import json
import math
import random
import threading
import time
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

import abo
from tests.service.conftest import Server

LEASE = 5.0  # seconds (the default is 10): a dead proposer's studies move within it
CLIENTS = 8
KILL_AFTER = 10  # acknowledged tells before the proposing replica is killed
TELLS = 24


def _value(params: dict) -> float:
    return (params["x"] - 0.3) ** 2 + (params["y"] - 0.6) ** 2


class Fleet:
    """The replicas and what the clients saw."""

    def __init__(self, servers: list[Server]) -> None:
        self.servers = servers
        self.dead: set[int] = set()
        self.lock = threading.Lock()
        self.acked: dict[int, float] = {}  # trial id -> the value a tell was acknowledged for
        self.handed: dict[int, str] = {}  # trial id -> the client it was handed to
        self.twice: list[tuple[int, str, str]] = []  # a trial handed to two clients
        self.errors: list[str] = []

    def post(self, client: int, path: str, body: dict) -> httpx.Response:
        """``body`` to ``path`` on a live replica (the client's own first, as a load balancer
        spreads them), retried on the next replica on a connection error or a 503."""
        for attempt in range(200):
            alive = [k for k in range(len(self.servers)) if k not in self.dead]
            server = self.servers[alive[(client + attempt) % len(alive)]]
            try:
                r = httpx.post(f"{server.url}/api/v1{path}", json=body, timeout=120.0)
            except httpx.TransportError:
                time.sleep(0.05)
                continue
            if r.status_code == 503:
                time.sleep(min(1.0, float(r.headers.get("Retry-After", "0.2"))))
                continue
            return r
        raise AssertionError(f"{path}: no replica answered")


def _client(fleet: Fleet, k: int, study: str) -> None:
    cid, rng = f"client-{k}", random.Random(k)
    while True:
        with fleet.lock:
            if len(fleet.acked) >= TELLS:
                return
        r = fleet.post(k, f"/studies/{study}/ask", {"client_id": cid, "n_workers": CLIENTS})
        if r.status_code != 200:
            fleet.errors.append(f"ask {r.status_code}: {r.text}")
            return
        trial = r.json()["trials"][0]
        with fleet.lock:
            other = fleet.handed.setdefault(trial["id"], cid)
            if other != cid:
                fleet.twice.append((trial["id"], other, cid))
        time.sleep(rng.uniform(0.02, 0.15))  # the evaluation
        value = _value(trial["params"])
        r = fleet.post(k, f"/studies/{study}/trials/{trial['id']}/tell", {"value": value})
        if r.status_code != 200:
            fleet.errors.append(f"tell {r.status_code}: {r.text}")
            return
        with fleet.lock:
            fleet.acked[trial["id"]] = value


def _lease(url: str) -> tuple[str, int]:
    """The study's proposer lease row: its holder and epoch."""
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.connect() as conn:
        row = conn.execute(sa.text("SELECT holder, epoch FROM abo_proposers")).one()
    engine.dispose()
    return str(row.holder), int(row.epoch)


def _replica(server: Server) -> dict:
    return httpx.get(server.url + "/api/v1/replica", timeout=30.0).json()


@pytest.mark.slow
def test_replicas_share_one_proposer_and_survive_its_sigkill(pg_url: str, tmp_path: Path):
    servers = [
        Server(pg_url, tmp_path / f"replica-{k}.log", args=("--proposer-lease", str(LEASE)))
        for k in range(2)
    ]
    for s in servers:
        s.start()
    fleet = Fleet(servers)
    try:
        body = {
            "name": "shared",
            "space": abo.Space({"x": abo.Float(0, 1), "y": abo.Float(0, 1)}).to_json(),
            "seed": 0,
            "n_initial": 4,
        }
        created = httpx.post(servers[0].url + "/api/v1/studies", json=body, timeout=30.0)
        assert created.status_code == 201, created.text
        threads = [
            threading.Thread(target=_client, args=(fleet, k, "shared")) for k in range(CLIENTS)
        ]
        for t in threads:
            t.start()
        while len(fleet.acked) < KILL_AFTER and any(t.is_alive() for t in threads):
            time.sleep(0.02)
        # the holder as the database says (a replica's own view of its lease lapses for a
        # moment when a loaded machine delays a renewal; the row is what the others obey)
        ids = [_replica(s)["replica"] for s in servers]
        killed = ids.index(_lease(pg_url)[0])
        seen = [_replica(s) for s in servers]
        assert all(r["rounds"] == 0 for k, r in enumerate(seen) if k != killed), seen
        fleet.dead.add(killed)
        servers[killed].kill()
        killed_at = time.time()
        for t in threads:
            t.join(timeout=240)
        assert not any(t.is_alive() for t in threads)
        assert not fleet.errors, fleet.errors[:3]
        holder, epoch = _lease(pg_url)
        assert holder != ids[killed] and holder in ids and epoch >= 2  # the survivor took it
    finally:
        for s in servers:
            s.stop()

    engine = sa.create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT t.number, t.state, t.value, t.params, t.created_at FROM abo_trials t "
                "JOIN abo_studies s ON s.id = t.study_id WHERE s.name = 'shared'"
            )
        ).all()
    engine.dispose()
    trials = {r.number: r for r in rows}
    assert len(trials) == len(rows)  # 0 duplicate trial ids
    assert not fleet.twice  # no trial handed to two clients
    for trial_id, value in fleet.acked.items():  # 0 acknowledged tells lost
        assert trials[trial_id].state == "done" and math.isclose(trials[trial_id].value, value)
    params = [r.params for r in rows]
    assert len(set(params)) == len(params)  # 0 duplicate proposals
    after = [r.created_at for r in rows if r.created_at > killed_at]
    assert after, "no trial was started after the kill"
    assert min(after) - killed_at <= LEASE + 5.0  # a survivor proposed within the lease


@pytest.mark.slow
def test_a_replica_stopped_with_sigterm_hands_its_studies_over_at_once(pg_url: str, tmp_path: Path):
    """Graceful shutdown: the proposing replica answers the asks in flight, releases its
    lease, and the asks the other replica forwarded to it move there well within the lease
    (30 s here: waiting for it to expire would show)."""
    long_lease = 30.0
    args = ("--proposer-lease", str(long_lease), "--log-format", "json")
    servers = [Server(pg_url, tmp_path / f"replica-{k}.log", args=args) for k in range(2)]
    for s in servers:
        s.start()
    try:
        space = abo.Space({"x": abo.Float(0, 1), "y": abo.Float(0, 1)}).to_json()
        body = {"name": "handed", "space": space, "seed": 0, "strategy": "random"}
        api = [s.url + "/api/v1/studies" for s in servers]
        assert httpx.post(api[0], json=body, timeout=30.0).status_code == 201
        assert httpx.post(api[0] + "/handed/ask", json={}, timeout=30.0).status_code == 200
        first = [_replica(s)["replica"] for s in servers]
        assert _lease(pg_url) == (first[0], 1)  # the first replica proposes
        answered: list[float] = []
        by_client: dict[int, list[float]] = {k: [] for k in range(4)}
        errors: list[str] = []
        stop = threading.Event()

        def client(k: int) -> None:  # asks only the second replica: forwarded to the first
            while not stop.is_set():
                r = httpx.post(api[1] + "/handed/ask", json={"client_id": f"c{k}"}, timeout=60)
                if r.status_code == 503:
                    time.sleep(float(r.headers.get("Retry-After", "1")))
                    continue
                if r.status_code != 200:
                    errors.append(f"ask {r.status_code}: {r.text}")
                    return
                trial = r.json()["trials"][0]
                tell = f"{api[1]}/handed/trials/{trial['id']}/tell"
                if httpx.post(tell, json={"value": _value(trial["params"])}).status_code != 200:
                    errors.append("tell failed")
                    return
                answered.append(time.time())
                by_client[k].append(answered[-1])

        threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        while len(answered) < 8 and not errors:
            time.sleep(0.02)
        assert servers[0].proc is not None
        servers[0].proc.terminate()  # SIGTERM: a graceful stop
        assert servers[0].proc.wait(30) in (0, -15)  # uvicorn re-raises the signal it handled
        stopped = time.time()

        def resumed() -> list[float | None]:  # each client's first answer after the stop
            return [min((a for a in t if a > stopped), default=None) for t in by_client.values()]

        while None in resumed() and not errors:
            assert time.time() - stopped < long_lease, "the lease was not handed over"
            time.sleep(0.02)
        stop.set()
        for t in threads:
            t.join(timeout=60)
        assert not errors, errors[:3]
        waits = [a - stopped for a in resumed() if a is not None]
        assert len(waits) == 4 and max(waits) < 5.0, waits  # every client, not after the lease
        assert _lease(pg_url) == (first[1], 2)  # the second replica holds it, next epoch
    finally:
        for s in servers:
            s.stop()
    records = [json.loads(line) for line in servers[0].log.read_text().splitlines() if line]
    released = [r for r in records if "released the proposer lease" in r["message"]]
    assert [(r["study"], r["epoch"]) for r in released] == [("handed", 1)]
    assert records[-1]["message"].startswith("Finished server process")  # not cut short
