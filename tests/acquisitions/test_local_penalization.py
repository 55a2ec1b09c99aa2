"""Local penalisers, Lipschitz estimates and the ``playbook`` / ``lp`` strategies."""

from __future__ import annotations

import pytest
import torch
from strategy_helpers import PEAK, make_ctx, peaked_data

import abo
from abo.acquisitions.local_penalization import (
    _LIPSCHITZ_CACHE,
    LIPSCHITZ_FALLBACK,
    LocallyPenalizedAcquisition,
    LocalPenalizationStrategy,
    PlaybookStrategy,
    estimate_lipschitz,
    hlp_penalizer,
    kernel_lengthscale,
    log_hlp_penalizer,
    log_lp_penalizer,
    lp_penalizer,
)
from abo.acquisitions.optimize import OptimizerBudget, maximize
from abo.model.surrogate import fit_gp

UNIT2 = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.double)
R = torch.tensor([0.2], dtype=torch.double)
S = torch.tensor([0.05], dtype=torch.double)


def test_hlp_is_zero_at_the_busy_point_and_rises_monotonically_to_one() -> None:
    dist = torch.linspace(0, 3, 301, dtype=torch.double).unsqueeze(-1)
    phi = hlp_penalizer(dist, R, S).squeeze(-1)
    assert phi[0].item() == 0.0
    assert (phi.diff() > 0).all()  # strictly increasing with distance
    assert (phi <= 1).all() and phi[-1] > 0.999
    assert phi[25].item() == pytest.approx(0.25 / 0.25 * 2 ** (1 / -5), rel=1e-9)  # c = 1


def test_log_hlp_stays_finite_with_a_finite_gradient_at_the_busy_point() -> None:
    dist = torch.tensor([[0.0], [1e-3], [0.1], [2.0]], dtype=torch.double, requires_grad=True)
    log_phi = log_hlp_penalizer(dist, R, S)
    log_phi.sum().backward()
    assert torch.isfinite(log_phi).all() and torch.isfinite(dist.grad).all()
    assert log_phi[0].item() <= torch.log(torch.tensor(1e-11)).item()
    assert log_phi[2].exp().item() == pytest.approx(hlp_penalizer(dist[2:3], R, S).item())


def test_lp_penalizer_lies_strictly_between_zero_and_one() -> None:
    dist = torch.linspace(0, 2**0.5, 301, dtype=torch.double).unsqueeze(-1)  # the unit square
    phi = lp_penalizer(dist, R, S)
    log_phi = log_lp_penalizer(dist, R, S)
    assert (phi > 0).all() and phi[0].item() > 1e-6  # soft: a busy point is not excluded
    assert torch.isfinite(log_phi).all() and (log_phi < 0).all()  # phi < 1 even far away
    assert (phi.squeeze(-1).diff() >= 0).all()


def test_lipschitz_of_a_linear_mean_is_its_slope() -> None:
    X = torch.quasirandom.SobolEngine(2, scramble=True, seed=1).draw(30, dtype=torch.double)
    Y = 3.0 * X[:, :1] - 1.0 * X[:, 1:]
    model = fit_gp(X, Y, noise="deterministic").model
    slope = torch.tensor([3.0, -1.0], dtype=torch.double).norm() / Y.std()  # standardised
    L = estimate_lipschitz(model, UNIT2)
    assert L.shape == (1,)
    assert L.item() == pytest.approx(slope.item(), rel=0.15)
    assert model in _LIPSCHITZ_CACHE  # cached per fitted model


def test_local_lipschitz_is_smaller_where_the_mean_is_flat() -> None:
    X = torch.quasirandom.SobolEngine(2, scramble=True, seed=2).draw(40, dtype=torch.double)
    Y = torch.tanh(12 * (X[:, :1] - 0.8))  # flat for x0 < 0.6, steep near 0.8
    model = fit_gp(X, Y, noise="deterministic").model
    centers = torch.tensor([[0.2, 0.5], [0.8, 0.5]], dtype=torch.double)
    box = torch.full((2,), 0.2, dtype=torch.double)
    L_local = estimate_lipschitz(model, UNIT2, centers, box)
    L_global = estimate_lipschitz(model, UNIT2)
    assert L_local[0] < 0.5 * L_local[1]
    assert L_local[1] <= L_global * 1.01


def test_flat_model_falls_back_to_ten() -> None:
    X = torch.rand(8, 2, dtype=torch.double, generator=torch.Generator().manual_seed(0))
    model = fit_gp(X, torch.zeros(8, 1, dtype=torch.double), noise="deterministic").model
    assert estimate_lipschitz(model, UNIT2).item() == LIPSCHITZ_FALLBACK


def _busy_near_peak() -> torch.Tensor:
    return torch.stack([PEAK, PEAK + torch.tensor([0.05, 0.0], dtype=torch.double)])


@pytest.mark.parametrize("strategy", [PlaybookStrategy, LocalPenalizationStrategy])
def test_penalised_proposals_keep_further_from_busy_points_than_plain_ucb(strategy) -> None:
    X, Y = peaked_data(n=10, seed=3)  # sparse data: UCB's maximum is uncertain
    model = fit_gp(X, Y, noise="deterministic").model
    budget = OptimizerBudget(raw_samples=128, num_restarts=3)
    plain = LocallyPenalizedAcquisition(model, Y.max(), X[:0], UNIT2)  # no busy points
    x_plain, _ = maximize(plain, make_ctx(model, X, Y), budget)
    # the busy points: where the unpenalised base acquisition would go, and a neighbour
    busy = torch.cat([x_plain, (x_plain + 0.03).clamp(0, 1)])
    x_pen = strategy(raw_samples=128, num_restarts=3).propose(make_ctx(model, X, Y, busy), 1).X
    x_again, _ = maximize(plain, make_ctx(model, X, Y, busy, seed=1), budget)
    d_plain = torch.cdist(x_again, busy).min().item()
    d_pen = torch.cdist(x_pen, busy).min().item()
    assert d_plain < 1e-3  # the base acquisition proposes a busy point again
    assert d_pen > d_plain + 0.02


def test_playbook_acquisition_vanishes_at_a_busy_point(peaked) -> None:
    model, X, Y = peaked
    busy = _busy_near_peak()
    pen = LocallyPenalizedAcquisition(model, Y.max(), busy, UNIT2, penalizer="hlp")
    plain = LocallyPenalizedAcquisition(model, Y.max(), busy[:0], UNIT2)
    at_busy = busy[:1].unsqueeze(1)
    assert (pen(at_busy) - plain(at_busy)).item() <= -25  # log(1e-12) ~ -27.6
    far = torch.tensor([[[0.05, 0.95]]], dtype=torch.double)
    assert (pen(far) - plain(far)).abs().item() < 1e-3
    assert pen.L.shape == (2,) and (pen.L > 0).all()
    ls = kernel_lengthscale(model, 2)
    assert ls is not None and ls.shape == (2,)


def test_greedy_batch_spreads_out(peaked) -> None:
    model, X, Y = peaked
    proposal = PlaybookStrategy(raw_samples=64, num_restarts=2).propose(make_ctx(model, X, Y), 3)
    assert proposal.X.shape == (3, 2)
    assert torch.pdist(proposal.X).min() > 1e-3
    assert all(info == {"strategy": "playbook"} for info in proposal.info)


def test_bad_options_are_rejected_by_name() -> None:
    space = abo.Space({"x": abo.Float(0, 1)})
    with pytest.raises(abo.AboError, match="kappa"):
        abo.create_study(space, strategy="playbook", strategy_options={"kappa": -1})
    with pytest.raises(abo.AboError, match="penalizer"):
        LocallyPenalizedAcquisition(None, 0.0, torch.zeros(0, 1), UNIT2[:, :1], penalizer="x")
