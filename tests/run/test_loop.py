"""The asynchronous loop on a ThreadExecutor: fast checks of its bookkeeping and guards."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

import pytest

import abo
from abo.core.exceptions import FailureRateExceeded
from abo.core.trial import TrialState
from abo.executors import ThreadExecutor
from abo.run.loop import FailureGuard, auto_lookahead, run

SPACE = abo.Space({"x": abo.Float(0.0, 1.0), "k": abo.Categorical(["a", "b"])})


def _study(**kw: object) -> abo.Study:
    return abo.create_study(SPACE, strategy="random", seed=3, **kw)  # type: ignore[arg-type]


def _counting_objective(seconds: float = 0.05) -> tuple[Callable[[dict], float], list[int]]:
    """An objective sleeping ``seconds``, and a one-item list: the most evaluations at once."""
    lock = threading.Lock()
    active, peak = [0], [0]

    def objective(p: dict) -> float:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(seconds)
        with lock:
            active[0] -= 1
        return p["x"]

    return objective, peak


def test_keeps_every_worker_busy_and_finishes_the_budget() -> None:
    objective, peak = _counting_objective()
    study = _study()
    with ThreadExecutor(4) as ex:
        result = study.optimize(objective, n_trials=20, executor=ex)
    assert result.n_done == 20 and len(study) == 20
    assert peak[0] == 4  # never more, and reached: a new trial starts when one finishes
    assert all(t.state is TrialState.DONE for t in study.trials)
    assert 0.0 < result.utilization <= 1.0
    assert all("worker" in t.info and t.info["eval_seconds"] > 0 for t in study.trials)


def test_raising_objective_fails_its_trial_with_traceback_and_loop_continues() -> None:
    def objective(p: dict) -> float:
        if p["x"] > 0.7:
            raise RuntimeError("diverged at step 12")
        return p["x"]

    study = _study()
    with ThreadExecutor(2) as ex:
        result = study.optimize(objective, n_trials=12, executor=ex, guard=None)
    failed = [t for t in study.trials if t.state is TrialState.FAILED]
    assert failed and result.n_failed == len(failed)
    assert result.n_done + result.n_failed == 12
    for t in failed:
        assert t.reason == "RuntimeError: diverged at step 12"
        assert "raise RuntimeError" in t.info["traceback"]


def test_dict_results_keep_metadata_and_nan_fails() -> None:
    def objective(p: dict) -> dict:
        return {"value": math.nan if p["k"] == "b" else p["x"], "epochs": 7}

    study = _study()
    with ThreadExecutor(2) as ex:
        study.optimize(objective, n_trials=10, executor=ex, guard=None)
    for t in study.trials:
        assert t.user["epochs"] == 7
        if t.params["k"] == "b":
            assert t.state is TrialState.FAILED and "finite" in (t.reason or "")
        else:
            assert t.state is TrialState.DONE and t.value == t.params["x"]


def test_failure_rate_guard_stops_the_study() -> None:
    calls = [0]

    def objective(p: dict) -> float:
        calls[0] += 1
        raise ValueError("always")

    study = _study()
    with ThreadExecutor(2) as ex, pytest.raises(FailureRateExceeded, match="n_failed"):
        study.optimize(objective, n_trials=100, executor=ex, guard=FailureGuard(0.5, 5))
    assert 5 <= calls[0] <= 8  # stopped after the fifth failure, not after 100
    assert all(t.state is not TrialState.RUNNING for t in study.trials)


class _Clock:
    """The loop's clock, moved by hand (timeouts without waiting for them); counts reads."""

    def __init__(self) -> None:
        self.now = 1_000.0
        self.reads = 0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            self.reads += 1
            return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


def test_trial_timeout_fails_with_reason_timeout() -> None:
    clock = _Clock()
    study = _study()

    def objective(p: dict, trial: dict) -> float:
        if p["k"] == "a":  # a slow evaluation: an hour of the loop's time passes...
            seen = clock.reads
            while clock.reads < seen + 3:  # ...once the loop has started its timeout clock
                time.sleep(0.001)
            clock.advance(3600.0)
            while study.trial(trial["id"]).state is TrialState.RUNNING:
                time.sleep(0.005)  # the loop times it out; then this thread may end
        return p["x"]

    objective.accepts_trial = True  # type: ignore[attr-defined]
    # threads cannot be killed: spare ones run the next trials. lookahead=0: a queued trial
    # would run at once on a spare thread while its timeout clock waits for the head of the
    # queue, and this objective's one clock jump could then pass before that clock started
    with ThreadExecutor(8) as ex:
        result = study.optimize(
            objective, n_trials=6, n_workers=1, executor=ex, trial_timeout=60.0,
            guard=None, clock=clock, lookahead=0,
        )  # fmt: skip
    timed_out = [t for t in study.trials if t.reason == "timeout"]
    assert timed_out and all(t.params["k"] == "a" for t in timed_out)
    assert all(t.state is TrialState.FAILED for t in timed_out)
    assert all(t.state is TrialState.DONE for t in study.trials if t.params["k"] == "b")
    assert result.n_done + result.n_failed == 6


def test_retryable_failure_is_lost_and_retried_once() -> None:
    seen: list[int] = []

    def objective(p: dict) -> float:
        seen.append(1)
        if len(seen) == 1:
            raise abo.TrialFailure("node lost its filesystem", retryable=True)
        return p["x"]

    study = _study()
    with ThreadExecutor(1) as ex:
        study.optimize(objective, n_trials=3, executor=ex)
    first = study.trial(1)
    (retry,) = [t for t in study.trials if t.retry_of == 1]  # a queued design point may be 2
    assert first.state is TrialState.LOST and first.reason == "node lost its filesystem"
    assert retry.retry_of == 1 and retry.attempt == 1 and retry.params == first.params
    assert retry.state is TrialState.DONE
    assert sum(t.state is TrialState.DONE for t in study.trials) == 3


def test_bad_budget_is_rejected() -> None:
    with pytest.raises(abo.AboError, match="n_trials"):
        run(_study(), lambda p: 0.0, n_trials=0, executor=ThreadExecutor(1))


def test_lookahead_keeps_trials_ready_and_asks_no_more_than_the_budget() -> None:
    objective, peak = _counting_objective()
    study = abo.create_study(SPACE, strategy="thompson", seed=4, n_initial=4)
    with ThreadExecutor(3) as ex:
        result = study.optimize(objective, n_trials=14, executor=ex, lookahead=2)
    assert result.n_done == 14 and result.n_lost == 0
    assert len(study) == 14  # proposals ahead never overshoot the budget
    assert all(t.state is TrialState.DONE for t in study.trials)
    assert peak[0] == 3  # never more workers than asked for, and all of them used
    assert any((t.proposal.strategy if t.proposal else None) == "thompson" for t in study.trials)


def test_lookahead_trials_never_submitted_are_lost_when_the_run_stops() -> None:
    study = _study()
    with ThreadExecutor(2) as ex:
        result = study.optimize(
            lambda p: time.sleep(0.2) or p["x"], n_trials=100, executor=ex, timeout=0.5,
            lookahead=3, grace=5.0,
        )  # fmt: skip
    assert result.stopped == "timeout" and result.n_done < 100
    assert not study.pending  # nothing is left running
    unsent = [  # asked ahead: never submitted, or queued at the executor and withdrawn
        t for t in study.trials if (t.reason or "").startswith("driver stopped before the trial")
    ]
    assert unsent and all(t.state is TrialState.LOST for t in unsent)
    assert result.n_done == sum(t.state is TrialState.DONE for t in study.trials)


def test_with_lookahead_a_freed_worker_starts_before_the_result_is_told() -> None:
    """The tell is a durable write; a ready trial does not need it, so it is submitted first."""
    started: dict[int, threading.Event] = {}
    seen: list[bool] = []

    def objective(p: dict, trial: dict) -> float:
        started.setdefault(trial["id"], threading.Event()).set()
        time.sleep(0.1)  # the asker has a trial ready by the time this one ends
        return p["x"]

    objective.accepts_trial = True  # type: ignore[attr-defined]

    def callback(study: abo.Study, trial: abo.Trial) -> None:  # runs after the tell
        nxt = [t.id for t in study.trials if t.id > trial.id and t.retry_of is None]
        if nxt and len(seen) < 3:
            seen.append(started.setdefault(nxt[0], threading.Event()).wait(5.0))

    study = _study()
    with ThreadExecutor(1) as ex:
        result = study.optimize(objective, n_trials=5, executor=ex, lookahead=1, callback=callback)
    assert result.n_done == 5
    assert seen == [True, True, True]  # the next trial was running when each tell returned


def test_with_lookahead_evaluations_wait_in_the_executors_queue_not_in_the_driver() -> None:
    """A worker that finishes starts the next queued evaluation even while the driver is busy
    (here: stuck in the callback of the trial that finished before)."""
    started: dict[int, threading.Event] = {}
    seen: list[bool] = []

    def objective(p: dict, trial: dict) -> float:
        started.setdefault(trial["id"], threading.Event()).set()
        time.sleep(0.1)
        return p["x"]

    objective.accepts_trial = True  # type: ignore[attr-defined]

    def callback(study: abo.Study, trial: abo.Trial) -> None:  # the driver is held here
        if len(seen) < 2:  # two trials later: it can only start from the executor's queue
            seen.append(started.setdefault(trial.id + 2, threading.Event()).wait(5.0))

    study = _study()
    with ThreadExecutor(1) as ex:
        result = study.optimize(objective, n_trials=6, executor=ex, lookahead=2, callback=callback)
    assert result.n_done == 6 and len(study) == 6
    assert seen == [True, True]


def test_a_queued_trials_timeout_runs_from_its_start_not_its_submission() -> None:
    study = _study()
    with ThreadExecutor(1) as ex:  # 3 queued behind 1 worker: the last waits 0.6 s to start
        result = study.optimize(
            lambda p: time.sleep(0.2) or p["x"], n_trials=8, executor=ex, lookahead=3,
            trial_timeout=0.5,
        )  # fmt: skip
    assert result.n_done == 8 and result.n_failed == 0


def test_when_a_run_stops_queued_evaluations_never_start() -> None:
    calls: list[int] = []

    def objective(p: dict, trial: dict) -> float:
        calls.append(trial["id"])
        time.sleep(0.3)
        return p["x"]

    objective.accepts_trial = True  # type: ignore[attr-defined]
    study = _study()
    with ThreadExecutor(2) as ex:
        result = study.optimize(
            objective, n_trials=100, executor=ex, timeout=0.5, lookahead=4, grace=5.0
        )
    withdrawn = [t for t in study.trials if t.reason == "driver stopped before the trial started"]
    assert withdrawn and all(t.state is TrialState.LOST for t in withdrawn)
    assert not {t.id for t in withdrawn} & set(calls)  # none of them ran
    assert result.n_done == len(calls) and not study.pending


def test_bad_lookahead_is_rejected() -> None:
    for bad in (-1, "soon", 1.5, True):
        with pytest.raises(abo.AboError, match="lookahead: expected 'auto' or"):
            run(_study(), lambda p: 0.0, n_trials=1, executor=ThreadExecutor(1), lookahead=bad)


def test_the_automatic_lookahead_follows_proposal_and_evaluation_times() -> None:
    assert auto_lookahead(4, ask_seconds=0.001, eval_seconds=1.0) == 0  # 0.1 %: queue nothing
    # under 1 % each, but 32 workers keep the proposals busy a fifth of the time: queue
    assert auto_lookahead(32, ask_seconds=0.009, eval_seconds=1.25) == 32
    assert auto_lookahead(8, ask_seconds=0.009, eval_seconds=1.25) == 0  # load 0.06
    assert auto_lookahead(4, ask_seconds=0.05, eval_seconds=1.0) == 4  # 5 %: one on deck each
    assert auto_lookahead(4, ask_seconds=0.45, eval_seconds=1.0) == 4  # twice the load: 3.6
    assert auto_lookahead(2, ask_seconds=0.45, eval_seconds=1.0) == 2
    assert auto_lookahead(1, ask_seconds=0.9, eval_seconds=1.0) == 2  # twice the load: 1.8
    assert auto_lookahead(32, ask_seconds=0.05, eval_seconds=1.0) == 32  # load 1.6
    assert auto_lookahead(32, ask_seconds=0.2, eval_seconds=1.0) == 0  # load 6.4: saturated
    assert auto_lookahead(4, ask_seconds=10.0, eval_seconds=1.0) == 0
    assert auto_lookahead(1, ask_seconds=1.5, eval_seconds=1.0) == 2  # capped: 2 x workers
    assert auto_lookahead(4, ask_seconds=0.1, eval_seconds=0.0) == 0
    # the driver's own 5 % of an evaluation per trial (tell, submission): one on deck each
    assert auto_lookahead(4, ask_seconds=0.001, eval_seconds=1.0, gap_seconds=0.05) == 4
    assert auto_lookahead(4, ask_seconds=0.001, eval_seconds=100.0, gap_seconds=0.05) == 0
    assert auto_lookahead(32, ask_seconds=0.2, eval_seconds=1.0, gap_seconds=0.05) == 0


class _PaceRecorder(abo.Study):
    """A study that notes the pace of every ask the loop makes."""

    paces: list[float | None]

    def ask_batch(self, n, n_workers=None, info=None, *, pace=None):  # type: ignore[override]
        self.paces.append(pace)
        return super().ask_batch(n, n_workers, info, pace=pace)


def _recorder(**kw: object) -> _PaceRecorder:
    plain = abo.create_study(SPACE, strategy="thompson", seed=2, n_initial=3, **kw)  # type: ignore[arg-type]
    study = _PaceRecorder(plain.storage, plain.record)
    study.paces = []
    return study


def test_the_automatic_loop_tells_each_ask_its_pace_and_lookahead_zero_never_does() -> None:
    objective, _ = _counting_objective(seconds=0.2)
    study = _recorder()
    with ThreadExecutor(2) as ex:
        study.optimize(objective, n_trials=8, executor=ex)
    assert study.paces[0] is None  # before any evaluation is measured
    timed = [p for p in study.paces if p is not None]
    assert timed and all(0.05 < p < 0.2 for p in timed)  # about 0.2 s over 2 workers
    exact = _recorder()
    with ThreadExecutor(2) as ex:
        exact.optimize(objective, n_trials=6, executor=ex, lookahead=0)
    assert exact.paces and set(exact.paces) == {None}


def test_by_default_the_design_waits_on_deck_one_per_worker() -> None:
    """The initial design's points depend on no result: queued ahead from the first ask."""
    objective, peak = _counting_objective(seconds=0.3)
    study = abo.create_study(SPACE, strategy="thompson", seed=2, n_initial=6)
    with ThreadExecutor(2) as ex:
        result = study.optimize(objective, n_trials=6, executor=ex)
    assert result.max_queued == 2 and peak[0] == 2
    assert [t.proposal.strategy for t in study.trials] == ["sobol"] * 6


def test_by_default_slow_proposals_for_fast_evaluations_are_queued_ahead() -> None:
    """A model's proposals (0.02-0.5 s) against 1 s evaluations: the default queues some (the
    asker keeps up, with a queue against bursts: between 1 % and twice too slow)."""
    objective, peak = _counting_objective(seconds=1.0)
    plane = abo.Space({"x": abo.Float(0.0, 1.0), "y": abo.Float(0.0, 1.0)})
    study = abo.create_study(plane, strategy="thompson", seed=4, n_initial=4)
    with ThreadExecutor(2) as ex:
        result = study.optimize(objective, n_trials=10, executor=ex)
    assert result.n_done == 10 and len(study) == 10 and not study.pending
    assert 0 < result.max_queued <= 4  # some, never more than twice the workers
    assert peak[0] <= 2


def test_by_default_cheap_proposals_for_slow_evaluations_are_not_queued() -> None:
    """Random proposals (well under 1 % of a 2 s evaluation): each sees every result.

    The design is one point per worker: a longer design's last points may wait on deck by
    design (they depend on no result), which is not what this test is about. Two seconds, not
    one: on a loaded machine a durable tell may pass 1 % of one second, and then one point per
    worker rightly waits on deck."""
    objective, peak = _counting_objective(seconds=2.0)
    study = _study(n_initial=3)
    with ThreadExecutor(3) as ex:
        result = study.optimize(objective, n_trials=6, executor=ex)
    assert result.n_done == 6 and peak[0] == 3
    assert result.max_queued == 0


def _sequence(lookahead: int | str) -> list[dict]:
    study = abo.create_study(SPACE, strategy="thompson", seed=11, n_initial=3)
    with ThreadExecutor(1) as ex:
        study.optimize(lambda p: (p["x"] - 0.3) ** 2, n_trials=7, executor=ex, lookahead=lookahead)
    return [t.params for t in study.trials]


def test_lookahead_zero_reproduces_a_run_exactly() -> None:
    """With one worker every result is told in the same order, so a fixed seed fixes the run."""
    first = _sequence(0)
    assert _sequence(0) == first
    assert len(first) == 7 and len({p["x"] for p in first}) == 7


def test_an_objective_with_a_trial_argument_reports_and_stops_on_threads() -> None:
    seen: list[abo.TrialHandle] = []

    def objective(p: dict, trial: abo.TrialHandle) -> float:
        seen.append(trial)
        for step in (1, 3, 9, 27):
            if trial.report(step, p["x"] + 1.0 / step):
                return -1.0  # what a stopped run returns is not its value
        return p["x"]

    study = _study(stopping="asha")
    with ThreadExecutor(2) as ex:
        result = study.optimize(objective, n_trials=10, executor=ex)
    assert result.n_done + result.n_stopped == 10 and result.n_stopped > 0
    assert "stopped, " in result.summary()
    for t in study.trials:
        reports = study.reports(t.id)[t.id]
        assert (
            t.value == reports[-1].value
            if t.state is TrialState.STOPPED
            else t.value == t.params["x"]
        )
        assert t.info["eval_seconds"] >= 0  # the stopped ones too keep their bookkeeping
    assert sorted(h.id for h in seen) == [t.id for t in study.trials]
    assert all(h.should_stop == (study.trial(h.id).state is TrialState.STOPPED) for h in seen)


def test_a_second_parameter_with_a_default_keeps_it_and_one_named_trial_gets_the_handle() -> None:
    """``def objective(params, scale=2.0)`` is an option of the objective, not a handle slot."""

    def scaled(p: dict, scale: float = 2.0) -> float:
        return scale * p["x"]

    def optional(p: dict, trial: abo.TrialHandle | None = None) -> float:
        assert isinstance(trial, abo.TrialHandle) and trial.params == p
        return p["x"]

    for objective, factor in ((scaled, 2.0), (optional, 1.0)):
        study = _study()
        with ThreadExecutor(2) as ex:
            result = study.optimize(objective, n_trials=4, executor=ex)
        assert result.n_done == 4, [t.info.get("traceback") for t in study.trials]
        assert all(t.value == factor * t.params["x"] for t in study.trials)


def test_a_trial_handle_without_a_channel_says_so() -> None:
    handle = abo.TrialHandle("s", 1)
    with pytest.raises(abo.AboError, match="report: this trial has no channel"):
        handle.report(1, 0.5)
    with pytest.raises(abo.InvalidValueError, match="value: must be finite"):
        handle.report(1, math.nan)
    assert handle["id"] == 1 and handle.get("attempt") == 0 and handle.get("other") is None
