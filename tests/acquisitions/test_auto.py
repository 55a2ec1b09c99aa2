"""``auto``, the default strategy: believer on exact observations, qlognei on noisy ones, and
cheaper members when an asynchronous caller's pace says they cannot keep up."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
import torch
from strategy_helpers import make_ctx

import abo
from abo.acquisitions.auto import (
    CUBE_EVERY,
    EXACT_BELOW,
    FEW_WORKERS,
    GREEDY_FLOOR,
    QLOGNEI_OVER_BELIEVER,
    REST_DECAY,
    SHARE,
    AutoStrategy,
    exact_enough,
)
from abo.model.surrogate import NOISE_PRIOR_MODE, fit_gp


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


def test_exact_observations_with_four_workers_or_fewer_go_to_qlognei() -> None:
    strategy = AutoStrategy(raw_samples=32, num_restarts=2)
    X, Y = _data(0.0)
    ctx = make_ctx(fit_gp(X, Y, noise="deterministic").model, X, Y)
    arms = {w: strategy.propose(replace(ctx, n_workers=w), 1).info[0]["arm"]
            for w in (1, FEW_WORKERS, FEW_WORKERS + 1, 16, None)}  # fmt: skip
    assert arms == {1: "qlognei", FEW_WORKERS: "qlognei", FEW_WORKERS + 1: "believer",
                    16: "believer", None: "believer"}  # fmt: skip


def test_it_is_what_a_study_gets_without_a_strategy() -> None:
    space = abo.Space({"x": abo.Float(0.0, 1.0)})
    assert abo.create_study(space).strategy == "auto"
    assert "auto" in abo.strategies()


def _peak_ctx(pace: float | None, busy: int = 2):
    from strategy_helpers import peaked_data

    X, Y = peaked_data(16)
    model = fit_gp(X, Y, noise="deterministic").model
    gen = torch.Generator().manual_seed(1)
    ctx = make_ctx(model, X, Y, busy=torch.rand(busy, 2, generator=gen, dtype=torch.double))
    return replace(ctx, pace=pace)


def test_without_a_pace_it_never_switches_and_is_reproducible() -> None:
    first = AutoStrategy(raw_samples=32, num_restarts=2).propose(_peak_ctx(None), 3)
    again = AutoStrategy(raw_samples=32, num_restarts=2).propose(_peak_ctx(None), 3)
    assert [i["arm"] for i in first.info] == ["believer"] * 3
    assert torch.equal(first.X, again.X)


def test_a_pace_no_greedy_search_can_keep_goes_straight_to_thompson() -> None:
    strategy = AutoStrategy(raw_samples=32, num_restarts=2)
    proposal = strategy.propose(_peak_ctx(pace=GREEDY_FLOOR / 10), 5)
    assert [i["arm"] for i in proposal.info] == ["thompson"] * 5
    assert "believer" not in strategy.calls  # not even tried
    assert proposal.X.shape == (5, 2)


def test_a_member_measured_slower_than_the_pace_gives_way_and_comes_back() -> None:
    strategy = AutoStrategy(raw_samples=32, num_restarts=2)
    roomy = _peak_ctx(pace=10.0)
    assert {i["arm"] for i in strategy.propose(roomy, 3).info} == {"believer"}
    assert strategy.cost["believer"] > 0  # measured (its first call kept the pace too)
    strategy.cost["believer"] = 1.0  # as if each point took a second
    tight = _peak_ctx(pace=0.5)  # 1 s > SHARE * 0.5 s: believer cannot keep up
    arms = [i["arm"] for i in strategy.propose(tight, 4).info]
    assert arms == ["thompson"] * 4
    rested = strategy.cost["believer"]
    assert rested == pytest.approx(1.0 * REST_DECAY)  # it rests, and its cost decays
    while strategy.cost["believer"] > SHARE * 0.5:
        strategy.propose(tight, 1)
    assert strategy.propose(tight, 1).info[0]["arm"] == "believer"  # tried again


def test_a_member_whose_first_call_is_slow_is_tried_once_per_ask() -> None:
    strategy = AutoStrategy(raw_samples=32, num_restarts=2)
    real = strategy.believer.propose

    def slow(ctx, n):  # a believer point that takes 0.2 s, whatever the machine
        time.sleep(0.2 * n)
        return real(ctx, n)

    strategy.believer.propose = slow  # type: ignore[method-assign]
    tight = _peak_ctx(pace=0.1)  # SHARE * 0.1 s: greedy members may be tried, but 0.2 s is slow
    arms = [i["arm"] for i in strategy.propose(tight, 4).info]
    # its first call (which also warms it up) missed the pace: one point, not counted, and
    # the rest of the ask by thompson; the next ask tries it once more, and counts it
    assert arms == ["believer"] + ["thompson"] * 3
    assert "believer" not in strategy.cost and strategy.calls["believer"] == 1
    assert [i["arm"] for i in strategy.propose(tight, 2).info] == ["believer", "thompson"]
    assert strategy.cost["believer"] >= 0.2
    assert {i["arm"] for i in strategy.propose(tight, 3).info} == {"thompson"}  # measured slow


def test_under_a_pace_qlognei_is_tried_only_once_believer_says_it_may_keep_up() -> None:
    """Noisy data (qlognei's) under a pace: believer proposes until it is measured; qlognei is
    tried only when QLOGNEI_OVER_BELIEVER times believer's cost keeps the pace."""
    X, Y = _data(0.5)
    model = fit_gp(X, Y, noise="auto").model
    assert not exact_enough(model)  # without a pace, qlognei's (the first test)
    noisy = make_ctx(model, X, Y)
    strategy = AutoStrategy(raw_samples=32, num_restarts=2)
    roomy = replace(noisy, pace=100.0)
    # believer first (one unmeasured member is tried per ask) and measured; on the next ask
    # qlognei, tried since 3x believer's cost keeps the pace, and measured in turn
    assert {i["arm"] for i in strategy.propose(roomy, 2).info} == {"believer"}
    assert "qlognei" not in strategy.calls
    assert [i["arm"] for i in strategy.propose(roomy, 2).info] == ["qlognei"] * 2
    strategy = AutoStrategy(raw_samples=32, num_restarts=2)
    strategy.cost["believer"] = 0.1  # as if a believer point took 0.1 s
    # believer keeps the pace; 3x its cost would not, even once the first point's own time
    # (however short) is averaged in: 3 x (0.1 + 0) / 2 > 0.12
    pace = 0.12 / SHARE
    assert QLOGNEI_OVER_BELIEVER * 0.1 / 2 > SHARE * pace
    arms = [i["arm"] for i in strategy.propose(replace(noisy, pace=pace), 2).info]
    assert arms == ["believer", "believer"] and "qlognei" not in strategy.calls


def test_a_deterministic_objective_the_gp_learns_as_exact_goes_to_believer_undeclared() -> None:
    """With the default noise="auto", data that pull the learned noise well under its prior's
    guess count as exact: believer proposes, as it would for noise="deterministic"."""
    X = torch.quasirandom.SobolEngine(2, scramble=True, seed=3).draw(64, dtype=torch.double)
    Y = torch.sin(3 * X[:, :1]) * torch.cos(2 * X[:, 1:])
    model = fit_gp(X, Y, noise="auto").model
    assert EXACT_BELOW == pytest.approx(0.5 * NOISE_PRIOR_MODE)  # half the prior's guess
    assert float(model.likelihood.noise.detach()) < EXACT_BELOW
    proposal = AutoStrategy(raw_samples=32, num_restarts=2).propose(make_ctx(model, X, Y), 1)
    assert proposal.info[0]["arm"] == "believer"


def _trade_off_ctx(pace: float | None):
    from botorch.models import ModelListGP

    X = torch.quasirandom.SobolEngine(2, scramble=True, seed=1).draw(12, dtype=torch.double)
    U = torch.stack([X[:, 0], 1 - X[:, 0] ** 2 - 0.3 * X[:, 1]], dim=-1)
    model = ModelListGP(*[fit_gp(X, U[:, i : i + 1], noise="deterministic").model for i in (0, 1)])
    busy = torch.rand(2, 2, generator=torch.Generator().manual_seed(3), dtype=torch.double)
    return replace(make_ctx(model, X, U, busy=busy), pace=pace)


def test_several_objectives_step_down_from_qlognehvi_to_thompson_under_a_tight_pace() -> None:
    strategy = AutoStrategy(raw_samples=16, num_restarts=1, mc_samples=8)
    assert strategy.member(_trade_off_ctx(None)) is strategy.qlognehvi  # no pace: always
    assert strategy.member(_trade_off_ctx(pace=30.0)) is strategy.qlognehvi  # unmeasured: tried
    assert strategy.member(_trade_off_ctx(pace=GREEDY_FLOOR / 10)) is strategy.thompson
    strategy.cost["qlognehvi"] = 5.0  # as if each of its points took 5 s
    assert strategy.member(_trade_off_ctx(pace=30.0)) is strategy.qlognehvi  # keeps that pace
    tight = strategy.propose(_trade_off_ctx(pace=1.0), 3)
    assert [i["arm"] for i in tight.info] == ["thompson"] * 3
    assert all("improvement" in i for i in tight.info)  # thompson's several-objective rule
    assert torch.pdist(tight.X).min() > 1e-6
    assert strategy.cost["qlognehvi"] == pytest.approx(5.0 * REST_DECAY)  # it rests


def _wide_ctx(d: int, free: tuple[int, ...] = ()):
    X = torch.quasirandom.SobolEngine(d, scramble=True, seed=1).draw(40, dtype=torch.double)
    Y = -(X[:, :3] - 0.4).pow(2).sum(-1, keepdim=True)  # three of d matter
    X = torch.cat([X, X[Y[:, 0].argmax()].repeat(d, 1) * 0.5])  # d failures: the region halves
    Y = torch.cat([Y, torch.full((d, 1), float(Y.min()) - 1, dtype=torch.double)])
    model = fit_gp(X, Y, noise="deterministic").model
    ctx = make_ctx(model, X, Y, busy=X[:1] * 0.9)
    return replace(ctx, n_initial=40, free_columns=free)


def test_in_a_wide_space_the_member_proposes_inside_the_trust_region() -> None:
    from abo.acquisitions.trust_region import region

    ctx = _wide_ctx(20)
    box, state = region(ctx)
    assert state.length == pytest.approx(0.4)  # halved once by the d failures
    auto = AutoStrategy(raw_samples=64, num_restarts=2)
    assert auto.wide(ctx)
    proposal = auto.propose(ctx, 2)
    assert ((proposal.X >= box[0] - 1e-9) & (proposal.X <= box[1] + 1e-9)).all()
    assert all(info["region_length"] == pytest.approx(0.4) for info in proposal.info)
    assert {info["arm"] for info in proposal.info} == {"believer"}
    # below WIDE ordered columns (20 less one categorical's two), or told never: the cube
    assert not auto.wide(replace(ctx, free_columns=(18, 19)))
    never = AutoStrategy(raw_samples=64, num_restarts=2, trust_region="never")
    assert "region_length" not in never.propose(ctx, 1).info[0]
    assert AutoStrategy(trust_region="always").wide(_wide_ctx(3))
    with pytest.raises(ValueError, match="trust_region"):
        AutoStrategy(trust_region="sometimes")


def _long_study(**options) -> list[abo.Trial]:
    """30 results of a quadratic in a study whose GP holds at most 12 (``max_exact``)."""
    space = abo.Space({"x": abo.Float(0.0, 1.0), "y": abo.Float(0.0, 1.0)})
    study = abo.create_study(
        space, seed=5, noise="deterministic", max_exact=12, n_initial=6,
        strategy_options={"raw_samples": 64, "num_restarts": 2, **options},
    )  # fmt: skip
    for _ in range(30):
        trial = study.ask(n_workers=8)
        study.tell(trial.id, (trial.params["x"] - 0.3) ** 2 + (trial.params["y"] - 0.6) ** 2)
    return study.trials


def test_a_long_campaign_proposes_in_a_region_with_a_gp_of_its_own() -> None:
    trials = _long_study()
    details = [t.proposal.details for t in trials if t.proposal.strategy == "auto"]
    # the GP holds all 12 first: the whole cube; then a subset: the region's own GP, and on
    # every other proposal (CUBE_EVERY) the study's GP over the whole cube
    assert details[0].get("region_model") is None
    kinds = {k: t.proposal.details.get("region_model") for k, t in enumerate(trials)}
    local = [k for k, kind in kinds.items() if kind == "local"]
    cube = [k for k, kind in kinds.items() if kind == "cube"]
    assert len(local) >= 7 and len(cube) >= 7
    assert all(k % CUBE_EVERY == 0 for k in local) and all(k % CUBE_EVERY == 1 for k in cube)
    held = [trials[k].proposal.details for k in local]
    assert all(d["region_points"] >= 8 for d in held)
    assert {d["region_length"] for d in held} <= {0.8 / 2**k for k in range(8)} | {1.6}
    assert all("region_length" not in trials[k].proposal.details for k in cube)
    # the first fits; the next ones condition on its recorded hyperparameters
    refits = [k for k, t in enumerate(trials) if t.proposal.details.get("region_refit")]
    assert refits == [local[0]]
    assert all(("region_hypers" in d) == ("region_refit" in d) for d in held)  # only there
    assert [t.params for t in _long_study()] == [t.params for t in trials]  # reproducible
    never = _long_study(trust_region="never")
    assert all("region_model" not in t.proposal.details for t in never)


@pytest.mark.slow  # a study of 24 asks and tells
def test_a_long_campaign_s_region_gp_proposes_valid_mixed_and_conditional_parameters() -> None:
    space = abo.Space({
        "x": abo.Float(0.0, 1.0), "n": abo.Int(1, 20), "lr": abo.Float(1e-4, 1.0, log=True),
        "kind": abo.Categorical(["a", "b", "c"]), "depth": abo.Int(1, 5, when={"kind": "c"}),
    })  # fmt: skip

    def loss(p: dict) -> float:
        branch = 0.0 if p["kind"] == "c" else 0.5
        return (p["x"] - 0.3) ** 2 + abs(p["n"] - 7) / 20 + branch + abs(p.get("depth", 3) - 2) / 10

    study = abo.create_study(space, seed=2, max_exact=10, n_initial=6)
    for _ in range(24):
        trial = study.ask(n_workers=8)
        assert space.validate(trial.params) == trial.params  # rounded in the region: valid
        study.tell(trial.id, loss(trial.params))
    local = [t for t in study.trials if t.proposal.details.get("region_model") == "local"]
    assert len(local) >= 3  # every other model proposal searches the whole cube
    assert study.best.params["kind"] == "c" and abs(study.best.params["n"] - 7) <= 1
    assert len({tuple(sorted(t.params.items())) for t in study.trials}) == 24
