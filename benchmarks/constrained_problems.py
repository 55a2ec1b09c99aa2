"""Problems with outcome constraints or crash regions, on the unit cube, minimised.

Two kinds, one record (``ConstrainedProblem``): an evaluation either **fails** (the point lies
in the problem's crash region: no value, the whole duration spent) or returns the objective and
one value per constraint, feasible when every constraint value is ``<= 0``.

* **Constrained problems** (BoTorch's ``ConstrainedSyntheticTestFunction``; a constraint value
  is BoTorch's slack negated, so ``<= 0`` holds):

  * ``gramacy`` (2-D, 2 constraints, ``f* = 0.5998``): Gramacy et al. (2016)'s toy problem,
    whose feasible region is a few disconnected pieces;
  * ``tensioncompression`` (3-D, 4 constraints, ``f* = 0.012681``, BoTorch's value): the
    tension/compression spring; the feasible region is a thin sliver (about 1 % of the box);
  * ``pressurevessel`` (4-D, 4 constraints, ``f* = 6059.946``): the pressure-vessel design
    with BoTorch's continuous box; values span three orders of magnitude.

* **Crash problems**: Branin and Hartmann-6 (no constraints) whose evaluations fail in a ball
  next to the optimum (the optimum itself succeeds) and in a band:

  * ``branin-crash``: ball of radius 0.07 around ``(0.60, 0.22)``, 0.02 from the middle
    optimum ``(0.543, 0.152)``, and the band ``0.30 <= x0 <= 0.40`` between the left and middle
    optima: about 11.5 % of the square fails (``failure_share``, by Monte Carlo);
  * ``hartmann6-crash``: ball of radius 0.25 around the optimum shifted by 0.3 along ``x0``,
    and the band ``x5 >= 0.85``: about 14.5 % of the cube fails.

Example:
    >>> p = get_constrained_problem("branin-crash")
    >>> p(np.array([0.35, 0.5])) is None, round(p.failure_share, 3)
    (True, 0.115)
    >>> value, c = get_constrained_problem("gramacy")(np.array([0.2, 0.9]))
    >>> round(value, 3), c.shape
    (1.1, (2,))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from botorch.test_functions import Branin, Hartmann
from botorch.test_functions.synthetic import (
    ConstrainedGramacy,
    ConstrainedSyntheticTestFunction,
    PressureVessel,
    TensionCompressionString,
)

from benchmarks.problems import _on_cube

Outcome = tuple[float, np.ndarray] | None
"""An evaluation: ``None`` (failed) or the objective and the constraint values (``<= 0`` holds)."""

SHARE_SAMPLES = 20_000  # Monte Carlo points behind ``failure_share``


@dataclass(frozen=True)
class ConstrainedProblem:
    """A minimisation problem on the unit cube with constraints, a crash region, or both."""

    name: str
    dim: int
    optimum: float  # the best feasible value
    constraint_names: tuple[str, ...]
    objective: Callable[[np.ndarray], float]
    constraints: Callable[[np.ndarray], np.ndarray] | None = None  # values, ``<= 0`` holds
    fails: Callable[[np.ndarray], bool] | None = None  # the crash region

    def __call__(self, x: np.ndarray) -> Outcome:
        x = np.asarray(x, dtype=float)
        if self.fails is not None and self.fails(x):
            return None
        c = self.constraints(x) if self.constraints is not None else np.zeros(0)
        return self.objective(x), c

    def feasible(self, outcome: Outcome) -> bool:
        """Whether ``outcome`` succeeded and meets every constraint."""
        return outcome is not None and bool(np.all(outcome[1] <= 0.0))

    def regret(self, value: float) -> float:
        """Simple regret of a feasible ``value``; never negative."""
        return max(float(value) - self.optimum, 0.0)

    @property
    def failure_share(self) -> float:
        """The share of the cube that fails (Monte Carlo, a fixed seed)."""
        if self.fails is None:
            return 0.0
        X = np.random.default_rng(0).random((SHARE_SAMPLES, self.dim))
        return float(np.mean([self.fails(x) for x in X]))


def _botorch(name: str, fn: ConstrainedSyntheticTestFunction) -> ConstrainedProblem:
    bounds = torch.as_tensor(fn.bounds, dtype=torch.double)

    def native(x: np.ndarray) -> torch.Tensor:
        if x.shape != (fn.dim,) or np.any(x < 0) or np.any(x > 1):
            raise ValueError(f"x: expected {fn.dim} values in [0, 1], got {x!r}")
        z = bounds[0] + torch.as_tensor(x, dtype=torch.double) * (bounds[1] - bounds[0])
        return z.unsqueeze(0)

    def objective(x: np.ndarray) -> float:
        return float(fn.evaluate_true(native(x)).item())

    def constraints(x: np.ndarray) -> np.ndarray:
        return -fn.evaluate_slack_true(native(x)).reshape(-1).numpy().astype(float)

    names = tuple(f"c{i + 1}" for i in range(fn.num_constraints))
    return ConstrainedProblem(name, fn.dim, float(fn.optimal_value), names, objective, constraints)


def _ball_or_band(
    centre: np.ndarray, radius: float, axis: int, low: float, high: float
) -> Callable[[np.ndarray], bool]:
    def fails(x: np.ndarray) -> bool:
        return bool(np.linalg.norm(x - centre) < radius or low <= x[axis] <= high)

    return fails


def gramacy() -> ConstrainedProblem:
    """ConstrainedGramacy: 2-D, 2 constraints."""
    return _botorch("gramacy", ConstrainedGramacy())


def tensioncompression() -> ConstrainedProblem:
    """The tension/compression spring: 3-D, 4 constraints."""
    return _botorch("tensioncompression", TensionCompressionString())


def pressurevessel() -> ConstrainedProblem:
    """The pressure vessel: 4-D, 4 constraints."""
    return _botorch("pressurevessel", PressureVessel())


def branin_crash() -> ConstrainedProblem:
    """Branin failing in a ball next to its middle optimum and in a band ``0.3 <= x0 <= 0.4``."""
    fn = Branin()
    fails = _ball_or_band(np.array([0.60, 0.22]), 0.07, 0, 0.30, 0.40)
    return ConstrainedProblem(
        "branin-crash", 2, float(fn.optimal_value), (), _on_cube(fn), fails=fails
    )


HARTMANN6_OPTIMUM = np.array([0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573])


def hartmann6_crash() -> ConstrainedProblem:
    """Hartmann-6 failing in a ball 0.3 from its optimum and in the band ``x5 >= 0.85``."""
    fn = Hartmann(dim=6)
    centre = HARTMANN6_OPTIMUM + np.array([0.3, 0, 0, 0, 0, 0])
    fails = _ball_or_band(centre, 0.25, 5, 0.85, 1.0)
    return ConstrainedProblem(
        "hartmann6-crash", 6, float(fn.optimal_value), (), _on_cube(fn), fails=fails
    )


CONSTRAINED_PROBLEMS: dict[str, Callable[[], ConstrainedProblem]] = {
    "gramacy": gramacy,
    "tensioncompression": tensioncompression,
    "pressurevessel": pressurevessel,
    "branin-crash": branin_crash,
    "hartmann6-crash": hartmann6_crash,
}


def get_constrained_problem(name: str) -> ConstrainedProblem:
    """The problem called ``name`` (``ValueError`` listing the known names otherwise)."""
    if name not in CONSTRAINED_PROBLEMS:
        known = ", ".join(CONSTRAINED_PROBLEMS)
        raise ValueError(f"problem: unknown {name!r}; choose one of {known}")
    return CONSTRAINED_PROBLEMS[name]()
