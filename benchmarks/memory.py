"""Peak resident memory of the abo HTTP service holding one large study, and its ask seconds.

A real ``python -m abo.cli.main serve`` runs in a subprocess on a fresh SQLite file. Its resident
set
(``VmRSS`` in ``/proc/<pid>/status``) is read after startup (baseline, no study yet), after
``--observations`` Ackley results on uniformly random points of the unit cube are added over HTTP
with ``study.add``, and after the asks; the peak is the kernel's high-water mark (``VmHWM``), so a
transient spike during a fit is counted even though no sample landed on it. The asks keep 8
trials running: 8 are asked first (untimed: the first fit happens there), then each cycle tells
the oldest running trial and asks one more, and that ask is timed. The service proposes in its own
process; a background refit fits in a child process (``abo.model.fitproc``, started by the first
background refit), whose peak is reported beside the server's (0 when none ran).

    python -m benchmarks memory --observations 5000 --dim 10 --asks 20
    python -m benchmarks memory --observations 2000 --strategy qlognei --max-exact 1000
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np

BUSY = 8
MIB = 1024.0 * 1024.0


@dataclass(frozen=True)
class Memory:
    """One measurement: the server's memory at each stage (bytes) and the timed asks (s)."""

    observations: int
    dim: int
    strategy: str
    max_exact: int
    pid: int
    baseline_rss: int
    data_rss: int
    asks_rss: int
    peak_rss: int
    child_peak_rss: int
    add_seconds: float
    first_asks_seconds: float
    ask_seconds: list[float]

    @property
    def ratio(self) -> float:
        """Peak over baseline: how much the study grew the process."""
        return self.peak_rss / self.baseline_rss


def proc_status(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` of process ``pid`` in bytes, from ``/proc/<pid>/status``."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            number, unit = rest.split()
            if unit != "kB":
                raise ValueError(f"/proc/{pid}/status: unexpected unit {unit!r} for {key}")
            out[key] = int(number) * 1024
    if set(out) != {"VmRSS", "VmHWM"}:
        raise ValueError(f"/proc/{pid}/status: no VmRSS/VmHWM (a kernel thread or gone?)")
    return out


def children_peak(pid: int) -> int:
    """Sum of ``VmHWM`` over the live child processes of ``pid`` (the refit child), in bytes."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                total += proc_status(int(child))["VmHWM"]
            except (OSError, ValueError):
                pass  # exited meanwhile
    return total


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(folder: Path, timeout: float = 90.0) -> tuple[subprocess.Popen[bytes], str]:
    """``abo serve`` on a SQLite file in ``folder``; the process and its URL once ``/healthz``
    answers (the server's log goes to ``folder/server.log``)."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if k != "ABO_TOKEN"}
    cmd = [
        sys.executable,
        "-m",
        "abo.cli.main",
        "serve",
        "--storage",
        f"sqlite:///{folder / 'abo.db'}",
    ]
    cmd += ["--port", str(port), "--log-level", "warning"]
    log = folder / "server.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(url + "/healthz", timeout=1.0).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    stop_server(proc)
    raise RuntimeError(f"server did not start in {timeout:g} s: {log.read_text()[-2000:]}")


def stop_server(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """Terminate the server; kill it if it has not exited after ``timeout`` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)


def _problem(dim: int):  # noqa: ANN202 - benchmarks.problems.Problem, imported lazily
    """Ackley in ``dim`` dimensions on the unit cube (the suites' ``ackley10`` when 10-D)."""
    from botorch.test_functions import Ackley

    from benchmarks.suites import PROBLEMS, _make, get_problem

    name = f"ackley{dim}"
    return get_problem(name) if name in PROBLEMS else _make(name, lambda: Ackley(dim=dim))()


def measure(
    observations: int,
    dim: int = 10,
    asks: int = 20,
    strategy: str = "thompson",
    max_exact: int = 500,
    seed: int = 0,
    progress: bool = False,
) -> Memory:
    """Start a service, fill one study over HTTP, ask and tell; the server's memory and ask
    seconds. The server is stopped before this returns, whatever happens."""
    import abo
    from abo.service.client import Client

    if observations < 1 or dim < 1 or asks < 1:
        raise ValueError("observations, dim and asks must be positive")
    problem = _problem(dim)
    names = [f"x{i}" for i in range(dim)]
    space = abo.Space({name: abo.Float(0.0, 1.0) for name in names})
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory(prefix="abo-memory-") as tmp:
        proc, url = start_server(Path(tmp))
        try:
            baseline = proc_status(proc.pid)["VmRSS"]
            with Client(url, timeout=600.0) as client:
                study = client.create_study(
                    space, name="memory", strategy=strategy, seed=seed, max_exact=max_exact
                )
                t0 = time.perf_counter()
                for i, x in enumerate(rng.random((observations, dim))):
                    study.add(dict(zip(names, map(float, x), strict=True)), problem(x))
                    if progress and (i + 1) % 500 == 0:
                        elapsed = time.perf_counter() - t0
                        print(f"added {i + 1}/{observations} ({elapsed:.0f} s)", file=sys.stderr)
                add_seconds = time.perf_counter() - t0
                data_rss = proc_status(proc.pid)["VmRSS"]

                def value(trial: abo.Trial) -> float:
                    return problem(np.array([trial.params[name] for name in names]))

                t0 = time.perf_counter()
                running = deque(study.ask(n_workers=BUSY) for _ in range(BUSY))
                first_asks = time.perf_counter() - t0
                seconds: list[float] = []
                for _ in range(asks):
                    oldest = running.popleft()
                    study.tell(oldest.id, value(oldest))
                    t0 = time.perf_counter()
                    running.append(study.ask(n_workers=BUSY))
                    seconds.append(time.perf_counter() - t0)
                    if progress:
                        print(f"ask {len(seconds)}/{asks}: {seconds[-1]:.3f} s", file=sys.stderr)
            status = proc_status(proc.pid)
            child_peak = children_peak(proc.pid)
            if proc.poll() is not None:  # the /proc entry must belong to the live server
                raise RuntimeError(f"server exited {proc.returncode} during the measurement")
            return Memory(
                observations=observations,
                dim=dim,
                strategy=strategy,
                max_exact=max_exact,
                pid=proc.pid,
                baseline_rss=baseline,
                data_rss=data_rss,
                asks_rss=status["VmRSS"],
                peak_rss=status["VmHWM"],
                child_peak_rss=child_peak,
                add_seconds=add_seconds,
                first_asks_seconds=first_asks,
                ask_seconds=seconds,
            )
        finally:
            stop_server(proc)


def table(m: Memory) -> str:
    """The Markdown table of one measurement."""
    med, p95 = np.median(m.ask_seconds), np.percentile(m.ask_seconds, 95)
    return "\n".join(
        [
            "| observations | dim | strategy | baseline RSS MiB | RSS after data MiB "
            "| RSS after asks MiB | peak RSS (VmHWM) MiB | peak / baseline "
            "| refit child peak MiB | median ask s | p95 ask s |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
            f"| {m.observations} | {m.dim} | {m.strategy} | {m.baseline_rss / MIB:.1f} "
            f"| {m.data_rss / MIB:.1f} | {m.asks_rss / MIB:.1f} | {m.peak_rss / MIB:.1f} "
            f"| {m.ratio:.2f} | {m.child_peak_rss / MIB:.1f} | {med:.3f} | {p95:.3f} |",
        ]
    )


def main(args: argparse.Namespace) -> int:
    """Print the Markdown table of the service's memory with one study of the given size."""
    import torch

    from benchmarks.gp_vs_optuna import machine

    load_before = os.getloadavg()
    m = measure(
        args.observations,
        dim=args.dim,
        asks=args.asks,
        strategy=args.strategy,
        max_exact=args.max_exact,
        seed=args.seed,
        progress=True,
    )
    load_after = os.getloadavg()
    print(
        f"Memory of `abo serve` (SQLite storage) holding one study: {m.observations} Ackley "
        f"observations in {m.dim}-D added with `study.add` over HTTP "
        f"({m.add_seconds:.0f} s), then {BUSY} trials running; max_exact {m.max_exact}, "
        f"seed {args.seed}. {len(m.ask_seconds)} timed asks, each after telling the oldest "
        f"running trial (the first {BUSY} asks, untimed in the table, took "
        f"{m.first_asks_seconds:.1f} s). RSS from /proc/<pid>/status (VmRSS; peak = VmHWM)."
    )
    print()
    print(table(m))
    print()
    print(f"Machine: {machine()}.")
    print(
        "(The server itself runs with torch's default thread count, "
        f"{torch.get_num_threads()} on this machine.)"
    )
    print(
        "Load average (1/5/15 min): "
        f"{' '.join(f'{v:.2f}' for v in load_before)} before, "
        f"{' '.join(f'{v:.2f}' for v in load_after)} after."
    )
    return 0
