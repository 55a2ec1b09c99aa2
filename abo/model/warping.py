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

An outcome constraint's *slack* (``abo.acquisitions.feasibility``) gets its own transform,
``warp_slack``: the same Yeo-Johnson family, but of the slacks divided by their median
magnitude, not standardised, because the bound must stay where it is. Yeo-Johnson maps 0 to 0
and keeps every sign, so which trials are feasible, and where the GP's slack crosses 0, mean
the same after it; a violation of ``1e5`` next to slacks of order 1 (the tension/compression
spring of ``docs/benchmarks.md``) no longer flattens the GP everywhere else.

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

from abo.model.options import OUTPUT_TRANSFORMS

WARPS = ("none", "power")  # what ``warp`` applies (a spec's "auto" resolves to one)

__all__ = ["OUTPUT_TRANSFORMS", "best_lambda", "warp", "warp_slack", "yeo_johnson"]
MIN_POINTS = 4  # fewer values say nothing about the shape of their distribution
LAMBDA_RANGE = (-3.0, 5.0)  # exponents beyond this overfit a handful of values
SLACK_TEST = 6.635  # chi-square(1) at 0.99: twice the log-likelihood gain a slack's warp needs


def yeo_johnson(y: Tensor, lam: float) -> Tensor:
    """The Yeo-Johnson transform of ``y`` with exponent ``lam`` (monotone increasing)."""
    return _YeoJohnson(y)(lam)


class _YeoJohnson:
    """Yeo-Johnson of fixed values at any exponent, from logarithms taken once.

    ``((1 + y)^lam - 1) / lam`` is ``expm1(lam * log1p(y)) / lam`` (and the negative side
    alike), so trying an exponent costs one ``expm1`` per value: the maximum-likelihood search
    tries sixty on every ask.
    """

    def __init__(self, y: Tensor) -> None:
        self.pos = y >= 0
        self.log_pos = torch.log1p(y[self.pos])  # log(1 + y), y >= 0
        self.log_neg = torch.log1p(-y[~self.pos])  # log(1 - y), y < 0
        self.shape, self.dtype = y.shape, y.dtype
        # the log-Jacobian's sum, per unit of (lam - 1)
        self.jacobian = float(self.log_pos.sum() - self.log_neg.sum())

    def __call__(self, lam: float) -> Tensor:
        out = torch.empty(self.shape, dtype=self.dtype)
        if abs(lam) < 1e-12:
            out[self.pos] = self.log_pos
        else:
            out[self.pos] = torch.expm1(lam * self.log_pos) / lam
        if abs(lam - 2) < 1e-12:
            out[~self.pos] = -self.log_neg
        else:
            out[~self.pos] = -torch.expm1((2 - lam) * self.log_neg) / (2 - lam)
        return out

    def log_likelihood(self, lam: float) -> float:
        """Profile log-likelihood of a Gaussian for the transformed values, Jacobian included."""
        var = self(lam).var(unbiased=False).item()
        if not math.isfinite(var) or var <= 0:
            return -math.inf
        return -0.5 * self.shape.numel() * math.log(var) + (lam - 1) * self.jacobian


def _log_likelihood(y: Tensor, lam: float) -> float:
    """Profile log-likelihood of a Gaussian for ``yeo_johnson(y, lam)``, Jacobian included."""
    return _YeoJohnson(y).log_likelihood(lam)


def best_lambda(y: Tensor) -> float:
    """The maximum-likelihood exponent in ``LAMBDA_RANGE`` (golden-section search, unimodal
    in practice; deterministic, no randomness)."""
    profile = _YeoJohnson(y).log_likelihood
    lo, hi = LAMBDA_RANGE
    ratio = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = profile(c), profile(d)
    for _ in range(60):
        if fc >= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = profile(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = profile(d)
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


def warp_slack(s: Tensor) -> tuple[Tensor, float | None]:
    """``(warped slacks, exponent)``: a constraint's slacks (``n``, non-negative where it holds)
    over their median magnitude, Yeo-Johnson transformed with the maximum-likelihood exponent.

    Zero stays zero and signs are kept (see the module). Only where the transform explains the
    slacks significantly better than the identity (a likelihood-ratio test at the 1 % level,
    ``SLACK_TEST``); otherwise, and for fewer than ``MIN_POINTS`` values or all of them zero,
    ``s`` is returned unchanged with ``None``.
    """
    if s.numel() < MIN_POINTS:
        return s, None
    size = s.abs().median()
    if not size > 0:  # most slacks exactly at the bound: the mean magnitude instead
        size = s.abs().mean()
    if not torch.isfinite(size) or not size > 0:
        return s, None
    z = (s / size).to(torch.double)
    lam = best_lambda(z)
    if 2.0 * (_log_likelihood(z, lam) - _log_likelihood(z, 1.0)) < SLACK_TEST:
        return s, None  # the identity is as likely: the slacks look Gaussian already
    return yeo_johnson(z, lam).to(s.dtype), lam
