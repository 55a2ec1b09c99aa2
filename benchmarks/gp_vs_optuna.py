"""abo's ``qlognei`` and ``believer`` against Optuna's ``GPSampler`` (random search as a floor).

Branin and Hartmann-6, ``k = 4`` asynchronous workers, half-normal durations, common random
numbers across methods (see ``benchmarks/simulator.py``). Prints a Markdown table: median and
interquartile range of log10 simple regret at the final budget, each method against
``optuna-gp`` (Wilcoxon signed-rank by seed, Holm-corrected, as in the report), and the median
real seconds per proposal, with the machine it ran on.

    python -m benchmarks.gp_vs_optuna --seeds 10
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from benchmarks.report import versus

DEFAULT_BUDGETS = {"branin": 40, "hartmann6": 70}
DEFAULT_METHODS = ("qlognei", "believer", "optuna-gp", "random")
REGRET_FLOOR = 1e-12  # log10 of an exact hit would be -inf


def _one(args: tuple[str, str, int, int, int, str]) -> dict[str, object]:
    """One simulated run, in its own process: a summary row."""
    import torch

    torch.set_num_threads(1)  # one core per run, as for Optuna; runs parallelise across seeds
    from benchmarks.problems import get_problem
    from benchmarks.simulator import simulate

    problem, method, k, budget, seed, durations = args
    t0 = time.perf_counter()
    run = simulate(get_problem(problem), method, k=k, budget=budget, seed=seed, durations=durations)
    return {
        "problem": problem,
        "method": method,
        "seed": seed,
        "budget": budget,
        "log10_regret": float(np.log10(max(run.final_regret, REGRET_FLOOR))),
        "log10_regret_half": float(np.log10(max(run.regret_at(budget // 2), REGRET_FLOOR))),
        "median_proposal_s": float(np.median(run.proposal_seconds)),
        "wall_s": time.perf_counter() - t0,
    }


def paired_timing(problems: Sequence[str], methods: Sequence[str], rounds: int, k: int) -> str:
    """Median seconds per proposal, methods run back to back in one process (seed 0).

    On a shared machine the load drifts over a long benchmark, so the table's timings can mix
    quiet and busy periods; alternating the methods in one process compares them under the
    same load.
    """
    import torch

    torch.set_num_threads(1)
    from benchmarks.problems import get_problem
    from benchmarks.simulator import simulate

    seconds: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        for problem in problems:
            for method in methods:
                run = simulate(get_problem(problem), method, k, DEFAULT_BUDGETS[problem], 0)
                seconds.setdefault((problem, method), []).extend(run.proposal_seconds)
    out = [
        f"Paired timing: methods alternated in one process, seed 0, {rounds} round(s).",
        "",
        "| problem | method | median s / proposal | 90th percentile |",
        "|---|---|---|---|",
    ]
    for (problem, method), secs in seconds.items():
        out.append(
            f"| {problem} | {method} | {np.median(secs):.3f} | {np.percentile(secs, 90):.3f} |"
        )
    return "\n".join(out)


def machine() -> str:
    """Where the numbers came from."""
    import torch

    return (
        f"{platform.platform()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, torch {torch.__version__}, "
        "1 torch thread per run"
    )


def table(rows: Sequence[dict[str, object]], k: int, durations: str) -> str:
    """The Markdown summary of ``rows`` (one per run)."""
    out = [
        f"k = {k} asynchronous workers, {durations} durations (mean 1), "
        f"{len({r['seed'] for r in rows})} seeds; regret = best observed f - f*.",
        "",
        "| problem | budget | method | median log10 regret | IQR | log10 regret at budget/2 "
        "| vs optuna-gp | median s / proposal |",
        "|---|---|---|---|---|---|---|---|",
    ]
    keys = dict.fromkeys((r["problem"], r["method"]) for r in rows)
    marks: dict[str, dict[str, str]] = {}
    for problem in dict.fromkeys(r["problem"] for r in rows):
        values: dict[str, dict[int, float]] = {}
        for r in rows:
            if r["problem"] == problem:
                values.setdefault(str(r["method"]), {})[int(r["seed"])] = float(r["log10_regret"])
        marks[str(problem)] = versus(values, bar="optuna-gp")
    for problem, method in keys:
        sel = [r for r in rows if r["problem"] == problem and r["method"] == method]
        lr = np.array([r["log10_regret"] for r in sel])
        half = np.median([r["log10_regret_half"] for r in sel])
        q1, q3 = np.percentile(lr, [25, 75])
        secs = np.median([r["median_proposal_s"] for r in sel])
        out.append(
            f"| {problem} | {sel[0]['budget']} | {method} | {np.median(lr):.2f} | "
            f"[{q1:.2f}, {q3:.2f}] | {half:.2f} | {marks[str(problem)][str(method)]} | {secs:.3f} |"
        )
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 per cell")
    parser.add_argument("--budget", type=int, default=None, help="one budget for all problems")
    parser.add_argument("--problems", nargs="+", default=list(DEFAULT_BUDGETS))
    parser.add_argument("--methods", nargs="+", default=list(DEFAULT_METHODS))
    parser.add_argument("--k", type=int, default=4, help="asynchronous workers")
    parser.add_argument("--durations", default="halfnormal")
    parser.add_argument("--jobs", type=int, default=1, help="runs in parallel (processes)")
    parser.add_argument("--json", default=None, help="also write every run's row here")
    parser.add_argument(
        "--paired-timing", type=int, default=0, metavar="R", help="only time the methods (R rounds)"
    )
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.jobs < 1 or args.k < 1:
        parser.error("--seeds, --jobs and --k must be positive")
    unknown = set(args.problems) - set(DEFAULT_BUDGETS)
    if unknown:
        parser.error(f"--problems: unknown {sorted(unknown)}; choose from {list(DEFAULT_BUDGETS)}")

    if args.paired_timing:
        print(paired_timing(args.problems, args.methods, args.paired_timing, args.k))
        print()
        print(f"Machine: {machine()}.")
        return 0
    jobs = [
        (p, m, args.k, args.budget or DEFAULT_BUDGETS[p], s, args.durations)
        for p in args.problems
        for m in args.methods
        for s in range(args.seeds)
    ]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        rows = []
        for row in pool.map(_one, jobs):
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "args": vars(args), "rows": rows}, f, indent=1)
    print(table(rows, args.k, args.durations))
    print()
    print(f"Machine: {machine()}. Total wall time {time.perf_counter() - t0:.0f} s.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
