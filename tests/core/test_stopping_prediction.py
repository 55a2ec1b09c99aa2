"""The ``predict`` stopping rule (``abo.core.stopping.prediction``): a run's end predicted from
the finished curves, and the run stopped only when that end is unlikely to beat the best."""

from __future__ import annotations

import math

import pytest

import abo
from abo import AboError, TrialState
from abo.core.stopping import ASHA, PredictRule, make_rule, parse_stopping
from abo.core.stopping.prediction import predict_end
from abo.core.trial import Report


def _reports(curves: dict[int, list[float]]) -> dict[int, list[Report]]:
    return {t: [Report(float(i + 1), v) for i, v in enumerate(c)] for t, c in curves.items()}


def _ranked() -> dict[int, list[float]]:
    """Eight finished losses over 6 steps that keep their order: a run ends where it starts."""
    return {t: [1.0 + 0.2 * t - 0.1 * s for s in range(6)] for t in range(1, 9)}


def _crossing() -> dict[int, list[float]]:
    """Finished losses whose order turns over: the slow starters (falling fast) end best."""
    fast = [0.5, 0.45, 0.42, 0.4, 0.39, 0.38]
    slow = [2.0, 1.5, 1.0, 0.6, 0.3, 0.1]
    flat = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    return {1: fast, 2: [v + 0.01 for v in fast], 3: slow, 4: [v + 0.02 for v in slow],
            5: flat, 6: [v + 0.01 for v in flat], 7: [v + 0.02 for v in fast],
            8: [v + 0.03 for v in flat]}  # fmt: skip


def test_predict_end_recovers_a_linear_relation_and_widens_away_from_the_data() -> None:
    seen = [
        (level, slope, 2.0 * level - slope + 0.5)
        for level in (0.0, 1.0, 2.0)
        for slope in (0.0, 1.0, 3.0)
    ]
    mean, sd = predict_end(1.5, 0.5, seen)
    assert mean == pytest.approx(2.0 * 1.5 - 0.5 + 0.5, abs=1e-2)
    assert sd < 1e-2  # the ends lie on the plane: nothing left unexplained
    noisy = [(lv, sl, e + (0.3 if i % 2 else -0.3)) for i, (lv, sl, e) in enumerate(seen)]
    _, near = predict_end(1.0, 1.0, noisy)
    _, far = predict_end(30.0, 1.0, noisy)
    assert 0.2 < near < far  # residuals make it wide; a run unlike any finished one, wider


def test_predict_stops_a_run_that_is_behind_where_curves_keep_their_order() -> None:
    rule = PredictRule()
    behind = {**_ranked(), 9: [3.0, 2.9]}  # worse than every finished run at steps 1-2
    decision = rule.decide(9, _reports(behind), sign=-1.0)
    assert decision.stop
    assert "stopped by predict at step 2" in str(decision.reason)
    assert "from 8 finished curves" in str(decision.reason)
    assert "best end 0.7" in str(decision.reason)
    ahead = {**_ranked(), 9: [0.9, 0.8]}  # better than every finished run: it may end best
    assert not rule.decide(9, _reports(ahead), sign=-1.0).stop
    # maximising: the same curves mirrored decide the same way
    mirrored = {t: [-v for v in c] for t, c in behind.items()}
    assert rule.decide(9, _reports(mirrored), sign=1.0).stop


def test_predict_keeps_a_slow_starter_that_asha_would_stop() -> None:
    rule = PredictRule()
    starter = {**_crossing(), 9: [1.95, 1.45]}  # far behind, but falling like the slow runs
    assert not rule.decide(9, _reports(starter), sign=-1.0).stop
    assert ASHA(1.0, 2).decide(9, _reports(starter), sign=-1.0).stop
    stalled = {**_crossing(), 9: [1.05, 1.05, 1.05]}  # flat like the runs that ended at 1
    assert rule.decide(9, _reports(stalled), sign=-1.0).stop


def test_predict_waits_for_finished_runs_and_the_warmup_and_never_judges_the_last_step() -> None:
    curves = _ranked()
    few = {t: c for t, c in curves.items() if t <= 5} | {9: [3.0, 2.9]}
    assert not PredictRule().decide(9, _reports(few), sign=-1.0).stop  # 5 finished of 6
    assert PredictRule(min_curves=5).decide(9, _reports(few), sign=-1.0).stop
    behind = {**curves, 9: [3.0, 2.9]}
    assert not PredictRule(warmup_steps=3.0).decide(9, _reports(behind), sign=-1.0).stop
    ended = {**curves, 9: [3.0] * 6}  # at the last step: done, not stopped
    assert not PredictRule().decide(9, _reports(ended), sign=-1.0).stop
    # max_step beyond every report: nothing counts as finished yet
    assert not PredictRule(max_step=8.0).decide(9, _reports(behind), sign=-1.0).stop


def test_predict_is_spelled_and_checked_like_every_rule() -> None:
    assert parse_stopping("predict") == {
        "rule": "predict", "probability": 0.05, "min_curves": 6, "warmup_steps": 0.0,
        "max_step": None,
    }  # fmt: skip
    rule = make_rule(parse_stopping({"rule": "predict", "probability": 0.2, "max_step": 20}))
    assert rule == PredictRule(probability=0.2, max_step=20.0)
    for bad, field in (
        ({"probability": 0.0}, "stopping.probability"),
        ({"probability": 1.0}, "stopping.probability"),
        ({"probability": math.nan}, "stopping.probability"),
        ({"min_curves": 3}, "stopping.min_curves"),
        ({"neighbours": 5}, "stopping.neighbours"),
    ):
        with pytest.raises(AboError) as info:
            parse_stopping({"rule": "predict", **bad})
        assert info.value.field == field


def test_a_study_with_the_predict_rule_stops_a_hopeless_run_and_says_why(tmp_path) -> None:
    study = abo.create_study(
        {"x": abo.Float(0.0, 1.0)}, strategy="random", seed=3,
        storage=f"sqlite:///{tmp_path / 'p.db'}", stopping={"rule": "predict", "min_curves": 4},
    )  # fmt: skip
    trials = study.ask_batch(5)
    for i, trial in enumerate(trials[:4]):
        curve = [1.0 + 0.1 * i - 0.1 * s for s in range(4)]
        for step, value in enumerate(curve, 1):
            assert study.report(trial.id, step, value) is False
        study.tell(trial.id, curve[-1])
    assert study.report(trials[4].id, 1, 0.95) is False  # level with the best at step 1
    assert study.report(trials[4].id, 2, 2.0) is True  # far behind every finished run
    stopped = abo.load_study(study.name, storage=f"sqlite:///{tmp_path / 'p.db'}").trial(
        trials[4].id
    )
    assert stopped.state is TrialState.STOPPED
    assert "stopped by predict at step 2" in str(stopped.reason)
