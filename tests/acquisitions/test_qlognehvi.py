"""qlognehvi: expected hypervolume improvement, with every busy point as ``X_pending``."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from botorch.models import ModelListGP
from strategy_helpers import make_ctx

from abo.acquisitions.registry import make_strategy
from abo.model.surrogate import fit_gp

CHEAP = {"raw_samples": 32, "num_restarts": 2, "mc_samples": 32}


@pytest.fixture(scope="module")
def front() -> tuple[ModelListGP, torch.Tensor, torch.Tensor]:
    """Two utilities of one input that trade off, u1 = x and u2 = 1 - x^2, observed only near
    the ends of the front: the hypervolume gains most in the middle."""
    X = torch.tensor([[0.0], [0.05], [0.1], [0.9], [0.95], [1.0]], dtype=torch.double)
    U = torch.cat([X, 1 - X**2], dim=-1)
    fits = [fit_gp(X, U[:, i : i + 1], noise="deterministic").model for i in range(2)]
    return ModelListGP(*fits), X, U


def test_proposes_into_the_gap_of_the_front_then_away_from_a_busy_point(front) -> None:
    model, X, U = front
    ref = torch.tensor([-0.1, -0.1], dtype=torch.double)
    strategy = make_strategy("qlognehvi", **CHEAP)
    first = strategy.propose(replace(make_ctx(model, X, U, seed=3), ref_point=ref), 1)
    x = float(first.X[0, 0])
    assert 0.2 < x < 0.8, x  # the gap, not the well-observed ends
    assert first.info[0]["strategy"] == "qlognehvi"
    assert first.info[0]["ref_point"] == pytest.approx(ref.tolist())
    busy = first.X
    second = strategy.propose(replace(make_ctx(model, X, U, busy, seed=3), ref_point=ref), 1)
    assert abs(float(second.X[0, 0]) - x) > 0.05  # the busy point's improvement is counted
    assert 0.1 < float(second.X[0, 0]) < 0.9


def test_batches_are_distinct_seeded_and_the_default_reference_is_used(front) -> None:
    model, X, U = front
    strategy = make_strategy("qlognehvi", **CHEAP)
    a = strategy.propose(make_ctx(model, X, U, seed=5), 3)
    b = strategy.propose(make_ctx(model, X, U, seed=5), 3)
    assert a.X.shape == (3, 1) and torch.equal(a.X, b.X)
    assert torch.pdist(a.X).min() > 1e-3
    # no ref_point in the context: the rule over all observations (abo.core.pareto)
    assert a.info[0]["ref_point"] == pytest.approx([-0.1, -0.1], abs=1e-6)


def test_one_objective_and_bad_options_are_refused(front) -> None:
    model, X, U = front
    with pytest.raises(ValueError, match="several objectives"):
        make_strategy("qlognehvi", **CHEAP).propose(make_ctx(model.models[0], X, U[:, :1]), 1)
    with pytest.raises(Exception, match="mc_samples"):
        make_strategy("qlognehvi", mc_samples=0)


def test_the_baseline_is_whole_front_layers_of_the_observed_utilities() -> None:
    from abo.acquisitions.qlognehvi import front_layers
    from abo.core.pareto import pareto_mask

    gen = torch.Generator().manual_seed(0)
    X = torch.rand(300, 3, generator=gen, dtype=torch.double)
    Y = torch.rand(300, 2, generator=gen, dtype=torch.double)
    kept = front_layers(X, Y, k=40)
    rows = [int((X == row).all(-1).nonzero()) for row in kept]
    assert rows == sorted(rows) and 40 <= len(rows) < 100  # whole layers, in the original order
    front = set(pareto_mask(Y).nonzero().squeeze(-1).tolist())
    assert front < set(rows)  # the front, and more layers behind it
    for j in set(range(300)) - set(rows):  # whatever was left out is beaten by a kept point
        assert any(bool((Y[i] >= Y[j]).all() and (Y[i] > Y[j]).any()) for i in rows), j
    assert torch.equal(front_layers(X[:30], Y[:30], k=40), X[:30])  # small studies: all


def test_a_proposal_never_compiles_botorchs_fused_kernel(front, monkeypatch) -> None:
    # BoTorch JIT-compiles a C++ kernel at the first qLogNEHVI of a process: 30-65 s of a
    # waiting ask in a new environment (the module says why abo uses the PyTorch path)
    from botorch.acquisition.multi_objective import logei
    from torch.utils import cpp_extension

    builds: list[object] = []

    def build(*args: object, **kwargs: object) -> None:
        builds.append(kwargs.get("name"))
        raise RuntimeError("a compile was attempted")  # BoTorch warns and falls back

    monkeypatch.setattr(cpp_extension, "load", build)
    model, X, U = front
    ref = torch.tensor([-0.1, -0.1], dtype=torch.double)
    proposal = make_strategy("qlognehvi", **CHEAP).propose(
        replace(make_ctx(model, X, U, seed=3), ref_point=ref), 2
    )
    assert proposal.X.shape == (2, 1)
    assert builds == [] and logei._C is None
