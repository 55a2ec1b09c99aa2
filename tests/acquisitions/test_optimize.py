"""The fast posterior pieces shared by the strategies agree with ``model.posterior``; the
acquisition search climbs from its rounded optimum in a discrete space."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from botorch.acquisition import AcquisitionFunction
from botorch.models.deterministic import GenericDeterministicModel
from strategy_helpers import make_ctx, peaked_data

from abo import Int, Space
from abo.acquisitions.optimize import (
    latent_mean,
    latent_mean_std,
    maximize,
    outcome_scale,
    search_candidates,
    standardized_posterior,
)
from abo.model.surrogate import fit_gp


def _points(n: int = 64) -> torch.Tensor:
    return torch.quasirandom.SobolEngine(2, scramble=True, seed=5).draw(n, dtype=torch.double)


def _reference(model, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Standardised marginal mean and std the slow way: ``model.posterior`` point by point."""
    shift, scale = outcome_scale(model)
    post = model.posterior(X.unsqueeze(-2))
    mean = (post.mean.squeeze(-1).squeeze(-1) - shift) / scale
    return mean, post.variance.squeeze(-1).squeeze(-1).sqrt() / scale


def test_latent_mean_is_the_standardised_posterior_mean_with_its_gradient(peaked) -> None:
    model, _, _ = peaked
    fast_x = _points().requires_grad_(True)
    slow_x = _points().requires_grad_(True)
    fast = latent_mean(model, fast_x)
    slow, _ = _reference(model, slow_x)
    assert fast is not None
    assert torch.allclose(fast, slow, atol=1e-9, rtol=0)
    (g_fast,) = torch.autograd.grad(fast.sum(), fast_x)
    (g_slow,) = torch.autograd.grad(slow.sum(), slow_x)
    assert torch.allclose(g_fast, g_slow, atol=1e-7, rtol=0)
    assert g_slow.norm(dim=-1).max() > 0.1  # a mean with a real slope was compared


def test_latent_mean_std_is_the_standardised_marginal_posterior() -> None:

    X, Y = peaked_data(n=12, seed=1)
    model = fit_gp(X, Y).model  # learned noise: the latent std excludes it
    fast = latent_mean_std(model, _points(256))
    with torch.no_grad():
        mean, std = _reference(model, _points(256))
    assert fast is not None
    assert torch.allclose(fast[0], mean, atol=1e-9, rtol=0)
    assert torch.allclose(fast[1], std, atol=1e-7, rtol=0)
    assert std.max() > 3 * std.min()  # near data and far from it were both compared


def test_latent_moments_with_a_noise_per_point_are_the_posteriors() -> None:
    """The failure classifier's GP has a fixed noise per observation, not one level."""
    X, Y = peaked_data(n=12, seed=2)
    model = fit_gp(X, Y, noise="classifier").model
    assert model.likelihood.noise.numel() == 12
    fast = latent_mean_std(model, _points(128))
    with torch.no_grad():
        mean, std = _reference(model, _points(128))
    assert fast is not None
    assert torch.allclose(fast[0], mean, atol=1e-9, rtol=0)
    assert torch.allclose(fast[1], std, atol=1e-7, rtol=0)


def test_the_solves_follow_hyperparameters_changed_in_place() -> None:
    """``solves`` are kept per model; a parameter changed in place (a refit) renews them."""
    X, Y = peaked_data(n=12, seed=4)
    model = fit_gp(X, Y, noise="deterministic").model
    assert latent_mean(model, _points()) is not None  # the solves are now kept
    with torch.no_grad():
        model.covar_module.base_kernel.lengthscale = (
            0.5 * model.covar_module.base_kernel.lengthscale
        )
    fast = latent_mean_std(model, _points(128))
    with torch.no_grad():
        model.prediction_strategy = None  # GPyTorch's own caches do not see the change
        mean, std = _reference(model, _points(128))
    assert fast is not None
    assert torch.allclose(fast[0], mean, atol=1e-9, rtol=0)
    assert torch.allclose(fast[1], std, atol=1e-7, rtol=0)


def test_standardized_posterior_takes_the_fast_path_with_the_posteriors_gradients(peaked) -> None:
    """The penalised acquisition's search differentiates mean and std: both must be right."""
    model, _, _ = peaked
    fast_x = _points(128).requires_grad_(True)
    slow_x = _points(128).requires_grad_(True)
    mean, std = standardized_posterior(model, fast_x)
    ref_mean, ref_std = _reference(model, slow_x)
    assert torch.allclose(mean, ref_mean, atol=1e-9, rtol=0)
    assert torch.allclose(std, ref_std, atol=1e-7, rtol=0)
    (g_fast,) = torch.autograd.grad((mean + 2 * std).sum(), fast_x)
    (g_slow,) = torch.autograd.grad((ref_mean + 2 * ref_std).sum(), slow_x)
    assert torch.allclose(g_fast, g_slow, atol=1e-6, rtol=1e-6)
    assert g_slow.norm(dim=-1).max() > 0.1


def test_models_other_than_an_exact_gp_get_none() -> None:
    model = GenericDeterministicModel(lambda x: x.sum(-1, keepdim=True))
    assert latent_mean(model, _points()) is None
    assert latent_mean_std(model, _points()) is None


def test_fast_log_ei_is_botorchs_log_ei_also_on_a_believers_fantasy_model(peaked) -> None:
    from botorch.acquisition.analytic import LogExpectedImprovement

    from abo.acquisitions.believer import believe
    from abo.acquisitions.optimize import FastLogEI

    model, _, Y = peaked
    believed, _ = believe(model, _points(3))  # conditioned on busy points: still fast
    for m in (model, believed, fit_gp(*peaked_data(n=12, seed=1)).model):  # exact and noisy
        fast, slow = FastLogEI(m, Y.max()), LogExpectedImprovement(m, best_f=Y.max())
        X = _points(96).unsqueeze(-2)
        fast_x, slow_x = X.clone().requires_grad_(True), X.clone().requires_grad_(True)
        a, b = fast(fast_x), slow(slow_x)
        assert fast._fallback is None  # the fast path was taken
        assert a.shape == b.shape == (96,)
        assert torch.allclose(a, b, atol=1e-8, rtol=1e-6)
        (g_fast,) = torch.autograd.grad(a.sum(), fast_x)
        (g_slow,) = torch.autograd.grad(b.sum(), slow_x)
        assert torch.allclose(g_fast, g_slow, atol=1e-6, rtol=1e-6)
        assert b.max() - b.min() > 1.0  # values far apart were compared


def test_fast_log_ei_falls_back_to_botorch_for_other_models() -> None:
    from botorch.acquisition.analytic import LogExpectedImprovement
    from botorch.models import SingleTaskGP
    from botorch.models.model_list_gp_regression import ModelListGP

    from abo.acquisitions.optimize import FastLogEI

    X, Y = peaked_data(n=10, seed=2)
    listed = ModelListGP(SingleTaskGP(X, Y)).eval()
    fast = FastLogEI(listed, Y.max())
    value = fast(_points(8).unsqueeze(-2))
    assert isinstance(fast._fallback, LogExpectedImprovement)
    assert torch.allclose(
        value, LogExpectedImprovement(listed, best_f=Y.max())(_points(8).unsqueeze(-2))
    )


def test_believed_moments_are_the_fantasy_models_without_building_it(peaked) -> None:
    """``Believed`` (busy points observed at their mean) against BoTorch's fantasy model."""
    from abo.acquisitions.believer import believe
    from abo.acquisitions.optimize import Believed, FastLogEI

    model, _, Y = peaked
    noisy = fit_gp(*peaked_data(n=12, seed=1)).model  # learned noise: the fantasies get it
    for m in (model, noisy):
        busy = _points(5)[1:]
        fantasy, _ = believe(m, busy)
        X = _points(64) * 0.9 + 0.05
        mean, std = Believed(m, busy).mean_std(X)
        ref_mean, ref_std = latent_mean_std(fantasy, X)
        assert torch.allclose(mean, ref_mean, atol=1e-7, rtol=0)
        assert torch.allclose(std, ref_std, atol=1e-6, rtol=1e-5)
        plain = latent_mean_std(m, X)[1]
        assert (plain - std).max() > 1e-2  # the busy points did shrink the variance
        x = X.unsqueeze(-2)
        fast = FastLogEI(m, Y.max(), believed=Believed(m, busy))(x)
        slow = FastLogEI(fantasy, Y.max())(x)
        assert torch.allclose(fast, slow, atol=1e-5, rtol=1e-5)


class _Lopsided(AcquisitionFunction):
    """Over an integer ``n`` in 0..10 (one column, bins of width 1/11): peaks at
    ``n = 6.45``, steep below and flat above, so the relaxed optimum rounds to 6 while 7 is
    better among the integers."""

    def __init__(self) -> None:
        super().__init__(model=GenericDeterministicModel(lambda X: X[..., :1]))

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        v = X[..., 0, 0] * 11 - 0.5
        return torch.where(v < 6.45, -((v - 6.45) ** 2), -0.01 * (v - 6.45) ** 2)


def test_maximize_climbs_from_the_rounded_optimum_to_a_better_integer() -> None:
    space = Space({"n": Int(0, 10)})
    X = space.to_unit_batch([{"n": 0}, {"n": 10}])
    ctx = replace(make_ctx(None, X, torch.tensor([[0.0], [1.0]])), round=space.round)
    x, _ = maximize(_Lopsided(), ctx)
    assert space.from_unit(x[0]) == {"n": 6}  # rounding alone
    x, value = maximize(_Lopsided(), replace(ctx, neighbours=space.neighbours_of))
    assert space.from_unit(x[0]) == {"n": 7}
    assert value == pytest.approx(float(_Lopsided()(x.unsqueeze(1))))


def test_maximize_never_returns_an_evaluated_or_busy_point_while_a_free_one_is_valid() -> None:
    """The relaxed peak rounds onto 6, which is evaluated, and 7 is busy: the best free
    integer is 5 (steep side) or 8 (flat side); 8 is better."""
    space = Space({"n": Int(0, 10)})
    X = space.to_unit_batch([{"n": 0}, {"n": 6}, {"n": 10}])
    ctx = make_ctx(
        None, X, torch.tensor([[0.0], [1.0], [0.5]]), busy=space.to_unit_batch([{"n": 7}])
    )
    ctx = replace(ctx, round=space.round, neighbours=space.neighbours_of)
    x, value = maximize(_Lopsided(), ctx)
    assert space.from_unit(x[0]) == {"n": 8}
    full = Space({"n": Int(0, 2)})  # every value taken: the rounded peak (u = 0.63: n = 1)
    X = full.to_unit_batch([{"n": 0}, {"n": 1}, {"n": 2}])
    ctx = replace(
        make_ctx(None, X, torch.zeros(3, 1)), round=full.round, neighbours=full.neighbours_of
    )
    x, _ = maximize(_Lopsided(), ctx)
    assert full.from_unit(x[0]) == {"n": 1}  # for the proposer to replace


class _Bowl(AcquisitionFunction):
    """A smooth peak at 0.3 in every coordinate; records how each evaluated input was made."""

    def __init__(self) -> None:
        super().__init__(model=GenericDeterministicModel(lambda X: X[..., :1]))
        self.made_by: list[str] = []

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        self.made_by.append(type(X.grad_fn).__name__ if X.grad_fn is not None else "leaf")
        return -((X[..., 0, :] - 0.3) ** 2).sum(dim=-1)


def test_maximize_searches_on_the_optimisers_own_input_not_a_column_by_column_copy() -> None:
    """Without fixed features ``optimize_acqf`` hands its searches an empty dict, which made
    BoTorch rebuild each evaluated input one column at a time (a slice copy per dimension,
    forward and backward: a third of an ask in 100 dimensions). ``maximize`` passes ``None``
    instead; the point it finds is the one BoTorch's own search finds."""
    from botorch.generation.gen import gen_candidates_scipy
    from botorch.optim import optimize_acqf

    X = torch.rand(8, 40, dtype=torch.double, generator=torch.Generator().manual_seed(1))
    ctx = make_ctx(None, X, torch.zeros(8, 1, dtype=torch.double))
    acq = _Bowl()
    x, value = maximize(acq, ctx)
    searched = acq.made_by[1:]  # the first evaluation picks the starts, outside the searches
    assert searched and "CopySlices" not in searched, sorted(set(searched))
    assert torch.allclose(x, torch.full_like(x, 0.3), atol=1e-4)

    plain = _Bowl()
    starts = torch.cat([X[:3], torch.full((1, 40), 0.9, dtype=torch.double)]).unsqueeze(1)
    mine = _Bowl()
    kwargs = {"bounds": ctx.bounds, "q": 1, "num_restarts": 4, "batch_initial_conditions": starts}
    theirs, _ = optimize_acqf(plain, gen_candidates=gen_candidates_scipy, **kwargs)
    ours, _ = optimize_acqf(mine, gen_candidates=search_candidates, **kwargs)
    assert "CopySlices" in plain.made_by  # BoTorch's own path does copy: the test can fail
    assert torch.equal(ours, theirs)
