"""Stopping rules (``abo.core.stopping``) and ``Study.report``: what stops, what is refused, and
what a stopped trial is to the rest of the study."""

from __future__ import annotations

import math

import pytest

import abo
from abo import AboError, InvalidValueError, TrialState, TrialStateError
from abo.core.stopping import (
    ASHA,
    PASHA,
    CurveRule,
    Decision,
    Hyperband,
    MedianRule,
    make_rule,
    parse_stopping,
)
from abo.core.trial import Report

SPACE = {"x": abo.Float(0.0, 1.0)}


def _reports(curves: dict[int, list[float]]) -> dict[int, list[Report]]:
    return {t: [Report(float(i + 1), v) for i, v in enumerate(c)] for t, c in curves.items()}


def test_asha_rungs_grow_by_the_reduction_factor_below_the_max_step() -> None:
    assert ASHA(1.0, 3).rungs(100.0) == [1.0, 3.0, 9.0, 27.0, 81.0]
    assert ASHA(2.0, 2, max_step=16.0).rungs(100.0) == [2.0, 4.0, 8.0]
    assert ASHA(1.0, 3).rungs(0.5) == []


def test_asha_keeps_the_top_third_at_each_rung_and_judges_a_rung_once() -> None:
    rule = ASHA(1.0, 3)
    # at rung 1, trials 1..5 reached it with these losses; the sixth arrives with 0.45
    curves = {1: [0.1], 2: [0.2], 3: [0.3], 4: [0.4], 5: [0.5], 6: [0.45]}
    decision = rule.decide(6, _reports(curves), sign=-1.0)
    assert decision.stop and "rung 1, ranked 5 of 6 there, the best 2 go on" in str(decision.reason)
    curves[6] = [0.15]  # second of six: within the best 6 // 3 = 2
    assert not rule.decide(6, _reports(curves), sign=-1.0).stop
    curves[6] = [0.15, 0.9]  # step 2 is no rung: no new judgement, however bad
    assert not rule.decide(6, _reports(curves), sign=-1.0).stop
    # maximising: the same values rank the other way round
    curves[6] = [0.45]
    assert not rule.decide(6, _reports(curves), sign=1.0).stop


def test_asha_ranks_a_trial_against_the_values_others_had_on_reaching_the_rung() -> None:
    rule = ASHA(1.0, 2)
    # trial 1 went on and improved later; at rung 1 it had 0.8, which is what counts
    reports = {
        1: [Report(1.0, 0.8), Report(2.0, 0.1)],
        2: [Report(1.0, 0.5)],
    }
    assert not rule.decide(2, reports, sign=-1.0).stop  # 0.5 beats 0.8 at rung 1
    # a report that jumps over several rungs is judged at each of them
    reports[3] = [Report(5.0, 0.95)]
    assert rule.decide(3, reports, sign=-1.0).stop


def test_the_median_rule_waits_for_enough_trials_and_the_warmup() -> None:
    rule = MedianRule(warmup_steps=2.0, min_trials=3)
    others = {1: [0.5, 0.4, 0.3], 2: [0.6, 0.5, 0.4], 3: [0.7, 0.6, 0.5]}
    bad = {**others, 9: [0.9, 0.8]}
    assert rule.decide(9, _reports(bad), sign=-1.0).stop  # 0.8 is worse than the median 0.5
    assert not rule.decide(9, _reports({**others, 9: [0.9]}), sign=-1.0).stop  # warm-up
    assert not rule.decide(9, _reports({1: others[1], 2: others[2], 9: [0.9, 0.8]}), -1.0).stop
    good = {**others, 9: [0.9, 0.45]}  # better than the median of the others' best to step 2
    assert not rule.decide(9, _reports(good), sign=-1.0).stop
    assert "median 0.5 of 3 trials" in str(rule.decide(9, _reports(bad), sign=-1.0).reason)


def test_hyperband_has_a_bracket_per_rung_below_the_last_step_and_one_that_never_stops() -> None:
    rule = make_rule(parse_stopping({"rule": "hyperband", "max_step": 20}))
    assert isinstance(rule, Hyperband) and rule.count == 4  # first rungs 1, 3, 9; and none
    weights = rule.weights()
    assert sum(weights) == pytest.approx(1.0) and weights == sorted(weights, reverse=True)
    # Hyperband's proportions: B / (B - b) * eta ** (B - 1 - b) = 27, 12, 6, 4 (of 49)
    assert weights == pytest.approx([27 / 49, 12 / 49, 6 / 49, 4 / 49])
    dealt = [rule.bracket(i) for i in range(1, 201)]
    for b, w in enumerate(weights):  # any stretch of consecutive ids is split in proportion
        assert abs(dealt.count(b) - 200 * w) <= 3
        assert abs(dealt[:40].count(b) - 40 * w) <= 2
    assert parse_stopping("hyperband")["brackets"] == 3  # no max_step: three brackets


def test_hyperband_ranks_a_trial_only_within_its_bracket_and_never_stops_the_last() -> None:
    rule = Hyperband(max_step=20.0)
    by = {b: [i for i in range(1, 60) if rule.bracket(i) == b] for b in range(rule.count)}
    judged, *peers = by[0][:4]
    # three peers of its bracket did better at rung 1: the fourth, at 0.9, stops
    curves = {p: [0.1 * (n + 1)] for n, p in enumerate(peers)}
    decision = rule.decide(judged, _reports({**curves, judged: [0.9]}), sign=-1.0)
    assert decision.stop and "hyperband (bracket 1 of 4) at step 1" in str(decision.reason)
    # the same values in other brackets are not its peers: alone in its bracket it goes on
    others = {p: [0.1 * (n + 1)] for n, p in enumerate(by[1][:3])}
    assert not rule.decide(judged, _reports({**others, judged: [0.9]}), sign=-1.0).stop
    # bracket 2's first rung is step 3: at steps 1 and 2 nothing is judged there
    second, *rest = by[1][:4]
    early = {p: [0.1, 0.1, 0.1] for p in rest}
    assert not rule.decide(second, _reports({**early, second: [0.9, 0.9]}), -1.0).stop
    assert rule.decide(second, _reports({**early, second: [0.9, 0.9, 0.9]}), -1.0).stop
    # the last bracket runs everything to the end, however bad
    last, *mates = by[3][:4]
    worst = {p: [0.1] * 19 for p in mates}
    assert not rule.decide(last, _reports({**worst, last: [5.0] * 19}), sign=-1.0).stop


def test_pasha_stops_at_the_top_rung_until_rankings_there_disagree() -> None:
    rule = PASHA(max_step=20.0)
    assert rule.levels(math.inf) == [1.0, 3.0, 9.0, 20.0]
    agree = {1: [0.2, 0.2, 0.1], 2: [0.5, 0.5, 0.4]}  # at steps 1 and 3 trial 1 is ahead
    assert rule.top(_reports(agree), sign=-1.0) == 3.0
    decision = rule.decide(2, _reports(agree), sign=-1.0)
    assert decision.stop and "the current top rung 3" in str(decision.reason)
    assert not rule.decide(2, _reports({1: agree[1], 2: [0.5, 0.5]}), sign=-1.0).stop
    cross = {1: [0.2, 0.2, 0.3], 2: [0.5, 0.5, 0.1]}  # the slow starter ends ahead at step 3
    assert rule.top(_reports(cross), sign=-1.0) == 9.0
    assert not rule.decide(2, _reports(cross), sign=-1.0).stop  # the top grew: it goes on
    # values closer than epsilon are tied: no disagreement, the top stays
    assert PASHA(max_step=20.0, epsilon=0.5).top(_reports(cross), sign=-1.0) == 3.0
    # at max_step, the last level, runs are done rather than stopped
    assert PASHA(max_step=3.0).decide(2, _reports(agree), sign=-1.0) == Decision(False)


def _crossing() -> dict[int, list[float]]:
    """Finished curves of 6 steps: fast starters that end at 0.5, slow ones that end at 0.1,
    and flat ones that stay at 1.0."""
    fast = [0.6, 0.55, 0.52, 0.51, 0.5, 0.5]
    slow = [2.0, 1.5, 1.0, 0.5, 0.2, 0.1]
    flat = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    return {1: fast, 2: [v + 0.01 for v in fast], 3: slow, 4: [v + 0.02 for v in slow],
            5: flat, 6: [v + 0.01 for v in flat]}  # fmt: skip


def test_the_curve_rule_keeps_a_slow_starter_that_asha_would_stop() -> None:
    rule = CurveRule(min_curves=4, neighbours=2)
    starter = {**_crossing(), 9: [1.9, 1.45]}  # behind every fast run, but moving like the slow
    assert not rule.decide(9, _reports(starter), sign=-1.0).stop
    assert ASHA(1.0, 2).decide(9, _reports(starter), sign=-1.0).stop  # worst half at rung 2
    # a flat curve is matched with the flat runs, which gained nothing: it cannot reach 0.1
    stalled = {**_crossing(), 9: [1.0, 1.0]}
    decision = rule.decide(9, _reports(stalled), sign=-1.0)
    assert decision.stop
    assert "the 2 most similar of 6 finished curves went on to end at best 1" in str(
        decision.reason
    ) and "short of the best end 0.1" in str(decision.reason)
    # maximising: the same curves mirrored stop the same way
    mirrored = {t: [-v for v in c] for t, c in stalled.items()}
    assert rule.decide(9, _reports(mirrored), sign=1.0).stop


def test_the_curve_rule_waits_for_finished_runs_and_never_judges_the_last_step() -> None:
    curves = _crossing()
    few = {t: c for t, c in curves.items() if t in (1, 2)} | {3: curves[3][:3], 9: [1.0, 1.0]}
    assert not CurveRule(min_curves=3).decide(9, _reports(few), sign=-1.0).stop  # 2 finished
    assert CurveRule(min_curves=2).decide(9, _reports(few), sign=-1.0).stop
    ended = {**curves, 9: [1.0] * 6}  # at the last step: done, not stopped
    assert not CurveRule().decide(9, _reports(ended), sign=-1.0).stop
    # max_step set: runs that reached it count as finished, however long they ran
    assert (
        not CurveRule(min_curves=4, max_step=8.0)
        .decide(9, _reports({**curves, 9: [1.0, 1.0]}), sign=-1.0)
        .stop
    )  # no run reached step 8
    assert not CurveRule(warmup_steps=3.0).decide(9, _reports(stalled_at(2)), -1.0).stop


def stalled_at(step: int) -> dict[int, list[float]]:
    """The crossing curves and a flat trial 9 at 1.0 up to ``step``."""
    return {**_crossing(), 9: [1.0] * step}


def test_a_study_with_the_curve_rule_stops_a_stalled_run_and_says_why() -> None:
    study = abo.create_study(
        SPACE, strategy="random", seed=4, stopping={"rule": "curve", "min_curves": 2}
    )
    trials = study.ask_batch(3)
    for trial, curve in zip(trials[:2], ([0.9, 0.5, 0.2], [0.8, 0.4, 0.3]), strict=True):
        for step, value in enumerate(curve, 1):
            assert study.report(trial.id, step, value) is False
        study.tell(trial.id, curve[-1])
    assert study.report(trials[2].id, 1, 0.85) is False  # the first run gained 0.7 from 0.9
    assert study.report(trials[2].id, 2, 0.85) is True  # at best 0.85 - 0.3 from here
    stopped = study.trial(trials[2].id)
    assert stopped.state is TrialState.STOPPED and "stopped by curve at step 2" in str(
        stopped.reason
    )


@pytest.mark.parametrize(
    ("option", "field"),
    [
        ("bohb", "stopping.rule"),
        ({"rule": "asha", "eta": 3}, "stopping.eta"),
        ({"rule": "asha", "reduction_factor": 1}, "stopping.reduction_factor"),
        ({"rule": "asha", "reduction_factor": 2.5}, "stopping.reduction_factor"),
        ({"rule": "asha", "min_step": 0}, "stopping.min_step"),
        ({"rule": "asha", "min_step": math.nan}, "stopping.min_step"),
        ({"rule": "asha", "min_step": 4, "max_step": 2}, "stopping.max_step"),
        ({"rule": "median", "min_trials": 0}, "stopping.min_trials"),
        ({"rule": "median", "warmup_steps": -1}, "stopping.warmup_steps"),
        ({"rule": "hyperband", "brackets": 0}, "stopping.brackets"),
        ({"rule": "hyperband", "min_step": 3, "max_step": 3}, "stopping.max_step"),
        ({"rule": "hyperband", "warmup_steps": 1}, "stopping.warmup_steps"),
        ({"rule": "pasha", "epsilon": -0.1}, "stopping.epsilon"),
        ({"rule": "curve", "neighbours": 0}, "stopping.neighbours"),
        ({"rule": "curve", "min_curves": 1.5}, "stopping.min_curves"),
        ({"rule": "curve", "max_step": -2}, "stopping.max_step"),
        ({"rule": "curve", "warmup_steps": math.inf}, "stopping.warmup_steps"),
        (3, "stopping"),
    ],
)
def test_a_bad_stopping_option_names_its_field(option: object, field: str) -> None:
    with pytest.raises(AboError) as info:
        abo.create_study(SPACE, stopping=option)
    assert info.value.field == field


def test_stopping_options_are_stored_in_full_and_none_is_no_rule() -> None:
    assert parse_stopping(None) is None and parse_stopping("none") is None
    assert parse_stopping({"rule": "none"}) is None
    assert parse_stopping("asha") == {
        "rule": "asha", "min_step": 1.0, "reduction_factor": 3, "max_step": None,
    }  # fmt: skip
    assert parse_stopping({"rule": "median", "min_trials": 2}) == {
        "rule": "median", "warmup_steps": 0.0, "min_trials": 2,
    }  # fmt: skip
    assert make_rule(parse_stopping("median")) == MedianRule()
    study = abo.create_study(SPACE, stopping={"rule": "asha", "reduction_factor": 4})
    assert study.spec.stopping == {
        "rule": "asha", "min_step": 1.0, "reduction_factor": 4, "max_step": None,
    }  # fmt: skip
    assert abo.create_study(SPACE).spec.stopping is None


def test_a_stopping_rule_needs_a_study_of_one_objective() -> None:
    with pytest.raises(AboError, match="needs a study of one objective") as info:
        abo.create_study(SPACE, outcomes={"a": "minimize", "b": "minimize"}, stopping="asha")
    assert info.value.field == "stopping"
    two = abo.create_study(SPACE, outcomes={"a": "minimize", "b": "minimize"}, strategy="random")
    trial = two.ask()
    with pytest.raises(AboError, match="report: intermediate values are of a study's one"):
        two.report(trial.id, 1, 0.5)


@pytest.mark.parametrize(
    ("step", "value", "field"),
    [(1, math.nan, "value"), (1, math.inf, "value"), (1, "0.5", "value"),
     (math.nan, 0.5, "step"), (-1, 0.5, "step"), (True, 0.5, "step")],
)  # fmt: skip
def test_non_finite_or_negative_reports_are_refused_and_store_nothing(
    step: object, value: object, field: str
) -> None:
    study = abo.create_study(SPACE, strategy="random", seed=1)
    trial = study.ask()
    with pytest.raises(InvalidValueError) as info:
        study.report(trial.id, step, value)
    assert info.value.field == field
    assert study.reports() == {} and study.trial(trial.id).state is TrialState.RUNNING


def test_reports_on_unknown_or_finished_trials_are_refused(tmp_path) -> None:
    study = abo.create_study(SPACE, storage=f"sqlite:///{tmp_path / 'r.db'}", strategy="random")
    trial = study.ask()
    study.tell(trial.id, 0.3)
    with pytest.raises(TrialStateError, match="already done"):
        study.report(trial.id, 1, 0.3)
    with pytest.raises(abo.TrialNotFoundError):
        study.report(99, 1, 0.3)
    with pytest.raises(AboError, match="trial_id: expected an integer"):
        study.report("1", 1, 0.3)
    assert study.reports() == {}


def test_a_stopped_trial_is_modelled_where_finished_runs_went_from_its_step() -> None:
    study = abo.create_study(SPACE, strategy="qlognei", seed=2, n_initial=3, stopping="asha")
    a, b, c, d = study.ask_batch(4)
    for trial, curve in ((a, [1.0, 0.5, 0.3]), (b, [0.8, 0.6, 0.2])):  # two finished runs
        for step, value in enumerate(curve, 1):
            study.report(trial.id, step, value)
        study.tell(trial.id, curve[-1])
    assert study.report(c.id, 1, 1.4) is True  # behind both at rung 1: stopped
    proposer = study._proposer
    observed, _, Y = proposer.observations(study.trials, study.reports())
    modelled = {t.id: -float(y) for t, y in zip(observed, Y[:, 0], strict=True)}  # utilities
    # from step 1 the finished runs gained -0.7 and -0.6: the median, -0.65, is added
    assert modelled[c.id] == pytest.approx(1.4 - 0.65)
    assert modelled[a.id] == 0.3 and modelled[b.id] == 0.2  # finished runs as told
    assert d.id not in modelled  # running: not an observation
    # without reports (or before any run finished) the stopped trial is at its last value
    observed, _, Y = proposer.observations(study.trials)
    assert -float(Y[[t.id for t in observed].index(c.id), 0]) == 1.4
    assert study.trial(c.id).value == 1.4  # what the trial holds is what it reported


def test_a_stopped_trial_is_modelled_but_is_never_the_best() -> None:
    study = abo.create_study(SPACE, strategy="qlognei", seed=2, n_initial=3, stopping="asha")
    first, second, third = study.ask_batch(3)
    assert not study.report(first.id, 1, 0.1)
    study.tell(first.id, 0.2)  # a full run that ended worse than where it was at step 1
    assert study.report(second.id, 1, 0.05) is False  # better than the first at rung 1
    assert study.report(third.id, 1, 0.9) is True  # stopped: worse than both there
    stopped = study.trial(third.id)
    assert stopped.state is TrialState.STOPPED and stopped.value == 0.9
    assert "stopped by asha at step 1" in str(stopped.reason)
    study.tell(second.id, 0.01)
    assert study.best is not None and study.best.id == second.id
    proposal = study.ask().proposal
    assert proposal is not None and proposal.strategy == "qlognei"
    assert proposal.n_observations == 3  # the two done trials and the stopped one
    # a stopped trial's parameters are the study's: enqueueing them again is skipped
    assert study.enqueue(stopped.params) is False


def test_without_a_rule_reports_are_kept_and_nothing_stops() -> None:
    study = abo.create_study(SPACE, strategy="random", seed=3)
    trials = study.ask_batch(4)
    for step in (1, 2, 3):
        for k, t in enumerate(trials):
            assert study.report(t.id, step, k + 1.0 / step) is False
    assert {k: len(r) for k, r in study.reports().items()} == {t.id: 3 for t in trials}
    assert all(t.state is TrialState.RUNNING for t in study.trials)
    assert list(study.reports(trials[1].id)) == [trials[1].id]
