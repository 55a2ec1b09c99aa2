"""The direct marginal likelihood computes what GPyTorch's does, and fits land where BoTorch's
own closure lands."""

from __future__ import annotations

import pytest
import torch
from botorch.models import SingleTaskGP
from botorch.models.transforms import Normalize
from botorch.models.transforms.input import ChainedInputTransform, Warp
from botorch.optim.closures import ForwardBackwardClosure, get_loss_closure_with_grads
from botorch.optim.utils import get_parameters
from gpytorch import settings
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.priors import LogNormalPrior

import abo.model.surrogate
from abo.model.likelihood import loss
from abo.model.surrogate import _build, fit_gp


def _data(n: int = 25, d: int = 3, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=gen, dtype=torch.double)
    Y = torch.sin(6 * X[:, :1]) + (X - 0.4).pow(2).sum(-1, keepdim=True)
    return X, Y


def _both(mll: ExactMarginalLogLikelihood) -> tuple[tuple, tuple]:
    params = get_parameters(mll, requires_grad=True)
    forward = loss(mll)
    assert forward is not None
    value, grads = get_loss_closure_with_grads(mll, params)()
    reference = (value.item(), [g.clone() for g in grads])
    value, grads = ForwardBackwardClosure(forward, params)()
    return reference, (value.item(), [g.clone() for g in grads])


@pytest.mark.parametrize(
    ("noise", "fidelity"), [("auto", ()), ("deterministic", ()), ("auto", (2,))]
)
def test_value_and_gradient_are_gpytorchs(noise: str, fidelity: tuple[int, ...]) -> None:
    X, Y = _data()
    model = _build(X, Y, noise, fidelity)
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    mll.train()
    for step in range(2):  # at the initial values, then away from every prior's mode
        (v0, g0), (v1, g1) = _both(mll)
        assert v1 == pytest.approx(v0, rel=1e-10, abs=1e-12)
        assert len(g0) == len(g1) >= 3
        for a, b in zip(g0, g1, strict=True):
            torch.testing.assert_close(b, a, rtol=1e-8, atol=1e-10)
        if step == 0:
            with torch.no_grad():
                model.covar_module.base_kernel.lengthscale = torch.tensor([[0.3, 0.9, 2.0]])
                model.covar_module.outputscale = 1.7
                model.mean_module.constant.fill_(0.2)
                if noise == "auto":
                    model.likelihood.noise = 0.05


def test_the_failure_classifiers_fixed_noise_gp_too() -> None:
    X, Y = _data()
    classifier = _build(X, (Y > 0.5).double(), "classifier")  # noise fixed per point
    mll = ExactMarginalLogLikelihood(classifier.likelihood, classifier)
    mll.train()
    (v0, g0), (v1, g1) = _both(mll)
    assert v1 == pytest.approx(v0, rel=1e-10, abs=1e-12)
    for a, b in zip(g0, g1, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-8, atol=1e-10)


def test_other_models_keep_botorchs_closure() -> None:
    X, Y = _data()
    plain = SingleTaskGP(X, Y)  # BoTorch's default kernel, not abo's Matern-5/2
    assert loss(ExactMarginalLogLikelihood(plain.likelihood, plain)) is None
    exact = settings.max_cholesky_size.value()  # above it GPyTorch uses conjugate gradients
    X, Y = _data(n=exact + 1, d=2)
    large = _build(X, Y, "auto")
    assert loss(ExactMarginalLogLikelihood(large.likelihood, large)) is None
    X, Y = _data(n=exact, d=2)
    small = _build(X, Y, "auto")
    assert loss(ExactMarginalLogLikelihood(small.likelihood, small)) is not None


@pytest.mark.parametrize("noise", ["auto", "deterministic"])
def test_a_fit_lands_where_botorchs_closure_lands(
    noise: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    X, Y = _data(n=30, d=2, seed=3)
    used: list[bool] = []

    def spy(mll: ExactMarginalLogLikelihood):  # the fit takes the direct loss
        forward = loss(mll)
        used.append(forward is not None)
        return forward

    monkeypatch.setattr(abo.model.surrogate, "direct_loss", spy)
    direct = fit_gp(X, Y, noise=noise, full=True, seed=1).model
    assert len(used) >= 3 and all(used)  # a full fit: two probes, then the winner continued
    monkeypatch.setattr(abo.model.surrogate, "direct_loss", lambda mll: None)  # BoTorch's own
    reference = fit_gp(X, Y, noise=noise, full=True, seed=1).model
    for (name, a), (_, b) in zip(
        reference.named_parameters(), direct.named_parameters(), strict=True
    ):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6, msg=name)


def _warped(d: int, bounds: torch.Tensor) -> ChainedInputTransform:
    """abo's unit ``Normalize`` followed by BoTorch's ``Warp`` (HEBO's input warping)."""
    return ChainedInputTransform(
        normalize=Normalize(d=d, bounds=bounds),
        warp=Warp(d=d, indices=list(range(d)), bounds=bounds,
                  concentration1_prior=LogNormalPrior(0.0, 0.75**0.5),
                  concentration0_prior=LogNormalPrior(0.0, 0.75**0.5)),
    )  # fmt: skip


def test_inputs_warped_by_a_learned_kumaraswamy_cdf_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(abo.model.surrogate, "Normalize", _warped)
    X, Y = _data()
    model = _build(X, Y, "auto")
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    mll.train()
    warp = model.input_transform["warp"]
    for step in range(2):  # at the identity warp, then at a warp that bends every input
        (v0, g0), (v1, g1) = _both(mll)
        assert v1 == pytest.approx(v0, rel=1e-10, abs=1e-12)
        assert len(g0) == len(g1) >= 5  # the two concentrations' gradients among them
        for a, b in zip(g0, g1, strict=True):
            torch.testing.assert_close(b, a, rtol=1e-8, atol=1e-10)
        if step == 0:
            with torch.no_grad():
                warp.concentration0.copy_(torch.tensor([0.5, 2.0, 1.3]))
                warp.concentration1.copy_(torch.tensor([1.7, 0.6, 1.0]))
    mll.eval()  # there BoTorch stores the inputs warped: the direct loss would warp them twice
    assert loss(mll) is None


def test_a_warp_of_other_inputs_keeps_botorchs_closure() -> None:
    X, Y = _data()
    model = _build(X, Y, "auto")
    bounds = torch.stack([torch.zeros(3), 2 * torch.ones(3)]).to(X)  # not the unit cube
    model.input_transform = _warped(3, bounds)
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    mll.train()
    assert loss(mll) is None
