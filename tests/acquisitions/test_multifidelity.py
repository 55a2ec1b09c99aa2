"""``multifidelity``: where it proposes, at which fidelity, and with busy points at theirs."""

from __future__ import annotations

import math

import pytest
import torch

import abo
from abo.acquisitions.base import FidelityLevels
from abo.acquisitions.multifidelity import choose_level, fidelity_scores
from abo.model.surrogate import fit_gp

SPACE = abo.Space({"x": abo.Float(0.0, 1.0), "s": abo.Float(0.0, 1.0)})
CHEAP = {"raw_samples": 64, "num_restarts": 2}


def _levels(costs: list[float]) -> FidelityLevels:
    n = len(costs)
    grid = torch.linspace(0.0, 1.0, n, dtype=torch.double).unsqueeze(-1)
    return FidelityLevels(slice(1, 2), grid, torch.tensor(costs, dtype=torch.double), n - 1)


def _model() -> object:
    """A GP of a smooth function observed at the cheapest fidelity on the left half only."""
    x = torch.linspace(0.0, 0.5, 12, dtype=torch.double)
    X = torch.stack([x, torch.zeros_like(x)], dim=-1)
    Y = torch.sin(6.0 * x).unsqueeze(-1)
    return fit_gp(X, Y, noise="deterministic", fidelity=(1,)).model


def test_a_cheap_fidelity_explores_and_the_target_follows_where_the_cheap_one_is_known() -> None:
    model = _model()
    fid = _levels([0.05, 0.5, 1.0])
    none = torch.zeros(0, 2, dtype=torch.double)
    unexplored = torch.tensor([[0.95, 1.0]], dtype=torch.double)
    scores, eligible = fidelity_scores(model, none, unexplored, fid)
    assert bool(eligible.all()) and choose_level(scores, eligible, 2) == 0  # cheap, unknown
    known = torch.tensor([[0.25, 1.0]], dtype=torch.double)  # observed there at fidelity 0
    scores, eligible = fidelity_scores(model, none, known, fid)
    assert not bool(eligible[0]) and choose_level(scores, eligible, 2) != 0  # not again
    # a busy cheap evaluation at the unexplored point counts as if known there
    busy = torch.tensor([[0.95, 0.0]], dtype=torch.double)
    scores, eligible = fidelity_scores(model, busy, unexplored, fid)
    assert not bool(eligible[0]) and choose_level(scores, eligible, 2) != 0
    # with equal costs nothing is gained by a lower fidelity: the target
    scores, eligible = fidelity_scores(model, none, unexplored, _levels([1.0, 1.0, 1.0]))
    assert choose_level(scores, eligible, 2) == 2


def _objective(p: dict) -> float:
    """A bowl at x = 0.7 whose cheap fidelities are biased towards larger x."""
    return (p["x"] - 0.7) ** 2 + 0.2 * (1.0 - p["s"]) * p["x"]


def _run(seed: int, n: int = 16) -> abo.Study:
    study = abo.create_study(
        SPACE, fidelity={"parameter": "s", "cost": {"fixed": 0.05, "per_unit": 1.0}},
        seed=seed, n_initial=4, noise="deterministic", strategy_options=CHEAP,
    )  # fmt: skip
    for _ in range(n):
        trial = study.ask()
        study.tell(trial.id, _objective(trial.params))
    return study


@pytest.mark.slow
def test_the_default_strategy_spends_cheap_fidelities_and_finds_the_target_optimum() -> None:
    study = _run(seed=0)
    modelled = [t for t in study.trials if t.proposal.arm == "multifidelity"]
    assert len(modelled) == 12
    fidelities = [t.params["s"] for t in modelled]
    assert min(fidelities) < 0.5 and fidelities.count(1.0) >= 3  # both kinds of evaluation
    assert all(t.proposal.details["at_target"] == (t.params["s"] == 1.0) for t in modelled)
    best = study.best
    assert best is not None and best.params["s"] == 1.0
    assert abs(best.params["x"] - 0.7) < 0.05  # the target's optimum, not the biased one
    # reproducible: the same seed and the same tells give the same points
    assert [t.params for t in _run(seed=0).trials] == [t.params for t in study.trials]


def test_a_batch_holds_distinct_points_at_their_fidelities_and_a_categorical_fidelity() -> None:
    space = abo.Space({"x": abo.Float(0.0, 1.0), "cell": abo.Categorical(["coin", "pouch"])})
    study = abo.create_study(
        space, fidelity={"parameter": "cell", "cost": {"coin": 1.0, "pouch": 20.0}},
        seed=3, n_initial=4, strategy_options=CHEAP,
    )  # fmt: skip
    for t in study.ask_batch(4):
        value = math.sin(5.0 * t.params["x"]) + (0.1 if t.params["cell"] == "coin" else 0.0)
        study.tell(t.id, value)
    batch = study.ask_batch(3)
    assert [t.proposal.strategy for t in batch] == ["auto"] * 3
    assert len({(round(t.params["x"], 6), t.params["cell"]) for t in batch}) == 3
    assert all(t.params["cell"] in ("coin", "pouch") for t in batch)
    costs = {t.params["cell"]: t.proposal.details["cost"] for t in batch}
    assert all(costs[c] == {"coin": 1.0, "pouch": 20.0}[c] for c in costs)


def test_with_a_stopping_rule_every_trial_starts_at_the_target_and_reports_are_data() -> None:
    """MOBSTER's combination: the rule decides what stops, the model (reading the curves as
    lower fidelities) what starts."""
    space = abo.Space({"x": abo.Float(0.0, 1.0), "epochs": abo.Int(1, 27, log=True)})
    study = abo.create_study(space, fidelity="epochs", stopping="asha", seed=5, n_initial=3,
                             strategy_options=CHEAP)  # fmt: skip
    for x in (0.1, 0.5, 0.9):
        study.enqueue({"x": x})  # at the target: the curves run (and report) to 27 epochs
    for trial in study.ask_batch(3):
        for step in range(1, trial.params["epochs"] + 1):
            if study.report(trial.id, step, (trial.params["x"] - 0.4) ** 2 + 1.0 / step):
                break
        else:
            study.tell(trial.id, (trial.params["x"] - 0.4) ** 2 + 1.0 / trial.params["epochs"])
    proposed = study.ask_batch(2)
    assert all(t.params["epochs"] == 27 for t in proposed)  # the target: ASHA is the schedule
    finished = [t for t in study.trials if t.state.is_finished]
    assert proposed[0].proposal.n_observations > len(finished)  # the reports are observations


def test_with_a_stopping_rule_the_design_starts_at_the_target_too() -> None:
    """The Sobol design draws the fidelity with the other parameters, except under a stopping
    rule, where the rule is the schedule: there a design point at 2 epochs would never be a
    result, and the rule would never judge it."""
    space = abo.Space({"x": abo.Float(0.0, 1.0), "epochs": abo.Int(1, 27, log=True)})
    stopped = abo.create_study(space, fidelity="epochs", stopping="asha", seed=5, n_initial=6)
    design = stopped.ask_batch(6)
    assert [t.proposal.strategy for t in design] == ["sobol"] * 6
    assert [t.params["epochs"] for t in design] == [27] * 6
    assert len({round(t.params["x"], 6) for t in design}) == 6  # still a design over x
    free = abo.create_study(space, fidelity="epochs", seed=5, n_initial=6)
    assert len({t.params["epochs"] for t in free.ask_batch(6)}) > 1  # spread without a rule
