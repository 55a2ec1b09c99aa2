"""Seconds per full GP fit with abo's direct marginal likelihood against BoTorch's own closure
(a script, not a test).

The same full multi-start fit (``fit_gp(..., full=True)``) on the same 6-D data, with
``abo.model.likelihood``'s loss and with BoTorch's closure over GPyTorch's marginal likelihood,
alternated in one process; the median of ``--reps`` fits each and their ratio per size.

    PYTHONPATH=. .venv/bin/python benchmarks/fit_speed.py [--sizes 20 100 250 500] [--reps 3]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from typing import Any

import torch

import abo.model.surrogate
from abo.model.likelihood import loss


def _botorch_closure(mll: Any) -> None:
    """What ``abo.model.surrogate`` falls back to: ``None`` keeps BoTorch's closure."""
    return None


def measure(n: int, reps: int, seed: int = 0) -> dict[str, float]:
    """Median seconds of a full fit on ``n`` points, both ways, and direct / BoTorch."""
    gen = torch.Generator().manual_seed(seed + n)
    X = torch.rand(n, 6, generator=gen, dtype=torch.double)
    Y = torch.sin(5 * X[:, :1]) + (X - 0.4).pow(2).sum(-1, keepdim=True)
    seconds: dict[str, list[float]] = {"botorch": [], "direct": []}
    try:
        for rep in range(reps):
            for mode, closure in (("botorch", _botorch_closure), ("direct", loss)):
                abo.model.surrogate.direct_loss = closure  # type: ignore[assignment]
                t0 = time.perf_counter()
                abo.model.surrogate.fit_gp(X, Y, full=True, seed=rep)
                seconds[mode].append(time.perf_counter() - t0)
    finally:
        abo.model.surrogate.direct_loss = loss
    botorch, direct = (statistics.median(seconds[k]) for k in ("botorch", "direct"))
    return {"n": n, "botorch": botorch, "direct": direct, "ratio": direct / botorch}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 100, 250, 500])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print("| observations | BoTorch's closure (s) | direct (s) | ratio |")
    print("|---|---|---|---|")
    for n in args.sizes:
        row = measure(n, args.reps)
        print(f"| {n} | {row['botorch']:.3f} | {row['direct']:.3f} | {row['ratio']:.2f} |")
    print(f"\nMachine: {platform.platform()}, {platform.machine()}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} torch thread(s)")  # fmt: skip


if __name__ == "__main__":
    main()
