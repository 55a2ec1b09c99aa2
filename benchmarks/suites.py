"""The benchmark problems (noisy ones too) and the named benchmark suites.

``benchmarks/problems.py`` holds the noiseless Branin and Hartmann-6; this module adds Ackley
(5-D and 10-D), Levy-5, Michalewicz-5 and Rosenbrock-8 on the same unit-cube footing, plus Gaussian
observation noise for the noisy variants, and names the grids ``python -m benchmarks run`` can
run (the protocol: ``docs/benchmarks.md``, "Protocol"). The problems of several objectives
(``benchmarks/mo_problems.py``) are known here by name too, for the ``multiobjective`` suite.

Example:
    >>> SUITES["smoke"].budgets["branin"], get_problem("ackley10").dim
    (60, 10)
    >>> SUITES["multiobjective"].budgets["branincurrin"], get_problem("vehiclesafety").dim
    (40, 5)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from botorch.test_functions import Ackley, Branin, Hartmann, Levy, Michalewicz, Rosenbrock

from benchmarks.constrained_problems import CONSTRAINED_PROBLEMS, ConstrainedProblem
from benchmarks.mo_problems import MO_PROBLEMS, MOProblem
from benchmarks.problems import Problem, _on_cube


@dataclass(frozen=True)
class NoisyProblem:
    """``true`` observed with Gaussian noise of standard deviation ``noise_sd``.

    Regret is always measured on ``true`` (the noiseless function) at the point a method would
    report, so noise never makes a run look better than it is.
    """

    name: str
    true: Problem
    noise_sd: float

    @property
    def dim(self) -> int:
        return self.true.dim

    @property
    def optimum(self) -> float:
        return self.true.optimum


AnyProblem = Problem | NoisyProblem | MOProblem | ConstrainedProblem


def _make(name: str, fn: Any) -> Callable[[], Problem]:
    def build() -> Problem:
        made = fn()
        return Problem(name, made.dim, float(made.optimal_value), _on_cube(made))

    build.__doc__ = f"{name} on the unit cube (BoTorch's implementation, minimised)."
    return build


def _noisy(name: str, base: Callable[[], Problem], sd: float) -> Callable[[], NoisyProblem]:
    def build() -> NoisyProblem:
        return NoisyProblem(name, base(), sd)

    build.__doc__ = f"{name}: observations with Gaussian noise of sd {sd}."
    return build


_branin = _make("branin", Branin)
_hartmann6 = _make("hartmann6", lambda: Hartmann(dim=6))


def _embedded(name: str, fn: Any, dim: int) -> Callable[[], Problem]:
    """``fn``'s problem hidden among ``dim`` parameters: it reads a fixed, seeded choice of
    its own number of them (in that order) and ignores the rest."""

    def build() -> Problem:
        inner = _make(name, fn)()
        rng = np.random.default_rng(dim)  # the same hidden coordinates in every run
        active = np.sort(rng.choice(dim, size=inner.dim, replace=False))

        def evaluate(x: np.ndarray) -> float:
            if x.shape != (dim,):
                raise ValueError(f"x: expected {dim} values, got shape {x.shape}")
            return inner(x[active])

        return Problem(name, dim, inner.optimum, evaluate)

    build.__doc__ = f"{name}: a problem read from {dim} parameters, most of them inert."
    return build


PROBLEMS: dict[str, Callable[[], AnyProblem]] = {
    "branin": _branin,
    "hartmann6": _hartmann6,
    "ackley5": _make("ackley5", lambda: Ackley(dim=5)),
    "ackley10": _make("ackley10", lambda: Ackley(dim=10)),
    "levy5": _make("levy5", lambda: Levy(dim=5)),
    "michalewicz5": _make("michalewicz5", lambda: Michalewicz(dim=5)),
    # values from 0 to about 1e7 on [-5, 10]^8: a few huge values dominate a GP of raw values
    "rosenbrock8": _make("rosenbrock8", lambda: Rosenbrock(dim=8)),
    "hartmann6-noisy": _noisy("hartmann6-noisy", _hartmann6, 0.1),
    # wide spaces (issue: long campaigns and wide spaces)
    "ackley20": _make("ackley20", lambda: Ackley(dim=20)),
    "ackley50": _make("ackley50", lambda: Ackley(dim=50)),
    "rosenbrock20": _make("rosenbrock20", lambda: Rosenbrock(dim=20)),
    "branin-in-100": _embedded("branin-in-100", Branin, 100),
    "hartmann6-in-100": _embedded("hartmann6-in-100", lambda: Hartmann(dim=6), 100),
    "branin-noisy": _noisy("branin-noisy", _branin, 1.0),
    **MO_PROBLEMS,
    **CONSTRAINED_PROBLEMS,
}


def get_problem(name: str) -> AnyProblem:
    """The problem called ``name`` (``ValueError`` listing the known names otherwise)."""
    if name not in PROBLEMS:
        raise ValueError(f"problem: unknown {name!r}; choose one of {', '.join(PROBLEMS)}")
    return PROBLEMS[name]()


def observe(problem: AnyProblem, x: np.ndarray, rng: np.random.Generator) -> tuple[Any, Any]:
    """``(observed value, true value)`` of ``problem`` at ``x``; ``rng`` draws the noise.

    For a problem of several objectives both are the (noiseless) vector of values; for a
    constrained or crashing one, the outcome (``None`` when the evaluation failed).
    """
    if isinstance(problem, MOProblem | ConstrainedProblem):
        values = problem(x)
        return values, values
    if isinstance(problem, NoisyProblem):
        true = problem.true(x)
        return true + problem.noise_sd * float(rng.standard_normal()), true
    value = problem(x)
    return value, value


# -- suites ----------------------------------------------------------------------------------
SMOKE_OPTIONS: dict[str, Any] = {"raw_samples": 256, "num_restarts": 2}
"""Acquisition effort in the smoke suite: half the full suite's 512/4, to keep the suite short."""


@dataclass(frozen=True)
class Suite:
    """A grid of runs: every method on every problem, ``k`` and seed."""

    name: str
    budgets: dict[str, int]
    ks: tuple[int, ...]
    seeds: int
    methods: tuple[str, ...] | None = None  # None: every method in ``benchmarks.methods``
    durations: tuple[str, ...] = ("halfnormal",)
    strategy_options: dict[str, Any] = field(default_factory=dict)


SUITES: dict[str, Suite] = {
    "smoke": Suite(
        "smoke",
        {"branin": 60, "hartmann6": 100},
        (4, 16),
        10,
        strategy_options=SMOKE_OPTIONS,
    ),
    "full": Suite(
        "full",
        {
            "branin": 100,
            "branin-noisy": 100,
            "hartmann6": 150,
            "hartmann6-noisy": 150,
            "ackley5": 150,
            "levy5": 150,
            "michalewicz5": 150,
            "ackley10": 200,
        },
        (4, 8, 16),
        20,
        strategy_options={"raw_samples": 512, "num_restarts": 4},
    ),
    "scale": Suite(  # output_transform: raw values against the power transform
        "scale",
        {"rosenbrock8": 120, "branin": 60, "hartmann6": 100},
        (4, 16),
        10,
        methods=(
            "qlognei",
            "qlognei+power",
            "believer",
            "believer+power",
            "thompson",
            "thompson+power",
            "optuna-gp",
            "optuna-tpe",
            "random",
        ),
        strategy_options=SMOKE_OPTIONS,
    ),  # fmt: skip
    # issue 16's broad suite: the default against every abo strategy and the baselines, with
    # each strategy's own defaults (what a user gets), problems not tuned on included
    "broad": Suite(
        "broad",
        {
            "branin": 60,
            "hartmann6": 100,
            "ackley5": 100,
            "levy5": 100,
            "ackley10": 150,
            "rosenbrock8": 120,
            "branin-noisy": 60,
            "hartmann6-noisy": 100,
        },
        (4, 16),
        10,
        methods=(
            "auto",
            "believer",
            "qlognei",
            "thompson",
            "playbook",
            "aegis",
            "portfolio",
            "lp",
            "ucb",
            "aegis-rs",
            "random",
            "optuna-gp",
            "optuna-tpe",
            "sync-qlognei",
            "seq-logei",
        ),
    ),  # fmt: skip
    # several objectives: every method that supports the problem's number of objectives.
    # Budgets: BraninCurrin (2-D) gets 40, ten times its initial design of 2d = 4; DTLZ2 and
    # ZDT2 (6-D) get 60, five times theirs (12): enough for the models to separate from
    # random search and for NSGA-II to run 4 generations. VehicleSafety (5-D, 3 objectives)
    # gets 40, four times its design of 10: a qLogNEHVI ask over three objectives costs
    # several times one over two (the box decomposition of a 3-D front), and at 60 one run
    # of the default took 214 s here, which would have left time for two seeds in all.
    # Acquisition effort as in the smoke suite.
    "multiobjective": Suite(
        "multiobjective",
        {"branincurrin": 40, "dtlz2": 60, "zdt2": 60, "vehiclesafety": 40},
        (4, 16),
        10,
        strategy_options=SMOKE_OPTIONS,
    ),
    # issue 18: outcome constraints (BoTorch's constrained problems) and crash regions, abo's
    # default (a GP per constraint, a GP classifier of failures) against Optuna's samplers
    # with constraints_func and failures told as FAIL, and against abo's earlier worst-value
    # imputation of failures (``auto+worst``, crash problems only: without failures it is
    # ``auto``). Budgets: 20 times the dimension, at least 40; acquisition effort as in smoke.
    "constrained": Suite(
        "constrained",
        {"gramacy": 40, "tensioncompression": 60, "pressurevessel": 80},
        (4, 16),
        10,
        methods=("auto", "random", "optuna-gp", "optuna-tpe"),
        strategy_options=SMOKE_OPTIONS,
    ),
    "crash": Suite(
        "crash",
        {"branin-crash": 40, "hartmann6-crash": 120},
        (4, 16),
        10,
        methods=("auto", "auto+worst", "random", "optuna-gp", "optuna-tpe"),
        strategy_options=SMOKE_OPTIONS,
    ),
    # wide spaces: 20 to 100 parameters, budgets of 20 x d or 1,000 (the smaller), 8 and 32
    # busy points, against CMA-ES, TPE, GPSampler and random search; NSGA-II stands in for
    # CMA-ES (one objective only) on DTLZ2-20, and each runs only where it applies
    "wide": Suite(
        "wide",
        {
            "ackley20": 400,
            "ackley50": 1000,
            "rosenbrock20": 400,
            "branin-in-100": 1000,
            "hartmann6-in-100": 1000,
            "dtlz2-20": 400,
        },
        (8, 32),
        10,
        methods=("auto", "random", "optuna-cmaes", "optuna-nsga2", "optuna-tpe", "optuna-gp"),
    ),
    "tiny-mo": Suite("tiny-mo", {"branincurrin": 8}, (2,), 1, methods=("random", "optuna-tpe")),
    "tiny": Suite(
        "tiny",
        {"branin": 8},
        (2,),
        2,
        methods=("random", "optuna-tpe"),
    ),
}
