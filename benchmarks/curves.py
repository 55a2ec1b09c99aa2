"""Learning-curve benchmarks: training runs that report after every step, in simulated
asynchronous time, with and without early stopping.

Each trial trains for up to ``max_step`` steps; every step of a trial takes the same simulated
time (drawn per trial: half-normal of mean 1), after which the value of that step is reported
and the method decides whether the run goes on. A run stops when the method stops it, when it
diverges (it fails at that step) or at ``max_step`` (it is done). The budget is in steps
(``BUDGETS``: full runs times ``max_step``); a run's record has, after every finished trial,
the steps spent and the regret of the best trial that ran all ``max_step`` steps (by its
observed final value, measured on the noise-free curve): only full runs are results. Beside
it, ``regret_last``: the regret (noise-free end) of the run whose last report was the best,
stopped runs included: what a user who retrains the best configuration gets.

Problems (``CURVE_PROBLEMS``), on the unit cube:

* ``curves``: a synthetic family of 4 parameters with a documented shape: the value at step
  ``t`` is ``final(x) + (2.3 - final(x)) * exp(-t / tau(x))``, where ``final`` is a bowl
  (minimum 0.1 at ``x0 = 0.55``) with a three-fold ripple in ``x3``, and ``tau = 1 + 3 (1 -
  x0)^2`` makes a large ``x0`` (a learning rate) learn fast but end worse, so curves cross in
  the first few steps; above
  ``x0 = 0.9`` runs diverge after ``3 + 40 (1 - x0)`` steps (the value grows until it passes
  10, where the run fails); reports carry 2 % multiplicative noise. ``max_step`` 27.
* ``sgd``: the asynchronous SGD trainer of ``examples/async_sgd`` on scikit-learn's bundled
  digits, tabulated: ``benchmarks/data/sgd_curves.json`` holds the validation loss after each
  of 20 epochs of 200 configurations (a scrambled Sobol sample of the example's 7 parameters,
  seed 0, each trained once: ``python -m benchmarks curves-table`` writes it again); a point
  of the cube takes the curve of the nearest tabulated configuration. Diverged runs end
  where they diverged.
* ``linear-digits``, ``linear-diabetes``, ``gbm-cancer``, ``mlp-digits``,
  ``torch-mlp-digits``: scikit-learn and torch trainers on bundled data, each tabulated at 2048
  configurations x 20 steps (``benchmarks/real_curves.py``: the trainers and their curves'
  shapes; ``benchmarks/data/curves-<name>.json.gz``), looked up the same way.

Methods (``CURVE_METHODS``): ``auto`` (abo's default, every run to the end), ``auto+asha``
and ``auto+median`` (with abo's stopping rules), ``auto+fidelity`` (the same ASHA, and the
epochs a fidelity the strategy chooses, with the reports as observations at their steps),
``auto+fidelity+curve`` (the same fidelity model, the learning-curve matching rule stopping),
``auto+hyperband`` and ``auto+curve`` (abo's Hyperband brackets and its learning-curve
matching rule), ``auto+predict`` (the learning-curve prediction rule), ``aegis+asha``,
``aegis+hyperband``, ``aegis+curve`` and ``aegis+predict`` (the same rules under
abo's ``aegis`` strategy, whose proposals explore more than ``auto``'s: a model with more
configurations to rank), ``random+asha``, ``random+hyperband``, ``random+pasha``,
``random+curve``, ``random+predict``, and
Optuna's ``TPESampler`` with the ``HyperbandPruner`` (``tpe+hyperband``), the
``SuccessiveHalvingPruner`` (``tpe+sh``) and the ``MedianPruner`` (``tpe+median``), each at
minimum resource 1 and reduction factor 3 like abo's ASHA; with ``syne-tune`` installed
(optional), Syne Tune's ``ASHA`` (``st-asha``) and ``BOHB`` (``st-bohb``; the installable Syne
Tune 0.16 has no MOBSTER).

Example:
    >>> record = simulate_curves("curves", "random+asha", k=2, budget=60, seed=0)
    >>> record["steps"][-1] <= 60 + 27, len(record["regret"]) == len(record["steps"])
    (True, True)
"""

from __future__ import annotations

import heapq
import json
import logging
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import budget_runs, real_curves

TABLE = Path(__file__).parent / "data" / "sgd_curves.json"
DIVERGED = 10.0  # a synthetic run whose value passes this has diverged


@dataclass(frozen=True)
class CurveProblem:
    """Curves over the unit cube: ``curve(x, rng)`` is a run's reported values, one per step
    (shorter than ``max_step`` when it diverged), ``final(x)`` the noise-free value a full run
    ends at, ``optimum`` the best such value."""

    name: str
    dim: int
    max_step: int
    optimum: float
    curve: Callable[[np.ndarray, np.random.Generator], list[float]]
    final: Callable[[np.ndarray], float]


# -- the synthetic family ----------------------------------------------------------------------
def _bowl(x: np.ndarray) -> float:
    ripple = 0.1 * (1.0 - math.cos(6.0 * math.pi * (x[3] - 0.5))) / 2.0
    return (
        0.1 + 0.6 * (x[0] - 0.55) ** 2 + 0.4 * (x[1] - 0.65) ** 2 + 0.3 * (x[2] - 0.4) ** 2 + ripple
    )


def _value(x: np.ndarray, t: float) -> float:
    final = _bowl(x)
    tau = 1.0 + 3.0 * (1.0 - x[0]) ** 2
    value = final + (2.3 - final) * math.exp(-t / tau)
    if x[0] > 0.9:
        start = 3.0 + 40.0 * (1.0 - x[0])
        if t > start:
            value *= math.exp(0.5 * (t - start))
    return value


SYNTHETIC_STEPS = 27


def _synthetic_curve(x: np.ndarray, rng: np.random.Generator) -> list[float]:
    out = []
    for t in range(1, SYNTHETIC_STEPS + 1):
        value = _value(x, t) * (1.0 + 0.02 * rng.standard_normal())
        out.append(value)
        if value > DIVERGED:
            break
    return out


@cache
def _synthetic_optimum() -> float:
    from scipy.optimize import minimize

    best = math.inf
    grid = np.random.default_rng(0).random((256, 4))
    for x0 in grid[np.argsort([_value(g, SYNTHETIC_STEPS) for g in grid])[:8]]:
        options = {"xatol": 1e-9, "fatol": 1e-12, "maxiter": 4000}
        at_end = lambda z: _value(np.clip(z, 0, 1), SYNTHETIC_STEPS)  # noqa: E731
        res = minimize(at_end, x0, method="Nelder-Mead", options=options)
        best = min(best, float(res.fun))
    return best


def synthetic() -> CurveProblem:
    return CurveProblem(
        "curves", 4, SYNTHETIC_STEPS, _synthetic_optimum(), _synthetic_curve,
        lambda x: _value(x, SYNTHETIC_STEPS),
    )  # fmt: skip


# -- the tabulated SGD trainer -------------------------------------------------------------------
SGD_SPACE = {
    "lr": ("float", 1e-3, 1.0, True),
    "momentum": ("float", 0.0, 0.95, False),
    "batch_size": ("int", 8, 256, True),
    "workers": ("int", 1, 16, False),
    "dc_lambda": ("float", 1e-2, 100.0, True),
    "accumulate": ("int", 1, 8, False),
    "variant": ("cat", ("asgd", "dc-asgd", "staleness-lr")),
}
SGD_EPOCHS = 20


def sgd_params(u: np.ndarray) -> dict[str, Any]:
    """The trainer's parameters at ``u`` in the cube (the example's space, one column each)."""
    out: dict[str, Any] = {}
    for (name, spec), v in zip(SGD_SPACE.items(), u, strict=True):
        if spec[0] == "cat":
            choices = spec[1]
            out[name] = choices[min(len(choices) - 1, int(v * len(choices)))]
            continue
        out[name] = real_curves.from_unit(spec, v)
    return out


def write_table(n: int = 200, out: Path = TABLE, say: Callable[[str], None] = print) -> Path:
    """Train the SGD example once at each of ``n`` Sobol points; write their curves."""
    import sys

    from scipy.stats import qmc

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "async_sgd"))
    from trainer import Diverged, train  # type: ignore[import-not-found]

    points = qmc.Sobol(len(SGD_SPACE), scramble=True, seed=0).random(n)
    rows = []
    for i, u in enumerate(points):
        params = sgd_params(u)
        losses: list[float] = []

        def keep(epoch: int, value: float, into: list[float] = losses) -> bool:
            into.append(value)
            return False

        try:
            train({**params, "epochs": SGD_EPOCHS, "seed": 0}, keep)
        except Diverged:
            pass
        shown = [v if math.isfinite(v) else None for v in losses]
        rows.append({"u": [round(float(v), 6) for v in u], "params": params, "losses": shown})
        say(f"{i + 1}/{n}: {len(losses)} epochs, last {losses[-1] if losses else None}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"epochs": SGD_EPOCHS, "rows": rows}, indent=0) + "\n")
    return out


SGD_DIVERGED = 10.0  # the trainer's DIVERGED_LOSS: a run above it has diverged (it fails)


@cache
def _table() -> tuple[np.ndarray, list[list[float]]]:
    """The tabulated configurations (unit cube) and their curves, each cut before the first
    epoch that diverged (non-finite or above ``SGD_DIVERGED``)."""
    data = json.loads(TABLE.read_text())
    U = np.array([r["u"] for r in data["rows"]])
    curves = []
    for r in data["rows"]:
        kept = []
        for v in r["losses"]:
            if v is None or not math.isfinite(v) or v > SGD_DIVERGED:
                break
            kept.append(float(v))
        curves.append(kept)
    return U, curves


def _nearest(x: np.ndarray) -> int:
    U, _ = _table()
    return int(np.argmin(np.linalg.norm(U - x, axis=1)))


def sgd() -> CurveProblem:
    U, losses = _table()
    full = [c[-1] for c in losses if len(c) == SGD_EPOCHS]
    return CurveProblem(
        "sgd", U.shape[1], SGD_EPOCHS, float(min(full)),
        lambda x, rng: list(losses[_nearest(x)]),
        lambda x: losses[_nearest(x)][-1] if len(losses[_nearest(x)]) == SGD_EPOCHS else math.inf,
    )  # fmt: skip


CURVE_PROBLEMS: dict[str, Callable[[], CurveProblem]] = {"curves": synthetic, "sgd": sgd}
CURVE_PROBLEMS.update({name: partial(real_curves.problem, name) for name in real_curves.TRAINERS})
BUDGETS = {"curves": 40 * SYNTHETIC_STEPS, "sgd": 40 * SGD_EPOCHS}
BUDGETS.update({name: 40 * real_curves.STEPS for name in real_curves.TRAINERS})
"""Steps a run may spend: 40 full runs."""


def write_tables(problems: Sequence[str], n: int | None, say: Callable[[str], None]) -> None:
    """Tabulate the named trainers (``sgd``: the asynchronous SGD example, 200 configurations
    by default; the others ``benchmarks/real_curves.py``'s, 2048)."""
    for name in problems:
        if name == "sgd":
            write_table(n or 200, say=say)
        elif name in real_curves.TRAINERS:
            real_curves.write_table(name, n or 2048, say=say)
        else:
            raise SystemExit(f"--problems: {name!r} is not a tabulated trainer "
                             f"(sgd, {', '.join(real_curves.TRAINERS)})")  # fmt: skip


# -- methods -------------------------------------------------------------------------------------
class AboCurves:
    """An abo study driven by ask/report/tell; ``fidelity``: the steps are a fidelity the
    strategy chooses (``epochs``), the reports observations at their steps."""

    def __init__(self, problem: CurveProblem, seed: int, k: int, strategy: str = "auto",
                 stopping: Any = None, fidelity: bool = False) -> None:  # fmt: skip
        import abo

        self.names = [f"x{i}" for i in range(problem.dim)]
        params: dict[str, Any] = {n: abo.Float(0.0, 1.0) for n in self.names}
        extra: dict[str, Any] = {}
        if fidelity:
            params["epochs"] = abo.Int(1, problem.max_step, log=True)
            extra["fidelity"] = "epochs"
        self.fidelity, self.k = fidelity, k
        self.study = abo.create_study(
            abo.Space(params), strategy=strategy, seed=seed, stopping=stopping,
            strategy_options=None if strategy == "random" else {"raw_samples": 256,
                                                                  "num_restarts": 2},
            **extra,
        )  # fmt: skip

    def ask(self, max_step: int) -> tuple[Any, np.ndarray, int]:
        trial = self.study.ask(n_workers=self.k)
        steps = int(trial.params["epochs"]) if self.fidelity else max_step
        return trial.id, np.array([trial.params[n] for n in self.names]), steps

    def report(self, handle: Any, step: int, value: float) -> bool:
        return self.study.report(handle, step, value)

    def tell(self, handle: Any, value: float, seconds: float) -> None:
        self.study.tell(handle, value, info={"eval_seconds": seconds})

    def fail(self, handle: Any, seconds: float) -> None:
        self.study.fail(handle, "diverged", info={"eval_seconds": seconds})


class OptunaCurves:
    """Optuna's TPE with a pruner; running trials stay RUNNING (the sampler's liars)."""

    def __init__(self, problem: CurveProblem, seed: int, k: int, pruner: str) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        made: Any
        if pruner == "hyperband":
            made = optuna.pruners.HyperbandPruner(
                min_resource=1, max_resource=problem.max_step, reduction_factor=3
            )
        elif pruner == "median":
            made = optuna.pruners.MedianPruner()
        else:
            made = optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3)
        sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True)
        self.optuna = optuna
        self.names = [f"x{i}" for i in range(problem.dim)]
        self.dists = {n: optuna.distributions.FloatDistribution(0.0, 1.0) for n in self.names}
        self.study = optuna.create_study(direction="minimize", sampler=sampler, pruner=made)

    def ask(self, max_step: int) -> tuple[Any, np.ndarray, int]:
        trial = self.study.ask(self.dists)
        return trial, np.array([trial.params[n] for n in self.names]), max_step

    def report(self, handle: Any, step: int, value: float) -> bool:
        handle.report(value, step)
        if handle.should_prune():
            self.study.tell(handle, state=self.optuna.trial.TrialState.PRUNED)
            return True
        return False

    def tell(self, handle: Any, value: float, seconds: float) -> None:
        self.study.tell(handle, value)

    def fail(self, handle: Any, seconds: float) -> None:
        self.study.tell(handle, state=self.optuna.trial.TrialState.FAIL)


class SyneTuneCurves:
    """Syne Tune's ``ASHA`` (random configurations, stopping variant) or ``BOHB`` (a TPE-like
    model of what starts, ASHA for what stops), driven through its scheduler interface:
    ``suggest``, ``on_trial_result`` (continue or stop), ``on_trial_complete``.

    Optional: ``pip install syne-tune`` (0.16 is what installs here; it no longer ships
    MOBSTER, its GP-based multi-fidelity searcher, so ``BOHB`` is its model-based method)."""

    def __init__(self, problem: CurveProblem, seed: int, k: int, kind: str) -> None:
        from syne_tune.config_space import uniform
        from syne_tune.optimizer.baselines import ASHA as SyneASHA
        from syne_tune.optimizer.baselines import BOHB

        self.names = [f"x{i}" for i in range(problem.dim)]
        space: dict[str, Any] = {n: uniform(0.0, 1.0) for n in self.names}
        space["epochs"] = problem.max_step
        made = {"asha": SyneASHA, "bohb": BOHB}[kind]
        self.scheduler = made(
            space, metric="loss", time_attr="epoch", max_t=problem.max_step, do_minimize=True,
            random_seed=seed, grace_period=1, reduction_factor=3,
        )  # fmt: skip
        self.count = 0
        self.max_step = problem.max_step

    def ask(self, max_step: int) -> tuple[Any, np.ndarray, int]:
        import datetime

        from syne_tune.backend.trial_status import Trial

        suggestion = self.scheduler.suggest()
        trial = Trial(
            trial_id=self.count, config=suggestion.config, creation_time=datetime.datetime.now()
        )
        self.count += 1
        self.scheduler.on_trial_add(trial)
        return trial, np.array([trial.config[n] for n in self.names]), max_step

    def report(self, handle: Any, step: int, value: float) -> bool:
        from syne_tune.optimizer.scheduler import SchedulerDecision

        if step >= self.max_step:  # its last step: Syne Tune says STOP there, meaning done
            return False  # (``tell`` reports it as the trial's completion)
        decision = self.scheduler.on_trial_result(handle, {"loss": value, "epoch": step})
        if decision == SchedulerDecision.STOP:
            self.scheduler.on_trial_remove(handle)
            return True
        return False

    def tell(self, handle: Any, value: float, seconds: float) -> None:
        self.scheduler.on_trial_complete(handle, {"loss": value, "epoch": handle.config["epochs"]})

    def fail(self, handle: Any, seconds: float) -> None:
        self.scheduler.on_trial_error(handle)


def _rule(name: str, problem: CurveProblem) -> dict[str, Any]:
    """A rule with its defaults (ASHA's: first rung 1, reduction factor 3) and the problem's
    last step, as a user who knows it sets."""
    return {"rule": name, "max_step": problem.max_step}


PAGE_COLUMNS = ("auto", "auto+asha", "auto+hyperband", "auto+curve", "auto+predict", "aegis+asha",
                "auto+fidelity")  # fmt: skip
"""The methods of the results page's real-curves table (``budget_report.summary_table``)."""

METHODS: dict[str, Callable[[CurveProblem, int, int], Any]] = {
    "auto": lambda p, s, k: AboCurves(p, s, k),
    "auto+asha": lambda p, s, k: AboCurves(p, s, k, stopping=_rule("asha", p)),
    "auto+median": lambda p, s, k: AboCurves(p, s, k, stopping="median"),
    "auto+fidelity": lambda p, s, k: AboCurves(p, s, k, stopping=_rule("asha", p), fidelity=True),
    "auto+fidelity+curve": lambda p, s, k: AboCurves(
        p, s, k, stopping=_rule("curve", p), fidelity=True
    ),
    "random+asha": lambda p, s, k: AboCurves(p, s, k, strategy="random", stopping=_rule("asha", p)),
    "auto+hyperband": lambda p, s, k: AboCurves(p, s, k, stopping=_rule("hyperband", p)),
    "auto+curve": lambda p, s, k: AboCurves(p, s, k, stopping=_rule("curve", p)),
    "auto+predict": lambda p, s, k: AboCurves(p, s, k, stopping=_rule("predict", p)),
    "aegis+asha": lambda p, s, k: AboCurves(p, s, k, strategy="aegis", stopping=_rule("asha", p)),
    "aegis+hyperband": lambda p, s, k: AboCurves(
        p, s, k, strategy="aegis", stopping=_rule("hyperband", p)
    ),
    "aegis+curve": lambda p, s, k: AboCurves(p, s, k, strategy="aegis", stopping=_rule("curve", p)),
    "aegis+predict": lambda p, s, k: AboCurves(
        p, s, k, strategy="aegis", stopping=_rule("predict", p)
    ),
    "random+hyperband": lambda p, s, k: AboCurves(
        p, s, k, strategy="random", stopping=_rule("hyperband", p)
    ),
    "random+pasha": lambda p, s, k: AboCurves(
        p, s, k, strategy="random", stopping=_rule("pasha", p)
    ),
    "random+curve": lambda p, s, k: AboCurves(
        p, s, k, strategy="random", stopping=_rule("curve", p)
    ),
    "random+predict": lambda p, s, k: AboCurves(
        p, s, k, strategy="random", stopping=_rule("predict", p)
    ),
    "tpe+hyperband": lambda p, s, k: OptunaCurves(p, s, k, "hyperband"),
    "tpe+sh": lambda p, s, k: OptunaCurves(p, s, k, "sh"),
    "tpe+median": lambda p, s, k: OptunaCurves(p, s, k, "median"),
    "st-asha": lambda p, s, k: SyneTuneCurves(p, s, k, "asha"),
    "st-bohb": lambda p, s, k: SyneTuneCurves(p, s, k, "bohb"),
}
OPTIONAL = ("st-asha", "st-bohb")  # need syne-tune installed (not a dependency of abo)
CURVE_METHODS = tuple(m for m in METHODS if m not in OPTIONAL)


def _regret(true: float, optimum: float) -> float | None:
    regret = true - optimum
    return float(f"{max(regret, 0.0):.6g}") if math.isfinite(regret) else None


def simulate_curves(problem: str, method: str, k: int, budget: int, seed: int) -> dict[str, Any]:
    """One run with ``k`` workers until ``budget`` steps were started (see the module)."""
    prob = CURVE_PROBLEMS[problem]()
    durations = np.random.default_rng([seed, 2])
    noise = np.random.default_rng([seed, 3])
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.getLogger("optuna").setLevel(logging.WARNING)
        opt = METHODS[method](prob, seed, k)
        events: list[tuple[float, int, Any]] = []  # (time, order, run)
        clock, committed, spent, order = 0.0, 0, 0, 0
        best_observed, best_true = math.inf, math.inf
        best_last = (math.inf, math.inf)  # (last report, noise-free end) of the best by it
        out = {"steps": [], "times": [], "regret": [], "regret_last": [], "trials": 0,
               "full": 0, "stopped": 0, "failed": 0, "ask_seconds": []}  # fmt: skip
        while True:
            while len(events) < k and committed < budget:
                t0 = time.perf_counter()
                handle, x, steps = opt.ask(prob.max_step)
                out["ask_seconds"].append(round(time.perf_counter() - t0, 5))
                step_time = abs(durations.normal(0.0, math.sqrt(math.pi / 2)))
                curve = prob.curve(x, noise)
                run = {"handle": handle, "x": x, "steps": steps, "curve": curve, "at": 0,
                       "step_time": step_time}  # fmt: skip
                committed += steps
                heapq.heappush(events, (clock + step_time, order, run))
                order += 1
                out["trials"] += 1
            if not events:
                break
            clock, _, run = heapq.heappop(events)
            run["at"] += 1
            spent += 1
            t, curve = run["at"], run["curve"]
            seconds = t * run["step_time"]
            ended, last = True, None
            if t > len(curve):  # diverged before this step
                opt.fail(run["handle"], seconds)
                out["failed"] += 1
                committed -= run["steps"] - t
            elif opt.report(run["handle"], t, curve[t - 1]):
                out["stopped"] += 1
                committed -= run["steps"] - t  # what it will not spend
                last = curve[t - 1]
            elif t == run["steps"]:
                opt.tell(run["handle"], curve[t - 1], seconds)
                last = curve[t - 1]
                if t == prob.max_step:
                    out["full"] += 1
                    if curve[t - 1] < best_observed:
                        best_observed, best_true = curve[t - 1], prob.final(run["x"])
            else:
                ended = False
                heapq.heappush(events, (clock + run["step_time"], order, run))
                order += 1
            if last is not None and last < best_last[0]:
                best_last = (last, prob.final(run["x"]))
            if ended:
                out["steps"].append(spent)
                out["times"].append(round(clock, 6))
                out["regret"].append(_regret(best_true, prob.optimum))
                out["regret_last"].append(_regret(best_last[1], prob.optimum))
    return {"method": method, "problem": problem, "k": k, "budget": budget, "seed": seed,
            **out, "wall_seconds": round(time.perf_counter() - started, 3)}  # fmt: skip


Cell = tuple[str, str, int, int, int]  # method, problem, k, budget, seed


def cells(methods: Sequence[str] | None = None, problems: Sequence[str] | None = None,
          ks: Sequence[int] = (4, 16), seeds: int = 10) -> list[Cell]:  # fmt: skip
    """Every run of the grid (``budget_runs.grid``)."""
    return budget_runs.grid(list(methods or CURVE_METHODS), list(METHODS),
                            list(problems or CURVE_PROBLEMS), BUDGETS, ks, seeds)  # fmt: skip


def _execute(cell: Cell) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    return simulate_curves(cell[1], cell[0], cell[2], cell[3], cell[4])


def run(todo: Sequence[Cell], out: str | Path, processes: int = 1,
        say: Callable[[str], None] = print) -> int:  # fmt: skip
    """Run the cells not yet in ``out``, appending a line per run; how many ran."""
    return budget_runs.run(todo, out, _execute, processes, say)


read = budget_runs.read
