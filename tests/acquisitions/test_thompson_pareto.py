"""thompson on several objectives: a fresh sample per objective, its largest hypervolume gain."""

from __future__ import annotations

import warnings

import pytest
import torch
from botorch.exceptions.warnings import BadInitialCandidatesWarning
from botorch.models import ModelListGP
from strategy_helpers import make_ctx

from abo.acquisitions.registry import make_strategy
from abo.acquisitions.thompson_pareto import SampleImprovement, front_cells, pareto_sample_points
from abo.core.pareto import hypervolume, pareto_mask
from abo.model.surrogate import fit_gp

CHEAP = {"raw_samples": 64, "num_restarts": 2}


def utilities(X: torch.Tensor) -> torch.Tensor:
    """Two utilities of two inputs that trade off along the first, u1 = x and u2 = 1 - x^2."""
    return torch.stack([X[:, 0], 1 - X[:, 0] ** 2 - 0.3 * X[:, 1]], dim=-1)


@pytest.fixture(scope="module")
def trade_off() -> tuple[ModelListGP, torch.Tensor, torch.Tensor]:
    X = torch.quasirandom.SobolEngine(2, scramble=True, seed=1).draw(12, dtype=torch.double)
    U = utilities(X)
    fits = [fit_gp(X, U[:, i : i + 1], noise="deterministic").model for i in range(2)]
    return ModelListGP(*fits), X, U


def test_the_improvement_is_the_hypervolume_a_point_adds_to_the_front(trade_off) -> None:
    model, X, U = trade_off
    ref = torch.tensor([-0.1, -0.5], dtype=torch.double)
    front = U[pareto_mask(U)]
    acq = SampleImprovement(model, lambda Z: list(utilities(Z).T), front_cells(front, ref))
    points = torch.rand(20, 2, generator=torch.Generator().manual_seed(0), dtype=torch.double)
    got = acq(points.unsqueeze(1))
    base = hypervolume(front, ref)
    for x, value in zip(points, got, strict=True):
        joined = torch.cat([front, utilities(x.unsqueeze(0))])
        assert float(value) == pytest.approx(hypervolume(joined, ref) - base, abs=1e-9)
    assert (got > 0).any() and (got == 0).any()  # some points add volume, dominated ones none
    gaining = points[got > 0][:1].unsqueeze(1).requires_grad_(True)
    acq(gaining).sum().backward()
    assert gaining.grad is not None and gaining.grad.abs().sum() > 0  # L-BFGS-B can climb it


def test_points_are_seeded_distinct_and_each_says_what_it_gains(trade_off) -> None:
    model, X, U = trade_off
    strategy = make_strategy("thompson", **CHEAP)
    a = strategy.propose(make_ctx(model, X, U, seed=2), 3)
    b = strategy.propose(make_ctx(model, X, U, seed=2), 3)
    assert a.X.shape == (3, 2) and torch.equal(a.X, b.X)
    assert ((a.X >= 0) & (a.X <= 1)).all() and torch.pdist(a.X).min() > 1e-6
    assert torch.cdist(a.X, X).min() > 1e-6
    for info in a.info:
        assert info["strategy"] == "thompson" and info["draws"] >= 1
        assert info["improvement"] > 0 and "fallback" not in info
        assert len(info["ref_point"]) == 2
    other = strategy.propose(make_ctx(model, X, U, seed=3), 3)
    assert not torch.equal(a.X, other.X)


def test_a_busy_point_is_not_proposed_again(trade_off) -> None:
    model, X, U = trade_off
    strategy = make_strategy("thompson", **CHEAP)
    first = strategy.propose(make_ctx(model, X, U, seed=4), 1)
    # the same seed draws the same sample, which lands on the busy point: it draws again
    second = strategy.propose(make_ctx(model, X, U, first.X, seed=4), 1)
    assert torch.cdist(second.X, first.X).min() > 1e-6
    assert first.info[0]["draws"] == 1 and second.info[0]["draws"] >= 2


def test_a_sample_with_nothing_to_gain_falls_back_to_a_random_scalarisation(trade_off) -> None:
    model, X, U = trade_off
    ctx = make_ctx(model, X, U, seed=5)
    # a reference point above every utility: no point can add volume over it
    unreachable = torch.tensor([10.0, 10.0], dtype=torch.double)
    ctx = type(ctx)(**{**ctx.__dict__, "ref_point": unreachable})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        proposal = pareto_sample_points(ctx, 1, make_strategy("thompson", **CHEAP).budget)
    # no search from random starts on an improvement that is zero everywhere looked at
    assert not [w for w in caught if issubclass(w.category, BadInitialCandidatesWarning)]
    (info,) = proposal.info
    assert info["improvement"] == 0 and info["fallback"] == "chebyshev"
    assert sum(info["weights"]) == pytest.approx(1.0, abs=1e-5)
    assert ((proposal.X >= 0) & (proposal.X <= 1)).all()


def test_one_objective_is_refused_by_the_pareto_sampler(trade_off) -> None:
    model, X, U = trade_off
    ctx = make_ctx(model.models[0], X, U[:, :1])
    with pytest.raises(ValueError, match="several objectives"):
        pareto_sample_points(ctx, 1, make_strategy("thompson", **CHEAP).budget)


def test_a_repeat_of_a_seen_point_is_replaced_by_the_samples_best_improvement(trade_off) -> None:
    from abo.acquisitions.thompson import replace_duplicates

    model, X, U = trade_off
    busy = torch.tensor([[0.5, 0.5]], dtype=torch.double)
    ctx = make_ctx(model, X, U, busy, seed=6)
    fresh = torch.tensor([[0.25, 0.75]], dtype=torch.double)
    rows = torch.cat([X[3:4], fresh, busy])  # an evaluated point, a new one, a busy one
    out, replaced = replace_duplicates(ctx, rows, make_strategy("thompson", **CHEAP).budget)
    assert torch.equal(out[1:2], fresh) and replaced[1] is None
    for i in (0, 2):
        assert replaced[i] is not None and "improvement" in replaced[i]  # the Pareto rule
    seen = torch.cat([X, busy])
    assert torch.cdist(out[[0, 2]], seen).min() > 1e-6 and torch.pdist(out).min() > 1e-6
