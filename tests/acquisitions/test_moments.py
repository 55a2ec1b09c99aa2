"""``MaternMoments``: the posterior's mean and std with a closed-form gradient equal
``model.posterior``'s values and autograd's gradients, alone and with busy points believed."""

from __future__ import annotations

import pytest
import torch
from botorch.models import SingleTaskGP
from botorch.models.transforms import Normalize, Standardize
from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel

from abo.acquisitions.believer import believe
from abo.acquisitions.moments import MaternMoments
from abo.acquisitions.optimize import Believed, latent_mean_std, outcome_scale, solves
from abo.model.surrogate import fit_gp


def _data(n: int, d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=torch.double)
    Y = torch.sin(6 * X).sum(-1, keepdim=True) - 3 * (X - 0.4).pow(2).sum(-1, keepdim=True)
    return X, Y


def _queries(X: torch.Tensor, k: int, seed: int) -> torch.Tensor:
    """Random points, and points a hair from the data (where the variance nearly vanishes)."""
    g = torch.Generator().manual_seed(seed)
    far = torch.rand(k, X.shape[1], generator=g, dtype=torch.double)
    near = (X[:k] + 1e-4 * torch.randn(k, X.shape[1], generator=g, dtype=torch.double)).clamp(0, 1)
    return torch.cat([far, near])


def _slow(model, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Standardised latent mean and std through GPyTorch's posterior, autograd throughout."""
    shift, scale = outcome_scale(model)
    post = model.posterior(X.unsqueeze(-2))
    mean = (post.mean.reshape(-1) - shift) / scale
    return mean, post.variance.reshape(-1).clamp_min(1e-16).sqrt() / scale


def _compare(fast, slow, X: torch.Tensor, grad_tol: float = 1e-6) -> None:
    """Values, and the gradients of two different combinations of mean and std."""
    a, b = X.clone().requires_grad_(True), X.clone().requires_grad_(True)
    mean, std = fast(a)
    ref_mean, ref_std = slow(b)
    assert torch.allclose(mean, ref_mean, atol=1e-8, rtol=1e-8)
    assert torch.allclose(std, ref_std, atol=1e-7, rtol=1e-6)
    for wm, ws in ((1.0, 2.0), (-0.5, 3.0)):
        (ga,) = torch.autograd.grad((wm * mean + ws * std).sum(), a, retain_graph=True)
        (gb,) = torch.autograd.grad((wm * ref_mean + ws * ref_std).sum(), b, retain_graph=True)
        assert torch.allclose(ga, gb, atol=grad_tol, rtol=1e-5), (ga - gb).abs().max()
        assert gb.norm(dim=-1).max() > 0.1  # slopes, not flat zeros, were compared


@pytest.mark.parametrize("noise", ["deterministic", "auto", "classifier"])
def test_moments_of_abos_gp_are_the_posteriors_with_its_gradients(noise: str) -> None:
    X, Y = _data(40, 3, seed=1)
    model = fit_gp(X, Y, noise=noise).model
    sol = solves(model)
    assert sol is not None and sol.moments(model) is not None  # the closed form applies
    Q = _queries(X, 24, seed=2)
    _compare(lambda x: latent_mean_std(model, x, grad=True), lambda x: _slow(model, x), Q)


def test_believed_moments_and_gradients_are_the_fantasy_models() -> None:
    """Busy points believed at their mean: the conditioned model's posterior, autograd."""
    X, Y = _data(40, 3, seed=3)
    for noise in ("deterministic", "auto"):
        model = fit_gp(X, Y, noise=noise).model
        busy = _data(5, 3, seed=4)[0]
        believed = Believed(model, busy)
        assert believed.moments is not None
        fantasy, _ = believe(model, busy)
        Q = torch.cat([_queries(X, 16, seed=5), busy + 1e-3])
        _compare(believed.mean_std, lambda x, f=fantasy: _slow(f, x), Q, grad_tol=1e-5)


def test_a_model_with_a_transformed_input_takes_its_transform() -> None:
    """Inputs outside the unit cube: the model's ``Normalize`` is applied, gradient included."""
    X, Y = _data(30, 2, seed=6)
    X = 4 * X - 1
    base = MaternKernel(nu=2.5, ard_num_dims=2)
    gp = SingleTaskGP(
        X,
        Y,
        covar_module=ScaleKernel(base),
        outcome_transform=Standardize(m=1),
        input_transform=Normalize(d=2, bounds=torch.tensor([[-1.0, -1.0], [3.0, 3.0]])),
    )
    with torch.no_grad():
        base.lengthscale = torch.tensor([[0.3, 0.5]])
    gp.eval()
    sol = solves(gp)
    assert sol is not None and sol.moments(gp) is not None
    Q = 4 * _queries((X + 1) / 4, 16, seed=7) - 1
    _compare(lambda x: latent_mean_std(gp, x, grad=True), lambda x: _slow(gp, x), Q)


def test_other_kernels_keep_autograd_with_the_same_results() -> None:
    X, Y = _data(30, 2, seed=8)
    gp = SingleTaskGP(X, Y, covar_module=ScaleKernel(RBFKernel(ard_num_dims=2))).eval()
    sol = solves(gp)
    assert sol is not None and sol.moments(gp) is None
    assert MaternMoments.of(gp, X, sol.L, sol.alpha) is None
    busy = _data(3, 2, seed=9)[0]
    assert Believed(gp, busy).moments is None
    Q = _queries(X, 12, seed=10)
    _compare(lambda x: latent_mean_std(gp, x, grad=True), lambda x: _slow(gp, x), Q)
    fantasy, _ = believe(gp, busy)
    _compare(Believed(gp, busy).mean_std, lambda x: _slow(fantasy, x), Q, grad_tol=1e-5)


def test_log_h_has_botorchs_value_and_gradient_over_a_wide_range() -> None:
    from botorch.acquisition.analytic import _log_ei_helper

    from abo.acquisitions.optimize import LogH

    u = torch.cat([torch.linspace(-60, 60, 2001), torch.tensor([-1e3, -1.0, 0.0, 1e3])])
    a, b = u.double().requires_grad_(True), u.double().requires_grad_(True)
    fast, slow = LogH.apply(a), _log_ei_helper(b)
    assert torch.equal(fast, slow)
    (ga,) = torch.autograd.grad(fast.sum(), a)
    (gb,) = torch.autograd.grad(slow.sum(), b)
    assert torch.isfinite(ga).all()
    assert torch.allclose(ga, gb, rtol=1e-9, atol=1e-12), (ga - gb).abs().max()
    assert gb.max() > 50 and gb.min() < 1e-2  # both tails were compared
