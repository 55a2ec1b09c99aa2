"""How big the initial design should be in a wide space: one study per run, asked and told with
``--busy`` points always running (the oldest told first), on Hartmann-6 hidden among
``--dim`` parameters (a fixed, seeded choice of six; the rest inert) or Ackley in ``--dim``
dimensions, for ``--budget`` evaluations. Prints one JSON line per run: the best value, its
regret (Hartmann-6), the best after 100 and 200 evaluations, and the model's asks' median
and 95th percentile in seconds.

python -m benchmarks.wide_design --designs default 38 --seeds 0 1           # Hartmann-6 in 100-D
python -m benchmarks.wide_design --problem ackley --dim 50 --designs default 28 --seeds 0
python -m benchmarks.wide_design --options '{"trust_region": "never"}' --seeds 0 1
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import torch
from botorch.test_functions import Ackley, Hartmann

import abo


def _objective(problem: str, dim: int, seed: int) -> tuple[Callable[[Any], float], float]:
    """The objective on the unit cube and its optimum."""
    if problem == "hartmann6":
        fn = Hartmann(dim=6)
        active = torch.randperm(dim, generator=torch.Generator().manual_seed(100 + seed))[:6]
        return lambda x: float(fn(x[:, active])[0]), -3.32237
    ackley = Ackley(dim=dim)
    lo, hi = ackley.bounds[0].double(), ackley.bounds[1].double()
    return lambda x: float(ackley(lo + (hi - lo) * x)[0]), 0.0


def run(
    problem: str,
    dim: int,
    budget: int,
    busy: int,
    seed: int,
    design: str,
    strategy: str | None = None,
    strategy_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One study: ``design`` is ``"default"`` or an ``n_initial``; ``strategy`` the study's
    (``None``: its default), with ``strategy_options``."""
    names = [f"x{i:03d}" for i in range(dim)]
    f, optimum = _objective(problem, dim, seed)
    options: dict[str, Any] = {} if design == "default" else {"n_initial": int(design)}
    if strategy is not None:
        options["strategy"] = strategy
    if strategy_options:
        options["strategy_options"] = strategy_options
    space = abo.Space({n: abo.Float(0.0, 1.0) for n in names})
    study = abo.create_study(space, seed=seed, device="cpu", **options)
    pending: list[abo.Trial] = []
    best, curve, asks = float("inf"), [], []
    while len(study) < budget or pending:
        while len(pending) < busy and len(study) < budget:
            t0 = time.perf_counter()
            pending.append(study.ask(n_workers=busy))
            asks.append((time.perf_counter() - t0, pending[-1].proposal))
        trial = pending.pop(0)
        value = f(torch.tensor([[trial.params[n] for n in names]], dtype=torch.double))
        study.tell(trial.id, value)
        best = min(best, value)
        curve.append(best)
    model = sorted(s for s, p in asks if p is not None and p.model is not None)
    return {
        "problem": problem, "dim": dim, "budget": budget, "busy": busy, "seed": seed,
        "strategy": strategy, "strategy_options": strategy_options or {},
        "n_initial": study.config.resolved_n_initial, "best": best, "regret": best - optimum,
        "best_at_100": curve[min(99, budget - 1)], "best_at_200": curve[min(199, budget - 1)],
        "model_asks": len(model),
        "ask_p50": model[len(model) // 2] if model else None,
        "ask_p95": model[int(0.95 * len(model))] if model else None,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problem", choices=("hartmann6", "ackley"), default="hartmann6")
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--budget", type=int, default=300)
    parser.add_argument("--busy", type=int, default=8)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--designs", nargs="+", default=["default"])
    parser.add_argument("--strategy", default=None, help="the study's strategy (default: its)")
    parser.add_argument("--options", type=json.loads, default=None, help="strategy options, JSON")
    args = parser.parse_args(argv)
    for seed in args.seeds:
        for design in args.designs:
            result = run(
                args.problem,
                args.dim,
                args.budget,
                args.busy,
                seed,
                design,
                args.strategy,
                args.options,
            )
            print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
