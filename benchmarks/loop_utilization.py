"""Does ``study.optimize`` keep a real Dask cluster busy? Utilization and time spent waiting.

A local Dask cluster of ``--workers`` processes (``abo.executors.DaskExecutor``) evaluates an
objective that sleeps 0.5-2 s (a deterministic function of its parameters) and returns a
quadratic; the driver proposes with ``--strategy``. Reported:

* utilization: busy seconds / (workers x makespan), from ``OptimizeResult``;
* proposal wait: worker-seconds spent idle *while the driver was fitting and proposing* (from
  the trials' start/finish times and the proposal seconds recorded on each), over workers x
  makespan: the share of worker time spent waiting for a proposal;
* driver busy: the share of the makespan the driver spent fitting and proposing (near 1 means
  proposals, not evaluations, set the pace);
* what remains idle (1 - utilization - wait): dispatch overhead and the tail of the run;
* late utilization: the same ratio over the last fifth of the run before its drain (from the
  start of trial ``0.8 * trials`` to the start of the last trial): the steady state once the
  study holds that many observations, without the ramp-up or the final tail, when no
  new trial may start by design;
* utilization at ``--trials`` completed: with ``--extra`` more trials in the budget (default
  ``workers + lookahead``), busy worker-seconds from the run's start to the moment the
  ``trials``-th trial completes, over workers x that time: the ramp-up counts, the drain that
  a finite budget forces does not (the run goes on past that moment).

With no options the study and ``optimize`` run with their defaults (the default strategy and
refit policy, ``lookahead="auto"``, abo's own torch threads): what a user gets.

    python -m benchmarks utilization --trials 200 --workers 32
    python -m benchmarks utilization --trials 1000 --workers 32 --strategy thompson \
        --refit background --max-staleness 1000 --lookahead 8
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

DIM = 4


def sleepy_objective(params: dict[str, Any]) -> float:
    """Sleep 0.5-2 s (set by the parameters), then return a quadratic with minimum 0."""
    x = np.array([params[f"x{i}"] for i in range(DIM)])
    time.sleep(0.5 + 1.5 * float(np.mean(np.abs(np.sin(7.0 * x)))))
    return float(np.sum((x - 0.3) ** 2))


def waiting_worker_seconds(trials: Sequence[Any], workers: int, steps: int = 20_000) -> float:
    """Integral over the driver's proposing intervals of the number of idle workers.

    Trials started together came from one proposal call of ``sum(proposal_seconds)`` that ended
    when they were created; a worker is busy on a trial from its creation to its finish.
    """
    calls: dict[float, float] = {}
    for t in trials:
        calls[t.created_at] = calls.get(t.created_at, 0.0) + float(
            (t.proposal.seconds or 0.0) if t.proposal else 0.0
        )
    if not calls:
        return 0.0
    start = min(c - p for c, p in calls.items())
    end = max(t.finished_at or t.created_at for t in trials)
    grid = np.linspace(start, end, steps)
    proposing = np.zeros(steps, dtype=bool)
    for created, seconds in calls.items():
        proposing |= (grid >= created - seconds) & (grid < created)
    running = np.zeros(steps)
    for t in trials:
        running += (grid >= t.created_at) & (grid < (t.finished_at or end))
    idle = np.clip(workers - running, 0, None)
    return float(np.sum(idle * proposing) * (end - start) / steps)


def window_utilization(trials: Sequence[Any], workers: int, start: float, end: float) -> float:
    """Busy worker-seconds inside ``[start, end]`` over ``workers x (end - start)``."""
    if end <= start:
        return float("nan")
    busy = 0.0
    for t in trials:
        a, b = t.info.get("started"), t.info.get("finished")
        if a is None or b is None:
            continue
        busy += max(0.0, min(b, end) - max(a, start))
    return busy / (workers * (end - start))


def late_window(trials: Sequence[Any]) -> tuple[float, float]:
    """From the start of the trial at 80 % of the run to the start of the last trial."""
    starts = sorted(t.info["started"] for t in trials if "started" in t.info)
    if len(starts) < 5:
        return (0.0, 0.0)
    return starts[int(0.8 * (len(starts) - 1))], starts[-1]


def _warm_up() -> None:
    import abo.run.loop  # noqa: F401 - the evaluation wrapper unpickles into abo (and torch)


def measure(
    trials: int,
    workers: int,
    strategy: str | None,
    seed: int,
    refit: str | None = None,
    max_staleness: int | None = None,
    lookahead: int | str = "auto",
    extra: int = 0,
) -> dict[str, float]:
    """Run one study on a fresh local cluster; its utilization and proposal-wait fraction.

    ``extra`` trials beyond ``trials`` are run (and counted in the whole-run figures) so that
    the utilization at ``trials`` completions is measured before the final drain; ``None``
    for ``strategy`` or ``refit`` leaves the study's default.
    """
    import warnings

    import abo
    from abo.executors import DaskExecutor

    warnings.simplefilter("ignore")
    space = abo.Space({f"x{i}": abo.Float(0.0, 1.0) for i in range(DIM)})
    options: dict[str, Any] = {"max_staleness": max_staleness}
    if strategy is not None:
        options["strategy"] = strategy
    if refit is not None:
        options["refit"] = refit
    study = abo.create_study(space, seed=seed, **options)
    executor = DaskExecutor(n_workers=workers)
    executor.client.wait_for_workers(workers)
    executor.client.run(_warm_up)  # imports on every worker now, not inside the measured run
    started = time.time()
    try:
        result = study.optimize(
            sleepy_objective, n_trials=trials + extra, executor=executor, lookahead=lookahead
        )
    finally:
        executor.close()
    n_at = trials
    trials = study.trials
    finishes = sorted(t.info["finished"] for t in trials if "finished" in t.info)
    at_n = (
        window_utilization(trials, result.n_workers, started, finishes[n_at - 1])
        if len(finishes) >= n_at
        else float("nan")
    )
    proposing = sum(float(t.proposal.seconds or 0.0) for t in trials if t.proposal)
    late = window_utilization(trials, result.n_workers, *late_window(trials))
    capacity = result.n_workers * result.elapsed
    return {
        "trials": result.n_done,
        "workers": result.n_workers,
        "makespan_s": result.elapsed,
        "utilization": result.utilization,
        "proposal_wait": waiting_worker_seconds(trials, result.n_workers) / capacity
        if capacity
        else 0.0,
        "driver_busy": proposing / result.elapsed if result.elapsed else 0.0,
        "proposing_s": proposing,
        "late_utilization": late,
        "utilization_at_n": at_n,
        "best": float(result.best.value) if result.best else float("nan"),
    }


def main(args: argparse.Namespace) -> int:
    """Print the measurement as a Markdown table."""
    from benchmarks.gp_vs_optuna import machine

    lookahead = args.lookahead if args.lookahead == "auto" else int(args.lookahead)
    queue = 2 * args.workers if lookahead == "auto" else int(lookahead)  # the most queued
    extra = args.workers + queue if args.extra is None else args.extra
    strategy = None if args.strategy == "default" else args.strategy
    refit = None if args.refit == "default" else args.refit
    m = measure(
        args.trials, args.workers, strategy, args.seed,
        refit, args.max_staleness, lookahead, extra,
    )  # fmt: skip
    print(
        f"`study.optimize`, strategy {args.strategy}, refit={args.refit} (max_staleness "
        f"{args.max_staleness}), lookahead {args.lookahead}, local Dask cluster "
        f"({m['workers']} worker processes), objective sleeping 0.5-2 s; {args.trials} + "
        f"{extra} trials run."
    )
    print()
    print(
        f"| workers | lookahead | utilization at {args.trials} completed | whole run "
        "| late utilization | makespan s | proposal wait | driver busy | s / proposal |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    print(
        f"| {m['workers']} | {args.lookahead} | {m['utilization_at_n']:.3f} | "
        f"{m['utilization']:.3f} | {m['late_utilization']:.3f} | {m['makespan_s']:.1f} | "
        f"{m['proposal_wait']:.3f} | {m['driver_busy']:.3f} | "
        f"{m['proposing_s'] / max(1, m['trials']):.3f} |"
    )
    print()
    print(f"Machine: {machine()}.")
    return 0
