"""Problems of several objectives on the unit cube, minimised, with their hypervolume gap.

BoTorch's multi-objective test functions (``botorch.test_functions.multi_objective``) are
written for maximisation with ``negate=True``; here they are built with ``negate=False``, so
``evaluate`` returns each objective's raw value and every objective is minimised. Each
problem carries BoTorch's reference point (for minimisation: a point worse than the known
front in every objective, ``fn.ref_point`` with ``negate=False``) and the hypervolume of the
known (or best-known) Pareto front, BoTorch's ``max_hv``:

* ``branincurrin`` (2-D, 2 objectives): ``max_hv = 59.3601`` (BoTorch: approximated with
  NSGA-II);
* ``dtlz2`` (6-D, 2 objectives): ``max_hv = 0.424602``, exact (a quarter circle);
* ``dtlz2-20``: the same in 20 dimensions (the wide-space suite), the same front;
* ``zdt2`` (6-D, 2 objectives): ``max_hv = 120.333``, exact (a concave front, harder for
  scalarisations than ZDT1's convex one);
* ``vehiclesafety`` (5-D, 3 objectives, native box ``[1, 3]^5``): ``max_hv = 246.816``, the
  hypervolume of the approximate front of Tanabe and Ishibuchi (2020) that BoTorch ships; a
  best-known value, not a proven maximum, so a run could in principle exceed it (its gap is
  then clipped at 0 and its raw ``hypervolume`` is kept in the run record).

The metric is the hypervolume gap ``max_hv - HV(observed front)``, computed by abo's
``abo.core.pareto.hypervolume`` (BoTorch's ``DominatedPartitioning``) on the negated values
(utilities: larger is better) against the negated reference point.

Example:
    >>> p = get_mo_problem("branincurrin")
    >>> p.dim, p.num_objectives, [float(v) for v in p.ref_point], round(p.max_hv, 2)
    (2, 2, [18.0, 6.0], 59.36)
    >>> hypervolume(np.array([[0.0, 0.0], [20.0, 1.0]]), p.ref_point)  # the second is outside
    108.0
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from botorch.test_functions.multi_objective import DTLZ2, ZDT2, BraninCurrin, VehicleSafety


@dataclass(frozen=True)
class MOProblem:
    """A noiseless problem of several objectives, all minimised, on the unit cube."""

    name: str
    dim: int
    num_objectives: int
    ref_point: np.ndarray  # minimisation: every objective's value must be below it to count
    max_hv: float  # hypervolume of the known (or best-known) front w.r.t. ``ref_point``
    evaluate: Callable[[np.ndarray], np.ndarray]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.evaluate(np.asarray(x, dtype=float))

    def gap(self, Y: np.ndarray) -> float:
        """Hypervolume gap of the front of ``n x m`` values ``Y``; never negative."""
        return max(self.max_hv - hypervolume(Y, self.ref_point), 0.0)


def hypervolume(Y: np.ndarray, ref_point: np.ndarray) -> float:
    """Volume dominated by the minimised values ``Y`` (``n x m``) and bounded by ``ref_point``.

    Values not better than ``ref_point`` in every objective add nothing (BoTorch's convention).
    """
    from abo.core.pareto import hypervolume as utility_hypervolume

    U = -torch.as_tensor(np.atleast_2d(Y), dtype=torch.double)
    return utility_hypervolume(U, -torch.as_tensor(ref_point, dtype=torch.double))


def _on_cube(fn: Any) -> Callable[[np.ndarray], np.ndarray]:
    """``fn`` (a BoTorch multi-objective function, ``negate=False``) read on ``[0, 1]^d``."""
    bounds = fn.bounds.to(torch.double)

    def evaluate(x: np.ndarray) -> np.ndarray:
        if x.shape != (fn.dim,) or np.any(x < 0) or np.any(x > 1):
            raise ValueError(f"x: expected {fn.dim} values in [0, 1], got {x!r}")
        z = bounds[0] + torch.as_tensor(x, dtype=torch.double) * (bounds[1] - bounds[0])
        return fn.evaluate_true(z.unsqueeze(0)).reshape(-1).numpy().astype(float)

    return evaluate


def _make(name: str, build: Callable[[], Any]) -> Callable[[], MOProblem]:
    def make() -> MOProblem:
        fn = build()
        assert not fn.negate  # raw values, minimised
        ref = fn.ref_point.to(torch.double).numpy().astype(float)
        return MOProblem(name, fn.dim, fn.num_objectives, ref, float(fn.max_hv), _on_cube(fn))

    make.__doc__ = f"{name} on the unit cube, minimised (BoTorch's implementation)."
    return make


MO_PROBLEMS: dict[str, Callable[[], MOProblem]] = {
    "branincurrin": _make("branincurrin", BraninCurrin),
    "dtlz2": _make("dtlz2", lambda: DTLZ2(dim=6, num_objectives=2)),
    "dtlz2-20": _make("dtlz2-20", lambda: DTLZ2(dim=20, num_objectives=2)),  # a wide space
    "zdt2": _make("zdt2", lambda: ZDT2(dim=6)),
    "vehiclesafety": _make("vehiclesafety", VehicleSafety),
}


def get_mo_problem(name: str) -> MOProblem:
    """The problem called ``name`` (``ValueError`` listing the known names otherwise)."""
    if name not in MO_PROBLEMS:
        raise ValueError(f"problem: unknown {name!r}; choose one of {', '.join(MO_PROBLEMS)}")
    return MO_PROBLEMS[name]()
