"""Test problems on the unit cube, minimised, with known optima (BoTorch implementations).

Each problem maps ``x`` in ``[0, 1]^d`` onto the function's native box, so every method sees the
same cube and regret is ``f(x) - f*``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from botorch.test_functions import Branin, Hartmann
from botorch.test_functions.synthetic import SyntheticTestFunction


@dataclass(frozen=True)
class Problem:
    """A noiseless minimisation problem on the unit cube."""

    name: str
    dim: int
    optimum: float
    evaluate: Callable[[np.ndarray], float]

    def __call__(self, x: np.ndarray) -> float:
        return self.evaluate(np.asarray(x, dtype=float))

    def regret(self, value: float) -> float:
        """Simple regret of ``value``; never negative (rounding below ``f*`` is clipped)."""
        return max(float(value) - self.optimum, 0.0)


def _on_cube(fn: SyntheticTestFunction) -> Callable[[np.ndarray], float]:
    bounds = fn.bounds.to(torch.double)

    def evaluate(x: np.ndarray) -> float:
        if x.shape != (fn.dim,) or np.any(x < 0) or np.any(x > 1):
            raise ValueError(f"x: expected {fn.dim} values in [0, 1], got {x!r}")
        z = bounds[0] + torch.as_tensor(x, dtype=torch.double) * (bounds[1] - bounds[0])
        return float(fn.evaluate_true(z.unsqueeze(0)).item())

    return evaluate


def branin() -> Problem:
    """Branin on ``[-5, 10] x [0, 15]``: three global minima, ``f* = 0.397887``."""
    fn = Branin()
    return Problem("branin", 2, float(fn.optimal_value), _on_cube(fn))


def hartmann6() -> Problem:
    """Hartmann-6 on ``[0, 1]^6``: ``f* = -3.32237``."""
    fn = Hartmann(dim=6)
    return Problem("hartmann6", 6, float(fn.optimal_value), _on_cube(fn))


PROBLEMS: dict[str, Callable[[], Problem]] = {"branin": branin, "hartmann6": hartmann6}


def get_problem(name: str) -> Problem:
    """The problem called ``name`` (``ValueError`` listing the known names otherwise)."""
    if name not in PROBLEMS:
        raise ValueError(f"problem: unknown {name!r}; choose one of {', '.join(PROBLEMS)}")
    return PROBLEMS[name]()
