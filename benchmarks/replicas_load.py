"""Load on 1, 2 and 4 service replicas over one PostgreSQL, beside Optuna on the same database.

Each run starts ``R`` replicas (``abo serve`` processes of this checkout, one port each) on
``--storage``, creates a fresh study of 6 parameters (``random``, or the default strategy),
and drives it with ``C`` clients (``--processes`` processes of threads) for ``--seconds``:
each client loops ask (a fresh ``client_id``) -> an evaluation of ``--eval`` seconds -> tell,
sending each request to the next replica in turn (as a round-robin load balancer does).
Beside it, in the same run and on the same database, Optuna with ``RDBStorage``
(``RandomSampler`` and ``TPESampler``) is driven the same way: the same processes and threads,
each looping ``study.ask()`` -> evaluation -> ``study.tell()``.

    python -m benchmarks.replicas_load --storage postgresql://postgres@127.0.0.1/test \\
        --clients 64 --replicas 1 2 4 --strategies random default --optuna

Reported per run: asks and tells completed a second (``ops``: ask+tell pairs), ask latency
p50/p95, error answers (a 503 is retried and counted), and trial ids handed out twice. Every
run uses its own study names, so nothing is dropped from the database. Prints JSON lines
(appended to ``--out``) and a Markdown table.
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
import uuid
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DIMS = 6


def objective(params: dict[str, float]) -> float:
    x = np.array([params[f"x{i}"] for i in range(DIMS)])
    return float(np.sum((x - 0.3) ** 2) + 0.1 * np.sin(5 * x).sum())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Replica:
    """``abo serve`` of this checkout on ``storage``."""

    def __init__(self, storage: str, folder: Path, k: int) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if k != "ABO_TOKEN"}
        env["PYTHONPATH"] = str(ROOT)
        cmd = [sys.executable, "-m", "abo.cli.main", "serve", "--storage", storage]
        cmd += ["--port", str(self.port), "--log-level", "warning"]
        self.log = (folder / f"replica-{k}.log").open("wb")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self.log, stderr=self.log)

    def wait(self) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.2)
        raise RuntimeError(f"replica on {self.port} did not start")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


def _abo_clients(
    urls: list[str], study: str, first: int, threads: int, total: int, job: dict, queue: Any
) -> None:
    """One client process: ``threads`` clients on the replicas at ``urls``."""

    def client(i: int) -> dict:
        out: dict[str, Any] = {"asks": [], "ids": [], "errors": 0, "pairs": 0}
        apis = [httpx.Client(base_url=u + f"/api/v1/studies/{study}", timeout=300) for u in urls]
        turn = i
        begin = time.monotonic()
        while time.monotonic() - begin < job["seconds"]:
            api = apis[turn % len(apis)]
            turn += 1
            t0 = time.perf_counter()
            try:
                r = api.post("/ask", json={"client_id": uuid.uuid4().hex, "n_workers": total})
            except httpx.HTTPError:
                out["errors"] += 1
                continue
            if r.status_code != 200:
                out["errors"] += 1
                time.sleep(float(r.headers.get("Retry-After", "0.1")))
                continue
            out["asks"].append(time.perf_counter() - t0)
            trial = r.json()["trials"][0]
            out["ids"].append(trial["id"])
            time.sleep(job["eval"])
            body = {"value": objective(trial["params"])}
            api = apis[turn % len(apis)]
            turn += 1
            for _ in range(20):
                try:
                    if api.post(f"/trials/{trial['id']}/tell", json=body).status_code == 200:
                        out["pairs"] += 1
                        break
                except httpx.HTTPError:
                    pass
                out["errors"] += 1
        for api in apis:
            api.close()
        return out

    _threads(client, first, threads, queue)


def _optuna_clients(
    storage: str, study: str, first: int, threads: int, total: int, job: dict, queue: Any
) -> None:
    """One client process: ``threads`` clients asking and telling one Optuna study."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # connections per process: PostgreSQL allows 100 in all (16 processes of 10 each failed
    # most of Optuna's requests at 256 clients; abo's replicas pool theirs)
    pool = max(1, min(threads, 10, 90 // job["processes"]))
    rdb = optuna.storages.RDBStorage(
        storage, engine_kwargs={"pool_size": pool, "max_overflow": 0, "pool_timeout": 300}
    )
    sampler = optuna.samplers.TPESampler() if job["sampler"] == "tpe" else None
    shared = optuna.load_study(study_name=study, storage=rdb, sampler=sampler)
    dists = {f"x{i}": optuna.distributions.FloatDistribution(0.0, 1.0) for i in range(DIMS)}

    def client(_i: int) -> dict:
        out: dict[str, Any] = {"asks": [], "ids": [], "errors": 0, "pairs": 0}
        begin = time.monotonic()
        while time.monotonic() - begin < job["seconds"]:
            t0 = time.perf_counter()
            try:
                trial = shared.ask(dists)
            except Exception:  # noqa: BLE001 - counted: a benchmark reports, never stops
                out["errors"] += 1
                continue
            out["asks"].append(time.perf_counter() - t0)
            out["ids"].append(trial._trial_id)
            time.sleep(job["eval"])
            try:
                shared.tell(trial, objective(trial.params))
                out["pairs"] += 1
            except Exception:  # noqa: BLE001
                out["errors"] += 1
        return out

    _threads(client, first, threads, queue)


def _threads(client: Any, first: int, threads: int, queue: Any) -> None:
    results: list[dict] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        r = client(first + i)
        with lock:
            results.append(r)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    queue.put(results)


def _drive(target: Any, args: tuple, clients: int, processes: int, job: dict) -> dict:
    """``clients`` clients in ``processes`` processes running ``target``; merged results."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    per = [clients // processes + (1 if k < clients % processes else 0) for k in range(processes)]
    procs, first = [], 0
    for n in per:
        p = ctx.Process(target=target, args=(*args, first, n, clients, job, queue))
        p.start()
        procs.append(p)
        first += n
    merged: dict[str, Any] = {"asks": [], "ids": [], "errors": 0, "pairs": 0}
    for _ in procs:
        for r in queue.get(timeout=job["seconds"] + 900):
            merged["asks"] += r["asks"]
            merged["ids"] += r["ids"]
            merged["errors"] += r["errors"]
            merged["pairs"] += r["pairs"]
    for p in procs:
        p.join()
    asks = np.asarray(merged["asks"]) if merged["asks"] else np.asarray([np.nan])
    return {
        "ops": merged["pairs"] / job["seconds"],
        "ask_p50": float(np.percentile(asks, 50)),
        "ask_p95": float(np.percentile(asks, 95)),
        "errors": merged["errors"],
        "duplicate_ids": len(merged["ids"]) - len(set(merged["ids"])),
        "asks": len(merged["asks"]),
    }


def run_abo(storage: str, replicas: int, strategy: str, clients: int, args: Any) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="abo-replicas-"))
    servers = [Replica(storage, folder, k) for k in range(replicas)]
    try:
        for s in servers:
            s.wait()
        name = f"load-{uuid.uuid4().hex[:8]}"
        space = {f"x{i}": {"type": "float", "low": 0.0, "high": 1.0} for i in range(DIMS)}
        body: dict[str, Any] = {"name": name, "space": space, "seed": 0}
        if strategy != "default":
            body["strategy"] = strategy
        httpx.post(servers[0].url + "/api/v1/studies", json=body, timeout=60).raise_for_status()
        job = {"seconds": args.seconds, "eval": args.eval}
        urls = [s.url for s in servers]
        out = _drive(_abo_clients, (urls, name), clients, args.processes, job)
        rounds = [httpx.get(s.url + "/api/v1/replica", timeout=60).json() for s in servers]
        out["rounds_per_replica"] = [r["rounds"] for r in rounds]
    finally:
        for s in servers:
            s.stop()
    return {"system": "abo", "replicas": replicas, "strategy": strategy, **out}


def run_optuna(storage: str, sampler: str, clients: int, args: Any) -> dict:
    import optuna

    name = f"optuna-{uuid.uuid4().hex[:8]}"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    optuna.create_study(study_name=name, storage=storage)
    job = {"seconds": args.seconds, "eval": args.eval, "sampler": sampler,
           "processes": args.processes}  # fmt: skip
    out = _drive(_optuna_clients, (storage, name), clients, args.processes, job)
    return {"system": "optuna", "replicas": 0, "strategy": sampler, **out}


def table(rows: list[dict]) -> str:
    lines = [
        "| system | strategy | replicas | clients | ops/s | ask p50 (s) | ask p95 (s) | errors "
        "| duplicate ids |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['system']} | {r['strategy']} | {r['replicas'] or '-'} | {r['clients']} "
            f"| {r['ops']:.1f} | {r['ask_p50']:.3f} | {r['ask_p95']:.3f} | {r['errors']} "
            f"| {r['duplicate_ids']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--storage", required=True, help="PostgreSQL URL shared by all runs")
    p.add_argument("--clients", type=int, nargs="+", default=[64])
    p.add_argument("--replicas", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--strategies", nargs="+", default=["random", "default"])
    p.add_argument("--optuna", action="store_true", help="Optuna random and TPE beside")
    p.add_argument("--processes", type=int, default=8, help="client processes")
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--eval", type=float, default=0.0, help="seconds per evaluation")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    rows = []
    machine = f"{os.cpu_count()} CPUs"
    for clients in args.clients:
        runs = [
            (run_abo, (args.storage, r, s, clients, args))
            for s in args.strategies
            for r in args.replicas
        ]
        if args.optuna:
            runs += [(run_optuna, (args.storage, s, clients, args)) for s in ("random", "tpe")]
        for fn, fargs in runs:
            row = {**fn(*fargs), "clients": clients, "machine": machine}
            row["seconds"], row["eval"] = args.seconds, args.eval
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.out is not None:
                with args.out.open("a") as f:
                    f.write(json.dumps(row) + "\n")
    print(table(rows))


if __name__ == "__main__":
    main()
