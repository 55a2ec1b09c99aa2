"""A long campaign: thousands of evaluations of one problem with ``--busy`` workers always
running, and what the default's regret and ask latency do as the observations grow.

One in-memory study per run is asked and told as an asynchronous driver would: ``--busy``
trials always run; their simulated durations (exponential, mean 1, fixed by the seed) decide
which one finishes next, and each result is told before the next ask (so every ask sees the
others busy). The study's own defaults choose everything (initial design, strategy, refits,
the GP's subset above ``max_exact``); ``--max-exact`` overrides that one setting, to compare
the default's 500-point subset with an exact GP on every observation while one is affordable,
and ``--strategy`` the strategy (``trust_region``: the default's search held to a box around
the incumbent).
After every ``--window`` results it prints one JSON line: the observations so far, the best
value's regret, and the window's ask seconds (median, 95th percentile, maximum; a
synchronous refit runs inside the ask that needs it, so it shows in the maximum).

``--latency N`` measures only the asks' cost at ``N`` observations, in minutes instead of
hours: ``N`` results at Sobol points are added to a fresh study, ``--busy`` trials are
asked, then ``--asks`` cycles each tell the oldest busy trial and ask again; it prints their
median and 95th percentile.

    python -m benchmarks.long_campaign --problem ackley10 --budget 10000 --busy 64 --seeds 0
    python -m benchmarks.long_campaign --problem ackley10 --budget 2000 --busy 64 --seeds 0 \
        --max-exact 2000
    python -m benchmarks.long_campaign --problem ackley10 --latency 10000 --busy 64 --asks 30
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import time
from typing import Any

import numpy as np

import abo
from benchmarks.simulator import sample_durations
from benchmarks.suites import get_problem


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(
    problem_name: str,
    budget: int,
    busy: int,
    seed: int,
    window: int,
    max_exact: int | None,
    strategy: str | None = None,
    strategy_options: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One campaign; one record per ``window`` results (printed as they come). ``strategy``:
    the study's (``None``: its default), with ``strategy_options``."""
    problem = get_problem(problem_name)
    names = [f"x{i:02d}" for i in range(problem.dim)]
    options: dict[str, Any] = {} if max_exact is None else {"max_exact": max_exact}
    if strategy is not None:
        options["strategy"] = strategy
    if strategy_options:
        options["strategy_options"] = strategy_options
    study = abo.create_study(
        abo.Space({n: abo.Float(0.0, 1.0) for n in names}),
        seed=seed,
        noise="deterministic",
        device="cpu",
        **options,
    )
    durations = iter(sample_durations("exponential", budget, np.random.default_rng([seed, 2])))
    running: list[tuple[float, int, abo.Trial]] = []  # (finish time, order, trial)
    clock, best, asks, records = 0.0, math.inf, [], []
    started = time.perf_counter()
    asked = told = 0
    while asked < budget or running:
        while len(running) < busy and asked < budget:
            t0 = time.perf_counter()
            trial = study.ask(n_workers=busy)
            asks.append(time.perf_counter() - t0)
            heapq.heappush(running, (clock + next(durations), asked, trial))
            asked += 1
        clock, _, trial = heapq.heappop(running)
        x = np.array([trial.params[n] for n in names])
        value = float(problem(x))
        study.tell(trial.id, value)
        best = min(best, value)
        told += 1
        if told % window == 0 or (asked >= budget and not running):
            record = {
                "problem": problem_name, "dim": problem.dim, "busy": busy, "seed": seed,
                "max_exact": max_exact, "strategy": strategy,
                "strategy_options": strategy_options or {}, "observations": told,
                "regret": best - problem.optimum,
                "ask_p50": _quantile(asks, 0.5), "ask_p95": _quantile(asks, 0.95),
                "ask_max": max(asks), "asks": len(asks),
                "elapsed_s": round(time.perf_counter() - started, 1),
                "loadavg": round(os.getloadavg()[0], 2),
            }  # fmt: skip
            print(json.dumps(record), flush=True)
            records.append(record)
            asks = []
    return records


def latency(
    problem_name: str,
    n: int,
    busy: int,
    asks: int,
    seed: int,
    strategy_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Ask seconds at ``n`` observations with ``busy`` trials running (see the module's
    docstring); ``strategy_options``: the default strategy's."""
    from scipy.stats import qmc

    problem = get_problem(problem_name)
    names = [f"x{i:02d}" for i in range(problem.dim)]
    study = abo.create_study(
        abo.Space({k: abo.Float(0.0, 1.0) for k in names}),
        seed=seed,
        noise="deterministic",
        device="cpu",
        strategy_options=strategy_options or {},
    )
    points = qmc.Sobol(problem.dim, seed=seed).random_base2(max(0, (n - 1).bit_length()))[:n]
    for x in points:
        study.add(dict(zip(names, map(float, x), strict=True)), problem(x))
    running = [study.ask(n_workers=busy) for _ in range(busy)]  # the first refits the GP
    seconds = []
    for _ in range(asks):
        trial = running.pop(0)
        study.tell(trial.id, problem(np.array([trial.params[k] for k in names])))
        t0 = time.perf_counter()
        running.append(study.ask(n_workers=busy))
        seconds.append(time.perf_counter() - t0)
    return {
        "problem": problem_name, "observations": n, "busy": busy, "asks": asks,
        "strategy_options": strategy_options or {},
        "ask_p50": _quantile(seconds, 0.5), "ask_p95": _quantile(seconds, 0.95),
        "loadavg": round(os.getloadavg()[0], 2),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problem", default="ackley10")
    parser.add_argument("--budget", type=int, default=5000)
    parser.add_argument("--busy", type=int, default=64)
    parser.add_argument("--window", type=int, default=250)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--max-exact", type=int, default=None)
    parser.add_argument("--strategy", default=None, help="the study's strategy (default: its)")
    parser.add_argument("--options", type=json.loads, default=None, help="strategy options, JSON")
    parser.add_argument("--latency", type=int, default=None, help="only asks at N observations")
    parser.add_argument("--asks", type=int, default=30, help="asks timed with --latency")
    args = parser.parse_args(argv)
    if args.latency is not None:
        for seed in args.seeds:
            result = latency(args.problem, args.latency, args.busy, args.asks, seed, args.options)
            print(json.dumps(result), flush=True)
        return 0
    for seed in args.seeds:
        run(
            args.problem,
            args.budget,
            args.busy,
            seed,
            args.window,
            args.max_exact,
            args.strategy,
            args.options,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
