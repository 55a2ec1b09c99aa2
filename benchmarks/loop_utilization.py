"""Does ``study.optimize`` keep a real Dask cluster busy? Utilization and time spent waiting.

A local Dask cluster of ``--workers`` processes (``abo.executors.DaskExecutor``) evaluates an
objective that sleeps 0.5-2 s (a deterministic function of its parameters) and returns a
quadratic; the driver proposes with ``--strategy``. Reported:

* utilization: busy seconds / (workers x makespan), from ``OptimizeResult``;
* proposal wait: seconds the driver spent fitting and proposing (recorded on each trial), over
  workers x makespan: the fraction of worker time spent waiting for a proposal (at least one
  worker is idle for every second the driver proposes);
* what remains idle (1 - utilization - wait): dispatch overhead and the tail of the run.

    python -m benchmarks utilization --trials 200 --workers 32
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

DIM = 4


def sleepy_objective(params: dict[str, Any]) -> float:
    """Sleep 0.5-2 s (set by the parameters), then return a quadratic with minimum 0."""
    x = np.array([params[f"x{i}"] for i in range(DIM)])
    time.sleep(0.5 + 1.5 * float(np.mean(np.abs(np.sin(7.0 * x)))))
    return float(np.sum((x - 0.3) ** 2))


def _warm_up() -> None:
    import abo.loop  # noqa: F401 - the evaluation wrapper unpickles into abo (and torch)


def measure(trials: int, workers: int, strategy: str, seed: int) -> dict[str, float]:
    """Run one study on a fresh local cluster; its utilization and proposal-wait fraction."""
    import warnings

    import abo
    from abo.executors import DaskExecutor

    warnings.simplefilter("ignore")
    space = abo.Space({f"x{i}": abo.Float(0.0, 1.0) for i in range(DIM)})
    study = abo.create_study(space, strategy=strategy, seed=seed)
    executor = DaskExecutor(n_workers=workers)
    executor.client.wait_for_workers(workers)
    executor.client.run(_warm_up)  # imports on every worker now, not inside the measured run
    try:
        result = study.optimize(sleepy_objective, n_trials=trials, executor=executor)
    finally:
        executor.close()
    proposing = sum(float(t.info.get("proposal_seconds", 0.0)) for t in study.trials)
    capacity = result.n_workers * result.elapsed
    return {
        "trials": result.n_done,
        "workers": result.n_workers,
        "makespan_s": result.elapsed,
        "utilization": result.utilization,
        "proposal_wait": proposing / capacity if capacity else 0.0,
        "proposing_s": proposing,
        "best": float(result.best.value) if result.best else float("nan"),
    }


def main(args: argparse.Namespace) -> int:
    """Print the measurement as a Markdown table."""
    from benchmarks.gp_vs_optuna import machine

    m = measure(args.trials, args.workers, args.strategy, args.seed)
    print(
        f"`study.optimize`, strategy {args.strategy}, local Dask cluster "
        f"({m['workers']} worker processes), objective sleeping 0.5-2 s."
    )
    print()
    print("| trials | workers | makespan s | utilization | proposal wait | other idle |")
    print("|---|---|---|---|---|---|")
    other = max(0.0, 1.0 - m["utilization"] - m["proposal_wait"])
    print(
        f"| {m['trials']} | {m['workers']} | {m['makespan_s']:.1f} | {m['utilization']:.3f} | "
        f"{m['proposal_wait']:.3f} | {other:.3f} |"
    )
    print()
    print(f"Machine: {machine()}.")
    return 0
