"""Several objectives: the Pareto front of told trials, its reference point and hypervolume.

Everything here works on *utilities* (each objective's value times its sign, so larger is
better for all of them), the convention of BoTorch's Pareto utilities; ``Study`` converts to
and from the objectives' own units.

The reference point, when the user gives none, is fixed by a rule so that the hypervolume of a
running study is comparable over time: from the first ``n_initial`` results to arrive (the
initial design, in completion order; all results while fewer have arrived), each objective's
worst utility less ``REF_MARGIN`` of its range (of ``REF_MARGIN`` of its magnitude, or of 1,
when all those values are equal). Once that many results are in, it no longer moves.

Example:
    >>> import torch
    >>> U = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.4, 0.4], [0.2, 0.2]])
    >>> pareto_mask(U).tolist()
    [True, True, True, False]
    >>> ref = reference_point(U, n_initial=4)
    >>> [round(v, 2) for v in ref.tolist()], round(hypervolume(U, ref), 3)
    ([-0.1, -0.1], 0.37)
"""

from __future__ import annotations

import math
import sys

import torch
from botorch.utils.multi_objective.box_decompositions.dominated import (
    DominatedPartitioning,
)
from botorch.utils.multi_objective.pareto import is_non_dominated
from torch import Tensor

from abo.core.exceptions import AboError

REF_MARGIN = 0.1
"""How far beyond the worst initial utility the reference point lies, as a share of its range."""


def pareto_mask(U: Tensor) -> Tensor:
    """``n`` booleans: the rows of ``n x m`` utilities no other row dominates (duplicates of a
    non-dominated row are all kept)."""
    if U.shape[0] == 0:
        return torch.zeros(0, dtype=torch.bool)
    return is_non_dominated(U, deduplicate=False)


def reference_point(U: Tensor, n_initial: int) -> Tensor:
    """The default reference point (``m`` utilities) for ``n x m`` utilities in the order the
    results arrived (see the module): fixed once ``n_initial`` rows exist."""
    if U.shape[0] == 0:
        raise ValueError("reference_point: no results yet")
    first = U[: max(1, n_initial)]
    worst, best = first.min(dim=0).values, first.max(dim=0).values
    span = best - worst
    fallback = REF_MARGIN * worst.abs().clamp_min(1.0)
    margin = torch.where(span > 0, REF_MARGIN * span, fallback)
    return worst - margin


def hypervolume(U: Tensor, ref: Tensor) -> float:
    """The volume dominated by ``n x m`` utilities and bounded below by ``ref`` (rows that do
    not strictly beat ``ref`` in every objective add nothing).

    Raises:
        AboError: the volume is beyond the float range (about 1.8e308); the message gives its
            order of magnitude. It is never returned as ``inf`` (JSON would carry ``null``).
    """
    inside = U[(U > ref).all(dim=-1)]
    if inside.shape[0] == 0:
        return 0.0
    front = inside[pareto_mask(inside)]
    volume = float(DominatedPartitioning(ref_point=ref.to(front), Y=front).compute_hypervolume())
    if math.isfinite(volume):
        return volume
    return _scaled_hypervolume(front, ref.to(front))


def _scaled_hypervolume(front: Tensor, ref: Tensor) -> float:
    """The hypervolume of a front whose spans (or volume) overflow a float: measured with each
    objective divided by its largest magnitude, then scaled back in log space."""
    scale = torch.maximum(front.abs().max(dim=0).values, ref.abs())  # m, finite and > 0
    unit = DominatedPartitioning(ref_point=ref / scale, Y=front / scale).compute_hypervolume()
    if float(unit) <= 0.0:
        return 0.0
    log10 = math.log10(float(unit)) + float(torch.log10(scale).sum())
    if log10 < math.log10(sys.float_info.max):
        return float(10.0**log10)
    raise AboError(
        f"hypervolume: about 1e{math.floor(log10)}, beyond the float range (1.8e308); "
        "measure it from a reference point nearer the front, or rescale the objectives",
        field="hypervolume",
    )
