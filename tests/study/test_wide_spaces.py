"""A study of about 100 parameters keeps every capability: mixed types, conditional parameters,
busy points, outcome constraints and failed trials, and several objectives."""

from __future__ import annotations

import math
from typing import Any

import pytest

import abo

FAST = {"raw_samples": 64, "num_restarts": 1}  # a cheap search: these tests check behaviour


def wide_space() -> abo.Space:
    """60 floats (every fifth log-scaled), 20 integers, 15 categoricals and two parameters
    conditional on a 16th: 98 parameters."""
    params: dict[str, Any] = {}
    for i in range(60):
        params[f"f{i:02d}"] = abo.Float(1e-4, 1.0, log=True) if i % 5 == 0 else abo.Float(-1, 1)
    for i in range(20):
        params[f"i{i:02d}"] = abo.Int(1, 64, log=i % 2 == 0)
    for i in range(15):
        params[f"c{i:02d}"] = abo.Categorical(["a", "b", "c", "d"])
    params["opt"] = abo.Categorical(["sgd", "adam"])
    params["momentum"] = abo.Float(0.0, 0.99, when={"opt": "sgd"})
    params["beta2"] = abo.Float(0.9, 0.9999, when={"opt": "adam"})
    return abo.Space(params)


def evaluate(p: dict) -> dict[str, float]:
    """A loss that a handful of the parameters decide, a memory constraint, and a crash region."""
    if p["f01"] > 0.8:
        raise RuntimeError("diverged")
    loss = sum((p[f"f{i:02d}"] - 0.3) ** 2 for i in range(1, 6)) + 0.01 * abs(p["i00"] - 20)
    loss += 0.5 * (p["c00"] != "b") + (p.get("momentum", 0.9) - 0.9) ** 2
    return {"loss": loss, "mem": 20.0 + 20.0 * p["f02"], "time": (p["f03"] + 1.0) ** 2}


def check_params(space: abo.Space, params: dict) -> None:
    """Every active parameter present and in its domain; the inactive branch absent."""
    for name, value in params.items():
        dim = space[name]
        if isinstance(dim, abo.Categorical):
            assert value in dim.choices, name
        else:
            assert dim.low <= value <= dim.high, (name, value)
            if isinstance(dim, abo.Int):
                assert value == int(value), name
    assert ("momentum" in params) == (params["opt"] == "sgd")
    assert ("beta2" in params) == (params["opt"] == "adam")


def drive(study: abo.Study, model_asks: int, outcomes: tuple[str, ...]) -> list[abo.Trial]:
    """Ask and tell with 8 trials always busy until ``model_asks`` model proposals were made;
    return those proposals."""
    space, busy, proposed = study.space, [], []
    while len(proposed) < model_asks:
        while len(busy) < 8:
            trial = study.ask(n_workers=8)
            check_params(space, trial.params)
            if trial.proposal.strategy != "sobol":
                proposed.append(trial)
            busy.append(trial)
        trial = busy.pop(0)
        try:
            result = evaluate(trial.params)
        except RuntimeError as exc:
            study.fail(trial.id, str(exc))
            continue
        study.tell(trial.id, {k: result[k] for k in outcomes})
    return proposed


@pytest.mark.slow
@pytest.mark.xdist_group("wide")
def test_a_wide_mixed_study_with_constraints_and_failures_proposes_from_its_models() -> None:
    space = wide_space()
    study = abo.create_study(
        space, seed=3, outcomes={"loss": "minimize", "mem": "<= 30"}, strategy_options=FAST
    )
    assert len(space) == 98
    assert study.config.resolved_n_initial == 20 + (98 - 10) // 5  # not 2 x 98
    proposed = drive(study, 3, ("loss", "mem"))
    for trial in proposed:
        record = trial.proposal
        assert record.strategy == "auto" and not record.fallback
        assert record.arm in ("believer", "qlognei")
        assert record.gp_points is not None and record.gp_points > 0
        assert 0 < record.details["region_length"] <= 1.6  # searched in a trust region
        keys = record.model.hypers
        assert any(k.startswith("constraint.mem:") for k in keys)  # the constraint's GP
        assert any(k.startswith("failure:") for k in keys)  # the failure classifier
    assert any(t.state.value == "failed" for t in study.trials)
    busy_points = [
        tuple(sorted(t.params.items())) for t in study.trials if t.state.value == "running"
    ]
    assert len(set(busy_points)) == len(busy_points) == 7  # 8 busy, then one told
    best = study.best
    assert best is not None and best.values["mem"] <= 30 and math.isfinite(best.values["loss"])


@pytest.mark.slow
@pytest.mark.xdist_group("wide")
def test_a_wide_mixed_study_of_two_objectives_proposes_from_its_models() -> None:
    study = abo.create_study(
        wide_space(),
        seed=4,
        outcomes={"loss": "minimize", "time": "minimize"},
        strategy_options=FAST,
    )
    proposed = drive(study, 1, ("loss", "time"))
    assert all(t.proposal.strategy == "auto" and not t.proposal.fallback for t in proposed)
    assert {t.proposal.arm for t in proposed} <= {"qlognehvi", "thompson"}
    assert len(study.best_trials) >= 1
