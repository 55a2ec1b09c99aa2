"""The GP surrogate: predicts held-out points, interpolates deterministic data, warm starts."""

from __future__ import annotations

import math

import pytest
import torch

from abo import SurrogateFitError
from abo.model import surrogate
from abo.model.surrogate import fit_gp, subset


def branin_like(X: torch.Tensor) -> torch.Tensor:
    """A smooth 2-D function on the unit square."""
    x, y = X[:, 0], X[:, 1]
    return (torch.sin(3 * x) + torch.cos(4 * y) + 0.5 * x * y).unsqueeze(-1)


def data(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=gen, dtype=torch.double)
    return X, branin_like(X)


def posterior_mean(fitted, X: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return fitted.model.posterior(X).mean.squeeze(-1)


def test_fit_predicts_held_out_points() -> None:
    torch.manual_seed(0)
    X, Y = data(25, seed=0)
    X_test, Y_test = data(50, seed=1)
    fitted = fit_gp(X, Y)
    assert fitted.n == 25 and fitted.warm is False
    mean = posterior_mean(fitted, X_test)
    r = torch.corrcoef(torch.stack([mean, Y_test.squeeze(-1)]))[0, 1]
    assert r > 0.95
    # and the model knows more than the mean of the data does
    rmse = (mean - Y_test.squeeze(-1)).pow(2).mean().sqrt()
    assert rmse < 0.3 * Y_test.std()


def test_deterministic_noise_interpolates_the_data() -> None:
    torch.manual_seed(0)
    X, Y = data(12, seed=2)
    fitted = fit_gp(X, Y, noise="deterministic")
    noise = fitted.model.likelihood.noise.item()
    assert noise < 1e-5
    mean = posterior_mean(fitted, X)
    assert torch.allclose(mean, Y.squeeze(-1), atol=1e-3 * float(Y.std()))


def test_auto_noise_learns_noise_of_noisy_data() -> None:
    torch.manual_seed(0)
    X, Y = data(30, seed=3)
    gen = torch.Generator().manual_seed(4)
    noisy = Y + 0.3 * torch.randn(Y.shape, generator=gen, dtype=torch.double)
    auto = fit_gp(X, noisy, noise="auto")
    exact = fit_gp(X, noisy, noise="deterministic")
    assert auto.model.likelihood.noise.item() > 100 * exact.model.likelihood.noise.item()


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_values_raise_surrogate_fit_error(bad: float) -> None:
    X, Y = data(6, seed=5)
    Y[2, 0] = bad
    with pytest.raises(SurrogateFitError, match="^Y:"):
        fit_gp(X, Y)


def test_unknown_noise_mode_raises() -> None:
    X, Y = data(6, seed=5)
    with pytest.raises(SurrogateFitError, match="^noise:"):
        fit_gp(X, Y, noise="loud")


@pytest.mark.slow
def test_warm_start_is_reported_and_only_when_dims_match() -> None:
    torch.manual_seed(0)
    X, Y = data(10, seed=6)
    first = fit_gp(X, Y)
    X2, Y2 = data(14, seed=6)
    second = fit_gp(X2, Y2, previous=first)
    assert second.warm is True and second.n == 14
    # a previous fit of another dimension cannot seed this one: a cold fit
    X3 = torch.rand(8, 3, generator=torch.Generator().manual_seed(7), dtype=torch.double)
    third = fit_gp(X3, X3.sum(-1, keepdim=True), previous=first)
    assert third.warm is False


def test_subset_keeps_all_points_up_to_the_cap() -> None:
    X, Y = data(30, seed=8)
    assert torch.equal(subset(X, Y, m=30), torch.arange(30))


def test_subset_keeps_the_best_half_and_a_seeded_sample_of_the_rest() -> None:
    X, Y = data(200, seed=9)
    idx = subset(X, Y, m=50, seed=1)
    assert idx.numel() == 50 and torch.equal(idx, torch.sort(torch.unique(idx)).values)
    best = torch.argsort(Y.squeeze(-1), descending=True)[:25]
    assert set(best.tolist()) <= set(idx.tolist())  # every near-incumbent point stays
    assert torch.equal(idx, subset(X, Y, m=50, seed=1))  # deterministic
    assert not torch.equal(idx, subset(X, Y, m=50, seed=2))  # the sample depends on the seed


def test_a_full_refit_tries_three_starts_keeps_the_best(monkeypatch: pytest.MonkeyPatch) -> None:
    X, Y = data(20, seed=10)
    first = fit_gp(X, Y)
    values: list[float] = []
    iterations: list[int] = []
    real = surrogate._fit

    def spy(model, maxiter=surrogate.FIT_ITERATIONS):
        iterations.append(maxiter)
        values.append(real(model, maxiter))
        return values[-1]

    monkeypatch.setattr(surrogate, "_fit", spy)
    X2, Y2 = data(24, seed=10)
    quick = fit_gp(X2, Y2, previous=first)
    assert len(values) == 1 and quick.warm  # between full refits: one warm start only
    values.clear()
    iterations.clear()
    full = fit_gp(X2, Y2, previous=first, full=True, seed=4)
    # warm (to convergence), the prior's mode and a prior draw (probed), and the best fresh
    # start continued to convergence when it beat the warm one
    probe, whole = surrogate.PROBE_ITERATIONS, surrogate.FIT_ITERATIONS
    assert iterations[:3] == [whole, probe, probe]
    best = max(range(3), key=values.__getitem__)
    assert full.warm == (best == 0)
    assert iterations[3:] == ([] if best == 0 else [whole])
    again = fit_gp(X2, Y2, previous=first, full=True, seed=4)
    ls = full.model.covar_module.base_kernel.lengthscale
    assert torch.allclose(ls, again.model.covar_module.base_kernel.lengthscale)


def test_subset_is_stable_as_data_arrive() -> None:
    X, Y = data(301, seed=11)
    before = set(subset(X[:300], Y[:300], m=60).tolist())
    after = set(subset(X, Y, m=60).tolist())
    assert len(after - before) <= 2  # the newcomer and at most one it displaced
