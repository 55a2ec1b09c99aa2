"""Plain UCB: the refit-only baseline that ignores busy points."""

from __future__ import annotations

import math

import pytest
import torch
from strategy_helpers import PEAK, make_ctx, peaked_data

import abo
from abo.acquisitions.ucb import UCBStrategy, beta_schedule
from abo.model.surrogate import fit_gp


def test_beta_schedule_is_the_aegis_harness_formula() -> None:
    assert beta_schedule(2, 10) == pytest.approx(2 * math.log(2 * 100 * math.pi**2 / 0.06))
    assert beta_schedule(2, 20) > beta_schedule(2, 10)


def test_busy_points_change_nothing(peaked) -> None:
    model, X, Y = peaked
    s = UCBStrategy(raw_samples=64, num_restarts=2)
    free = s.propose(make_ctx(model, X, Y, seed=0), 1)
    elsewhere = torch.tensor([[0.1, 0.9], [0.2, 0.8]], dtype=torch.double)
    busy = s.propose(make_ctx(model, X, Y, elsewhere, seed=0), 1)
    assert torch.allclose(free.X, busy.X, atol=1e-6)
    assert free.info[0]["beta"] == pytest.approx(beta_schedule(2, X.shape[0]), abs=1e-5)


def test_beta_trades_the_mean_for_the_uncertainty() -> None:
    X, Y = peaked_data(n=6, seed=5)
    model = fit_gp(X, Y, noise="deterministic").model
    greedy = UCBStrategy(beta=0.0, raw_samples=128, num_restarts=3)
    curious = UCBStrategy(beta=1e4, raw_samples=128, num_restarts=3)
    x_greedy = greedy.propose(make_ctx(model, X, Y), 1).X
    x_curious = curious.propose(make_ctx(model, X, Y), 1).X
    std = lambda x: model.posterior(x).variance.sqrt().item()  # noqa: E731
    mean = lambda x: model.posterior(x).mean.item()  # noqa: E731
    assert mean(x_greedy) > mean(x_curious)
    assert std(x_curious) > 2 * std(x_greedy)
    assert (x_greedy - PEAK).norm() < (x_curious - PEAK).norm()


def test_bad_beta_is_rejected() -> None:
    with pytest.raises(abo.AboError, match="beta"):
        abo.create_study(
            abo.Space({"x": abo.Float(0, 1)}), strategy="ucb", strategy_options={"beta": -1.0}
        )


def test_an_exact_repeat_is_replaced_by_a_posterior_sample(peaked) -> None:
    model, X, Y = peaked
    s = UCBStrategy(raw_samples=64, num_restarts=2)
    first = s.propose(make_ctx(model, X, Y, seed=0), 1)
    again = s.propose(make_ctx(model, X, Y, first.X, seed=0), 2)  # the maximiser is busy
    assert torch.cdist(again.X, first.X).min() > 1e-6
    assert torch.pdist(again.X).min() > 1e-6
    assert [i.get("replaced") for i in again.info] == ["duplicate", "duplicate"]
    assert "replaced" not in first.info[0]
