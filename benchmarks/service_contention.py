"""The service under ask contention: 64 clients asking a ``qlognei`` study at once.

Each client loops ask -> a simulated evaluation (``--eval`` seconds) -> tell, for ``--seconds``;
meanwhile a probe process, every half second, times ``/healthz``, a heartbeat (of a trial of
the study), a tell (of a trial of a ``random`` study on the same server and storage: held
trials of the study itself would be busy points that slow its proposals) and a trial listing.
The same load runs against a baseline checkout (an older commit, checked out with
``git worktree add BEFORE <commit>``) and against this one, in one run, on the same machine,
with the same Python environment, so the numbers compare as ratios.

    python -m benchmarks.service_contention --baseline BEFORE --seconds 90

Prints each run as a JSON line (also appended to ``--out`` when given) and a Markdown table
(percentiles in seconds, and after/before ratios).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SPACE = {f"x{i}": {"type": "float", "low": 0.0, "high": 1.0, "log": False} for i in range(4)}
PROBES = ("healthz", "heartbeat", "tell", "list")


def objective(params: dict[str, float]) -> float:
    """A smooth 4-D bowl with a little ripple (cheap: the evaluation is simulated by sleep)."""
    x = np.array([params[f"x{i}"] for i in range(4)])
    return float(np.sum((x - 0.3) ** 2) + 0.1 * np.sin(5 * x).sum())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


_LAUNCH = """
import json, sys, uvicorn
from abo.service.app import create_app
url, port, options = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
uvicorn.run(create_app(url, **options), host="127.0.0.1", port=port, log_level="warning")
"""


class Served:
    """The service (as ``abo serve`` runs it) from the checkout ``repo`` on a fresh SQLite
    file, with ``create_app`` options."""

    def __init__(self, repo: Path, folder: Path, options: dict[str, Any]) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if k != "ABO_TOKEN"}
        env["PYTHONPATH"] = str(repo)
        cmd = [sys.executable, "-c", _LAUNCH, f"sqlite:///{folder / 'bench.db'}"]
        cmd += [str(self.port), json.dumps(options)]
        self.log = (folder / "server.log").open("wb")
        self.proc = subprocess.Popen(cmd, cwd=repo, env=env, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the server from {repo} did not start")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


def _setup(url: str, n_done: int, n_probe: int, seed: int) -> tuple[int, list[int]]:
    """A qlognei study with ``n_done`` results and one running trial for the probe's
    heartbeats; and a ``random`` study beside it with ``n_probe`` running trials for the
    probe's tells (on the same storage and server; as busy points of the qlognei study they
    would slow its proposals)."""
    api = httpx.Client(base_url=url + "/api/v1", timeout=300)
    body = {"name": "bench", "space": SPACE, "strategy": "qlognei", "seed": seed}
    api.post("/studies", json=body).raise_for_status()
    rng = np.random.default_rng(seed)
    for x in rng.random((n_done, 4)):
        params = {f"x{i}": float(v) for i, v in enumerate(x)}
        api.post("/studies/bench/add", json={"params": params, "value": objective(params)})
    api.post("/studies/bench/enqueue", json={"params": {f"x{i}": 0.5 for i in range(4)}})
    held = api.post("/studies/bench/ask", json={}).json()["trials"][0]["id"]
    body = {"name": "probe", "space": SPACE, "strategy": "random", "seed": seed}
    api.post("/studies", json=body).raise_for_status()
    out: list[dict] = []
    while len(out) < n_probe:
        count = min(64, n_probe - len(out))
        out += api.post("/studies/probe/ask", json={"count": count}).json()["trials"]
    api.close()
    return held, [t["id"] for t in out]


def _probe(url: str, held: int, to_tell: list[int], stop: Any, queue: Any) -> None:
    """Probe process: time each endpoint every half second until ``stop`` is set."""
    api = httpx.Client(base_url=url, timeout=300)
    base = "/api/v1/studies/bench"
    while not stop.is_set():
        for name in PROBES:
            t0 = time.perf_counter()
            try:
                if name == "healthz":
                    ok = api.get("/healthz").status_code == 200
                elif name == "heartbeat":
                    ok = api.post(f"{base}/trials/{held}/heartbeat").status_code == 200
                elif name == "tell":
                    if not to_tell:
                        continue
                    told = f"/api/v1/studies/probe/trials/{to_tell.pop()}/tell"
                    r = api.post(told, json={"value": 1.0})
                    ok = r.status_code == 200
                else:
                    ok = api.get(f"{base}/trials", params={"limit": 10}).status_code == 200
            except httpx.HTTPError:
                ok = False
            queue.put((name, time.perf_counter() - t0, ok))
        stop.wait(0.5)
    api.close()
    queue.put(None)


def _load(url: str, clients: int, seconds: float, evaluation: float) -> dict[str, Any]:
    """``clients`` threads asking and telling for ``seconds``; their ask latencies."""
    asks: list[float] = []
    done_at: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(clients)
    begin = time.monotonic()
    end = begin + seconds

    def client(i: int) -> None:
        with httpx.Client(base_url=url + "/api/v1/studies/bench", timeout=300) as api:
            start.wait()
            k = 0
            while time.monotonic() < end:
                t0 = time.perf_counter()
                try:
                    r = api.post("/ask", json={"client_id": f"c{i}-{k}", "n_workers": clients})
                except httpx.HTTPError as exc:
                    with lock:
                        failures.append(type(exc).__name__)
                    continue
                with lock:
                    if r.status_code == 200:
                        asks.append(time.perf_counter() - t0)
                        done_at.append(time.monotonic() - begin)
                    else:
                        failures.append(str(r.status_code))
                        continue
                k += 1
                trial = r.json()["trials"][0]
                time.sleep(evaluation)
                api.post(f"/trials/{trial['id']}/tell", json={"value": objective(trial["params"])})

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    in_window = sum(1 for t in done_at if t <= seconds)
    return {"asks": asks, "failures": failures, "per_minute": 60 * in_window / seconds}


def _pct(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    a = np.asarray(values)
    return {
        "n": len(values),
        "p50": float(np.percentile(a, 50)),
        "p95": float(np.percentile(a, 95)),
        "max": float(a.max()),
    }


def run(
    repo: Path,
    label: str,
    clients: int,
    seconds: float,
    evaluation: float,
    options: dict[str, Any] | None = None,
) -> dict:
    """One server from ``repo`` under the load; latency percentiles per endpoint."""
    with tempfile.TemporaryDirectory() as tmp:
        served = Served(repo, Path(tmp), options or {})
        try:
            idle = []
            for _ in range(20):
                t0 = time.perf_counter()
                httpx.get(served.url + "/healthz")
                idle.append(time.perf_counter() - t0)
            held, to_tell = _setup(served.url, n_done=20, n_probe=1000, seed=0)
            ctx = mp.get_context("spawn")
            stop, queue = ctx.Event(), ctx.Queue()
            probe = ctx.Process(target=_probe, args=(served.url, held, to_tell, stop, queue))
            probe.start()
            t0 = time.monotonic()
            load = _load(served.url, clients, seconds, evaluation)
            wall = time.monotonic() - t0
            stop.set()
            probes: dict[str, list[float]] = {name: [] for name in PROBES}
            probe_failures = 0
            while (item := queue.get(timeout=600)) is not None:
                probes[item[0]].append(item[1])
                probe_failures += not item[2]
            probe.join(60)
        finally:
            served.stop()
    return {
        "label": label,
        "repo": str(repo),
        "clients": clients,
        "seconds": seconds,
        "wall": wall,
        "eval": evaluation,
        "cpus": os.cpu_count(),
        "idle_healthz": _pct(idle),
        "ask": _pct(load["asks"]),
        "ask_failures": load["failures"],
        "options": options or {},
        "asks_per_minute": load["per_minute"],
        "probe_failures": probe_failures,
        **{name: _pct(values) for name, values in probes.items()},
    }


def table(before: dict, after: dict) -> str:
    """Markdown: each endpoint's p50/p95/max before and after, and the after/before ratios."""
    lines = [
        f"| endpoint | {before['label']} p50 / p95 / max (s) | {after['label']} p50 / p95 / "
        "max (s) | p50 ratio | p95 ratio |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in ("idle_healthz", *PROBES, "ask"):
        b, a = before[name], after[name]
        if not b.get("n") or not a.get("n"):
            continue
        cell = lambda d: f"{d['p50']:.3f} / {d['p95']:.3f} / {d['max']:.3f}"  # noqa: E731
        lines.append(
            f"| {name} | {cell(b)} | {cell(a)} | {a['p50'] / b['p50']:.3g} | "
            f"{a['p95'] / b['p95']:.3g} |"
        )
    for key in ("asks_per_minute",):  # asks answered within the window
        lines.append(
            f"| {key} | {before[key]:.1f} | {after[key]:.1f} | {after[key] / before[key]:.3g} | |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="checkout to compare with")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--eval", type=float, default=1.0, help="simulated evaluation seconds")
    parser.add_argument("--out", type=Path, help="append each run as a JSON line to this file")
    parser.add_argument(
        "--options", type=json.loads, default={}, help="create_app options (JSON) for 'after'"
    )
    parser.add_argument("--skip-baseline", action="store_true", help="only run 'after'")
    args = parser.parse_args(argv)
    results = []
    runs = [(args.baseline.resolve(), "before", {}), (ROOT, "after", args.options)]
    for repo, label, options in runs[args.skip_baseline :]:
        print(f"running {label} ({repo}) ...", flush=True)
        results.append(run(repo, label, args.clients, args.seconds, args.eval, options))
        print(json.dumps(results[-1]), flush=True)
    if args.out is not None:
        with args.out.open("a") as out:
            for r in results:
                out.write(json.dumps(r) + "\n")
    if len(results) == 2:
        print(table(*results))


if __name__ == "__main__":
    main()
