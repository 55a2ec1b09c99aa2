"""The surrogate choices docs/surrogate.md justifies: output scale, warm starts, EI when exact."""

from __future__ import annotations

import pytest
import torch
from botorch.acquisition.logei import qLogExpectedImprovement, qLogNoisyExpectedImprovement

from abo.acquisitions.base import ProposalContext
from abo.acquisitions.qlognei import QLogNEIStrategy, is_noise_free
from abo.model.surrogate import FittedModel, fit_gp


def _data(noise_sd: float, n: int = 12, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=gen, dtype=torch.double)
    Y = torch.sin(6 * X[:, :1]) + X[:, 1:] ** 2
    return X, Y + noise_sd * torch.randn(n, 1, generator=gen, dtype=torch.double)


def _ctx(fitted: FittedModel, X: torch.Tensor, Y: torch.Tensor) -> ProposalContext:
    return ProposalContext(
        model=fitted.model,
        X=X,
        Y=Y,
        X_pending=X[:2] * 0.5,
        bounds=torch.stack([torch.zeros(2), torch.ones(2)]).double(),
        generator=torch.Generator().manual_seed(1),
        round=lambda x: x,
    )


def test_the_output_scale_is_learned_and_warm_started() -> None:
    X, Y = _data(0.0)
    first = fit_gp(X, Y, noise="deterministic")
    scale = first.model.covar_module.outputscale.item()
    assert abs(scale - 1.0) > 1e-3  # moved off its initial value by the fit
    again = fit_gp(X, Y, noise="deterministic", previous=first)
    assert again.warm
    assert again.model.covar_module.outputscale.item() == pytest.approx(scale, rel=1e-3)
    torch.testing.assert_close(
        again.model.covar_module.base_kernel.lengthscale,
        first.model.covar_module.base_kernel.lengthscale,
        rtol=1e-3,
        atol=1e-6,
    )


def test_exact_observations_get_ei_and_noisy_ones_noisy_ei() -> None:
    X, Y = _data(0.0)
    exact = fit_gp(X, Y, noise="deterministic")
    assert is_noise_free(exact.model)
    strategy = QLogNEIStrategy(mc_samples=32, raw_samples=32, num_restarts=2)
    acq = strategy.acquisition(_ctx(exact, X, Y), X[:1] * 0.5)
    assert isinstance(acq, qLogExpectedImprovement)
    assert acq.X_pending is not None and acq.X_pending.shape[0] == 1

    Xn, Yn = _data(0.3, n=20)
    noisy = fit_gp(Xn, Yn, noise="auto")
    assert not is_noise_free(noisy.model)
    acq = strategy.acquisition(_ctx(noisy, Xn, Yn), Xn[:0])
    assert isinstance(acq, qLogNoisyExpectedImprovement)
    assert strategy.propose(_ctx(noisy, Xn, Yn), 1).X.shape == (1, 2)
