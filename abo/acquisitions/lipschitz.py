"""Lipschitz constants of a GP's posterior mean (cached per model) and its kernel lengthscales."""

from __future__ import annotations

import weakref
from typing import cast

import numpy as np
import torch
from botorch.models.model import Model
from scipy.optimize import minimize
from torch import Tensor
from torch.quasirandom import SobolEngine

from abo.acquisitions.exact_posterior import PosteriorMoments, latent_mean, outcome_scale
from abo.core.exceptions import AboError

LIPSCHITZ_FLOOR = 1e-7  # below this the model is flat: use LIPSCHITZ_FALLBACK instead
LIPSCHITZ_FALLBACK = 10.0

# -- Lipschitz constants ------------------------------------------------------------------------
_LIPSCHITZ_CACHE: weakref.WeakKeyDictionary[Model, dict[tuple, float]] = weakref.WeakKeyDictionary()


def _cache_owner(model: Model) -> Model:
    """The model whose Lipschitz cache ``model`` uses: its own, or, for a background-refit
    model conditioned on newer data with unchanged hyperparameters (``abo_hypers_of``), the
    fitted model's. A busy point's constant is then computed once per refit, not per ask; it
    lags the data by at most the refit step, which the constant's own estimation error dwarfs.
    """
    ref = getattr(model, "abo_hypers_of", None)
    owner = ref() if ref is not None else None
    return owner if owner is not None else model


def _grad_norm(model: Model, X: Tensor, create_graph: bool = False) -> Tensor:
    """``||grad mu(x)||`` (standardised mean) at each of ``k x d`` points, in one autograd call."""
    if not X.requires_grad:
        X = X.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        mean = latent_mean(model, X)
        if mean is None:
            shift, scale = outcome_scale(model)
            post = cast(PosteriorMoments, model.posterior(X.unsqueeze(-2)))
            mean = post.mean.squeeze(-1).squeeze(-1)
            mean = (mean - shift) / scale
        (grad,) = torch.autograd.grad(mean.sum(), X, create_graph=create_graph)
    return grad.norm(dim=-1)


def _maximize_grad_norm(model: Model, start: Tensor, lower: Tensor, upper: Tensor, maxiter: int):
    """L-BFGS-B on all ``m x d`` starts at once (the objective is separable per row)."""
    shape = start.shape

    def f(z: np.ndarray) -> tuple[float, np.ndarray]:
        Z = torch.from_numpy(z).to(start).reshape(shape).requires_grad_(True)
        with torch.enable_grad():
            norms = _grad_norm(model, Z, create_graph=True)
            (g,) = torch.autograd.grad(-norms.sum(), Z)
        return float(-norms.sum().detach()), g.detach().reshape(-1).cpu().numpy()

    bounds = list(zip(lower.reshape(-1).tolist(), upper.reshape(-1).tolist(), strict=True))
    res = minimize(
        f,
        start.detach().reshape(-1).cpu().numpy(),
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={"maxiter": maxiter},
    )
    return torch.from_numpy(res.x).to(start).reshape(shape)


def estimate_lipschitz(
    model: Model,
    bounds: Tensor,
    centers: Tensor | None = None,
    box: Tensor | None = None,
    n_samples: int = 500,
    maxiter: int = 20,
    seed: int = 0,
) -> Tensor:
    """Lipschitz constants ``max ||grad mu||`` of the standardised posterior mean.

    Global (``centers=None``): one constant over ``bounds``. Local: one per row of the
    ``m x d`` ``centers``, over ``[c - box/2, c + box/2]`` intersected with ``bounds``. Each is
    found by ``n_samples`` Sobol points and L-BFGS-B from the best; a value below ``1e-7`` (a
    flat model) becomes 10. Results are cached per model object (and shared by the models a
    background refit's hyperparameters serve, see ``_cache_owner``), so refits recompute them.

    Args:
        model: a fitted single-output model.
        bounds: ``2 x d`` bounds of the search space.
        centers: ``m x d`` busy points for local constants, or ``None`` for a global one.
        box: ``d`` box widths (the kernel lengthscales) for local constants.
        n_samples: Sobol points per region.
        maxiter: L-BFGS-B iterations.
        seed: Sobol seed (fixed, so cached and fresh results agree).

    Returns:
        ``m`` constants (``1`` for a global estimate).
    """
    lower, upper, kind = _regions(bounds.to(torch.double), centers, box)
    cache = _LIPSCHITZ_CACHE.setdefault(_cache_owner(model), {})
    keys = [
        (kind, n_samples, maxiter, seed, tuple(lo.tolist()), tuple(hi.tolist()))
        for lo, hi in zip(lower, upper, strict=True)
    ]
    todo = [i for i, k in enumerate(keys) if k not in cache]
    if todo:
        best = _max_grad_norms(model, lower[todo], upper[todo], n_samples, maxiter, seed)
        for i, v in zip(todo, best.tolist(), strict=True):
            cache[keys[i]] = v if v >= LIPSCHITZ_FLOOR else LIPSCHITZ_FALLBACK
    return torch.tensor([cache[k] for k in keys], dtype=torch.double, device=lower.device)


def _regions(
    bounds: Tensor, centers: Tensor | None, box: Tensor | None
) -> tuple[Tensor, Tensor, str]:
    """``(lower, upper, kind)``: the ``m x d`` regions ``estimate_lipschitz`` searches, the
    whole of ``bounds`` (``"global"``) or a box around each center (``"local"``)."""
    d = bounds.shape[-1]
    if centers is None:
        centers_ = ((bounds[0] + bounds[1]) / 2).unsqueeze(0)
        half = ((bounds[1] - bounds[0]) / 2).unsqueeze(0)
        kind = "global"
    else:
        if box is None:
            raise AboError("box: local Lipschitz constants need the box widths")
        centers_ = centers.to(bounds)
        half = (box.to(bounds).reshape(-1).expand(d) / 2).unsqueeze(0).expand_as(centers_)
        kind = "local"
    lower = torch.maximum(centers_ - half, bounds[0])
    upper = torch.minimum(centers_ + half, bounds[1])
    return lower, upper, kind


def _max_grad_norms(
    model: Model, lo: Tensor, hi: Tensor, n_samples: int, maxiter: int, seed: int
) -> Tensor:
    """The largest ``||grad mu||`` found in each ``[lo, hi]`` box: the best of ``n_samples``
    Sobol points, polished by L-BFGS-B where that stays finite."""
    d = lo.shape[-1]
    unit = SobolEngine(d, scramble=True, seed=seed).draw(n_samples, dtype=torch.double)
    pts = lo.unsqueeze(1) + (hi - lo).unsqueeze(1) * unit.to(lo.device)  # m x n x d
    norms = _grad_norm(model, pts.reshape(-1, d)).reshape(lo.shape[0], n_samples)
    best_val, best_idx = norms.max(dim=-1)
    start = pts[torch.arange(lo.shape[0]), best_idx]
    try:
        polished = _maximize_grad_norm(model, start, lo, hi, maxiter)
        val = _grad_norm(model, polished)
        best_val = torch.where(torch.isfinite(val), torch.maximum(val, best_val), best_val)
    except (RuntimeError, ValueError):  # a non-finite second derivative: keep Sobol's best
        pass
    return best_val


def kernel_lengthscale(model: Model, d: int) -> Tensor | None:
    """The ``d`` kernel lengthscales (abo's GP takes unit-cube inputs), if the model has any."""
    kernel = getattr(model, "covar_module", None)
    while kernel is not None:
        ls = getattr(kernel, "lengthscale", None)
        if ls is not None:
            return ls.detach().reshape(-1).to(torch.double).expand(d)
        kernel = getattr(kernel, "base_kernel", None)
    return None
