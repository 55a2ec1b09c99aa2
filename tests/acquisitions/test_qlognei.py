"""qlognei: greedy by default; ``joint=True`` optimises a whole q-batch at once (synchronous BO)."""

from __future__ import annotations

import torch
from strategy_helpers import make_ctx

from abo.acquisitions.registry import make_strategy


def test_joint_batch_is_distinct_in_bounds_and_seeded(peaked) -> None:
    model, X, Y = peaked
    busy = torch.tensor([[0.2, 0.8]], dtype=torch.double)
    options = {"joint": True, "raw_samples": 64, "num_restarts": 2, "mc_samples": 32}
    a = make_strategy("qlognei", **options).propose(make_ctx(model, X, Y, busy, seed=1), 3)
    b = make_strategy("qlognei", **options).propose(make_ctx(model, X, Y, busy, seed=1), 3)
    assert a.X.shape == (3, 2) and torch.equal(a.X, b.X)
    assert ((a.X >= 0) & (a.X <= 1)).all()
    assert torch.pdist(a.X).min() > 1e-3  # q = 3 distinct points, not one point three times
    assert all(info == {"strategy": "qlognei", "joint": True} for info in a.info)
    greedy = make_strategy("qlognei", raw_samples=64, num_restarts=2, mc_samples=32)
    g = greedy.propose(make_ctx(model, X, Y, busy, seed=1), 3)
    assert not any(info.get("joint") for info in g.info)


def test_the_noisy_incumbent_is_sampled_over_the_best_observed_points_only() -> None:
    """qLogNEI's joint posterior over every observation cost seconds at 1,000 results."""
    from abo.acquisitions.optimize import MAX_INCUMBENTS, best_observed
    from abo.model.surrogate import fit_gp

    gen = torch.Generator().manual_seed(0)
    X = torch.rand(300, 2, generator=gen, dtype=torch.double)
    Y = -((X - 0.5) ** 2).sum(-1, keepdim=True) + 0.05 * torch.randn(300, 1, generator=gen)
    kept = best_observed(X, Y)
    assert kept.shape[0] == MAX_INCUMBENTS
    best = set(Y.reshape(-1).topk(MAX_INCUMBENTS).indices.tolist())
    assert {int((X == row).all(-1).nonzero()) for row in kept} == best  # the best ones
    assert torch.equal(best_observed(X[:50], Y[:50]), X[:50])  # small studies: all of them
    model = fit_gp(X, Y, noise="auto").model
    acq = make_strategy("qlognei").acquisition(make_ctx(model, X, Y), X[:0])
    assert acq.X_baseline.shape[0] <= MAX_INCUMBENTS  # the strategy passes the kept points
