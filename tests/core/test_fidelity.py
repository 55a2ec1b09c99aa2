"""A study's fidelity (``abo.core.fidelity``): how it is declared and checked, what counts as a
result, what the cost of a fidelity is, and which reports the model reads."""

from __future__ import annotations

from pathlib import Path

import pytest

import abo
from abo import AboError
from abo.core.fidelity import RUNGS, Fidelity, report_rows
from abo.core.trial import Report, Trial, TrialState

SPACE = abo.Space({"x": abo.Float(0.0, 1.0), "epochs": abo.Int(1, 81, log=True)})
CELLS = abo.Space({"x": abo.Float(0.0, 1.0), "cell": abo.Categorical(["coin", "pouch"])})


def _trial(i: int, state: TrialState, epochs: int, seconds: float | None = None, **kw) -> Trial:
    info = {} if seconds is None else {"eval_seconds": seconds}
    return Trial(i, "s", {"x": 0.5, "epochs": epochs}, state, info=info, **kw)


@pytest.mark.parametrize(
    ("fidelity", "field", "words"),
    [
        ("epoch", "fidelity.parameter", "expected the name of a parameter of the space"),
        (3, "fidelity", "expected a parameter name or a dict"),
        ({"parameter": "epochs", "steps": 3}, "fidelity.steps", "not a setting of a fidelity"),
        ({"parameter": "epochs", "target": 100}, "fidelity.target", "outside [1, 81]"),
        ({"parameter": "epochs", "cost": "cheap"}, "fidelity.cost", "'learned' or a dict"),
        ({"parameter": "epochs", "cost": {"fixed": -1}}, "fidelity.cost", "non-negative"),
        ({"parameter": "epochs", "cost": {"fixd": 1}}, "fidelity.cost", "fixed + per_unit * s"),
        (
            {"parameter": "epochs", "cost": {"fixed": 0, "per_unit": 0}},
            "fidelity.cost",
            "every fidelity must cost more than 0",
        ),
    ],
)
def test_a_bad_fidelity_names_the_field_and_why(fidelity: object, field: str, words: str) -> None:
    with pytest.raises(AboError) as err:
        abo.create_study(SPACE, fidelity=fidelity)
    assert err.value.field == field and words in str(err.value)


def test_a_categorical_fidelity_needs_a_cost_per_choice_and_a_known_target() -> None:
    with pytest.raises(AboError, match="cost.pouch: missing"):
        abo.create_study(CELLS, fidelity={"parameter": "cell", "cost": {"coin": 1}})
    with pytest.raises(AboError, match="cost.cylinder: not a choice"):
        abo.create_study(
            CELLS, fidelity={"parameter": "cell", "cost": {"coin": 1, "pouch": 2, "cylinder": 3}}
        )
    with pytest.raises(AboError, match="'prismatic' is not one of"):
        abo.create_study(CELLS, fidelity={"parameter": "cell", "target": "prismatic"})
    study = abo.create_study(
        CELLS, fidelity={"parameter": "cell", "cost": {"coin": 1, "pouch": 20}}
    )
    assert study.spec.fidelity == {
        "parameter": "cell", "target": "pouch", "cost": {"coin": 1.0, "pouch": 20.0}
    }  # fmt: skip


def test_studies_a_fidelity_does_not_fit_are_refused_naming_what_does() -> None:
    with pytest.raises(AboError) as err:
        abo.create_study(SPACE, fidelity="epochs", strategy="thompson")
    assert err.value.field == "strategy"
    assert "does not choose a fidelity ('epochs')" in str(err.value)
    assert "auto, multifidelity, random" in str(err.value)
    with pytest.raises(AboError, match="a fidelity is for a study of one objective") as err:
        abo.create_study(SPACE, fidelity="epochs", outcomes={"a": "minimize", "b": "minimize"})
    assert err.value.field == "fidelity"
    linear = abo.Space({"x": abo.Float(0.0, 1.0), "mesh": abo.Float(1.0, 8.0)})
    with pytest.raises(AboError, match="involves the fidelity 'mesh'"):
        abo.create_study(linear, fidelity="mesh", parameter_constraints=["x + mesh <= 4"])
    with pytest.raises(AboError, match="needs a parameter beside the fidelity"):
        abo.create_study(abo.Space({"epochs": abo.Int(1, 9)}), fidelity="epochs")


def test_the_fidelity_is_stored_and_a_missing_one_means_the_target(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'f.db'}"
    study = abo.create_study(SPACE, name="f", storage=url, fidelity="epochs", seed=1)
    study.enqueue({"x": 0.25})  # at the target
    study.add({"x": 0.75, "epochs": 3}, 0.01)  # a cheap, better-looking value: not a result
    study.add({"x": 0.5}, 0.2)
    again = abo.load_study("f", storage=url)
    assert again.spec.fidelity == {"parameter": "epochs", "target": 81, "cost": None}
    assert again.ask().params == {"x": 0.25, "epochs": 81}
    assert again.best is not None and again.best.params == {"x": 0.5, "epochs": 81}
    assert [t.params["epochs"] for t in again.best_trials] == [81]
    from abo.analysis.summary import study_summary
    from abo.storage import open_storage

    store = open_storage(url)
    listed = study_summary(store, store.load_study("f"))  # what `abo studies` and HTTP list
    assert listed["best"]["params"] == {"x": 0.5, "epochs": 81}


def test_the_cost_is_given_learned_from_durations_or_the_prior() -> None:
    given = Fidelity.parse({"parameter": "epochs", "cost": {"fixed": 2, "per_unit": 0.5}}, SPACE)
    assert given.cost_of(10) == 7.0
    learned = Fidelity.parse("epochs", SPACE)
    prior = learned.cost_model([], {})
    assert learned.cost_of(81, prior) / learned.cost_of(1, prior) == pytest.approx(10.0)
    # 0.1 s per epoch beside 1 s of start-up, measured; the running trial says nothing yet
    trials = [_trial(i, TrialState.DONE, e, 1.0 + 0.1 * e) for i, e in enumerate((1, 9, 27, 81))]
    trials.append(_trial(9, TrialState.RUNNING, 3))
    model = learned.cost_model(trials, {})
    assert model["fixed"] == pytest.approx(1.0) and model["per_unit"] == pytest.approx(0.1)
    # a stopped trial cost what it ran: its last report's step
    stopped = _trial(10, TrialState.STOPPED, 81, 1.0 + 0.1 * 5)
    model = learned.cost_model([*trials, stopped], {10: [Report(5.0, 0.3)]})
    assert model["per_unit"] == pytest.approx(0.1)
    # two trials are too few to learn from
    assert learned.cost_model(trials[:2], {}) == prior
    cells = Fidelity.parse("cell", CELLS)
    timed = [
        Trial(i, "s", {"x": 0.5, "cell": c}, TrialState.DONE, info={"eval_seconds": s})
        for i, (c, s) in enumerate([("coin", 1.0), ("coin", 3.0), ("pouch", 30.0)])
    ]
    assert cells.cost_model(timed, {}) == {"coin": 2.0, "pouch": 30.0}


def test_reports_at_the_rungs_of_the_fidelity_are_observations() -> None:
    fid = Fidelity.parse("epochs", SPACE)
    curve = [Report(float(e), 1.0 / e) for e in range(1, 82)]
    running = report_rows(fid, _trial(1, TrialState.RUNNING, 81), curve)
    steps = [r.step for _, r in running]
    assert steps[0] == 1.0 and len(steps) <= RUNGS + 1 and steps == sorted(steps)
    assert len(set(steps)) == len(steps) > 5 and steps[-1] > 40  # spread over the log range
    # done: its result is the observation at 27, reports from 27 on are not repeated
    done = report_rows(fid, _trial(2, TrialState.DONE, 27), curve[:27])
    assert max(r.step for _, r in done) < 27
    # stopped: its last report is always an observation, in a slot of its own
    stopped = report_rows(fid, _trial(3, TrialState.STOPPED, 81), curve[:5])
    assert stopped[-1] == (RUNGS + 1, curve[4])
    # the rows of a curve do not change as it grows (their ids stay)
    assert report_rows(fid, _trial(1, TrialState.RUNNING, 81), curve[:40])[:3] == running[:3]
    cells = Fidelity.parse("cell", CELLS)
    coin = Trial(4, "s", {"x": 0.1, "cell": "coin"}, TrialState.RUNNING)
    assert report_rows(cells, coin, curve) == []
