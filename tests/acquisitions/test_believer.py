"""Kriging believer: busy points believed at their posterior mean."""

from __future__ import annotations

import pytest
import torch
from botorch.acquisition.analytic import LogExpectedImprovement
from strategy_helpers import make_ctx, peaked_data

from abo.acquisitions.believer import BelieverStrategy, believe, plug_in
from abo.acquisitions.optimize import OptimizerBudget, maximize
from abo.model.surrogate import fit_gp


def test_believed_points_keep_their_mean_and_lose_their_variance() -> None:
    X, Y = peaked_data(n=10, seed=3)
    Y = 50.0 + 20.0 * Y  # far from standardised, so a scale mistake would show
    model = fit_gp(X, Y, noise="deterministic").model
    busy = torch.tensor([[0.1, 0.9], [0.5, 0.5]], dtype=torch.double)
    before = model.posterior(busy)
    believed, means = believe(model, busy)
    after = believed.posterior(busy)
    # the believed outcomes are the posterior means (abo's own solves: equal to rounding)
    assert torch.allclose(means, before.mean.detach(), rtol=1e-9, atol=1e-9 * Y.std().item())
    assert torch.allclose(after.mean, before.mean, atol=1e-4 * Y.std().item())
    assert (after.variance < 1e-3 * before.variance).all()
    far = torch.tensor([[0.9, 0.1]], dtype=torch.double)
    assert torch.allclose(
        believed.posterior(far).mean,
        model.posterior(far).mean,
        atol=0.05 * Y.std().item(),
    )
    assert believe(model, busy[:0])[0] is model


def test_believer_moves_away_from_where_plain_logei_would_go() -> None:
    X, Y = peaked_data(n=10, seed=3)
    model = fit_gp(X, Y, noise="deterministic").model
    budget = OptimizerBudget(raw_samples=128, num_restarts=3)
    plain = LogExpectedImprovement(model, best_f=Y.max())
    x_plain, _ = maximize(plain, make_ctx(model, X, Y), budget)
    busy = x_plain
    proposal = BelieverStrategy(raw_samples=128, num_restarts=3).propose(
        make_ctx(model, X, Y, busy), 2
    )
    assert torch.cdist(proposal.X, busy).min() > 0.02
    assert torch.pdist(proposal.X).min() > 0.02  # the first new point is believed too
    assert [i["strategy"] for i in proposal.info] == ["believer", "believer"]


def test_the_incumbent_is_the_posterior_mean_so_a_lucky_noisy_result_does_not_set_the_bar() -> None:
    from abo.model.surrogate import fit_gp

    gen = torch.Generator().manual_seed(0)
    X = torch.rand(10, 2, generator=gen, dtype=torch.double).repeat(3, 1)  # each point 3 times
    Y = torch.sin(4 * X[:, :1]) + 0.5 * torch.randn(30, 1, generator=gen, dtype=torch.double)
    noisy = fit_gp(X, Y, noise="auto").model  # repeats that disagree: it learns the noise
    assert plug_in(noisy, X).max() < Y.max() - 0.3  # the luckiest repeat does not set the bar
    proposal = BelieverStrategy(raw_samples=32, num_restarts=2).propose(make_ctx(noisy, X, Y), 1)
    assert proposal.info[0]["incumbent"] < Y.max().item() - 0.3  # and the strategy uses it
    clean = torch.sin(4 * X[:, :1])  # a deterministic objective: the GP interpolates
    exact = fit_gp(X, clean, noise="deterministic").model
    assert plug_in(exact, X).max().item() == pytest.approx(clean.max().item(), abs=1e-3)
