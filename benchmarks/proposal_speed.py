"""Median seconds per proposal of every model-based strategy (a script, not a test).

Hartmann-6 data at 50, 200 and 500 observations, 8 busy points, each strategy at its default
options, proposing ``--batch`` points per call and reporting seconds per point, so the
amortised cost of a multi-point call is visible. The GP is fitted once per size (fitting is
not part of a proposal); every timed proposal gets a fresh copy of it with empty caches, as
after a refit, so per-model caches (prediction caches, PLAyBOOK's Lipschitz constants) are
paid for as in a real run.

    .venv/bin/python benchmarks/proposal_speed.py [--reps 5] [--sizes 50 200 500] [--batch 1]
        [--threads T]
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import statistics
import time
import warnings

import torch
from botorch.test_functions import Hartmann

from abo.acquisitions.base import ProposalContext
from abo.acquisitions.registry import make_strategy, strategies
from abo.model.surrogate import fit_gp

STRATEGIES = ["playbook", "lp", "thompson", "aegis", "aegis-rs", "believer", "ucb", "qlognei"]
N_BUSY = 8


def _fresh(model):
    """A copy of ``model`` with no prediction caches, like a model just refitted."""
    clone = copy.deepcopy(model)
    clone.prediction_strategy = None
    return clone


def time_strategy(name: str, model, X, Y, busy, reps: int, batch: int = 1) -> float:
    """Median seconds per proposed point over ``reps`` calls that each ask ``batch`` points."""
    strategy = make_strategy(name)
    seconds = []
    for rep in range(reps):
        ctx = ProposalContext(
            model=_fresh(model),
            X=X,
            Y=Y,
            X_pending=busy,
            bounds=torch.stack([torch.zeros(6), torch.ones(6)]).to(torch.double),
            generator=torch.Generator().manual_seed(rep),
            round=lambda x: x,
            n_trials=X.shape[0] + busy.shape[0] + 100,  # AEGiS past its first fill
            n_workers=N_BUSY + 1,
        )
        with torch.random.fork_rng():
            torch.manual_seed(rep)
            t0 = time.perf_counter()
            strategy.propose(ctx, batch)
            seconds.append((time.perf_counter() - t0) / batch)
    return statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 200, 500])
    parser.add_argument("--batch", type=int, default=1, help="points per propose call")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch intra-op threads (default: torch's)"
    )
    parser.add_argument(
        "--strategies", nargs="+", default=STRATEGIES, choices=list(strategies(objectives=1))
    )
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.threads:
        torch.set_num_threads(args.threads)
    print(
        f"machine: {platform.platform()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, torch {torch.__version__} with {torch.get_num_threads()} "
        f"threads, load average {os.getloadavg()[0]:.1f}"
    )
    f = Hartmann(dim=6)
    gen = torch.Generator().manual_seed(0)
    results: dict[str, list[float]] = {name: [] for name in args.strategies}
    for n in args.sizes:
        X = torch.rand(n, 6, generator=gen, dtype=torch.double)
        Y = -f(X).unsqueeze(-1)  # utilities: larger is better
        busy = torch.rand(N_BUSY, 6, generator=gen, dtype=torch.double)
        t0 = time.perf_counter()
        model = fit_gp(X, Y).model
        print(f"n = {n}: GP fit {time.perf_counter() - t0:.2f} s", flush=True)
        for name in args.strategies:
            results[name].append(time_strategy(name, model, X, Y, busy, args.reps, args.batch))
            print(f"  {name:<10} {results[name][-1]:.3f} s", flush=True)
    print(
        f"\nmedian seconds per point, {args.batch} point(s) per call "
        f"(6-D Hartmann, {N_BUSY} busy points, {args.reps} reps)"
    )
    print(f"{'strategy':<10}" + "".join(f"{f'n={n}':>10}" for n in args.sizes))
    for name, row in results.items():
        print(f"{name:<10}" + "".join(f"{s:>10.3f}" for s in row))


if __name__ == "__main__":
    main()
