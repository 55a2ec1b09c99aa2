"""Conditional-space benchmark: a choice between three sub-problems of different dimension, one
of them with a nested choice of its own dimension, against Optuna's samplers.

The problem (``branches``, minimised, optimum 0), in abo's conditional form::

    branch    in {a, b, c}
    a_x1, a_x2            when branch = a   Branin:   (f - f*) / 60 + 0.25          (best 0.25)
    b_x1, b_x2, b_x3      when branch = b   Levy-3 / 20                              (best 0)
    c_depth in 2..4       when branch = c
    c_x1, c_x2            when branch = c   Levy in c_depth dimensions / 20 + 0.1    (best 0.1)
    c_x3                  when c_depth in {3, 4}
    c_x4                  when c_depth = 4

Every coordinate is in ``[0, 1]`` (mapped onto each function's box: Levy's ``[-10, 10]``, its
optimum at 1, i.e. 0.55 on the cube). The global optimum is in branch ``b``; ``a`` and ``c`` are
decoys whose best values are close and whose typical values are alike (the median of each
branch over its cube is between about 0.5 and 1), so a method must try every branch and then
spend its evaluations in the right one.

Methods (``COND_METHODS``), each with ``k`` simulated asynchronous workers (half-normal
durations of mean 1), running trials left visible to the method:

* ``auto``: abo's default on the conditional space;
* ``auto-flat``: abo's default on the flat space (all 11 parameters in every trial; the
  objective ignores those its branch does not use): what a user without conditions writes;
* ``optuna-tpe``: ``TPESampler(multivariate=True, group=True, constant_liar=True)``,
  define-by-run (it suggests only the active parameters: TPE's own conditional support);
* ``optuna-gp``: ``GPSampler`` on the flat space (it needs one);
* ``random``: abo's random search on the conditional space.

Each method uses its own default initial design (abo: twice the most parameters one
configuration has, 12; Optuna: 10). A run records, after every completion, the number of
evaluations completed (``evals``) and the best value so far (the regret: the optimum is 0).
"""

from __future__ import annotations

import heapq
import logging
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks import budget_runs

BUDGET = 60
SMOKE = {"raw_samples": 256, "num_restarts": 2}  # the acquisition effort of the other suites
FLAT = ("branch", "a_x1", "a_x2", "b_x1", "b_x2", "b_x3", "c_depth", "c_x1", "c_x2", "c_x3",
        "c_x4")  # fmt: skip


def _on_box(fn: Any, x: Sequence[float]) -> float:
    bounds = fn.bounds.to(torch.double)
    z = bounds[0] + torch.as_tensor(list(x), dtype=torch.double) * (bounds[1] - bounds[0])
    return float(fn.evaluate_true(z.unsqueeze(0)).item())


class Branches:
    """The problem; ``__call__`` takes conditional or flat parameters alike (it reads only
    those of the chosen branch)."""

    def __init__(self) -> None:
        from botorch.test_functions import Branin, Levy

        self.branin = Branin()
        self.levy = {d: Levy(dim=d) for d in (2, 3, 4)}

    def __call__(self, p: dict[str, Any]) -> float:
        if p["branch"] == "a":
            value = _on_box(self.branin, [p["a_x1"], p["a_x2"]])
            return (value - float(self.branin.optimal_value)) / 60.0 + 0.25
        if p["branch"] == "b":
            return _on_box(self.levy[3], [p["b_x1"], p["b_x2"], p["b_x3"]]) / 20.0
        d = int(p["c_depth"])
        return _on_box(self.levy[d], [p[f"c_x{i}"] for i in range(1, d + 1)]) / 20.0 + 0.1


def space(conditional: bool) -> dict[str, Any]:
    """The problem's abo space, conditional or flat."""
    import abo

    def when(**c: Any) -> dict[str, Any]:
        return {"when": c} if conditional else {}

    return {
        "branch": abo.Categorical(["a", "b", "c"]),
        **{f"a_x{i}": abo.Float(0.0, 1.0, **when(branch="a")) for i in (1, 2)},
        **{f"b_x{i}": abo.Float(0.0, 1.0, **when(branch="b")) for i in (1, 2, 3)},
        "c_depth": abo.Int(2, 4, **when(branch="c")),
        **{f"c_x{i}": abo.Float(0.0, 1.0, **when(branch="c")) for i in (1, 2)},
        "c_x3": abo.Float(0.0, 1.0, **when(c_depth=[3, 4])),
        "c_x4": abo.Float(0.0, 1.0, **when(c_depth=4)),
    }


class Abo:
    def __init__(self, seed: int, k: int, conditional: bool, strategy: str = "auto") -> None:
        import abo

        options = SMOKE if strategy != "random" else None
        self.study = abo.create_study(space(conditional), strategy=strategy, seed=seed,
                                      noise="deterministic", strategy_options=options)  # fmt: skip
        self.k = k

    def ask(self) -> tuple[Any, dict[str, Any]]:
        trial = self.study.ask(n_workers=self.k)
        return trial.id, trial.params

    def tell(self, handle: Any, value: float) -> None:
        self.study.tell(handle, value)


class Optuna:
    def __init__(self, seed: int, sampler: str) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        if sampler == "gp":
            made: Any = optuna.samplers.GPSampler(seed=seed)
        else:
            made = optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True,
                                              constant_liar=True)  # fmt: skip
        self.flat = sampler == "gp"
        self.study = optuna.create_study(direction="minimize", sampler=made)

    def ask(self) -> tuple[Any, dict[str, Any]]:
        trial = self.study.ask()
        if self.flat:
            return trial, {
                n: trial.suggest_categorical(n, ["a", "b", "c"]) if n == "branch"
                else trial.suggest_int(n, 2, 4) if n == "c_depth"
                else trial.suggest_float(n, 0.0, 1.0)
                for n in FLAT
            }  # fmt: skip
        p: dict[str, Any] = {"branch": trial.suggest_categorical("branch", ["a", "b", "c"])}
        if p["branch"] == "a":
            p.update({f"a_x{i}": trial.suggest_float(f"a_x{i}", 0.0, 1.0) for i in (1, 2)})
        elif p["branch"] == "b":
            p.update({f"b_x{i}": trial.suggest_float(f"b_x{i}", 0.0, 1.0) for i in (1, 2, 3)})
        else:
            p["c_depth"] = trial.suggest_int("c_depth", 2, 4)
            for i in range(1, p["c_depth"] + 1):
                p[f"c_x{i}"] = trial.suggest_float(f"c_x{i}", 0.0, 1.0)
        return trial, p

    def tell(self, handle: Any, value: float) -> None:
        self.study.tell(handle, value)


METHODS: dict[str, Callable[[int, int], Any]] = {
    "auto": lambda seed, k: Abo(seed, k, conditional=True),
    "auto-flat": lambda seed, k: Abo(seed, k, conditional=False),
    "optuna-tpe": lambda seed, k: Optuna(seed, "tpe"),
    "optuna-gp": lambda seed, k: Optuna(seed, "gp"),
    "random": lambda seed, k: Abo(seed, k, conditional=True, strategy="random"),
}
COND_METHODS = tuple(METHODS)


def simulate(method: str, k: int, budget: int, seed: int) -> dict[str, Any]:
    """One run of ``method`` with ``k`` workers for ``budget`` evaluations."""
    prob = Branches()
    rng = np.random.default_rng([seed, 4])
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.getLogger("optuna").setLevel(logging.WARNING)
        opt = METHODS[method](seed, k)
        events: list[tuple[float, int, Any, float, str]] = []
        clock, best, submitted = 0.0, np.inf, 0
        times: list[float] = []
        regrets: list[float] = []
        branches: list[str] = []
        asks: list[float] = []
        while True:
            while len(events) < k and submitted < budget:
                t0 = time.perf_counter()
                handle, params = opt.ask()
                asks.append(time.perf_counter() - t0)
                value = prob(params)
                seconds = abs(rng.normal(0.0, np.sqrt(np.pi / 2)))
                heapq.heappush(events, (clock + seconds, submitted, handle, value,
                                        str(params["branch"])))  # fmt: skip
                submitted += 1
            if not events:
                break
            clock, _, handle, value, branch = heapq.heappop(events)
            opt.tell(handle, value)
            best = min(best, value)
            times.append(round(clock, 6))
            regrets.append(float(f"{max(best, 0.0):.6g}"))
            branches.append(branch)
    return {
        "method": method, "problem": "branches", "k": k, "budget": budget, "seed": seed,
        "times": times, "evals": list(range(1, len(times) + 1)), "regret": regrets,
        "branches": branches, "ask_seconds": [round(a, 5) for a in asks],
        "wall_seconds": round(time.perf_counter() - started, 3),
    }  # fmt: skip


Cell = tuple[str, str, int, int, int]  # method, problem, k, budget, seed


def cells(
    methods: Sequence[str] | None = None, problems: Sequence[str] | None = None,
    ks: Sequence[int] = (4, 16), seeds: int = 10,
) -> list[Cell]:  # fmt: skip
    """Every run of the grid (``budget_runs.grid``; one problem, ``branches``)."""
    chosen = list(problems or ["branches"])
    return budget_runs.grid(list(methods or COND_METHODS), COND_METHODS, chosen,
                            {"branches": BUDGET}, ks, seeds)  # fmt: skip


def _execute(cell: Cell) -> dict[str, Any]:
    torch.set_num_threads(1)
    method, _problem, k, budget, seed = cell
    return simulate(method, k, budget, seed)


def run(todo: Sequence[Cell], out: str | Path, processes: int = 1,
        say: Callable[[str], None] = print) -> int:  # fmt: skip
    """Run the cells not yet in ``out``, appending a line per run; how many ran."""
    return budget_runs.run(todo, out, _execute, processes, say)


read = budget_runs.read
