"""Asynchronous Thompson sampling: fresh, seeded posterior paths."""

from __future__ import annotations

import pytest
import torch
from botorch.models.deterministic import GenericDeterministicModel
from strategy_helpers import PEAK, make_ctx

from abo import AboWarning
from abo.acquisitions.optimize import OptimizerBudget
from abo.acquisitions.thompson import (
    ThompsonStrategy,
    draw_paths,
    path_values,
    replace_duplicates,
    sobol_points,
    thompson_points,
)


def _strategy() -> ThompsonStrategy:
    return ThompsonStrategy(raw_samples=64, num_restarts=2)


def test_seeds_decide_the_proposals(peaked) -> None:
    model, X, Y = peaked
    s = _strategy()
    a = s.propose(make_ctx(model, X, Y, seed=1), 1).X
    b = s.propose(make_ctx(model, X, Y, seed=1), 1).X
    c = s.propose(make_ctx(model, X, Y, seed=2), 1).X
    assert torch.allclose(a, b, atol=1e-6, rtol=0)  # model caches may move the last digits
    assert (a - c).abs().max() > 1e-4


@pytest.mark.slow
def test_samples_concentrate_at_a_clear_maximum(peaked) -> None:
    model, X, Y = peaked
    s = ThompsonStrategy(raw_samples=32, num_restarts=1)
    points = torch.cat([s.propose(make_ctx(model, X, Y, seed=i), 1).X for i in range(30)])
    near = (points - PEAK).norm(dim=-1) < 0.1
    assert near.sum() >= 21  # >= 70 %
    assert torch.pdist(points).min() > 1e-6  # ... yet every draw is a different point


def test_points_of_one_call_are_independent_draws(peaked) -> None:
    model, X, Y = peaked
    busy = PEAK.unsqueeze(0)
    proposal = _strategy().propose(make_ctx(model, X, Y, busy, seed=3), 4)
    assert proposal.X.shape == (4, 2)
    assert torch.pdist(proposal.X).min() > 1e-6
    assert [i["strategy"] for i in proposal.info] == ["thompson"] * 4
    assert not any("fallback" in i for i in proposal.info)  # the pathwise draw worked


def test_falls_back_to_exact_sampling_on_candidates_when_pathwise_fails(peaked) -> None:
    _, X, Y = peaked
    # a deterministic model has no pathwise sampler; its "posterior sample" is itself
    model = GenericDeterministicModel(lambda x: -(x - PEAK).pow(2).sum(-1, keepdim=True))
    with pytest.warns(AboWarning, match="^thompson: the pathwise posterior sample failed"):
        proposal = ThompsonStrategy(n_candidates=512).propose(make_ctx(model, X, Y, seed=0), 1)
    assert "max_posterior_sampling" in proposal.info[0]["fallback"]
    assert (proposal.X[0] - PEAK).norm() < 0.08  # the best of 512 Sobol candidates


def test_a_batch_gives_distinct_points_fixed_by_the_seed(peaked) -> None:
    model, X, Y = peaked
    s = _strategy()
    a = s.propose(make_ctx(model, X, Y, seed=5), 8).X
    b = s.propose(make_ctx(model, X, Y, seed=5), 8).X
    c = s.propose(make_ctx(model, X, Y, seed=6), 8).X
    assert a.shape == (8, 2)
    assert torch.pdist(a).min() > 1e-6
    assert torch.allclose(a, b, atol=1e-6, rtol=0)
    assert torch.cdist(a, c).min(dim=-1).values.max() > 1e-4  # not the same set reordered


def test_each_point_of_a_batch_maximises_its_own_path(peaked) -> None:
    model, X, Y = peaked
    n, budget = 6, OptimizerBudget(raw_samples=64, num_restarts=2)
    ctx, twin = make_ctx(model, X, Y, seed=11), make_ctx(model, X, Y, seed=11)
    points, _ = thompson_points(ctx, n, budget)
    paths = draw_paths(twin, n, twin.seed())  # the paths the call drew, from the same seed
    grid = sobol_points(twin, 4096, seed=0)
    with torch.no_grad():
        on_grid = path_values(paths, grid.unsqueeze(1).expand(-1, n, -1))  # 4096 x n
        at_points = path_values(paths, points.unsqueeze(1).expand(-1, n, -1))  # point i, path j
    own = at_points.diagonal()
    spread = on_grid.max(0).values - on_grid.min(0).values
    assert (own >= on_grid.max(0).values - 1e-3 * spread).all()  # at least the grid's best
    assert (own >= at_points.max(0).values - 1e-9).all()  # no other point is higher on path j


def test_replace_duplicates_swaps_only_repeats_for_new_thompson_points(peaked) -> None:
    model, X, Y = peaked
    busy = PEAK.unsqueeze(0)
    ctx = make_ctx(model, X, Y, busy, seed=4)
    fresh = torch.tensor([[0.123, 0.456]], dtype=torch.double)
    # an evaluated point, a busy one, a new one, then that new one again
    proposed = torch.cat([X[3:4], busy, fresh, fresh])
    out, replaced = replace_duplicates(ctx, proposed, OptimizerBudget(64, 2))
    assert [r is None for r in replaced] == [False, False, True, False]
    assert torch.equal(out[2], fresh[0])  # a new point is kept as it is
    seen = torch.cat([X, busy])
    assert torch.cdist(out[[0, 1, 3]], seen).min() > 1e-6  # replacements repeat nothing seen
    assert torch.pdist(out).min() > 1e-6  # ... nor each other
