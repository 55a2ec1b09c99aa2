"""Linear constraints between parameters: parsed with clear errors, enforced on enqueue and
add, respected by the initial design and by every proposal."""

from __future__ import annotations

import re

import pytest

import abo
from abo import AboError
from abo.core.linear import parse_linear

SPACE = abo.Space({"x": abo.Float(0.0, 1.0), "y": abo.Float(0.0, 1.0), "k": abo.Int(0, 4)})
RULES = ["x + y <= 1", "x - 0.1*k >= 0"]


def broken(p: dict) -> bool:
    return p["x"] + p["y"] > 1 + 1e-9 or p["x"] - 0.1 * p["k"] < -1e-9


def test_constraints_read_like_they_are_written() -> None:
    c = parse_linear("2.5e-1*x - y + 3*k >= -1", SPACE)
    assert c.terms == (("x", 0.25), ("y", -1.0), ("k", 3.0)) and c.op == ">=" and c.rhs == -1
    assert c.holds({"x": 0.0, "y": 1.0, "k": 0}) and not c.holds({"x": 0.0, "y": 1.5, "k": 0})


@pytest.mark.parametrize(
    ("rule", "reason"),
    [
        ("x + y < 1", "exactly one '<=' or '>='"),
        ("x + z <= 1", "'z' in 'x + z <= 1' is not a parameter"),
        ("x**2 <= 1", "cannot read the term"),
        ("x <= y", "is not a number"),
        ("x + y <= -1", "too small (or empty) to sample"),
    ],
)
def test_bad_constraints_are_refused_naming_the_field(rule: str, reason: str) -> None:
    with pytest.raises(AboError, match=re.escape(reason)) as err:
        abo.create_study(SPACE, parameter_constraints=[rule])
    assert err.value.field == "parameter_constraints"


def test_log_scaled_and_categorical_parameters_cannot_enter_a_linear_constraint() -> None:
    space = abo.Space({"lr": abo.Float(1e-4, 1.0, log=True), "c": abo.Categorical(["a", "b"])})
    for rule, reason in [("lr <= 0.1", "log-scaled"), ("c <= 1", "categorical")]:
        with pytest.raises(AboError, match=reason):
            abo.create_study(space, parameter_constraints=[rule])


def test_enqueue_and_add_refuse_points_outside_and_change_nothing(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'lin.db'}"
    study = abo.create_study(SPACE, storage=url, parameter_constraints=RULES, seed=1)
    with pytest.raises(AboError, match="'x \\+ y <= 1'") as err:
        study.enqueue({"x": 0.8, "y": 0.5, "k": 0})
    assert err.value.field == "parameter_constraints"
    with pytest.raises(AboError, match="'x - 0.1\\*k >= 0'"):
        study.add({"x": 0.1, "y": 0.1, "k": 3}, 1.0)
    assert study.trials == []
    assert study.add({"x": 0.3, "y": 0.7, "k": 3}, 1.0).state is abo.TrialState.DONE  # on the bound
    again = abo.load_study(study.name, storage=url)
    assert again.spec.parameter_constraints == tuple(RULES)


@pytest.mark.slow
@pytest.mark.parametrize(("strategy", "n"), [("auto", 9), ("thompson", 14), ("random", 14)])
def test_the_design_and_every_proposal_stay_inside(strategy: str, n: int) -> None:
    study = abo.create_study(SPACE, strategy=strategy, parameter_constraints=RULES, seed=0)
    for _ in range(n):
        t = study.ask()
        assert not broken(t.params), (t.proposal.strategy, t.params)
        p = t.params
        study.tell(t.id, (p["x"] - 0.9) ** 2 + (p["y"] - 0.9) ** 2 + 0.01 * p["k"])
    design = [t for t in study.trials if t.proposal.strategy == "sobol"]
    assert len(design) == study.spec.resolved_n_initial  # rejection kept the design's size
    if strategy == "thompson":  # the unconstrained optimum (0.9, 0.9) is outside: the edge wins
        assert study.best.value < 0.33, study.best.params  # 0.32 at (0.5, 0.5), k = 0
