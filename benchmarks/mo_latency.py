"""Seconds per ``ask()`` of the default multi-objective strategy beside Optuna's ``GPSampler``.

The setting: DTLZ2 (6-D, 2 objectives, ``benchmarks/mo_problems.py``), ``--observations``
uniform random results added to the study (300 by default), 8 trials left running (asked,
never told: busy points), then ``--repeats`` timed asks, each followed by the tell of the
trial it proposed (one more completion before the next ask, as in an asynchronous loop).

* ``auto``: ``abo.create_study(space, outcomes={"f1": "minimize", "f2": "minimize"},
  strategy="auto", refit="background")`` (``auto`` is ``qlognehvi`` for several
  objectives); with background refits an ask conditions the latest hyperparameters on the
  data while a refit runs in a thread of the same process, as in the HTTP service;
* ``optuna-gp``: ``optuna.samplers.GPSampler`` on a two-objective Optuna study given the same
  data, the same 8 RUNNING trials and the same ask-then-tell cycle (qLogEHVI over the running
  trials).

Each measures in its own spawned process, one after the other in the same invocation, under a
cap of ``--cap`` seconds of asking; the untimed setup (adding the data, the busy asks, the
first fit) has ``--setup`` seconds. Output: a Markdown table (median and 95th percentile, the
ratio of each to ``GPSampler``'s) and the same as JSON with ``--json``, with the machine.

    python -m benchmarks mo-latency [--observations 300] [--repeats 20] [--json out.json]

Example:
    >>> ratio(0.5, 2.0)
    '0.25x'
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import time
from typing import Any

import numpy as np

from benchmarks.latency import BUSY, timed_asks

PROBLEM = "dtlz2"
METHODS = ("auto", "optuna-gp")


def _abo(n: int, repeats: int, seed: int, cap: float, queue: Any) -> None:
    """Worker: abo's default strategy of several objectives with background refits."""
    import abo
    from benchmarks.mo_methods import outcome_names
    from benchmarks.mo_problems import get_mo_problem

    problem = get_mo_problem(PROBLEM)
    names = [f"x{i}" for i in range(problem.dim)]
    outcomes = outcome_names(problem.num_objectives)
    space = abo.Space({name: abo.Float(0.0, 1.0) for name in names})
    study = abo.create_study(
        space,
        outcomes={o: "minimize" for o in outcomes},
        strategy="auto",
        seed=seed,
        n_initial=1,
        noise="deterministic",
        refit="background",
    )

    def values(x: np.ndarray) -> dict[str, float]:
        return dict(zip(outcomes, map(float, problem(x)), strict=True))

    for x in np.random.default_rng(seed).random((n, problem.dim)):
        study.add(dict(zip(names, map(float, x), strict=True)), values(x))
    timed_asks(study, repeats, cap, queue, values, names)


def _optuna(n: int, repeats: int, seed: int, cap: float, queue: Any) -> None:
    """Worker: Optuna's ``GPSampler`` on the same data, busy trials and timed cycle."""
    import optuna

    from benchmarks.mo_problems import get_mo_problem

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    problem = get_mo_problem(PROBLEM)
    names = [f"x{i}" for i in range(problem.dim)]
    dists = {name: optuna.distributions.FloatDistribution(0.0, 1.0) for name in names}
    sampler = optuna.samplers.GPSampler(seed=seed, n_startup_trials=1)
    study = optuna.create_study(sampler=sampler, directions=["minimize"] * problem.num_objectives)
    study.add_trials(
        [
            optuna.trial.create_trial(
                params=dict(zip(names, map(float, x), strict=True)),
                distributions=dists,
                values=[float(v) for v in problem(x)],
            )
            for x in np.random.default_rng(seed).random((n, problem.dim))
        ]
    )
    for _ in range(BUSY):
        study.ask(dists)  # running, never told: busy points for the sampler
    queue.put("ready")
    started = time.perf_counter()
    for _ in range(repeats):
        t0 = time.perf_counter()
        trial = study.ask(dists)  # fixed distributions: the sampler proposes here
        queue.put(time.perf_counter() - t0)
        x = np.array([trial.params[name] for name in names])
        study.tell(trial, [float(v) for v in problem(x)])
        if time.perf_counter() - started > cap:
            break
    queue.put(None)


def _worker(method: str, n: int, repeats: int, seed: int, cap: float, queue: Any) -> None:
    import warnings

    import torch

    warnings.simplefilter("ignore")
    queue.put(("threads", torch.get_num_threads()))
    (_abo if method == "auto" else _optuna)(n, repeats, seed, cap, queue)


def measure(
    method: str, n: int, repeats: int, seed: int, cap: float, setup: float = 120.0
) -> dict[str, Any]:
    """The timed asks of ``method`` (``"auto"`` or ``"optuna-gp"``) in a fresh process."""
    if method not in METHODS:
        raise ValueError(f"method: expected one of {', '.join(METHODS)}, got {method!r}")
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_worker, args=(method, n, repeats, seed, cap, queue))
    proc.start()
    times: list[float] = []
    threads, finished = None, False
    deadline = time.monotonic() + cap + setup
    while time.monotonic() < deadline:
        try:
            item = queue.get(timeout=max(0.1, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001 - queue.Empty: out of time
            break
        if isinstance(item, tuple):
            threads = item[1]
        elif item == "ready":
            deadline = time.monotonic() + cap
        elif item is None:
            finished = True
            break
        else:
            times.append(float(item))
    if proc.is_alive():
        proc.terminate()
    proc.join()
    return {
        "method": method,
        "asks": len(times),
        "capped": not finished or len(times) < repeats,
        "median_s": float(np.median(times)) if times else None,
        "p95_s": float(np.percentile(times, 95)) if times else None,
        "torch_threads": threads,
        "seconds": [round(t, 4) for t in times],
    }


def ratio(value: float | None, bar: float | None) -> str:
    """``value / bar`` written as ``"0.25x"`` (``"-"`` when either is missing)."""
    if value is None or not bar:
        return "-"
    return f"{value / bar:.2f}x"


def table(rows: list[dict[str, Any]], n: int) -> str:
    """The Markdown table of ``rows`` (one per method), ratios against ``optuna-gp``."""
    bar = next((r for r in rows if r["method"] == "optuna-gp"), None)
    lines = [
        f"`ask()` seconds, DTLZ2 (6-D, 2 objectives), {n} observations, {BUSY} running "
        'trials, one completion before each ask; abo: `strategy="auto"` (qlognehvi), '
        '`refit="background"`.',
        "",
        "| method | asks | median s | p95 s | median / GPSampler | p95 / GPSampler |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        med, p95 = r["median_s"], r["p95_s"]
        lines.append(
            f"| {r['method']} | {r['asks']}{' (capped)' if r['capped'] else ''} | "
            f"{'-' if med is None else f'{med:.3f}'} | {'-' if p95 is None else f'{p95:.3f}'} | "
            f"{ratio(med, bar and bar['median_s'])} | {ratio(p95, bar and bar['p95_s'])} |"
        )
    return "\n".join(lines)


def machine() -> str:
    """Where the numbers came from."""
    import optuna
    import torch

    return (
        f"{platform.platform()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, torch {torch.__version__}, "
        f"Optuna {optuna.__version__}"
    )


def main(args: argparse.Namespace) -> int:
    """Measure both methods and print the table (and write JSON with ``--json``)."""
    rows = [
        measure(m, args.observations, args.repeats, args.seed, args.cap, args.setup)
        for m in METHODS
    ]
    where = machine()
    threads = ", ".join(f"{r['method']} {r['torch_threads']}" for r in rows)
    print(table(rows, args.observations))
    print()
    print(f"Machine: {where}; torch threads: {threads}.")
    if args.json:
        out = {"observations": args.observations, "busy": BUSY, "problem": PROBLEM,
               "machine": where, "rows": rows}  # fmt: skip
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0
