"""A GP of a trust region's own, for long campaigns: fitted on the observations inside the
region nearest its centre, in the region's coordinates (its sides mapped onto ``[0, 1]``).

Above ``max_exact`` observations the study's GP holds a subset of the data over the whole
cube, and its lengthscales are bounded below at a fortieth of the cube
(``abo.model.surrogate``): near a converged incumbent it cannot resolve what the many
observations there say (on Ackley-10 with 64 workers, nothing better was found from 2,000 to
10,000 observations). TuRBO fits a model per trust region instead; so does this one, on at
most ``LOCAL_POINTS`` observations. A fit costs 0.1-0.4 s there (128 points, 10 dimensions,
about 150 likelihood evaluations from the prior's mode), so it runs on every
``REFIT_EVERY``-th proposal made with it only, warm-started from the last; between, the GP
is conditioned on the region's observations with the last hyperparameters (milliseconds).
They are recorded on the proposal that fitted them (lengthscales in the cube's units, since
the region's size changes), and read back from the study's records: the same in any process,
for the same observations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from abo.core.exceptions import SurrogateFitError
from abo.model.surrogate import LENGTHSCALE_FLOOR, condition, export_hypers, fit_gp

LOCAL_POINTS = 128
"""At most this many observations (the nearest the region's centre) make the region's GP."""
REFIT_EVERY = 25
"""The region's GP refits its hyperparameters on every this-many-th proposal made with it (and
when none are recorded yet): fewer than one ask in twenty pays for a fit."""
LENGTHSCALE = "covar_module.base_kernel.raw_lengthscale"
"""The lengthscales' name among a GP's hyperparameters (``export_hypers``; no transform: raw
values are the lengthscales themselves)."""


def min_points(dim: int) -> int:
    """Fewer observations inside a region than this fit no GP of its own (the study's GP
    proposes there instead): two per dimension, as the initial design of a narrow study."""
    return max(8, 2 * dim)


def to_box(X: Tensor, box: Tensor) -> Tensor:
    """``X`` (unit cube) in the coordinates of ``box`` (``2 x d``): its sides onto ``[0, 1]``."""
    return (X - box[0]) / (box[1] - box[0])


def from_box(Z: Tensor, box: Tensor) -> Tensor:
    """The inverse of ``to_box``: points in ``box``'s coordinates back in the unit cube."""
    return box[0] + Z * (box[1] - box[0])


def local_rows(X: Tensor, box: Tensor, center: Tensor, k: int = LOCAL_POINTS) -> Tensor:
    """Indices (ascending) of the rows of ``X`` inside ``box``, at most ``k``: the nearest
    ``center`` in the box's coordinates (ties broken by the order observed)."""
    inside = ((X >= box[0]) & (X <= box[1])).all(dim=-1).nonzero().reshape(-1)
    if inside.numel() > k:
        dist = (to_box(X[inside], box) - to_box(center, box)).norm(dim=-1)
        inside = inside[torch.argsort(dist, stable=True)[:k]]
    return torch.sort(inside).values


def noise_of(model: Any) -> str:
    """The noise setting of a fitted study GP: ``"deterministic"`` when its noise is fixed."""
    raw = getattr(getattr(model, "likelihood", None), "raw_noise", None)
    return "deterministic" if raw is not None and not raw.requires_grad else "auto"


def _scaled(
    hypers: Mapping[str, list[float]], factor: Tensor, floor: float = 0.0
) -> dict[str, list[float]]:
    """``hypers`` with the lengthscales multiplied by ``factor`` (one per column), at least
    ``floor``."""
    out = {name: list(values) for name, values in hypers.items()}
    ls = out.get(LENGTHSCALE)
    if ls is not None and len(ls) == factor.numel():
        scaled = torch.tensor(ls, dtype=torch.double) * factor.cpu().to(torch.double)
        out[LENGTHSCALE] = scaled.clamp_min(floor).tolist()
    return out


def fit_local(
    Z: Tensor,
    Y: Tensor,
    noise: str,
    width: Tensor,
    last: Mapping[str, list[float]] | None = None,
    refit: bool = True,
) -> tuple[Any, dict[str, list[float]]] | None:
    """A GP on ``Z`` (the coordinates of a region whose sides are ``width``) and ``Y`` (``n x 1``
    utilities), and its hyperparameters to record (lengthscales in the cube's units).

    ``last``: the hyperparameters recorded before (cube units), conditioned on as they are
    unless ``refit``, which fits from them (from the prior's mode without any). ``None`` when
    no fit succeeds (the study's GP is there to fall back on)."""
    start = None
    if last is not None:
        start = condition(Z, Y, noise, _scaled(last, 1.0 / width, LENGTHSCALE_FLOOR))
    if start is not None and not refit:
        model = start.model
    else:
        try:
            model = fit_gp(Z, Y, noise=noise, previous=start).model
        except SurrogateFitError:
            if start is None:
                return None
            model = start.model
    return model, _scaled(export_hypers(model), width)
