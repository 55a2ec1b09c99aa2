"""A discrete-event simulator of asynchronous optimisation with ``k`` workers.

Evaluation durations are sampled, never slept: the clock jumps to the next completion, and only
the optimiser's own compute is real (measured per proposal). Common random numbers: the seed
fixes the initial design and the duration stream (the i-th submitted job takes the i-th
duration), so every method faces the same workers; each method's own randomness is seeded from
the same seed but is its own.

The protocol (stated in full in ``docs/benchmarks.md``, "Protocol"): ``n0 = 2d``
Latin-hypercube points are evaluated for free at ``t = 0`` (they count toward the budget, not
the time); then all ``k`` workers are filled, each proposal seeing the others as busy; whenever
evaluations finish (ties together) the method is told and proposes one point per free worker
until ``budget`` points were submitted.

Example:
    >>> from benchmarks.problems import branin
    >>> run = simulate(branin(), "random", k=2, budget=8, seed=0)
    >>> len(run.completions), run.completions[-1].n_completed
    (4, 8)
"""

from __future__ import annotations

import heapq
import logging
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from scipy.stats import qmc

from abo.spec.study_spec import default_n_initial
from benchmarks.problems import Problem

DURATIONS = ("halfnormal", "exponential", "pareto", "uniform")


def sample_durations(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` evaluation durations of mean 1 (as in the Kandasamy and AEGiS code)."""
    if kind == "halfnormal":
        return np.abs(rng.normal(0.0, np.sqrt(np.pi / 2), n))
    if kind == "exponential":
        return rng.exponential(1.0, n)
    if kind == "pareto":
        return (4.0 / 5.0) * (1.0 + rng.pareto(5.0, n))
    if kind == "uniform":
        return rng.uniform(0.0, 2.0, n)
    raise ValueError(f"durations: unknown {kind!r}; choose one of {', '.join(DURATIONS)}")


def initial_design(dim: int, n: int, seed: int) -> np.ndarray:
    """``n x dim`` Latin-hypercube points in the unit cube, fixed by ``seed``."""
    return qmc.LatinHypercube(d=dim, seed=np.random.default_rng([seed, 1])).random(n)


# -- methods ---------------------------------------------------------------------------------
class Method(Protocol):
    """An ask/tell optimiser as the simulator drives it (minimisation on the unit cube)."""

    def add(self, x: np.ndarray, y: float) -> None:
        """Record a free initial-design result."""

    def ask(self) -> tuple[Any, np.ndarray]:
        """A handle and the point to evaluate; everything asked and not told is busy."""

    def tell(self, handle: Any, y: float) -> None:
        """The value of an asked point."""


MethodFactory = Callable[[Problem, int, int, int], Method]
"""``(problem, seed, k, n_initial) -> Method``."""


class AboMethod:
    """An in-memory abo ``Study`` driven by ask/tell."""

    def __init__(
        self,
        problem: Problem,
        seed: int,
        k: int,
        n_initial: int,
        strategy: str = "qlognei",
        noise: str = "deterministic",
        strategy_options: dict[str, Any] | None = None,
        refit: str = "sync",
        output_transform: str = "none",
    ) -> None:
        import abo

        self._names = [f"x{i}" for i in range(problem.dim)]
        space = abo.Space({name: abo.Float(0.0, 1.0) for name in self._names})
        self._k = k
        self.study = abo.create_study(
            space,
            storage=None,
            strategy=strategy,
            seed=seed,
            n_initial=n_initial,
            noise=noise,
            strategy_options=strategy_options,
            refit=refit,
            output_transform=output_transform,
        )

    def add(self, x: np.ndarray, y: float) -> None:
        self.study.add(dict(zip(self._names, map(float, x), strict=True)), y)

    def ask(self) -> tuple[Any, np.ndarray]:
        trial = self.study.ask(n_workers=self._k)
        return trial.id, np.array([trial.params[name] for name in self._names])

    def tell(self, handle: Any, y: float) -> None:
        self.study.tell(handle, y)


class OptunaMethod:
    """An Optuna study; asked trials stay RUNNING until told, so the sampler sees them."""

    def __init__(self, problem: Problem, seed: int, k: int, n_initial: int, sampler: str) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        if sampler == "gp":
            # The model starts after the shared initial design, as abo's does.
            made = optuna.samplers.GPSampler(seed=seed, n_startup_trials=n_initial)
        elif sampler == "cmaes":  # after the same initial design; told points seed it
            made = optuna.samplers.CmaEsSampler(seed=seed, n_startup_trials=n_initial)
        elif sampler == "tpe":
            made = optuna.samplers.TPESampler(
                seed=seed, constant_liar=True, multivariate=True, n_startup_trials=n_initial
            )
        else:
            raise ValueError(f"sampler: unknown Optuna sampler {sampler!r}")
        self._optuna = optuna
        self._names = [f"x{i}" for i in range(problem.dim)]
        self._dists = {n: optuna.distributions.FloatDistribution(0.0, 1.0) for n in self._names}
        self.study = optuna.create_study(direction="minimize", sampler=made)

    def add(self, x: np.ndarray, y: float) -> None:
        params = dict(zip(self._names, map(float, x), strict=True))
        self.study.add_trial(
            self._optuna.trial.create_trial(params=params, distributions=self._dists, value=y)
        )

    def ask(self) -> tuple[Any, np.ndarray]:
        trial = self.study.ask(self._dists)
        return trial, np.array([trial.params[name] for name in self._names])

    def tell(self, handle: Any, y: float) -> None:
        self.study.tell(handle, y)


def _abo(strategy: str, **options: Any) -> MethodFactory:
    def make(problem: Problem, seed: int, k: int, n_initial: int) -> Method:
        return AboMethod(problem, seed, k, n_initial, strategy=strategy, **options)

    return make


def _optuna(sampler: str) -> MethodFactory:
    def make(problem: Problem, seed: int, k: int, n_initial: int) -> Method:
        return OptunaMethod(problem, seed, k, n_initial, sampler)

    return make


METHODS: dict[str, MethodFactory] = {
    "qlognei": _abo("qlognei"),
    "believer": _abo("believer"),
    "random": _abo("random"),
    "optuna-gp": _optuna("gp"),
    "optuna-tpe": _optuna("tpe"),
}


# -- the simulation --------------------------------------------------------------------------
@dataclass(frozen=True)
class Completion:
    """One finished evaluation (initial-design points have ``time == 0``)."""

    time: float
    value: float
    regret: float
    proposal_seconds: float
    n_completed: int
    n_busy: int


@dataclass
class RunResult:
    """Everything one simulated run recorded."""

    problem: str
    method: str
    k: int
    budget: int
    seed: int
    durations: str
    n_initial: int
    completions: list[Completion] = field(default_factory=list)
    proposal_seconds: list[float] = field(default_factory=list)

    @property
    def final_regret(self) -> float:
        return self.completions[-1].regret

    def regret_at(self, n: int) -> float:
        """Best-so-far regret after ``n`` completed evaluations (initial design included)."""
        return next(c.regret for c in self.completions if c.n_completed >= n)


def simulate(
    problem: Problem,
    method: str | MethodFactory,
    k: int,
    budget: int,
    seed: int,
    durations: str = "halfnormal",
    n_initial: int | None = None,
    method_name: str | None = None,
) -> RunResult:
    """Run ``method`` on ``problem`` with ``k`` asynchronous workers until ``budget`` results.

    Args:
        problem: the function to minimise.
        method: a name from ``METHODS`` or a factory ``(problem, seed, k, n_initial) -> Method``.
        k: workers (evaluations in flight at once).
        budget: total evaluations, the initial design included.
        seed: fixes the initial design, the duration stream and the method's own seed.
        durations: ``"halfnormal"`` (mean 1), ``"exponential"``, ``"pareto"`` or ``"uniform"``.
        n_initial: size of the free initial design (default abo's, ``default_n_initial``).
        method_name: the name to record for a factory.
    """
    if k < 1:
        raise ValueError(f"k: expected at least one worker, got {k}")
    n0 = default_n_initial(problem.dim) if n_initial is None else n_initial
    if not 1 <= n0 <= budget:
        raise ValueError(f"budget: must be at least the initial design ({n0}), got {budget}")
    if isinstance(method, str):
        if method not in METHODS:
            raise ValueError(f"method: unknown {method!r}; choose one of {', '.join(METHODS)}")
        name, factory = method, METHODS[method]
    else:
        name, factory = method_name or getattr(method, "__name__", "custom"), method
    taus = sample_durations(durations, budget, np.random.default_rng([seed, 2]))
    result = RunResult(problem.name, name, k, budget, seed, durations, n0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # experimental-feature and numerical chatter
        logging.getLogger("optuna").setLevel(logging.WARNING)
        _run(problem, factory(problem, seed, k, n0), k, budget, n0, taus, seed, result)
    return result


def _run(
    problem: Problem,
    opt: Method,
    k: int,
    budget: int,
    n0: int,
    taus: np.ndarray,
    seed: int,
    result: RunResult,
) -> None:
    best = np.inf
    for i, x in enumerate(initial_design(problem.dim, n0, seed)):
        y = problem(x)
        opt.add(x, y)
        best = min(best, y)
        result.completions.append(Completion(0.0, y, problem.regret(best), 0.0, i + 1, 0))
    events: list[tuple[float, int, Any, float, float]] = []  # (finish, job, handle, y, secs)
    submitted = completed = n0
    clock = 0.0

    def submit() -> None:
        nonlocal submitted
        t0 = time.perf_counter()
        handle, x = opt.ask()
        seconds = time.perf_counter() - t0
        result.proposal_seconds.append(seconds)
        y = problem(x)
        heapq.heappush(events, (clock + float(taus[submitted]), submitted, handle, y, seconds))
        submitted += 1

    while submitted < budget and len(events) < k:
        submit()
    while completed < budget:
        clock = events[0][0]
        while events and events[0][0] == clock:  # ties finish together
            _, _, handle, y, seconds = heapq.heappop(events)
            opt.tell(handle, y)
            completed += 1
            best = min(best, y)
            result.completions.append(
                Completion(clock, y, problem.regret(best), seconds, completed, len(events))
            )
        while submitted < budget and len(events) < k:
            submit()
