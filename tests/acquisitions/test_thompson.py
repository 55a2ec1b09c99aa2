"""Asynchronous Thompson sampling: fresh, seeded posterior paths."""

from __future__ import annotations

import pytest
import torch
from botorch.models.deterministic import GenericDeterministicModel
from strategy_helpers import PEAK, make_ctx

from abo.acquisitions.thompson import ThompsonStrategy


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
    proposal = ThompsonStrategy(n_candidates=512).propose(make_ctx(model, X, Y, seed=0), 1)
    assert "max_posterior_sampling" in proposal.info[0]["fallback"]
    assert (proposal.X[0] - PEAK).norm() < 0.08  # the best of 512 Sobol candidates
