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
  Every so often (``abo.model.refit``) a *full* refit also starts from the prior's mode and from a
  seeded draw of the lengthscale prior and keeps the start with the best marginal likelihood,
  so a study cannot stay stuck in the optimum of its first few points. The fresh starts are
  probed for ``PROBE_ITERATIONS`` L-BFGS-B iterations and only the best start runs to
  convergence: a full refit of Hartmann-6 at 24 points took 0.9-1.4 s with every start
  converged (a prior draw alone 0.7-1.0 s), and a fraction of that probed.
* Above ``MAX_EXACT`` observations the GP is fitted on a subset (``subset``): the best half
  by utility plus a fixed pseudo-random sample of the rest. An exact GP costs O(n^3) to factor and
  O(n^2) per prediction; the subset bounds an ask's cost and memory whatever the study's size,
  while keeping every point near the incumbent, where proposals land. ``benchmarks/scalable.py``
  compared it with exact GPs and a variational GP (numbers in ``docs/benchmarks.md``).

The model is always fitted on *utilities* (larger is better), the convention BoTorch's
acquisition functions assume; ``Study`` flips the sign for minimisation.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.transforms import Normalize, Standardize
from botorch.optim.closures import ForwardBackwardClosure
from botorch.optim.utils import get_parameters
from gpytorch.constraints import GreaterThan
from gpytorch.kernels import MaternKernel, ScaleKernel
from gpytorch.likelihoods import GaussianLikelihood
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.priors import GammaPrior, LogNormalPrior
from torch import Tensor

from abo.core.exceptions import AboWarning, SurrogateFitError
from abo.core.quiet import silenced
from abo.model.failures import TARGET_NOISE
from abo.model.likelihood import loss as direct_loss
from abo.model.options import (  # observations above which the GP sees a subset
    MAX_EXACT,
    NOISE_MODES,
)
from abo.model.prior_mean import PriorMean as PriorMean  # a warm start's prior mean

LENGTHSCALE_FLOOR = 2.5e-2
"""The objective GP's shortest lengthscale, in the units of its inputs' cube (a fortieth)."""
CLASSIFIER_LENGTHSCALE_FLOOR = 0.1
"""The failure classifier's shortest lengthscale (the unit cube): a failure region is a
region. Labels that flip across a cliff would otherwise pull the lengthscale to the floor of
the objective's GP, and between such spikes the classifier knows nothing."""

MODEL_NOISES = (*NOISE_MODES, "classifier")
"""The noise models of ``_build``: a study's (``NOISE_MODES``) and the failure classifier's
(the fixed noise of its Dirichlet targets, ``abo.model.failures``)."""

FIDELITY_LENGTHSCALE_PRIOR = (1.0, 0.75)
"""LogNormal(loc, scale) of a fidelity column's lengthscale (the unit cube): its mode 1.55 makes
the lowest and the target fidelity correlate about 0.75 a priori (Matern-5/2), where the
inputs' prior (mode 0.3 to 0.6) would make them nearly unrelated until data said otherwise."""

NOISE_FLOOR = 1e-6
NOISE_PRIOR = (-4.0, 1.0)  # LogNormal(loc, scale) of the learned noise (standardised scale)
NOISE_PRIOR_MODE = math.exp(NOISE_PRIOR[0] - NOISE_PRIOR[1] ** 2)  # about 6.7e-3


@dataclass(frozen=True)
class FittedModel:
    """A fitted GP with the data it saw; ``n`` is its number of observations."""

    model: SingleTaskGP
    n: int
    warm: bool


def _lengthscale_prior(
    d: int, fidelity: tuple[int, ...] = (), device: torch.device | None = None
) -> LogNormalPrior:
    """The lengthscales' prior: Hvarfner et al.'s for every input, and for a fidelity's
    columns ``FIDELITY_LENGTHSCALE_PRIOR``, whose long lengthscales say that an evaluation at
    one fidelity is evidence about the others (why a study declares a fidelity at all)."""
    loc = math.sqrt(2) + 0.5 * math.log(d)
    scale = math.sqrt(3)
    if not fidelity:
        return LogNormalPrior(loc=loc, scale=scale)
    locs = torch.full((1, d), loc, dtype=torch.double, device=device)  # the GP's device: a
    scales = torch.full((1, d), scale, dtype=torch.double, device=device)  # prior's not moved
    for i in fidelity:
        locs[0, i], scales[0, i] = FIDELITY_LENGTHSCALE_PRIOR
    return LogNormalPrior(loc=locs, scale=scales)


def _build(
    X: Tensor, Y: Tensor, noise: str, fidelity: tuple[int, ...] = (), prior: Any = None
) -> SingleTaskGP:
    """The GP of the module's choices; ``prior``: a warm start's ``abo.spec.warm_start.WarmPrior``,
    whose GP's mean becomes this one's prior mean (``PriorMean``)."""
    d = X.shape[-1]
    mean = {} if prior is None else {"mean_module": prior.mean_module()}
    ls_prior = _lengthscale_prior(d, fidelity, X.device)
    floor = CLASSIFIER_LENGTHSCALE_FLOOR if noise == "classifier" else LENGTHSCALE_FLOOR
    mode = ls_prior.mode
    matern = MaternKernel(
        nu=2.5,
        ard_num_dims=d,
        lengthscale_prior=ls_prior,
        lengthscale_constraint=GreaterThan(
            floor, transform=None, initial_value=max(floor, float(mode.min()))
        ),
    )
    if fidelity:
        with torch.no_grad():
            matern.lengthscale = mode.clamp_min(floor).to(matern.lengthscale)
    kernel = ScaleKernel(
        matern,
        outputscale_prior=GammaPrior(2.0, 1.0),
        outputscale_constraint=GreaterThan(1e-4, transform=None, initial_value=1.0),
    )
    bounds = torch.stack([torch.zeros(d), torch.ones(d)]).to(X)
    if noise == "classifier":  # the Dirichlet targets' own, fixed noise: no interpolated spikes
        given: dict[str, Any] = {"train_Yvar": torch.full_like(Y, TARGET_NOISE)}
    else:
        given = {"likelihood": _likelihood(noise), **mean}
    gp = SingleTaskGP(
        X,
        Y,
        covar_module=kernel,
        outcome_transform=Standardize(m=1),
        input_transform=Normalize(d=d, bounds=bounds),
        **given,
    )
    # its priors, constraints and mean are made on the CPU: they follow X to its device
    return gp if X.device.type == "cpu" else gp.to(X.device)


def _likelihood(noise: str) -> GaussianLikelihood:
    """The observation noise: learned under its prior (``"auto"``), or fixed at the floor."""
    noise_prior = LogNormalPrior(loc=NOISE_PRIOR[0], scale=NOISE_PRIOR[1])
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
    return likelihood


def _copy_hypers(source: SingleTaskGP, target: SingleTaskGP) -> None:
    """Start ``target`` from ``source``'s learned hyperparameters (same names and shapes)."""
    learned = dict(source.named_parameters())
    with torch.no_grad():
        for name, param in target.named_parameters():
            if param.requires_grad and name in learned and learned[name].shape == param.shape:
                param.copy_(learned[name])


def subset(X: Tensor, Y: Tensor, m: int = MAX_EXACT, seed: int = 0) -> Tensor:
    """Indices (ascending) of at most ``m`` observations for the GP: the best half, then a
    ``seed``-ed sample of the rest (all indices when ``n <= m``).

    The sample ranks observations by a hash of their position, so it is stable as data
    arrive: one more observation changes the subset by at most a point or two, and a
    conditioned model moves no more than the data did.
    """
    n = X.shape[0]
    if n <= m:
        return torch.arange(n)
    n_top = m // 2
    order = torch.argsort(Y.squeeze(-1), descending=True, stable=True)
    top, rest = order[:n_top], order[n_top:]
    salt = (seed * 0x9E3779B1 + 0x7F4A7C15) % 2**32
    priority = (rest * 2654435761 + salt) % 2**32  # Knuth's multiplicative hash
    sample = rest[torch.argsort(priority, stable=True)[: m - n_top]]
    return torch.sort(torch.cat([top, sample])).values


FIT_ITERATIONS = 200  # L-BFGS-B iterations of a fit to convergence
PROBE_ITERATIONS = 25  # of a full refit's fresh starts before the best one is continued


def _fit(model: SingleTaskGP, maxiter: int = FIT_ITERATIONS) -> float:
    """Maximise the marginal likelihood (with priors); return its value per observation."""
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    forward = direct_loss(mll)  # the same function without GPyTorch's per-step overhead
    closure = None
    if forward is not None:
        closure = ForwardBackwardClosure(forward, get_parameters(mll, requires_grad=True))
    with silenced():  # BoTorch's own optimisation notes (thread-safe); the result is checked
        fit_gpytorch_mll(mll, closure=closure, optimizer_kwargs={"options": {"maxiter": maxiter}})
    ls = model.covar_module.base_kernel.lengthscale
    if not torch.isfinite(ls).all():
        raise SurrogateFitError("lengthscale: fit produced non-finite lengthscales")
    mll.train()
    with torch.no_grad():
        value = float(mll(model(*model.train_inputs), model.train_targets))
    mll.eval()
    if not math.isfinite(value):
        raise SurrogateFitError("marginal likelihood: not finite after the fit")
    return value


def _prior_draw(model: SingleTaskGP, seed: int) -> None:
    """Set ``model``'s lengthscales to a seeded draw from their prior (a fresh start)."""
    base = model.covar_module.base_kernel
    gen = torch.Generator().manual_seed(seed)
    prior = base.lengthscale_prior
    z = torch.randn(base.lengthscale.shape, generator=gen, dtype=torch.double)
    z = z.to(base.lengthscale.device)  # drawn on the CPU: a seed means the same on any device
    draw = torch.exp(prior.loc + prior.scale * z).clamp(min=5e-2, max=1e2)
    with torch.no_grad():
        base.lengthscale = draw.to(base.lengthscale)


def fit_gp(
    X: Tensor,
    Y: Tensor,
    noise: str = "auto",
    previous: FittedModel | None = None,
    full: bool = False,
    seed: int = 0,
    fidelity: tuple[int, ...] = (),
    prior: Any = None,
) -> FittedModel:
    """Fit a GP to ``n x d`` inputs in the unit cube and ``n x 1`` utilities.

    Args:
        X: ``n x d`` points in the unit cube (``n >= 1``).
        Y: ``n x 1`` finite utilities (larger is better).
        noise: ``"auto"`` or ``"deterministic"`` (or ``"classifier"``: ``abo.model.failures``).
        previous: the last fit, whose hyperparameters start this one (a warm start).
        full: also start from the prior's mode and a ``seed``-ed prior draw, keeping the
            start with the best marginal likelihood (a full multi-start refit).
        seed: the prior draw's seed (a full refit is deterministic given it).
        fidelity: the columns of a study's fidelity (their lengthscales' own prior).
        prior: a warm start's sources (``abo.spec.warm_start.WarmPrior``): the prior mean.

    Raises:
        SurrogateFitError: when no fit succeeds and there is nothing to fall back to.
    """
    if noise not in MODEL_NOISES:
        raise SurrogateFitError(f"noise: expected one of {MODEL_NOISES}, got {noise!r}")
    X = X.to(torch.double)
    Y = Y.to(torch.double)
    if not torch.isfinite(Y).all():  # Study never lets this happen; a last guard for the GP
        raise SurrogateFitError("Y: the GP only takes finite values")
    can_warm = previous is not None and previous.model.train_inputs[0].shape[-1] == X.shape[-1]
    errors: list[str] = []
    best = _best_start(
        X, Y, noise, previous if can_warm else None, full, seed, fidelity, prior, errors
    )
    if best is not None:
        best[1].eval()
        return FittedModel(model=best[1], n=X.shape[0], warm=best[2])
    if previous is not None and can_warm:
        model = _build(X, Y, noise, fidelity, prior)
        _copy_hypers(previous.model, model)
        model.eval()
        warnings.warn(
            f"GP refit failed ({errors[-1]}); keeping the previous hyperparameters",
            AboWarning,
            stacklevel=2,
        )
        return FittedModel(model=model, n=X.shape[0], warm=True)
    raise SurrogateFitError(f"GP fit failed: {'; '.join(errors)}")


def _best_start(
    X: Tensor,
    Y: Tensor,
    noise: str,
    warm: FittedModel | None,
    full: bool,
    seed: int,
    fidelity: tuple[int, ...],
    prior: Any,
    errors: list[str],
) -> tuple[float, SingleTaskGP, bool] | None:
    """The fitted start with the best marginal likelihood (``fit_gp``): ``warm``'s
    hyperparameters, the prior's mode and (``full``) a ``seed``-ed prior draw; a full refit's
    fresh starts are probed first and only the best continued. Failures go to ``errors``."""
    starts = ["warm", "mode"] if warm is not None else ["mode"]
    if full:
        starts.append("draw")
    best: tuple[float, SingleTaskGP, bool] | None = None
    probed = False  # whether ``best`` is a fresh start fitted for PROBE_ITERATIONS only
    for start in starts:
        model = _build(X, Y, noise, fidelity, prior)
        if start == "warm":
            assert warm is not None
            _copy_hypers(warm.model, model)
        elif start == "draw":
            _prior_draw(model, seed)
        # a full refit's fresh starts are probed first; the best of them is continued below
        probe = full and start != "warm" and len(starts) > 1
        try:
            value = _fit(model, PROBE_ITERATIONS if probe else FIT_ITERATIONS)
        except Exception as exc:  # noqa: BLE001 - linear algebra and optimiser failures
            errors.append(f"{type(exc).__name__}: {exc}")
            continue
        if best is None or value > best[0]:
            best, probed = (value, model, start == "warm"), probe
        if not full:
            break  # one successful start is enough between full refits
    if best is not None and probed:
        try:  # continue the winning fresh start to convergence
            best = (_fit(best[1]), best[1], best[2])
        except Exception as exc:  # noqa: BLE001 - keep the probe's hyperparameters
            errors.append(f"{type(exc).__name__}: {exc}")
    return best


def export_hypers(model: Any) -> dict[str, list[float]]:
    """The learned raw hyperparameters of a GP as plain lists (exact through JSON)."""
    return {
        name: [float(v) for v in param.detach().reshape(-1).tolist()]
        for name, param in model.named_parameters()
        if param.requires_grad
    }


def condition(
    X: Tensor,
    Y: Tensor,
    noise: str,
    hypers: Mapping[str, list[float]],
    fidelity: tuple[int, ...] = (),
    prior: Any = None,
) -> FittedModel:
    """A GP on ``X, Y`` with the given hyperparameters, not re-optimised (cheap)."""
    model = _build(X.to(torch.double), Y.to(torch.double), noise, fidelity, prior)
    with torch.no_grad():
        for name, param in model.named_parameters():
            values = hypers.get(name)
            if param.requires_grad and values is not None and len(values) == param.numel():
                param.copy_(torch.tensor(values, dtype=param.dtype).reshape(param.shape))
    model.eval()
    return FittedModel(model=model, n=X.shape[0], warm=True)
