"""qlognei: greedy by default; ``joint=True`` optimises a whole q-batch at once (synchronous BO)."""

from __future__ import annotations

import torch
from strategy_helpers import make_ctx

from abo.registry import make_strategy


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
