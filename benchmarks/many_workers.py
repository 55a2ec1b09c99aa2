"""Hundreds of workers: does ``study.optimize`` with its defaults keep them busy?

A local Dask cluster of 4 worker processes with ``workers / 4`` threads each evaluates an
objective that *sleeps* about ``--duration`` seconds (0.8-1.2 times it, a deterministic
function of the parameters) and returns a quadratic of 6 parameters: the threads cost no
CPU, so the driver (this process) has the machine's cores to itself, as a driver beside
hundreds of remote workers would. Everything else is the default path: ``create_study``
with no options, ``optimize`` with its own lookahead, refit and batching.

Per worker count, reported:

* utilization at ``n`` completed: busy worker-seconds from the start to the moment the
  ``n``-th trial completes, over workers x that time (``n = generations x workers``; the run
  goes on ``workers`` more trials so that the forced drain of a finite budget is outside the
  window; the ramp-up with its initial design is inside it);
* steady utilization: the same over the last half of that window (the study already holds
  thousands of observations there);
* the proposer's points per second against the observations it saw (from each trial's
  recorded proposal seconds): what caps the workers one driver can feed, which is
  ``points per second x mean duration``.

    python -m benchmarks many-workers --workers 64 256 1024 --duration 10 --generations 4
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.loop_utilization import window_utilization

DIM = 6
DURATION = 10.0
OBSERVATION_BINS = (0, 250, 500, 1000, 2000, 4000, 8000, 16000)


def make_objective(duration: float) -> Any:
    """Sleep 0.8-1.2 x ``duration`` seconds (set by the parameters), then a quadratic."""

    def objective(params: dict[str, Any]) -> float:
        x = np.array([params[f"x{i}"] for i in range(DIM)])
        share = float(np.mod(997.0 * np.sum(x), 1.0))  # about uniform on [0, 1)
        time.sleep(duration * (0.8 + 0.4 * share))
        return float(np.sum((x - 0.3) ** 2))

    return objective


def points_per_second(trials: Sequence[Any]) -> list[dict[str, float]]:
    """The proposer's points per second by the observations it saw when proposing."""
    rows = []
    for lo, hi in zip(OBSERVATION_BINS, OBSERVATION_BINS[1:], strict=False):
        seconds = [
            float(t.proposal.seconds)
            for t in trials
            if t.proposal is not None
            and t.proposal.seconds is not None
            and t.proposal.n_observations is not None
            and lo <= t.proposal.n_observations < hi
        ]
        if len(seconds) >= 8 and sum(seconds) > 0:
            rows.append({"from": lo, "to": hi, "points": len(seconds),
                         "points_per_s": len(seconds) / sum(seconds)})  # fmt: skip
    return rows


def measure(workers: int, duration: float, generations: int, seed: int) -> dict[str, Any]:
    """One default study on ``workers`` sleeping threads; its utilization figures."""
    import warnings

    import abo
    from abo.executors import DaskExecutor

    warnings.simplefilter("ignore")
    space = abo.Space({f"x{i}": abo.Float(0.0, 1.0) for i in range(DIM)})
    study = abo.create_study(space, seed=seed)
    processes = 4 if workers % 4 == 0 else 1
    executor = DaskExecutor(n_workers=processes, threads_per_worker=workers // processes)
    executor.client.wait_for_workers(processes)
    n = generations * workers
    started = time.time()
    try:
        result = study.optimize(make_objective(duration), n_trials=n + workers, executor=executor)
    finally:
        executor.close()
    trials = study.trials
    finishes = sorted(t.info["finished"] for t in trials if "finished" in t.info)
    end = finishes[n - 1] if len(finishes) >= n else float("nan")
    proposing = sum(float(t.proposal.seconds or 0.0) for t in trials if t.proposal)
    return {
        "workers": result.n_workers,
        "duration_s": duration,
        "trials": result.n_done,
        "n": n,
        "makespan_s": result.elapsed,
        "utilization_at_n": window_utilization(trials, result.n_workers, started, end),
        "steady_utilization": window_utilization(
            trials, result.n_workers, started + (end - started) / 2, end
        ),
        "whole_run": result.utilization,
        "driver_busy": proposing / result.elapsed if result.elapsed else 0.0,
        "points_per_s": points_per_second(trials),
        "best": float(result.best.value) if result.best else float("nan"),
    }


def main(args: argparse.Namespace) -> int:
    """Each worker count in turn; a Markdown table, and the rows as JSON lines."""
    from benchmarks.gp_vs_optuna import machine

    if any(w < 1 for w in args.counts) or args.duration <= 0 or args.generations < 2:
        raise ValueError("--workers, --duration: expected positive; --generations: at least 2")
    rows = []
    for workers in args.counts:
        row = measure(workers, args.duration, args.generations, args.seed)
        row["machine"] = machine()
        rows.append(row)
        if args.json:
            with open(args.json, "a") as out:
                out.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)
    print()
    print(f"`study.optimize` with the defaults, objective sleeping {args.duration:g} s "
          f"(0.8-1.2x) on Dask worker threads, {args.generations} x workers trials "
          "+ workers.")  # fmt: skip
    print()
    print("| workers | utilization at n | steady (2nd half) | whole run | driver busy | "
          "points/s (observations) |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for r in rows:
        rates = ", ".join(f"{p['points_per_s']:.0f} ({p['from']}-{p['to']})"
                          for p in r["points_per_s"])  # fmt: skip
        print(f"| {r['workers']} | {r['utilization_at_n']:.3f} | "
              f"{r['steady_utilization']:.3f} | {r['whole_run']:.3f} | "
              f"{r['driver_busy']:.3f} | {rates} |")  # fmt: skip
    print()
    print(f"Machine: {machine()}.")
    return 0


def add_parser(sub: Any) -> None:
    """``python -m benchmarks many-workers``."""
    p = sub.add_parser("many-workers", help="optimize's utilization at hundreds of workers")
    p.add_argument("--workers", dest="counts", type=int, nargs="+", default=[64, 256, 1024])
    p.add_argument("--duration", type=float, default=DURATION, help="mean evaluation seconds")
    p.add_argument("--generations", type=int, default=4, help="trials = this x workers")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also append the rows to this JSON file")
    p.set_defaults(func=main)
