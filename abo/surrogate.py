"""The GP surrogate: a BoTorch ``SingleTaskGP`` configured on purpose, fitted robustly.

Choices (checked in ``benchmarks/gp_vs_optuna.py``; numbers in ``docs/surrogate.md``):

* Matern-5/2 kernel with one lengthscale per input (ARD) and the dimension-scaled LogNormal
  lengthscale prior of Hvarfner et al. (2024), which keeps high-dimensional fits from
  collapsing to tiny lengthscales.
* A learned output scale under a Gamma(2, 1) prior (mode 1 on the standardised scale, as
  Optuna's GPSampler). Without it the kernel's amplitude is pinned at 1 and the fit can only
  trade lengthscales against the data's spread; with it, Branin's median log10 regret at 40
  evaluations went from -2.1 to -3.0 (5 seeds, k = 4).
* Inputs are the unit-cube encoding of the space (``Normalize`` with the cube's bounds) and
  outputs are standardised (``Standardize``).
* ``noise="auto"`` learns the noise under a LogNormal(-4, 1) prior with a 1e-6 floor;
  ``noise="deterministic"`` fixes it at 1e-6 (on the standardised scale), which is what a
  deterministic objective (a simulation) deserves: the model interpolates the data.
* Warm starts: a refit starts from the previous fit's hyperparameters when the input dimension
  matches (a refit after one new point then takes ~10 ms instead of ~0.8 s on Hartmann-6);
  a failed fit retries from the prior's mode, then keeps the previous hyperparameters
  with a warning, and only then gives up (the study falls back to quasi-random points).

The model is always fitted on *utilities* (larger is better), the convention BoTorch's
acquisition functions assume; ``Study`` flips the sign for minimisation.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import torch
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.transforms import Normalize, Standardize
from gpytorch.constraints import GreaterThan
from gpytorch.kernels import MaternKernel, ScaleKernel
from gpytorch.likelihoods import GaussianLikelihood
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.priors import GammaPrior, LogNormalPrior
from torch import Tensor

from abo.exceptions import AboWarning, SurrogateFitError

NOISE_FLOOR = 1e-6
NOISE_MODES = ("auto", "deterministic")


@dataclass(frozen=True)
class FittedModel:
    """A fitted GP with the data it saw; ``n`` is its number of observations."""

    model: SingleTaskGP
    n: int
    warm: bool


def _build(X: Tensor, Y: Tensor, noise: str) -> SingleTaskGP:
    d = X.shape[-1]
    ls_prior = LogNormalPrior(loc=math.sqrt(2) + 0.5 * math.log(d), scale=math.sqrt(3))
    matern = MaternKernel(
        nu=2.5,
        ard_num_dims=d,
        lengthscale_prior=ls_prior,
        lengthscale_constraint=GreaterThan(2.5e-2, transform=None, initial_value=ls_prior.mode),
    )
    kernel = ScaleKernel(
        matern,
        outputscale_prior=GammaPrior(2.0, 1.0),
        outputscale_constraint=GreaterThan(1e-4, transform=None, initial_value=1.0),
    )
    noise_prior = LogNormalPrior(loc=-4.0, scale=1.0)
    likelihood = GaussianLikelihood(
        noise_prior=noise_prior if noise == "auto" else None,
        noise_constraint=GreaterThan(
            NOISE_FLOOR / 2,
            transform=None,
            initial_value=noise_prior.mode if noise == "auto" else NOISE_FLOOR,
        ),
    )
    if noise == "deterministic":
        likelihood.noise = NOISE_FLOOR
        likelihood.raw_noise.requires_grad_(False)
    bounds = torch.stack([torch.zeros(d), torch.ones(d)]).to(X)
    return SingleTaskGP(
        X,
        Y,
        likelihood=likelihood,
        covar_module=kernel,
        outcome_transform=Standardize(m=1),
        input_transform=Normalize(d=d, bounds=bounds),
    )


def _copy_hypers(source: SingleTaskGP, target: SingleTaskGP) -> None:
    """Start ``target`` from ``source``'s learned hyperparameters (same names and shapes)."""
    learned = dict(source.named_parameters())
    with torch.no_grad():
        for name, param in target.named_parameters():
            if param.requires_grad and name in learned and learned[name].shape == param.shape:
                param.copy_(learned[name])


def _fit(model: SingleTaskGP) -> None:
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # BoTorch's own optimisation warnings; we check below
        fit_gpytorch_mll(mll, optimizer_kwargs={"options": {"maxiter": 200}})
    ls = model.covar_module.base_kernel.lengthscale
    if not torch.isfinite(ls).all():
        raise SurrogateFitError("lengthscale: fit produced non-finite lengthscales")


def fit_gp(
    X: Tensor,
    Y: Tensor,
    noise: str = "auto",
    previous: FittedModel | None = None,
) -> FittedModel:
    """Fit a GP to ``n x d`` inputs in the unit cube and ``n x 1`` utilities.

    Args:
        X: ``n x d`` points in the unit cube (``n >= 1``).
        Y: ``n x 1`` finite utilities (larger is better).
        noise: ``"auto"`` or ``"deterministic"``.
        previous: the last fit, whose hyperparameters start this one (a warm start).

    Raises:
        SurrogateFitError: when no fit succeeds and there is nothing to fall back to.
    """
    if noise not in NOISE_MODES:
        raise SurrogateFitError(f"noise: expected one of {NOISE_MODES}, got {noise!r}")
    X = X.to(torch.double)
    Y = Y.to(torch.double)
    if not torch.isfinite(Y).all():  # Study never lets this happen; a last guard for the GP
        raise SurrogateFitError("Y: the GP only takes finite values")
    can_warm = previous is not None and previous.model.train_inputs[0].shape[-1] == X.shape[-1]
    errors: list[str] = []
    for warm in [True, False] if can_warm else [False]:
        model = _build(X, Y, noise)
        if warm:
            assert previous is not None
            _copy_hypers(previous.model, model)
        try:
            _fit(model)
            model.eval()
            return FittedModel(model=model, n=X.shape[0], warm=warm)
        except Exception as exc:  # noqa: BLE001 - linear algebra and optimiser failures
            errors.append(f"{type(exc).__name__}: {exc}")
    if previous is not None and can_warm:
        model = _build(X, Y, noise)
        _copy_hypers(previous.model, model)
        model.eval()
        warnings.warn(
            f"GP refit failed ({errors[-1]}); keeping the previous hyperparameters",
            AboWarning,
            stacklevel=2,
        )
        return FittedModel(model=model, n=X.shape[0], warm=True)
    raise SurrogateFitError(f"GP fit failed: {'; '.join(errors)}")
