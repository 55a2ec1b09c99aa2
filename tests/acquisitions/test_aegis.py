"""AEGiS: the epsilon-greedy decision rule, its arms and its schedule."""

from __future__ import annotations

import math

import pytest
import torch
from botorch.utils.multi_objective.pareto import is_non_dominated
from strategy_helpers import make_ctx, peaked_data

import abo
from abo.acquisitions.aegis import (
    AegisRSStrategy,
    AegisStrategy,
    choose_arm,
    epsilon_for,
    pareto_set,
)
from abo.acquisitions.thompson import sobol_points


def test_default_epsilon_follows_sqrt_d() -> None:
    assert epsilon_for("sqrtd", 2) == 0.5  # d <= 4: never exploit after t = 0
    assert epsilon_for("sqrtd", 16) == pytest.approx(0.25)
    assert epsilon_for(0.1, 16) == 0.1


def test_decision_rule_never_exploits_during_the_first_fill() -> None:
    k, eps = 4, 0.1
    assert choose_arm(0, k, eps, 0.5, u=0.99, u2=0.0) == "exploit"  # t = 0 always exploits
    assert choose_arm(0, k, 0.5, 0.5, u=0.0, u2=0.0) == "thompson"  # ... unless eps_c = 0.5
    for t in range(1, k + 1):
        assert choose_arm(t, k, eps, 0.5, u=0.0, u2=0.0) != "exploit"
    assert choose_arm(k + 1, k, eps, 0.5, u=0.0, u2=0.0) == "exploit"
    assert choose_arm(k + 1, k, eps, 0.5, u=0.85, u2=0.4) == "thompson"
    assert choose_arm(k + 1, k, eps, 0.5, u=0.85, u2=0.6) == "pareto"


def test_pareto_set_is_exactly_the_non_dominated_candidates(peaked) -> None:
    model, _, _ = peaked
    ctx = make_ctx(model, *peaked[1:])
    candidates = sobol_points(ctx, 300, seed=4)
    front = pareto_set(model, candidates)
    with torch.no_grad():
        post = model.posterior(candidates.unsqueeze(-2))
        objs = torch.stack([post.mean.reshape(-1), post.variance.reshape(-1).sqrt()], -1)
    in_front = torch.cdist(candidates, front).min(-1).values == 0
    assert 1 <= front.shape[0] < 300
    for i in range(candidates.shape[0]):  # brute force: dominated iff some other is >= in both
        others = torch.cat([objs[:i], objs[i + 1 :]])
        dominated = ((others >= objs[i]).all(-1) & (others > objs[i]).any(-1)).any()
        assert bool(in_front[i]) == (not bool(dominated))
    assert is_non_dominated(objs[in_front]).all()


def test_pareto_arm_returns_a_member_of_the_front(peaked) -> None:
    model, X, Y = peaked
    s = AegisStrategy(n_candidates=256)
    for seed in range(5):
        ctx = make_ctx(model, X, Y, seed=seed)
        twin = make_ctx(model, X, Y, seed=seed)  # same generator state: same candidates
        x = s.pareto(ctx)
        front = pareto_set(model, sobol_points(twin, 256, twin.seed()))
        assert torch.cdist(x, front).min() == 0


def test_arm_frequencies_match_epsilon(peaked) -> None:
    model, X, Y = peaked
    eps_c, n = 0.2, 400
    s = AegisStrategy(epsilon=eps_c)
    # t > k throughout: the epsilon-greedy regime
    arms = s.arms(make_ctx(model, X, Y, n_trials=X.shape[0] + 50, n_workers=4), n)
    for arm, p in [("exploit", 1 - 2 * eps_c), ("thompson", eps_c), ("pareto", eps_c)]:
        count = arms.count(arm)
        assert abs(count - n * p) <= 4 * math.sqrt(n * p * (1 - p)), (arm, count)


def test_proposals_follow_the_decisions_and_record_the_arm(peaked) -> None:
    model, X, Y = peaked
    s = AegisStrategy(epsilon=0.2, raw_samples=16, num_restarts=1, n_candidates=128)
    ctx = make_ctx(model, X, Y, seed=7, n_trials=X.shape[0] + 50, n_workers=4)
    planned = s.arms(make_ctx(model, X, Y, seed=7, n_trials=X.shape[0] + 50, n_workers=4), 12)
    proposal = s.propose(ctx, 12)
    recorded = [i.get("replaced", i["arm"]) for i in proposal.info]  # a repeat exploit samples
    assert recorded == planned
    assert {"exploit", "thompson", "pareto"} <= set(recorded)
    assert all(i["strategy"] == "aegis" for i in proposal.info)
    assert torch.pdist(proposal.X).min() > 1e-6  # exploits are never repeated


def _first_fill_arms(seed: int) -> tuple[list[str], list[str]]:
    space = abo.Space({"x": abo.Float(0, 1), "y": abo.Float(0, 1)})
    study = abo.create_study(
        space,
        strategy="aegis",
        seed=seed,
        n_initial=4,
        noise="deterministic",
        strategy_options={"epsilon": 0.1, "raw_samples": 32, "num_restarts": 2},
    )
    X, Y = peaked_data(n=4, seed=seed)
    for x, y in zip(X, Y, strict=True):
        study.add({"x": float(x[0]), "y": float(x[1])}, -float(y))
    fill = [study.ask(n_workers=4) for _ in range(5)]  # t = 0 .. 4, no result comes back
    later = []
    for t in fill:  # then results arrive and each freed worker gets a new point
        study.tell(t.id, (t.params["x"] - 0.7) ** 2 + (t.params["y"] - 0.3) ** 2)
        later.append(study.ask(n_workers=4))
    return [t.proposal.arm for t in fill], [t.proposal.arm for t in later]


@pytest.mark.slow
def test_no_two_exploits_while_the_workers_first_fill() -> None:
    later_exploits = 0
    for seed in range(2):
        fill, later = _first_fill_arms(seed)
        assert fill[0] == "exploit"
        assert "exploit" not in fill[1:]
        later_exploits += later.count("exploit")
    assert later_exploits >= 3  # with eps_c = 0.1 most later picks exploit (p = 0.8)


def test_aegis_rs_replaces_the_pareto_arm_by_random_points(peaked) -> None:
    model, X, Y = peaked
    s = AegisRSStrategy(epsilon=0.5, eta=0.0, raw_samples=16, num_restarts=1)
    proposal = s.propose(make_ctx(model, X, Y, n_trials=100, n_workers=4), 3)
    assert [i["arm"] for i in proposal.info] == ["random"] * 3
    assert [i["strategy"] for i in proposal.info] == ["aegis-rs"] * 3


def test_invalid_options_name_the_field() -> None:
    space = abo.Space({"x": abo.Float(0, 1)})
    for options, field in [
        ({"epsilon": 0.7}, "epsilon"),
        ({"epsilon": "often"}, "epsilon"),
        ({"eta": 2}, "eta"),
        ({"n_initial": -1}, "n_initial"),
    ]:
        with pytest.raises(abo.AboError, match=field):
            abo.create_study(space, strategy="aegis", strategy_options=options)


def test_pareto_arms_of_one_call_are_distinct_members_of_one_front(peaked) -> None:
    model, X, Y = peaked
    s = AegisStrategy(epsilon=0.5, eta=0.0, n_candidates=256)  # every arm is a Pareto arm
    ctx = make_ctx(model, X, Y, seed=3, n_trials=100, n_workers=4)
    twin = make_ctx(model, X, Y, seed=3, n_trials=100, n_workers=4)
    proposal = s.propose(ctx, 6)
    s.arms(twin, 6)  # the twin's generator now stands where the call's did after its decisions
    front = s.pareto_front(twin)
    assert [i["arm"] for i in proposal.info] == ["pareto"] * 6
    assert front.shape[0] >= 6
    assert (torch.cdist(proposal.X, front).min(-1).values == 0).all()
    assert torch.pdist(proposal.X).min() > 0


def test_thompson_arms_of_one_call_are_distinct_batched_paths(peaked) -> None:
    model, X, Y = peaked
    s = AegisStrategy(epsilon=0.5, eta=1.0, raw_samples=32, num_restarts=2)
    proposal = s.propose(make_ctx(model, X, Y, seed=4, n_trials=100, n_workers=4), 6)
    again = s.propose(make_ctx(model, X, Y, seed=4, n_trials=100, n_workers=4), 6)
    assert [i["arm"] for i in proposal.info] == ["thompson"] * 6
    assert not any("fallback" in i for i in proposal.info)
    assert torch.pdist(proposal.X).min() > 1e-6
    assert torch.allclose(proposal.X, again.X, atol=1e-6, rtol=0)
