"""parego: a random Chebyshev scalarisation per point, maximised on a posterior sample."""

from __future__ import annotations

import pytest
import torch
from botorch.models import ModelListGP
from strategy_helpers import make_ctx

import abo
from abo.acquisitions.parego import simplex_weights
from abo.acquisitions.registry import make_strategy
from abo.model.surrogate import fit_gp

CHEAP = {"raw_samples": 64, "num_restarts": 2}


@pytest.fixture(scope="module")
def trade_off() -> tuple[ModelListGP, torch.Tensor, torch.Tensor]:
    """Two utilities of two inputs that trade off along the first, u1 = x and u2 = 1 - x^2."""
    X = torch.quasirandom.SobolEngine(2, scramble=True, seed=1).draw(12, dtype=torch.double)
    U = torch.stack([X[:, 0], 1 - X[:, 0] ** 2 - 0.3 * X[:, 1]], dim=-1)
    fits = [fit_gp(X, U[:, i : i + 1], noise="deterministic").model for i in range(2)]
    return ModelListGP(*fits), X, U


def test_weights_are_uniform_on_the_simplex_and_seeded() -> None:
    draws = torch.stack([simplex_weights(3, torch.Generator().manual_seed(i)) for i in range(400)])
    assert torch.allclose(draws.sum(-1), torch.ones(400, dtype=torch.double))
    assert (draws > 0).all()
    assert draws.mean(0).tolist() == pytest.approx([1 / 3] * 3, abs=0.04)  # symmetric
    again = simplex_weights(3, torch.Generator().manual_seed(7))
    assert torch.equal(again, simplex_weights(3, torch.Generator().manual_seed(7)))


def test_points_are_seeded_distinct_and_each_records_its_weights(trade_off) -> None:
    model, X, U = trade_off
    strategy = make_strategy("parego", **CHEAP)
    a = strategy.propose(make_ctx(model, X, U, seed=2), 3)
    b = strategy.propose(make_ctx(model, X, U, seed=2), 3)
    assert a.X.shape == (3, 2) and torch.equal(a.X, b.X)
    assert ((a.X >= 0) & (a.X <= 1)).all() and torch.pdist(a.X).min() > 1e-6
    weights = [info["weights"] for info in a.info]
    assert all(sum(w) == pytest.approx(1.0, abs=1e-5) for w in weights)
    assert len({tuple(w) for w in weights}) == 3  # a fresh scalarisation for every point
    assert torch.cdist(a.X, X).min() > 1e-6


def test_a_busy_point_is_not_proposed_again(trade_off) -> None:
    model, X, U = trade_off
    strategy = make_strategy("parego", **CHEAP)
    first = strategy.propose(make_ctx(model, X, U, seed=4), 1)
    # the same seed draws the same weights and sample: they land on the busy point, so the
    # strategy draws again
    second = strategy.propose(make_ctx(model, X, U, first.X, seed=4), 1)
    assert torch.cdist(second.X, first.X).min() > 1e-6
    assert first.info[0]["draws"] == 1 and second.info[0]["draws"] >= 2


def test_one_objective_and_bad_options_are_refused(trade_off) -> None:
    model, X, U = trade_off
    with pytest.raises(ValueError, match="several objectives"):
        make_strategy("parego", **CHEAP).propose(make_ctx(model.models[0], X, U[:, :1]), 1)
    with pytest.raises(abo.AboError, match="alpha") as info:
        make_strategy("parego", alpha=-1)
    assert info.value.field == "strategy_options"
