"""Warm-start benchmark: a new campaign on a shifted and scaled variant of a problem, warm-started
from an earlier campaign on the original, against a cold start and against adding the old
results to the new study as they are.

Problems (``WARM_PROBLEMS``), minimised on the unit cube: the target is
``2 f(x - delta) + 1`` with ``f`` the original (``benchmarks.problems``), every coordinate
shifted by ``delta`` (the optimum moves by ``delta`` per coordinate and stays inside the cube;
``x - delta`` is clipped to the cube, a flat strip along the low edges) and the values doubled
and lifted (another unit, another level):

* ``branin-shift``: Branin, ``delta = 0.05`` (a 15th of the range), 30 evaluations;
* ``hartmann6-shift``: Hartmann-6, ``delta = 0.05``, 60 evaluations;
* ``hartmann6-far``: Hartmann-6, ``delta = 0.15`` (the old optimum is now a poor point: what a
  warm start must not be hurt by), 60 evaluations.

The earlier campaign (``source``) is abo's ``thompson`` on the original problem for the same
number of evaluations, sequentially, seeded by the run's seed: a few points near each local
optimum it found and a spread elsewhere, as a finished study holds.

Methods (``WARM_METHODS``), each abo's default strategy, 4 simulated asynchronous workers with
half-normal durations of mean 1 (``benchmarks/fidelity.py``'s loop without fidelities):

* ``cold``: a new study, nothing known;
* ``warm``: ``warm_start_from=[source]`` (``abo.spec.warm_start``: the sources' GP as the prior
mean,
  their best points first);
* ``pooled``: a new study with every old result added as a done trial (``study.add``): the old
  values count as observations of the new objective.

A run records, after every completion, the number of evaluations completed (``evals``) and the
regret of the best value so far against the target's optimum.
"""

from __future__ import annotations

import heapq
import logging
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks import budget_runs

SCALE, LIFT = 2.0, 1.0  # the target's values: SCALE * f + LIFT
SMOKE = {"raw_samples": 256, "num_restarts": 2}  # the acquisition effort of the other suites


@dataclass(frozen=True)
class Shifted:
    """The original ``f`` on the unit cube and the target ``SCALE f(x - delta) + LIFT``."""

    name: str
    base: str
    dim: int
    delta: float
    budget: int
    optimum: float  # the original's (and, shifted, the target's before scaling)
    native: Callable[[np.ndarray], float]  # f on the unit cube

    def original(self, x: np.ndarray) -> float:
        return self.native(np.asarray(x, dtype=float))

    def target(self, x: np.ndarray) -> float:
        z = np.clip(np.asarray(x, dtype=float) - self.delta, 0.0, 1.0)  # flat strips at the edge
        return SCALE * self.native(z) + LIFT

    def regret(self, value: float) -> float:
        return max(float(value) - (SCALE * self.optimum + LIFT), 0.0)


def _native(fn: Any) -> Callable[[np.ndarray], float]:
    bounds = fn.bounds.to(torch.double)

    def evaluate(x: np.ndarray) -> float:
        z = bounds[0] + torch.as_tensor(x, dtype=torch.double) * (bounds[1] - bounds[0])
        return float(fn.evaluate_true(z.unsqueeze(0)).item())

    return evaluate


def _problem(name: str, base: str, delta: float, budget: int) -> Callable[[], Shifted]:
    def make() -> Shifted:
        from botorch.test_functions import Branin, Hartmann

        fn = Branin() if base == "branin" else Hartmann(dim=6)
        return Shifted(name, base, fn.dim, delta, budget, float(fn.optimal_value), _native(fn))

    return make


WARM_PROBLEMS: dict[str, Callable[[], Shifted]] = {
    "branin-shift": _problem("branin-shift", "branin", 0.05, 30),
    "hartmann6-shift": _problem("hartmann6-shift", "hartmann6", 0.05, 60),
    "hartmann6-far": _problem("hartmann6-far", "hartmann6", 0.15, 60),
}
WARM_METHODS = ("cold", "warm", "pooled")


def source(prob: Shifted, seed: int) -> Any:
    """The earlier campaign on the original problem (an in-memory abo study)."""
    import abo

    names = [f"x{i}" for i in range(prob.dim)]
    study = abo.create_study(
        {n: abo.Float(0.0, 1.0) for n in names}, strategy="thompson", seed=10_000 + seed,
        noise="deterministic", strategy_options=SMOKE,
    )  # fmt: skip
    for _ in range(prob.budget):
        t = study.ask()
        study.tell(t.id, prob.original(np.array([t.params[n] for n in names])))
    return study


def simulate_warm(problem: str, method: str, k: int, budget: int, seed: int) -> dict[str, Any]:
    """One run of ``method`` with ``k`` workers for ``budget`` evaluations of the target."""
    import abo

    prob = WARM_PROBLEMS[problem]()
    rng = np.random.default_rng([seed, 3])
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.getLogger("distributed").setLevel(logging.WARNING)
        names = [f"x{i}" for i in range(prob.dim)]
        space = {n: abo.Float(0.0, 1.0) for n in names}
        old = source(prob, seed) if method != "cold" else None
        extra = {"warm_start_from": [old]} if method == "warm" else {}
        study = abo.create_study(space, seed=seed, noise="deterministic",
                                 strategy_options=SMOKE, **extra)  # fmt: skip
        if method == "pooled":
            assert old is not None
            for t in old.trials:
                study.add(t.params, t.value)
        source_seconds = time.perf_counter() - started
        events: list[tuple[float, int, int, float]] = []
        clock, best, submitted = 0.0, np.inf, 0
        times: list[float] = []
        evals: list[int] = []
        regrets: list[float] = []
        asks: list[float] = []
        while True:
            while len(events) < k and submitted < budget:
                t0 = time.perf_counter()
                trial = study.ask(n_workers=k)
                asks.append(time.perf_counter() - t0)
                value = prob.target(np.array([trial.params[n] for n in names]))
                seconds = abs(rng.normal(0.0, np.sqrt(np.pi / 2)))
                heapq.heappush(events, (clock + seconds, submitted, trial.id, value))
                submitted += 1
            if not events:
                break
            clock, _, handle, value = heapq.heappop(events)
            study.tell(handle, value)
            best = min(best, value)
            times.append(round(clock, 6))
            evals.append(len(evals) + 1)
            regrets.append(float(f"{prob.regret(best):.6g}"))
    return {
        "method": method, "problem": problem, "k": k, "budget": budget, "seed": seed,
        "times": times, "evals": evals, "regret": regrets,
        "ask_seconds": [round(a, 5) for a in asks],
        "source_seconds": round(source_seconds, 3),
        "wall_seconds": round(time.perf_counter() - started, 3),
    }  # fmt: skip


Cell = tuple[str, str, int, int, int]  # method, problem, k, budget, seed


def cells(
    methods: Sequence[str] | None = None, problems: Sequence[str] | None = None,
    ks: Sequence[int] = (4,), seeds: int = 10,
) -> list[Cell]:  # fmt: skip
    """Every run of the grid (``budget_runs.grid``)."""
    budgets = {name: make().budget for name, make in WARM_PROBLEMS.items()}
    return budget_runs.grid(list(methods or WARM_METHODS), WARM_METHODS,
                            list(problems or WARM_PROBLEMS), budgets, ks, seeds)  # fmt: skip


def _execute(cell: Cell) -> dict[str, Any]:
    torch.set_num_threads(1)
    method, problem, k, budget, seed = cell
    return simulate_warm(problem, method, k, budget, seed)


def run(todo: Sequence[Cell], out: str | Path, processes: int = 1,
        say: Callable[[str], None] = print) -> int:  # fmt: skip
    """Run the cells not yet in ``out``, appending a line per run; how many ran."""
    return budget_runs.run(todo, out, _execute, processes, say)


read = budget_runs.read
