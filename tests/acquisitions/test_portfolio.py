"""The portfolio: rewards from the shared model, records on every point, state in storage."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import abo
from abo.acquisitions.portfolio import MEMBERS, member_probabilities
from abo.model.surrogate import fit_gp

CHEAP = {"raw_samples": 32, "num_restarts": 2}
SPACE = abo.Space({"x": abo.Float(0.0, 1.0), "y": abo.Float(0.0, 1.0)})


def _bowl(p: dict) -> float:
    return (p["x"] - 0.2) ** 2 + (p["y"] - 0.7) ** 2


def _model() -> object:
    """A GP of the (negated) bowl: its posterior mean is highest near (0.2, 0.7)."""
    X = torch.rand(12, 2, generator=torch.Generator().manual_seed(0), dtype=torch.double)
    Y = -((X[:, :1] - 0.2) ** 2 + (X[:, 1:] - 0.7) ** 2)
    return fit_gp(X, Y, noise="deterministic").model


def test_the_member_whose_nominees_the_model_favours_gains_probability() -> None:
    model = _model()
    good, bad = [0.2, 0.7], [0.95, 0.05]
    history = [{"nominees": {"believer": good, "thompson": bad}}] * 6
    history += [{"nominees": {"qlognei": good, "thompson": bad}}] * 2
    history += [{"nominees": {"believer": good}}]  # one nominee: no round
    history += [{"nominees": {"gone": good, "thompson": bad}}]  # no longer a member: skipped
    probs, tally = member_probabilities(MEMBERS, history, model, floor=0.05)
    assert tally["believer"] == (6.0, 6) and tally["thompson"] == (0.0, 8)
    assert tally["qlognei"] == (2.0, 2) and tally["playbook"] == (0.0, 0)
    assert sum(probs.values()) == pytest.approx(1.0)
    assert min(probs.values()) >= 0.05
    assert probs["believer"] > probs["qlognei"] > probs["playbook"] > probs["thompson"]
    uniform, _ = member_probabilities(MEMBERS, [], model, floor=0.05)
    assert list(uniform.values()) == pytest.approx([0.2] * 5)


def _run(study: abo.Study, rounds: int) -> None:
    pending = study.ask_batch(2, n_workers=2) if not study.pending else list(study.pending)
    for _ in range(rounds):
        trial = pending.pop(0)
        study.tell(trial.id, _bowl(trial.params))
        pending.append(study.ask(n_workers=2))


@pytest.mark.slow
def test_every_point_records_its_member_the_odds_and_the_round(tmp_path: Path) -> None:
    study = abo.create_study(
        SPACE, strategy="portfolio", seed=3, n_initial=4, strategy_options=CHEAP,
        storage=f"sqlite:///{tmp_path / 'p.db'}", name="p", noise="deterministic",
    )  # fmt: skip
    _run(study, 8)
    chosen = [t for t in study.trials if t.proposal and t.proposal.strategy == "portfolio"]
    assert len(chosen) >= 5
    for t in chosen:
        details = t.proposal.details
        assert t.proposal.arm in MEMBERS
        assert sum(details["p"].values()) == pytest.approx(1.0, abs=1e-3)
        nominees = details["nominees"]
        assert len(nominees) == 2 and t.proposal.arm in nominees  # its own and a challenger's
        assert SPACE.to_unit(t.params).tolist() == pytest.approx(nominees[t.proposal.arm], abs=1e-6)
    assert chosen[-1].proposal.details["p"] != {m: 0.2 for m in MEMBERS}  # it learnt something
    # the state is in storage: a study loaded afresh proposes what the first one would
    again = abo.create_study(
        SPACE, strategy="portfolio", seed=3, n_initial=4, strategy_options=CHEAP,
        noise="deterministic",
    )  # fmt: skip
    _run(again, 8)
    resumed = abo.load_study("p", storage=f"sqlite:///{tmp_path / 'p.db'}")
    _run(resumed, 3)
    _run(again, 3)
    assert [t.params for t in resumed.trials] == [t.params for t in again.trials]
    assert [t.proposal.details.get("p") for t in resumed.trials if t.proposal] == [
        t.proposal.details.get("p") for t in again.trials if t.proposal
    ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"members": ["believer"]}, "members: expected two or more"),
        ({"members": "believer"}, "members: expected a list"),
        ({"members": ["believer", "nope"]}, "members: 'nope' is not a strategy"),
        ({"members": ["believer", "portfolio"]}, "members: 'portfolio' is not a strategy"),
        ({"floor": 0.2}, "floor: expected 0 <= floor < 1/5"),
        ({"member_options": {"ucb": {}}}, "member_options: \\['ucb'\\] are not members"),
        ({"member_options": {"playbook": {"bogus": 1}}}, "member_options: playbook"),
    ],
)
def test_bad_options_name_the_field(options: dict, message: str) -> None:
    with pytest.raises(abo.AboError, match=message):
        abo.create_study(SPACE, strategy="portfolio", strategy_options=options)


def test_with_constraints_a_likely_feasible_nominee_beats_a_better_infeasible_one() -> None:
    from abo.acquisitions.feasibility import Feasibility

    model = _model()
    X = torch.rand(12, 2, generator=torch.Generator().manual_seed(0), dtype=torch.double)
    slack = fit_gp(X, 0.5 - X[:, :1], noise="deterministic").model  # feasible where x <= 0.5
    feas = Feasibility(names=("c",), models=(slack,), observed=(X[:, 0] <= 0.5))
    inside = [0.45, 0.1]  # feasible, with a low mean
    outside = [0.75, 0.7]  # a higher mean than ``inside``, and infeasible
    history = [{"nominees": {"believer": inside, "thompson": outside}}] * 6
    _, unconstrained = member_probabilities(MEMBERS, history, model, floor=0.05)
    assert unconstrained["thompson"] == (6.0, 6)  # by the mean alone the infeasible one wins
    _, tally = member_probabilities(MEMBERS, history, model, floor=0.05, feasibility=feas)
    assert tally["believer"] == (6.0, 6) and tally["thompson"] == (0.0, 6)
    both_out = [{"nominees": {"believer": [0.95, 0.9], "thompson": [0.6, 0.7]}}]
    _, tally = member_probabilities(MEMBERS, both_out, model, floor=0.05, feasibility=feas)
    assert tally["thompson"] == (1.0, 1)  # neither likely feasible: the more likely one wins
