"""Multi-fidelity benchmarks: BoTorch's augmented test functions in simulated asynchronous time,
where an evaluation's duration is proportional to the cost of its fidelity.

Problems (``FIDELITY_PROBLEMS``), each minimised on the unit cube with one fidelity ``s`` in
``[0, 1]`` (the target ``s = 1`` is the function itself):

* ``augbranin``: ``AugmentedBranin`` (2 parameters): a cheap evaluation bends the valley, so
  the cheap optimum is not the target's;
* ``aughartmann``: ``AugmentedHartmann`` (6 parameters): the cheapest fidelity lowers one of
  the four bumps by a tenth, the others are exact;
* ``augrosenbrock``: ``AugmentedRosenbrock`` with 4 parameters on ``[-5, 10]^4``, whose two
  fidelity inputs are both ``s`` (one fidelity that biases both terms).

An evaluation at ``s`` costs ``COST_FIXED + (1 - COST_FIXED) * s`` (the cheapest a tenth of the
target) and takes that times a half-normal duration of mean 1, so time and cost agree. Each
run stops submitting once the cost of what it has submitted reaches the budget (in target
evaluations), and records, after every completion, the regret (at the target) of the best
point it evaluated *at the target*: cheap evaluations only count through what they led to.

Methods (``FIDELITY_METHODS``):

* ``auto``: abo's default on a study with the fidelity declared and its cost learned from the
  (simulated) evaluation times told with each result, as ``optimize`` tells them;
* ``auto+cost``: the same with the cost declared (``{"fixed": 0.1, "per_unit": 0.9}``);
* ``single``: abo's default on the parameters alone, every evaluation at the target (what a
  user without a fidelity runs);
* ``random``: random search at the target.

Each abo study draws its own quasi-random initial design (``2 (d + 1)`` points for the
multi-fidelity studies, ``2 d`` at the target for the others), whose cost counts.

Example:
    >>> run = simulate_fidelity("augbranin", "random", k=2, budget=4.0, seed=0)
    >>> run["spent"][-1] >= 4.0 - 1.0, len(run["regret"]) == len(run["spent"])
    (True, True)
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

COST_FIXED = 0.1  # the cheapest fidelity costs a tenth of the target
SMOKE = {"raw_samples": 256, "num_restarts": 2}  # the acquisition effort of the other suites


def cost(s: float) -> float:
    """The cost (and mean duration) of an evaluation at fidelity ``s``."""
    return COST_FIXED + (1.0 - COST_FIXED) * float(s)


@dataclass(frozen=True)
class FidelityProblem:
    """``f(x, s)`` on ``[0, 1]^dim x [0, 1]``, minimised at ``s = 1``; ``optimum`` at ``s = 1``."""

    name: str
    dim: int
    optimum: float
    evaluate: Callable[[np.ndarray, float], float]

    def __call__(self, x: np.ndarray, s: float = 1.0) -> float:
        return self.evaluate(np.asarray(x, dtype=float), float(s))

    def regret(self, value: float) -> float:
        return max(float(value) - self.optimum, 0.0)


def _botorch(fn: Any, dim: int, fidelity_inputs: int) -> Callable[[np.ndarray, float], float]:
    bounds = fn.bounds.to(torch.double)[:, :dim]

    def evaluate(x: np.ndarray, s: float) -> float:
        if x.shape != (dim,) or np.any(x < 0) or np.any(x > 1) or not 0 <= s <= 1:
            raise ValueError(f"x, s: expected {dim} values and s in [0, 1], got {x!r}, {s!r}")
        z = bounds[0] + torch.as_tensor(x, dtype=torch.double) * (bounds[1] - bounds[0])
        z = torch.cat([z, torch.full((fidelity_inputs,), s, dtype=torch.double)])
        return float(fn.evaluate_true(z.unsqueeze(0)).item())

    return evaluate


def augbranin() -> FidelityProblem:
    from botorch.test_functions.multi_fidelity import AugmentedBranin

    fn = AugmentedBranin()
    return FidelityProblem("augbranin", 2, float(fn.optimal_value), _botorch(fn, 2, 1))


def aughartmann() -> FidelityProblem:
    from botorch.test_functions.multi_fidelity import AugmentedHartmann

    fn = AugmentedHartmann()
    return FidelityProblem("aughartmann", 6, float(fn.optimal_value), _botorch(fn, 6, 1))


def augrosenbrock() -> FidelityProblem:
    from botorch.test_functions.multi_fidelity import AugmentedRosenbrock

    fn = AugmentedRosenbrock(dim=6)
    return FidelityProblem("augrosenbrock", 4, 0.0, _botorch(fn, 4, 2))


FIDELITY_PROBLEMS: dict[str, Callable[[], FidelityProblem]] = {
    "augbranin": augbranin,
    "aughartmann": aughartmann,
    "augrosenbrock": augrosenbrock,
}
BUDGETS = {"augbranin": 40.0, "aughartmann": 80.0, "augrosenbrock": 60.0}
"""Cost budgets in target evaluations: twenty times the dimension for Branin, and about ten
for the others (their initial design included)."""


class AboFidelity:
    """abo's default on a study with the fidelity ``s`` (``multi``), or on the parameters alone
    at the target (``multi=False``), driven by ask/tell with the simulated durations told."""

    def __init__(
        self, problem: FidelityProblem, seed: int, k: int, options: dict[str, Any],
        multi: bool, declared: bool = False, strategy: str = "auto",
    ) -> None:  # fmt: skip
        import abo

        self.names = [f"x{i}" for i in range(problem.dim)]
        params: dict[str, Any] = {n: abo.Float(0.0, 1.0) for n in self.names}
        extra: dict[str, Any] = {}
        if multi:
            params["s"] = abo.Float(0.0, 1.0)
            fid: dict[str, Any] = {"parameter": "s"}
            if declared:
                fid["cost"] = {"fixed": COST_FIXED, "per_unit": 1.0 - COST_FIXED}
            extra["fidelity"] = fid
        self.multi, self.k = multi, k
        self.study = abo.create_study(
            abo.Space(params), strategy=strategy, seed=seed, noise="deterministic",
            strategy_options=options if strategy != "random" else None, **extra,
        )  # fmt: skip

    def ask(self) -> tuple[Any, np.ndarray, float]:
        trial = self.study.ask(n_workers=self.k)
        x = np.array([trial.params[n] for n in self.names])
        return trial.id, x, float(trial.params["s"]) if self.multi else 1.0

    def tell(self, handle: Any, y: float, seconds: float) -> None:
        self.study.tell(handle, y, info={"eval_seconds": seconds})


METHODS: dict[str, Callable[[FidelityProblem, int, int, dict[str, Any]], AboFidelity]] = {
    "auto": lambda p, seed, k, o: AboFidelity(p, seed, k, o, multi=True),
    "auto+cost": lambda p, seed, k, o: AboFidelity(p, seed, k, o, multi=True, declared=True),
    "single": lambda p, seed, k, o: AboFidelity(p, seed, k, o, multi=False),
    "random": lambda p, seed, k, o: AboFidelity(p, seed, k, o, multi=False, strategy="random"),
}
FIDELITY_METHODS = tuple(METHODS)


def simulate_fidelity(
    problem: str, method: str, k: int, budget: float, seed: int,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """One run: ``k`` workers until the submitted cost reaches ``budget``; a JSON-able record
    with, per completion, the simulated time, the cost spent and the regret at the target
    (``None`` before a target evaluation)."""
    prob = FIDELITY_PROBLEMS[problem]()
    rng = np.random.default_rng([seed, 2])
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.getLogger("optuna").setLevel(logging.WARNING)
        opt = METHODS[method](prob, seed, k, dict(SMOKE if options is None else options))
        events: list[tuple[float, int, Any, float, float, float]] = []
        clock = committed = spent = 0.0
        best = np.inf
        times: list[float] = []
        spents: list[float] = []
        regrets: list[float | None] = []
        fidelities: list[float] = []
        asks: list[float] = []
        n = 0
        while True:
            while len(events) < k and committed < budget:
                t0 = time.perf_counter()
                handle, x, s = opt.ask()
                asks.append(time.perf_counter() - t0)
                seconds = cost(s) * abs(rng.normal(0.0, np.sqrt(np.pi / 2)))
                committed += cost(s)
                value = prob(x, s)
                heapq.heappush(events, (clock + seconds, n, handle, value, s, seconds))
                n += 1
            if not events:
                break
            clock, _, handle, value, s, seconds = heapq.heappop(events)
            opt.tell(handle, value, seconds)
            spent += cost(s)
            if s == 1.0:
                best = min(best, value)
            times.append(round(clock, 6))
            spents.append(round(spent, 6))
            regrets.append(float(f"{prob.regret(best):.6g}") if np.isfinite(best) else None)
            fidelities.append(round(s, 4))
    return {
        "method": method, "problem": problem, "k": k, "budget": budget, "seed": seed,
        "times": times, "spent": spents, "regret": regrets, "fidelities": fidelities,
        "ask_seconds": [round(a, 5) for a in asks],
        "wall_seconds": round(time.perf_counter() - started, 3),
    }  # fmt: skip


Cell = tuple[str, str, int, float, int]  # method, problem, k, budget, seed


def cells(
    methods: Sequence[str] | None = None, problems: Sequence[str] | None = None,
    ks: Sequence[int] = (4, 16), seeds: int = 10,
) -> list[Cell]:  # fmt: skip
    """Every run of the grid (``budget_runs.grid``)."""
    return budget_runs.grid(list(methods or FIDELITY_METHODS), list(METHODS),
                            list(problems or FIDELITY_PROBLEMS), BUDGETS, ks, seeds)  # fmt: skip


def _execute(cell: Cell) -> dict[str, Any]:
    torch.set_num_threads(1)
    method, problem, k, budget, seed = cell
    return simulate_fidelity(problem, method, k, budget, seed)


def run(todo: Sequence[Cell], out: str | Path, processes: int = 1,
        say: Callable[[str], None] = print) -> int:  # fmt: skip
    """Run the cells not yet in ``out``, appending a line per run; how many ran."""
    return budget_runs.run(todo, out, _execute, processes, say)


read = budget_runs.read
