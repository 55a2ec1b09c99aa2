"""Output warping: what the GP models when an objective's values span orders of magnitude.

A GP assumes its observations are roughly Gaussian around a smooth function. Losses, errors and
runtimes are often not: bounded below and heavy-tailed, with a few huge values that dominate
the fit (the lengthscales shrink to explain them and the model stops seeing structure near the
optimum). A monotone transform of the utilities fixes the shape without changing which point is
better, so every strategy (all rank points by the model's utility) stays valid in the warped
space.

``"power"`` is the Yeo-Johnson transform of the standardised utilities, its exponent chosen by
maximum likelihood of a Gaussian for the transformed values (the transform HEBO applies), then
standardised again. Data that already look Gaussian get an exponent near 1 (nearly the
identity); a long tail of bad values gets compressed.

Example:
    >>> import torch
    >>> Y = -torch.tensor([[1.0], [2.0], [4.0], [1e4]])  # utilities of a heavy-tailed loss
    >>> W, lam = warp(Y, "power")
    >>> bool((W.argsort(0) == Y.argsort(0)).all()), lam > 1  # same order, bad tail compressed
    (True, True)
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from abo.spec import OUTPUT_TRANSFORMS

WARPS = ("none", "power")  # what ``warp`` applies (a spec's "auto" resolves to one)

__all__ = ["OUTPUT_TRANSFORMS", "best_lambda", "warp", "yeo_johnson"]
MIN_POINTS = 4  # fewer values say nothing about the shape of their distribution
LAMBDA_RANGE = (-3.0, 5.0)  # exponents beyond this overfit a handful of values


def yeo_johnson(y: Tensor, lam: float) -> Tensor:
    """The Yeo-Johnson transform of ``y`` with exponent ``lam`` (monotone increasing)."""
    pos = y >= 0
    out = torch.empty_like(y)
    if abs(lam) < 1e-12:
        out[pos] = torch.log1p(y[pos])
    else:
        out[pos] = ((y[pos] + 1) ** lam - 1) / lam
    if abs(lam - 2) < 1e-12:
        out[~pos] = -torch.log1p(-y[~pos])
    else:
        out[~pos] = -((1 - y[~pos]) ** (2 - lam) - 1) / (2 - lam)
    return out


def _log_likelihood(y: Tensor, lam: float) -> float:
    """Profile log-likelihood of a Gaussian for ``yeo_johnson(y, lam)``, Jacobian included."""
    z = yeo_johnson(y, lam)
    var = z.var(unbiased=False).item()
    if not math.isfinite(var) or var <= 0:
        return -math.inf
    jacobian = (lam - 1) * (torch.sign(y) * torch.log1p(y.abs())).sum().item()
    return -0.5 * y.numel() * math.log(var) + jacobian


def best_lambda(y: Tensor) -> float:
    """The maximum-likelihood exponent in ``LAMBDA_RANGE`` (golden-section search, unimodal
    in practice; deterministic, no randomness)."""
    lo, hi = LAMBDA_RANGE
    ratio = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = _log_likelihood(y, c), _log_likelihood(y, d)
    for _ in range(60):
        if fc >= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = _log_likelihood(y, c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = _log_likelihood(y, d)
    return (a + b) / 2


def warp(Y: Tensor, kind: str) -> tuple[Tensor, float | None]:
    """``(warped Y, exponent)``: ``Y`` (``n x 1`` utilities) as the GP should see them.

    ``"none"``, fewer than ``MIN_POINTS`` values or constant values return ``Y`` unchanged and
    ``None``.
    """
    if kind not in WARPS:
        raise ValueError(f"output_transform: expected one of {WARPS}, got {kind!r}")
    if kind == "none" or Y.shape[0] < MIN_POINTS:
        return Y, None
    y = Y.reshape(-1).to(torch.double)
    std = y.std()
    if not torch.isfinite(std) or std.item() <= 0:
        return Y, None
    y = (y - y.mean()) / std
    lam = best_lambda(y)
    z = yeo_johnson(y, lam)
    z = (z - z.mean()) / z.std()
    return z.reshape(Y.shape).to(Y.dtype), lam
