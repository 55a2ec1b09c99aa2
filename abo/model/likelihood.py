"""The marginal likelihood of abo's GP, computed directly for the hyperparameter fit.

A fit maximises the log marginal likelihood (with the hyperparameters' priors) over dozens to
hundreds of L-BFGS-B steps. Through GPyTorch each step builds lazily evaluated tensors, a
multivariate normal, and the input and outcome transforms' checks: about 4 ms per step on
20 observations, almost all of it per-operation overhead, not arithmetic. ``loss`` writes
the same function as some twenty torch operations on the same parameters, with the log
density's gradient in closed form (``GaussianLogDensity``) and the priors' densities written
out (``log_prior``): the same values and gradients to rounding (tested), a fit in 0.4-0.7x the
time. Inputs warped by a learned Kumaraswamy CDF after the unit ``Normalize`` (BoTorch's
``Warp``, HEBO's input warping) are warped inside the same function, their concentrations
fitted with the rest. Models of any other shape (a warm start's prior mean), and data larger
than GPyTorch factorises exactly, return ``None`` and keep BoTorch's own closure.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import torch
from botorch.models import SingleTaskGP
from botorch.models.transforms import Normalize, Standardize
from botorch.models.transforms.input import ChainedInputTransform, Warp
from gpytorch import settings
from gpytorch.kernels import MaternKernel, ScaleKernel
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood, GaussianLikelihood
from gpytorch.means import ConstantMean
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.priors import GammaPrior, LogNormalPrior, Prior
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor

SQRT5 = math.sqrt(5.0)
LOG_SQRT_2PI = math.log(math.sqrt(2.0 * math.pi))  # as torch's Normal writes it


def unit_normalize(tf: object) -> bool:
    """Whether an input transform is ``Normalize`` onto fixed ``[0, 1]`` bounds (the identity
    on abo's inputs, which are already in the unit cube)."""
    if not isinstance(tf, Normalize) or tf.learn_bounds:
        return False
    lo, hi = tf.bounds[0], tf.bounds[1]
    return bool((lo == 0).all() and (hi == 1).all())


def unit_warp(tf: object) -> Warp | None:
    """The ``Warp`` of an input transform that is a unit ``Normalize`` followed by a warp of
    unit-cube inputs (no batch of warps, not reversed), else ``None``."""
    if not isinstance(tf, ChainedInputTransform) or len(tf) != 2:
        return None
    first, warp = tf.values()
    if not unit_normalize(first) or type(warp) is not Warp or warp.reverse:
        return None
    if len(warp.batch_shape) or not unit_normalize(warp._normalize):
        return None
    return warp if warp.transform_on_train else None


def supported(mll: ExactMarginalLogLikelihood) -> bool:
    """Whether ``loss`` computes this marginal likelihood: a single-output ``SingleTaskGP``
    with a constant mean, a scaled Matern-5/2 kernel on every input, a Gaussian likelihood
    (learned and homoskedastic, or fixed per point: the failure classifier's),
    ``Standardize`` and a unit ``Normalize``, warped or not (``unit_warp``; abo's GP,
    ``abo.model.surrogate``), on as many
    observations as GPyTorch factorises exactly (``max_cholesky_size``, 800: above it
    GPyTorch approximates the likelihood by conjugate gradients, and so would the fit)."""
    model = mll.model
    if not isinstance(model, SingleTaskGP) or model.num_outputs != 1:
        return False
    kernel = model.covar_module
    base = getattr(kernel, "base_kernel", None)
    if type(kernel) is not ScaleKernel or not isinstance(base, MaternKernel):
        return False
    inputs = getattr(model, "input_transform", None)
    return (
        type(model.likelihood) in (GaussianLikelihood, FixedNoiseGaussianLikelihood)
        and type(model.mean_module) is ConstantMean
        and type(base) is MaternKernel
        and base.nu == 2.5
        and base.active_dims is None
        and kernel.active_dims is None
        and isinstance(getattr(model, "outcome_transform", None), Standardize)
        # a warp's inputs are the raw ones only in training mode (BoTorch then warps them in
        # the model's forward; in eval mode it stores them warped)
        and (unit_normalize(inputs) or (unit_warp(inputs) is not None and model.training))
        and model.train_inputs[0].dim() == 2
        and model.train_targets.dim() == 1
        and model.train_targets.shape[-1] <= settings.max_cholesky_size.value()
        and model.mean_module.constant.numel() == 1
    )


def log_prior(prior: Prior, x: Tensor) -> Tensor:
    """A prior's log density at ``x``, summed: written out for the log-normal and gamma
    priors of abo's GP (torch's distributions validate and broadcast on every call, a fifth
    of a fit's step), the prior's own ``log_prob`` for any other."""
    if getattr(prior, "_transform", None) is None:
        if type(prior) is LogNormalPrior:  # torch's Normal on log(x), with its Jacobian
            loc, scale = prior.base_dist.loc, prior.base_dist.scale  # the same tensors
            y = x.log()
            normal = -((y - loc) ** 2) / (2 * scale**2) - scale.log() - LOG_SQRT_2PI
            return (normal - y).sum()
        if type(prior) is GammaPrior:
            a, b = prior.concentration, prior.rate
            return (a * b.log() + (a - 1.0) * x.log() - b * x - torch.lgamma(a)).sum()
    return prior.log_prob(x).sum()


class GaussianLogDensity(torch.autograd.Function):
    """``log N(r; 0, A)`` without its ``2 pi`` term, differentiable in ``A`` and ``r``.

    The gradient is the closed form ``0.5 (a a^T - A^-1)`` for ``A`` and ``-a`` for ``r``
    (``a = A^-1 r``), from the forward pass's Cholesky factor and one inverse: GPyTorch's
    rule, cheaper than autograd through the factorisation and two triangular solves.
    """

    @staticmethod
    def forward(ctx: Any, A: Tensor, r: Tensor) -> Tensor:
        L = psd_safe_cholesky(A)  # adds jitter to the diagonal only where A needs it
        a = torch.cholesky_solve(r.unsqueeze(-1), L).squeeze(-1)
        ctx.save_for_backward(L, a)
        return -0.5 * (r * a).sum() - L.diagonal().log().sum()

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor]:
        L, a = ctx.saved_tensors
        grad_A = 0.5 * grad * (torch.outer(a, a) - torch.cholesky_inverse(L))
        return grad_A, -grad * a


def loss(mll: ExactMarginalLogLikelihood) -> Callable[[], Tensor] | None:
    """``-log p(y | X, theta) - log p(theta)``, divided by ``n`` (what BoTorch's fit
    minimises), as a function of the model's current hyperparameters; ``None`` where the
    model is not ``supported``.

    ``K = s * (1 + sqrt(5) r + 5/3 r^2) exp(-sqrt(5) r)`` with ``r`` the lengthscale-scaled
    distance, plus the likelihood's noise on the diagonal; the log density of the targets
    (already standardised) around the constant mean comes from one Cholesky factor, and
    every registered prior adds its log density, as in GPyTorch's
    ``ExactMarginalLogLikelihood``.
    """
    if not supported(mll):
        return None
    model = mll.model
    X = model.train_inputs[0]
    y = model.train_targets
    n = y.shape[-1]
    warp = unit_warp(model.input_transform)
    centred = X - X.mean(dim=0)  # as GPyTorch's kernels do, for accuracy; fixed in the fit
    diagonal = torch.eye(n, dtype=torch.bool, device=X.device)
    kernel = model.covar_module
    base = kernel.base_kernel
    likelihood = model.likelihood
    mean = model.mean_module
    priors = [(prior, closure, module) for _, module, prior, closure, _ in model.named_priors()]
    eye = torch.eye(n, dtype=X.dtype, device=X.device)
    constant = 0.5 * n * math.log(2.0 * math.pi)

    def forward() -> Tensor:
        if warp is None:
            Z = centred / base.lengthscale.reshape(-1)
        else:  # the warp moves with its concentrations: warped and centred at every step
            W = warp.transform(X)
            Z = (W - W.mean(dim=0)) / base.lengthscale.reshape(-1)
        norms = Z.pow(2).sum(-1)
        # squared distances by one matrix product (n x n memory, not n x n x d), exactly
        # zero on the diagonal; the clamp keeps the square root's gradient finite at r = 0
        sq = norms.unsqueeze(-1) + norms.unsqueeze(-2) - 2.0 * (Z @ Z.transpose(-1, -2))
        sq = sq.clamp_min(0.0).masked_fill(diagonal, 0.0)
        r = sq.clamp_min(1e-30).sqrt()
        K = kernel.outputscale * (1.0 + SQRT5 * r + (5.0 / 3.0) * r.pow(2)) * torch.exp(-SQRT5 * r)
        A = K + likelihood.noise.reshape(-1) * eye
        resid = y - mean.constant.reshape(-1)
        value = cast(Tensor, GaussianLogDensity.apply(A, resid)) - constant
        for prior, closure, module in priors:
            value = value + log_prior(prior, closure(module))
        return -value / n

    return forward
