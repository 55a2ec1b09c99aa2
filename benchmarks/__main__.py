"""``python -m benchmarks``, from the repository root: run suites, report them, time proposals.

python -m benchmarks run smoke --out results/smoke.jsonl --processes 2
python -m benchmarks run full --shard 0/4 --out results/full-0.jsonl   # one of 4 machines
python -m benchmarks report results/*.jsonl --out docs/benchmarks
python -m benchmarks latency --sizes 50 200 500
python -m benchmarks mo-latency --observations 300 --json mo-latency.json
python -m benchmarks utilization --trials 200 --workers 32
python -m benchmarks fidelity run --out results/fidelity.jsonl --processes 2
python -m benchmarks curves run --out results/curves.jsonl --processes 2
python -m benchmarks warm-start run --out results/warm-start.jsonl --processes 2
python -m benchmarks conditional run --out results/conditional.jsonl --processes 2
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence


def _log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def _run(args: argparse.Namespace) -> int:
    from benchmarks.harness import run_cells, shard, suite_cells
    from benchmarks.suites import SUITES

    suite = SUITES[args.suite]
    cells = suite_cells(suite, args.methods, args.problems, args.k, args.seeds)
    if args.durations:
        cells = [(m, p, k, args.durations, b, s) for (m, p, k, _d, b, s) in cells]
    cells = shard(cells, args.shard)
    options = dict(suite.strategy_options)
    run_cells(cells, args.out, options, processes=args.processes, progress=_log)
    return 0


def _report(args: argparse.Namespace) -> int:
    from benchmarks.report import write_report

    text = write_report(
        args.results, args.out, title=args.title, seeds=args.seeds, bar=args.bar,
        methods=args.methods, problems=args.problems, complete=args.complete,
    )  # fmt: skip
    print(text)
    return 0


def _latency(args: argparse.Namespace) -> int:
    from benchmarks.latency import main as latency_main

    return latency_main(args)


def _mo_latency(args: argparse.Namespace) -> int:
    from benchmarks.mo_latency import main as mo_latency_main

    return mo_latency_main(args)


def _utilization(args: argparse.Namespace) -> int:
    from benchmarks.loop_utilization import main as utilization_main

    return utilization_main(args)


def _memory(args: argparse.Namespace) -> int:
    from benchmarks.memory import main as memory_main

    return memory_main(args)


GRIDS: dict[str, tuple[str, str, str, str | None]] = {
    # command: (what the runs are measured against, its label, the report's title, reference)
    "fidelity": ("spent", "cost spent (target evaluations)",
                 "Multi-fidelity: regret at the target against cost", "single"),
    "curves": ("steps", "steps spent",
               "Learning curves: regret of full runs against steps spent", "auto"),
    "warm-start": ("evals", "evaluations of the new problem",
                   "Warm start: a shifted and scaled problem, from a study of the original",
                   "cold"),
    "conditional": ("evals", "evaluations",
                    "Conditional space: three branches of different dimension", "auto"),
    "real-tasks": ("evals", "evaluations",
                   "Real tasks: scikit-learn models, best cross-validated loss", "auto"),
}  # fmt: skip
"""The benchmarks measured against a budget (``benchmarks/budget_runs.py``): each module has
``cells``, ``run`` and ``read``, and ``budget_report`` writes their reports."""


def _grid(args: argparse.Namespace) -> int:
    import importlib

    from benchmarks import budget_report

    module = importlib.import_module("benchmarks." + args.command.replace("-", "_"))
    if args.action == "table":  # the learning curves' tabulated trainers
        module.write_tables(args.problems or ["sgd"], args.n, say=_log)
        return 0
    if args.action == "report":
        x_key, xlabel, title, reference = GRIDS[args.command]
        runs = module.read(args.results)
        print(budget_report.write(runs, x_key, xlabel, args.out, title, reference=reference))
        if runs and all("regret_last" in r for r in runs):  # curves: two more views
            by_last = [{**r, "regret": r["regret_last"]} for r in runs]  # stopped runs count
            last = title.replace("of full runs", "of the best run by its last report")
            print(budget_report.write(by_last, x_key, xlabel, f"{args.out}/by-last-report",
                                      last, reference=reference))  # fmt: skip
            if reference:  # against simulated time, the reference's median end the budget
                timed = budget_report.against_time(runs, reference)
                clock = title.replace(
                    "steps spent", f"simulated time (the budget: {reference}'s median time)"
                )
                folder = f"{args.out}/by-time"
                print(budget_report.write(timed, "times", "simulated time", folder, clock,
                                          reference=reference))  # fmt: skip
            if reference and hasattr(module, "PAGE_COLUMNS"):  # the results page's table
                print(budget_report.summary_table(runs, x_key, reference, module.PAGE_COLUMNS,
                                                  "trainer, k"))  # fmt: skip
        if hasattr(module, "score_table"):
            print(module.score_table(runs))
        return 0
    module.run(module.cells(args.methods, args.problems, args.k, args.seeds), args.out,
               args.processes, say=_log)  # fmt: skip
    return 0


def parser() -> argparse.ArgumentParser:
    """The command line, one sub-command per benchmark."""
    from benchmarks.suites import SUITES

    top = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    sub = top.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a suite into a JSON-lines file (resumable)")
    run.add_argument("suite", choices=list(SUITES))
    run.add_argument("--out", required=True, help="JSON-lines results file (appended to)")
    run.add_argument("--processes", type=int, default=1, help="runs in parallel")
    run.add_argument("--shard", default=None, help="'i/n': only every n-th run, from the i-th")
    run.add_argument("--methods", nargs="+", default=None)
    run.add_argument("--problems", nargs="+", default=None)
    run.add_argument("--k", nargs="+", type=int, default=None)
    run.add_argument("--seeds", type=int, default=None, help="seeds 0..N-1 (default: suite's)")
    run.add_argument("--durations", default=None, help="override the suite's distribution")
    run.set_defaults(func=_run)

    rep = sub.add_parser("report", help="Markdown tables and PNG plots from results files")
    rep.add_argument("results", nargs="+", help="JSON-lines files (merged)")
    rep.add_argument("--out", required=True, help="folder for report.md and the PNGs")
    rep.add_argument("--title", default="Benchmark results")
    rep.add_argument("--seeds", type=int, default=None, help="only seeds 0..N-1")
    rep.add_argument("--bar", default="optuna-gp", help="the method the others are tested against")
    rep.add_argument("--methods", nargs="+", default=None, help="only these methods")
    rep.add_argument("--problems", nargs="+", default=None, help="only these problems")
    rep.add_argument(
        "--complete", action="store_true",
        help="only cells where every method has every seed of --seeds",
    )  # fmt: skip
    rep.set_defaults(func=_report)

    lat = sub.add_parser("latency", help="Study.ask() seconds against the number of observations")
    lat.add_argument("--sizes", nargs="+", type=int, default=[50, 200, 500, 1000, 2000])
    lat.add_argument("--strategies", nargs="+", default=None)
    lat.add_argument("--repeats", type=int, default=5, help="asks timed per size")
    lat.add_argument("--cap", type=float, default=120.0, help="seconds per strategy and size")
    lat.add_argument("--seed", type=int, default=0)
    lat.add_argument("--refit", choices=["default", "sync", "background", "full"], default="sync")
    lat.add_argument("--threads", type=int, default=None, help="torch threads (default: abo's)")
    lat.add_argument("--max-staleness", type=int, default=None, help="with --refit background")
    lat.add_argument("--setup", type=float, default=60.0, help="seconds allowed before asking")
    lat.add_argument("--max-exact", type=int, default=None, help="the study's max_exact")
    lat.set_defaults(func=_latency)

    mol = sub.add_parser(
        "mo-latency", help="ask() seconds of the default of several objectives vs GPSampler"
    )
    mol.add_argument("--observations", type=int, default=300)
    mol.add_argument("--repeats", type=int, default=20, help="timed asks per method")
    mol.add_argument("--cap", type=float, default=180.0, help="seconds of asking per method")
    mol.add_argument("--setup", type=float, default=180.0, help="seconds allowed before asking")
    mol.add_argument("--seed", type=int, default=0)
    mol.add_argument("--json", default=None, help="also write the rows to this JSON file")
    mol.set_defaults(func=_mo_latency)

    util = sub.add_parser("utilization", help="study.optimize on a local Dask cluster")
    util.add_argument("--trials", type=int, default=200)
    util.add_argument("--workers", type=int, default=32)
    util.add_argument("--strategy", default="default", help="default: the study's")
    util.add_argument("--seed", type=int, default=0)
    util.add_argument("--refit", choices=["default", "sync", "background"], default="default")
    util.add_argument("--max-staleness", type=int, default=None)
    util.add_argument(
        "--lookahead", default="auto", help="trials proposed ahead: auto (default) or a number"
    )
    util.add_argument(
        "--extra", type=int, default=None,
        help="trials beyond --trials, so that utilization at --trials completions is measured "
        "before the drain (default workers + lookahead, or 3 x workers with auto)",
    )  # fmt: skip
    util.set_defaults(func=_utilization)

    helps = {
        "fidelity": "multi-fidelity problems against cost (benchmarks/fidelity.py)",
        "curves": "learning curves with and without stopping (benchmarks/curves.py)",
        "warm-start": "warm start against cold (benchmarks/warm_start.py)",
        "conditional": "a conditional space (benchmarks/conditional.py)",
        "real-tasks": "scikit-learn models tuned live, beside the peers (benchmarks/real_tasks.py)",
    }
    for name, help_text in helps.items():
        cmd = sub.add_parser(name, help=help_text)
        actions = ["run", "report", "table"] if name == "curves" else ["run", "report"]
        cmd.add_argument(
            "action",
            choices=actions,
            help="run the grid, report results files"
            + (
                ", or tabulate trainers' curves (--problems; default sgd)"
                if name == "curves"
                else ""
            ),
        )
        cmd.add_argument("results", nargs="*", help="report: JSON-lines files (merged)")
        cmd.add_argument("--out", default=None, help="run: results file; report: a folder")
        cmd.add_argument("--processes", type=int, default=1)
        cmd.add_argument("--methods", nargs="+", default=None)
        cmd.add_argument("--problems", nargs="+", default=None)
        cmd.add_argument(
            "--k", nargs="+", type=int, default=[4] if name == "warm-start" else [4, 16]
        )
        cmd.add_argument("--seeds", type=int, default=10)
        cmd.add_argument(
            "--n",
            type=int,
            default=None,
            help="table: configurations to train (sgd 200, the others 2048)",
        )
        cmd.set_defaults(func=_grid)

    from benchmarks.many_workers import add_parser as many_workers_parser

    many_workers_parser(sub)

    mem = sub.add_parser("memory", help="peak RSS of `abo serve` holding one large study")
    mem.add_argument("--observations", type=int, default=5000)
    mem.add_argument("--dim", type=int, default=10)
    mem.add_argument("--asks", type=int, default=20, help="timed ask/tell cycles")
    mem.add_argument("--strategy", default="thompson")
    mem.add_argument("--max-exact", type=int, default=500, help="passed to the study")
    mem.add_argument("--seed", type=int, default=0)
    mem.set_defaults(func=_memory)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    for name in ("processes", "seeds", "trials", "workers", "repeats", "observations"):
        value = getattr(args, name, None)
        if value is not None and value < 1:
            parser().error(f"--{name}: expected a positive integer, got {value}")
    if getattr(args, "action", "table") != "table" and not args.out:
        parser().error("--out: required (run: the results file; report: the folder)")
    try:
        return args.func(args)
    except ValueError as exc:
        parser().error(str(exc))
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
