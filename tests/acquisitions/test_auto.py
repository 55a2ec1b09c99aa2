"""``auto``, the default strategy: believer on exact observations, qlognei on noisy ones."""

from __future__ import annotations

import torch
from strategy_helpers import make_ctx

import abo
from abo.acquisitions.auto import AutoStrategy
from abo.surrogate import fit_gp


def _data(noise: float) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    X = torch.rand(12, 2, generator=gen, dtype=torch.double).repeat(2, 1)  # each point twice
    Y = torch.sin(5 * X[:, :1]) + noise * torch.randn(24, 1, generator=gen, dtype=torch.double)
    return X, Y


def test_exact_observations_go_to_believer_and_noisy_ones_to_qlognei() -> None:
    strategy = AutoStrategy(raw_samples=32, num_restarts=2)
    X, Y = _data(0.0)
    exact = strategy.propose(make_ctx(fit_gp(X, Y, noise="deterministic").model, X, Y), 2)
    assert [(i["strategy"], i["arm"]) for i in exact.info] == [("auto", "believer")] * 2
    X, Y = _data(0.5)  # repeats that disagree: the GP learns the noise
    noisy = strategy.propose(make_ctx(fit_gp(X, Y, noise="auto").model, X, Y), 1)
    assert [(i["strategy"], i["arm"]) for i in noisy.info] == [("auto", "qlognei")]
    assert exact.X.shape == (2, 2) and noisy.X.shape == (1, 2)


def test_it_is_what_a_study_gets_without_a_strategy() -> None:
    space = abo.Space({"x": abo.Float(0.0, 1.0)})
    assert abo.create_study(space).strategy == "auto"
    assert "auto" in abo.strategies()
