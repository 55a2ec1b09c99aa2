"""The trust region: replayed from the observations, shaped by the lengthscales, searched inside."""

from __future__ import annotations

import pytest
import torch
from strategy_helpers import make_ctx

import abo
from abo.acquisitions.trust_region import (
    LENGTH_INIT,
    LENGTH_MAX,
    LENGTH_MIN,
    TrustRegionStrategy,
    failure_tolerance,
    last_hypers,
    region_bounds,
    replay,
    zoomed,
)
from abo.model.local import LENGTHSCALE
from abo.model.surrogate import fit_gp
from abo.propose.proposer import free_columns


def test_successes_double_the_side_and_failures_halve_it() -> None:
    design = [0.0, 1.0]  # the design only sets the incumbent (1.0)
    assert replay(design, n_initial=2, failures=4).length == LENGTH_INIT
    grown = replay([*design, 2.0, 3.0, 4.0], n_initial=2, failures=4)
    assert grown.length == pytest.approx(2 * LENGTH_INIT) and grown.successes == 0
    assert replay([*design, 2.0, 3.0, 4.0] + [5.0, 6.0, 7.0], 2, 4).length == LENGTH_MAX
    shrunk = replay([*design] + [0.5] * 4, n_initial=2, failures=4)
    assert shrunk.length == pytest.approx(LENGTH_INIT / 2) and shrunk.failures == 0
    # three failures then a success: the failures start again, the side stays
    mixed = replay([*design, 0.5, 0.5, 0.5, 2.0, 0.5], n_initial=2, failures=4)
    assert mixed.length == LENGTH_INIT and (mixed.successes, mixed.failures) == (1, 1)
    # an improvement smaller than 1e-3 of the incumbent is a failure
    assert replay([*design] + [1.0 + 1e-4] * 4, 2, 4).length == pytest.approx(LENGTH_INIT / 2)


def test_a_collapsed_region_restarts_at_its_first_side() -> None:
    halvings = 0
    length = LENGTH_INIT
    while length >= LENGTH_MIN:
        length, halvings = length / 2, halvings + 1
    state = replay([1.0] + [0.0] * (4 * halvings), n_initial=1, failures=4)
    assert state.restarts == 1 and state.length == LENGTH_INIT
    before = replay([1.0] + [0.0] * (4 * halvings - 1), n_initial=1, failures=4)
    assert before.restarts == 0 and before.length == pytest.approx(2 * length)


def test_failures_to_halve_cover_the_dimension_and_a_round_of_workers() -> None:
    assert failure_tolerance(2, None) == 4
    assert failure_tolerance(30, None) == 30
    assert failure_tolerance(10, 64) == 64


def test_the_box_is_shaped_by_the_lengthscales_and_clipped_to_the_cube() -> None:
    center = torch.tensor([0.5, 0.5, 0.95], dtype=torch.double)
    ls = torch.tensor([0.1, 0.4, 0.1], dtype=torch.double)
    box = region_bounds(center, 0.2, ls)
    side = box[1] - box[0]
    assert side[1] == pytest.approx(4 * side[0])  # a long lengthscale, a long side
    assert float(side[0]) == pytest.approx(0.2)  # the shortest lengthscale's side: the length
    assert box[1, 2] == 1.0 and box[0, 2] < 0.95  # clipped at the cube's face
    free = region_bounds(center, 0.2, ls, free=(1,))
    assert free[:, 1].tolist() == [0.0, 1.0] and torch.equal(free[:, 0], box[:, 0])
    cube = region_bounds(center, 0.2, None)
    assert torch.allclose(cube[1, :2] - cube[0, :2], torch.tensor([0.2, 0.2], dtype=torch.double))


def _quadratic(n: int, d: int = 4, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    X = torch.quasirandom.SobolEngine(d, scramble=True, seed=seed).draw(n, dtype=torch.double)
    Y = -(X - 0.3).pow(2).sum(-1, keepdim=True)
    return X, Y


def test_points_are_proposed_inside_the_region_around_the_incumbent() -> None:
    X, Y = _quadratic(16)
    # twelve results no better than the best: the region halved three times (d = 4)
    X = torch.cat([X, torch.full((12, 4), 0.9, dtype=torch.double)])
    Y = torch.cat([Y, torch.full((12, 1), float(Y.min()) - 1.0, dtype=torch.double)])
    model = fit_gp(X, Y, noise="deterministic").model
    busy = X[Y[:, 0].argmax()].unsqueeze(0) + 0.01
    ctx = make_ctx(model, X, Y, busy=busy)
    ctx = type(ctx)(**{**ctx.__dict__, "n_initial": 16})
    strategy = TrustRegionStrategy(raw_samples=64, num_restarts=2)
    box, state = strategy.region(ctx)
    assert state.length == pytest.approx(LENGTH_INIT / 8)
    best = X[Y[:, 0].argmax()]
    assert ((box[0] <= best) & (best <= box[1])).all()
    assert float((box[1] - box[0]).max()) < 0.5  # a small box, not the cube
    proposal = strategy.propose(ctx, 2)
    assert ((proposal.X >= box[0] - 1e-9) & (proposal.X <= box[1] + 1e-9)).all()
    assert [i["strategy"] for i in proposal.info] == ["trust_region"] * 2
    assert {i["arm"] for i in proposal.info} == {"believer"}  # exact observations
    assert proposal.info[0]["region_length"] == pytest.approx(LENGTH_INIT / 8, rel=1e-5)
    assert not torch.allclose(proposal.X[0], proposal.X[1])  # the first is busy for the second


def test_a_region_cannot_hold_a_region() -> None:
    with pytest.raises(ValueError, match="inner"):
        TrustRegionStrategy(inner="trust_region")
    with pytest.raises(ValueError, match="inner: unknown strategy 'nope'"):
        TrustRegionStrategy(inner="nope")
    assert TrustRegionStrategy(inner="thompson").inner.name == "thompson"


def test_categorical_and_conditional_columns_stay_whole() -> None:
    space = abo.Space(
        {
            "x": abo.Float(0.0, 1.0),
            "kind": abo.Categorical(["a", "b", "c"]),
            "n": abo.Int(1, 8),
            "depth": abo.Int(1, 4, when={"kind": "c"}),
        }
    )
    assert free_columns(space) == (1, 2, 3, 5)  # kind's one-hot columns and depth
    assert free_columns(abo.Space({"x": abo.Float(0, 1), "n": abo.Int(1, 3)})) == ()


def test_a_study_records_the_region_in_each_proposal() -> None:
    space = abo.Space({"x": abo.Float(0.0, 1.0), "y": abo.Float(0.0, 1.0)})

    def loss(p: dict) -> float:
        return (p["x"] - 0.2) ** 2 + (p["y"] - 0.7) ** 2

    study = abo.create_study(
        space,
        strategy="trust_region",
        seed=3,
        n_initial=4,
        strategy_options={"raw_samples": 64, "num_restarts": 2},
    )
    for _ in range(16):
        trial = study.ask()
        study.tell(trial.id, loss(trial.params))
    modelled = [t for t in study.trials if t.proposal and t.proposal.strategy == "trust_region"]
    assert len(modelled) == 12
    assert all(t.proposal.arm in ("believer", "qlognei") for t in modelled)
    lengths = [t.proposal.details["region_length"] for t in modelled]
    assert lengths[0] == LENGTH_INIT and len(set(lengths)) > 1  # the region moved with the data
    assert study.best.value < 1e-3


def test_before_start_the_inner_strategy_searches_the_whole_cube() -> None:
    X, Y = _quadratic(20)
    model = fit_gp(X, Y, noise="deterministic").model
    ctx = make_ctx(model, X, Y, busy=X[:1] + 0.01)
    late = TrustRegionStrategy(start=21, raw_samples=64, num_restarts=2).propose(ctx, 1)
    plain = TrustRegionStrategy(inner="believer", raw_samples=64, num_restarts=2)
    whole = plain.inner.propose(make_ctx(model, X, Y, busy=X[:1] + 0.01), 1)
    assert torch.allclose(late.X, whole.X)  # the same search as the inner strategy alone
    assert "region_length" not in late.info[0] and late.info[0]["strategy"] == "trust_region"
    started = TrustRegionStrategy(start=20, raw_samples=64, num_restarts=2)
    assert started.propose(make_ctx(model, X, Y), 1).info[0]["region_length"] == LENGTH_INIT
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="start"):
            TrustRegionStrategy(start=bad)  # type: ignore[arg-type]


def test_inert_parameters_do_not_shrink_the_sides_of_those_that_matter() -> None:
    ls = torch.cat([torch.full((6,), 0.2), torch.full((94,), 5.0)]).double()
    box = region_bounds(torch.full((100,), 0.5, dtype=torch.double), 0.4, ls)
    side = box[1] - box[0]
    assert torch.allclose(side[:6], torch.full((6,), 0.4, dtype=torch.double))
    assert (side[6:] == 1.0).all()  # the inert ones span the cube


def test_a_bad_region_option_is_refused_when_the_study_is_created(tmp_path) -> None:
    space = abo.Space({"x": abo.Float(0.0, 1.0)})
    storage = f"sqlite:///{tmp_path / 'abo.db'}"
    cases = [("trust_region", {"start": -2}, "start"), ("auto", {"trust_region": "often"}, "often")]
    for strategy, options, word in cases:
        with pytest.raises(abo.AboError, match=word) as info:
            abo.create_study(
                space, strategy=strategy, strategy_options=options, storage=storage, name="s"
            )
        assert info.value.field == "strategy_options"
    assert abo.create_study(space, storage=storage, name="s").trials == []  # nothing was stored


def _long_campaign(n: int = 60, held: int = 30) -> tuple:
    """A context whose GP holds ``held`` of its ``n`` observations, as above ``max_exact``."""
    X, _ = _quadratic(held, d=3)
    near = 0.3 + 0.05 * torch.randn(n - held, 3, generator=torch.Generator().manual_seed(0))
    X = torch.cat([X, near.double().clamp(0, 1)])  # the campaign closing in on the optimum
    Y = -(X - 0.3).pow(2).sum(-1, keepdim=True)
    model = fit_gp(X[:held], Y[:held], noise="deterministic").model
    ctx = make_ctx(model, X, Y, busy=X[Y[:, 0].argmax()].unsqueeze(0) + 0.01)
    return type(ctx)(**{**ctx.__dict__, "n_initial": n}), X, Y  # the region at its first side


def test_in_a_long_campaign_the_region_proposes_with_a_gp_of_its_own() -> None:
    ctx, X, Y = _long_campaign()
    strategy = TrustRegionStrategy(raw_samples=64, num_restarts=2)
    box, _ = strategy.region(ctx)
    proposal = strategy.propose(ctx, 2)
    assert ((proposal.X >= box[0] - 1e-9) & (proposal.X <= box[1] + 1e-9)).all()
    info = proposal.info[0]
    assert info["region_model"] == "local" and info["arm"] == "believer"
    assert info["region_refit"]  # no hyperparameters recorded before: a fit
    inside = int(((X >= box[0]) & (X <= box[1])).all(-1).sum())
    assert info["region_points"] == min(inside, 128) >= 8
    inside = zoomed(ctx, box)
    assert inside is not None
    train = inside[0].model.train_inputs[0]  # the box's coordinates: its points span [0, 1]
    assert train.shape[0] == info["region_points"] and float(train.min()) >= 0.0
    assert float(train.max()) <= 1.0 and float(train.max() - train.min()) > 0.5
    again, _, _ = _long_campaign()  # the same data, a fresh generator of the same seed
    assert torch.equal(strategy.propose(again, 2).X, proposal.X)  # a function of the data
    never = TrustRegionStrategy(raw_samples=64, num_restarts=2, local="never")
    assert "region_model" not in never.propose(ctx, 1).info[0]
    # the GP holds every observation: the study's GP proposes in the region
    whole = type(ctx)(**{**ctx.__dict__, "model": fit_gp(X, Y, noise="deterministic").model})
    assert "region_model" not in strategy.propose(whole, 1).info[0]
    always = TrustRegionStrategy(raw_samples=64, num_restarts=2, local="always")
    assert always.propose(whole, 1).info[0]["region_model"] == "local"
    with pytest.raises(ValueError, match="local: expected one of"):
        TrustRegionStrategy(local="sometimes")


def test_a_region_without_enough_points_or_with_constraints_keeps_the_study_gp() -> None:
    ctx, X, _ = _long_campaign()
    center = X[ctx.Y[:, 0].argmax()]
    tiny = torch.stack([center - 1e-6, center + 1e-6])
    assert zoomed(ctx, tiny) is None  # one observation inside
    cube = torch.stack([torch.zeros(3), torch.ones(3)]).double()
    assert zoomed(ctx, cube) is not None
    ranged = type(ctx)(**{**ctx.__dict__, "inequality_constraints": [
        (torch.tensor([0, 1]), torch.tensor([1.0, 1.0]).double(), 0.5)]})  # fmt: skip
    assert zoomed(ranged, cube) is None
    two = type(ctx)(**{**ctx.__dict__, "Y": ctx.Y.repeat(1, 2)})
    assert zoomed(two, cube) is None


def test_a_region_gp_that_fails_to_propose_gives_way_to_the_study_gp() -> None:
    from botorch.exceptions.errors import OptimizationGradientError

    from abo.acquisitions.trust_region import propose_inside

    ctx, _, _ = _long_campaign()
    box, _ = TrustRegionStrategy().region(ctx)
    inner = TrustRegionStrategy(raw_samples=64, num_restarts=2).inner
    seen: list[object] = []

    def propose(c, n):  # the numerical failure seen once in a long campaign, on the region's GP
        seen.append(c.model)
        if c.model is not ctx.model:
            raise OptimizationGradientError("10 elements of the gradient are NaN", current_x=None)
        return inner.propose(c, n)

    proposal, info = propose_inside(propose, ctx, 2, box, local=True)
    assert seen[0] is not ctx.model and seen[1] is ctx.model  # the region's GP, then the study's
    assert info["region_model_failed"].startswith("OptimizationGradientError: 10 elements")
    assert ((proposal.X >= box[0] - 1e-9) & (proposal.X <= box[1] + 1e-9)).all()
    with pytest.raises(ValueError, match="a bug"):  # anything else is not hidden
        propose_inside(lambda c, n: (_ for _ in ()).throw(ValueError("a bug")), ctx, 1, box, True)


def test_the_region_gp_refits_on_every_25th_proposal_made_with_it() -> None:
    ctx, _, _ = _long_campaign()
    box, _ = TrustRegionStrategy().region(ctx)
    inside = zoomed(ctx, box)
    assert inside is not None and inside[1]["region_refit"]
    fitted = {"region_model": "local", **inside[1]}
    hypers = fitted["region_hypers"]
    for made, refit in ((23, False), (24, True)):
        history = [fitted, *[{"region_model": "local"}] * made, *[{"region_model": "cube"}] * 9]
        assert last_hypers(history) == (hypers, made)  # the cube's proposals do not count
        again = zoomed(type(ctx)(**{**ctx.__dict__, "history": tuple(history)}), box)
        assert again is not None and ("region_refit" in again[1]) == refit
        if not refit:  # conditioned on the recorded ones: the same lengthscales
            ls = again[0].model.covar_module.base_kernel.lengthscale.detach().reshape(-1)
            width = (box[1] - box[0]).cpu()
            assert (ls * width).tolist() == pytest.approx(hypers[LENGTHSCALE], rel=1e-9)
    assert last_hypers([{"region_model": "local"}] * 3) == (None, 3)
