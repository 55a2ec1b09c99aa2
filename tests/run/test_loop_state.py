"""The loop's decisions (``abo.run.loop_state``) driven by hand: no Dask, threads, clocks or
sleeps."""

from __future__ import annotations

from abo.core.trial import ProposalRecord, Trial, TrialState
from abo.run.loop_state import LoopState, Move
from abo.run.optimize_result import FailureGuard


def _trial(i: int, strategy: str = "sobol", attempt: int = 0) -> Trial:
    return Trial(i, "s", {"x": i / 10}, TrialState.RUNNING, attempt=attempt,
                 proposal=ProposalRecord(strategy))  # fmt: skip


def _ended(trial: Trial, state: TrialState, reason: str | None = None) -> Trial:
    value = 0.0 if state is TrialState.DONE else None
    return Trial(trial.id, "s", trial.params, state, value=value, reason=reason,
                 attempt=trial.attempt, proposal=trial.proposal)  # fmt: skip


def _launch(state: LoopState[str], ids: range, now: float, strategy: str = "sobol") -> None:
    for i in ids:
        state.on_submitted(f"f{i}", _trial(i, strategy))
    state.on_launched(now)


def test_a_turn_fills_the_workers_and_the_lookahead_but_never_past_the_budget() -> None:
    state: LoopState[str] = LoopState(2, 5, start=0.0)
    assert state.begin(0.0, lookahead=2, asking=True).ask == 4
    _launch(state, range(1, 5), 0.0)
    turn = state.begin(0.1, lookahead=2, asking=True)
    assert (turn.want, turn.ask, turn.halt) == (0, 0, False)
    for _, trial in state.on_results(["f1", "f2"]):
        state.on_finished(_ended(trial, TrialState.DONE), max_retries=1)
    assert state.begin(0.2, lookahead=2, asking=True).ask == 1  # 5 - 2 finished - 2 in flight
    assert state.result.trial_ids == [1, 2, 3, 4] and state.result.sources == {"design": 4}
    assert state.result.max_queued == 2 and state.result.n_done == 2


def test_only_the_head_of_the_queue_runs_its_timeout_clock() -> None:
    state: LoopState[str] = LoopState(1, 10, start=0.0, trial_timeout=5.0)
    _launch(state, range(1, 3), now=0.0)  # trial 1 runs, trial 2 waits in the queue
    assert [s.started for s in state.inflight.values()] == [0.0, None]
    assert state.expired(4.0) == []
    assert [t.id for _, t in state.expired(6.0)] == [1]  # the queued one has not started
    state.start_clocks(6.0)  # it reached the head now
    assert state.expired(10.0) == [] and [t.id for _, t in state.expired(11.5)] == [2]
    assert not state.inflight


def test_the_runs_timeout_stops_asking_drains_then_ends_after_the_grace() -> None:
    state: LoopState[str] = LoopState(2, 10, start=0.0, timeout=60.0, grace=30.0)
    _launch(state, range(1, 4), now=0.0)
    assert state.queued() == ["f3"]
    turn = state.begin(61.0, lookahead=1, asking=True)
    assert state.stop.reason == "timeout" and state.stop.deadline == 91.0
    assert turn.ask == 0 and turn.halt  # halt the asker and withdraw the queued evaluation
    assert state.on_withdrawn("f3").id == 3
    assert state.move(80.0, asking=True, want=turn.want) is Move.AWAIT_RESULTS  # draining
    assert state.move(92.0, asking=True, want=turn.want) is Move.END  # the grace is over
    assert [t.id for _, t in state.unfinished()] == [1, 2]  # to cancel and mark lost


def test_a_first_signal_drains_and_a_second_stops_at_once() -> None:
    state: LoopState[str] = LoopState(1, 10, start=0.0, grace=30.0)
    _launch(state, range(1, 2), now=0.0)
    assert state.on_signal("SIGINT", 1.0) and state.stop.reason == "SIGINT"
    assert state.move(2.0, asking=False, want=0) is Move.AWAIT_RESULTS
    assert not state.on_signal("SIGTERM", 3.0) and state.stop.reason == "SIGINT"
    assert state.move(3.0, asking=False, want=0) is Move.END


def test_the_failure_guard_stops_the_run_after_enough_failures() -> None:
    state: LoopState[str] = LoopState(4, 100, start=0.0, guard=FailureGuard(0.5, 5))
    _launch(state, range(1, 9), now=0.0)
    for i, (_, trial) in enumerate(state.on_results([f"f{i}" for i in range(1, 9)])):
        ok = i in (0, 2, 4)
        state.on_finished(_ended(trial, TrialState.DONE if ok else TrialState.FAILED, "boom"), 0)
        state.check_guard(float(i))
        assert state.stopping == (i == 7)  # 5 failed of 8: over half of at least five
    assert state.stop.reason == "failure rate" and state.result.common_failure == ("boom", 5)


def test_a_lost_trial_that_will_be_retried_uses_no_budget() -> None:
    state: LoopState[str] = LoopState(1, 2, start=0.0)
    _launch(state, range(1, 2), now=0.0)
    (_, trial), = state.on_results(["f1"])  # fmt: skip
    state.on_finished(_ended(trial, TrialState.LOST, "node died"), max_retries=1)
    assert state.finished == 0 and state.result.n_lost == 1
    retry = _trial(2, "retry", attempt=1)
    state.on_submitted("f2", retry)
    (_, trial), = state.on_results(["f2"])  # fmt: skip
    state.on_finished(_ended(trial, TrialState.LOST, "node died"), max_retries=1)
    assert state.finished == 1  # no retry follows the last attempt


def test_freed_workers_take_ready_proposals_before_the_results_are_told() -> None:
    state: LoopState[str] = LoopState(2, 10, start=0.0)
    _launch(state, range(1, 5), now=0.0)
    done = state.on_results(["f1"])
    assert state.refill(len(done), lookahead=2, asking=True) == (1, 4)  # 4 places counted
    assert state.refill(len(done), lookahead=2, asking=False) is None  # no asker: nothing ready
    assert state.refill(0, lookahead=2, asking=True) is None
    state.request_stop("SIGINT", 1.0)
    assert state.refill(len(done), lookahead=2, asking=True) is None


def test_without_work_the_loop_ends_or_waits_for_the_askers_first_proposals() -> None:
    state: LoopState[str] = LoopState(2, 3, start=0.0)
    assert state.move(0.0, asking=True, want=2) is Move.AWAIT_PROPOSALS
    assert state.move(0.0, asking=False, want=2) is Move.END  # asked in the driver: none came
    assert state.move(0.0, asking=True, want=0) is Move.END  # the budget is finished
    assert state.poll_seconds(asking=True, want=1) == 0.02 and state.poll_seconds(True, 0) == 0.5


def test_heartbeats_are_due_every_interval() -> None:
    state: LoopState[str] = LoopState(1, 3, start=100.0, heartbeat_every=10.0)
    assert [state.beat_due(t) for t in (105.0, 111.0, 115.0, 121.5)] == [False, True, False, True]


def test_a_whole_run_driven_by_hand_finishes_its_budget_and_ends() -> None:
    """A driver of a few lines: ask in order, every evaluation finishes on the next turn."""
    state: LoopState[str] = LoopState(2, 5, start=0.0)
    asked, now = 0, 0.0
    while True:
        now += 1.0
        turn = state.begin(now, lookahead=0, asking=False)
        if turn.ask:
            _launch(state, range(asked + 1, asked + 1 + turn.ask), now)
            asked += turn.ask
        if state.move(now, asking=False, want=turn.want) is Move.END:
            break
        for _, trial in state.on_results(list(state.inflight)[:1]):  # one result per turn
            state.on_finished(_ended(trial, TrialState.DONE), max_retries=0)
    assert asked == 5 and state.finished == 5 and state.result.n_done == 5
    assert state.result.trial_ids == [1, 2, 3, 4, 5] and state.result.max_queued == 0
