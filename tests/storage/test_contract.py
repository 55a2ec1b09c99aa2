"""The storage contract, on every backend: memory, a SQLite file, PostgreSQL (``backend``).

The transitions themselves are ``abo.storage.lifecycle``'s; these tests hold every backend to the
same
answers, including under concurrent writers.
"""

from __future__ import annotations

import threading

import pytest

from abo import AboError, StudyNotFoundError, TrialState, TrialStateError
from abo.core.exceptions import DuplicatedStudyError, TrialNotFoundError
from abo.spec.study_spec import StudySpec
from abo.storage import NewTrial, QueuedPoint, StudyRecord, lifecycle

from .conftest import Backend, points, record, v


def test_study_records_round_trip(backend: Backend) -> None:
    store = backend.store
    created = store.create_study(record("a", n_initial=5, max_retries=3, noise="deterministic"))
    assert created.id > 0 and created.created_at == backend.clock.now
    other = backend.reopen()
    loaded = other.load_study("a")
    assert loaded == created
    assert loaded.spec.n_initial == 5 and loaded.spec.noise == "deterministic"
    with pytest.raises(DuplicatedStudyError, match="name"):
        store.create_study(record("a"))
    assert [s.name for s in other.list_studies()] == ["a"]


def test_ids_are_one_to_n_without_gaps(backend: Backend) -> None:
    store = backend.store
    study = store.create_study(record())
    lifecycle.start(store, study, points(3), [None] * 3)
    lifecycle.add_done(store, study, points(1, 50)[0], v(0.5), None, {})
    lifecycle.enqueue(store, study, QueuedPoint(points(1, 60)[0]))
    lifecycle.enqueue(store, study, QueuedPoint(points(1, 61)[0]))
    queued = lifecycle.start_queued(store, study, 5, {})
    assert [t.params for t in queued] == [points(1, 60)[0], points(1, 61)[0]]
    assert [t.proposal.strategy for t in queued] == ["enqueued", "enqueued"]
    with pytest.raises(TrialNotFoundError):
        lifecycle.finish(
            store, study, 42, TrialState.DONE, v(1.0)
        )  # a rolled-back write takes no id
    lifecycle.start(store, study, points(2, 70), [None] * 2)
    assert [t.id for t in store.trials(study)] == list(range(1, 9))
    assert store.count(study) == 8


def test_ids_stay_gap_free_under_concurrent_writers(backend: Backend) -> None:
    store = backend.store
    study = store.create_study(record())
    handles = [store if k % 2 else backend.reopen() for k in range(4)]  # threads and handles
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(8):
                lifecycle.start(handles[k], study, points(1, 10 * k + i), [None], {"thread": k})
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    trials = store.trials(study)
    assert [t.id for t in trials] == list(range(1, 33))
    assert sorted(t.info["thread"] for t in trials) == sorted(list(range(4)) * 8)


def test_a_tell_races_stored_exactly_once(backend: Backend) -> None:
    """Eight writers tell the same trial at once, half of them another value: one value wins,
    every writer of that value gets it back, every other one a TrialStateError."""
    store = backend.store
    study = store.create_study(record())
    (trial,) = lifecycle.start(store, study, points(1), [None])
    results: list[object] = [None] * 8
    start = threading.Barrier(8)

    def tell(k: int) -> None:
        handle = store if k % 2 else backend.reopen()
        start.wait()
        try:
            results[k] = lifecycle.finish(handle, study, trial.id, TrialState.DONE, v(float(k % 2)))
        except TrialStateError as exc:
            results[k] = exc

    threads = [threading.Thread(target=tell, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stored = store.trial(study, trial.id)
    won = stored.value
    for k, result in enumerate(results):
        if float(k % 2) == won:
            assert result == stored
        else:
            assert isinstance(result, TrialStateError)


def test_each_study_numbers_its_own_trials(backend: Backend) -> None:
    store = backend.store
    a = store.create_study(record("a"))
    b = store.create_study(record("b"))
    lifecycle.start(store, a, points(2), [None] * 2)
    lifecycle.start(store, b, points(3), [None] * 3)
    assert [t.id for t in store.trials(a)] == [1, 2]
    assert [t.id for t in store.trials(b)] == [1, 2, 3]


def test_tells_are_visible_from_a_second_handle(backend: Backend) -> None:
    store = backend.store
    study = store.create_study(record())
    t1, t2 = lifecycle.start(store, study, points(2), [None] * 2)
    other = backend.reopen()
    seen = other.load_study("s")
    assert [t.state for t in other.trials(seen)] == [TrialState.RUNNING] * 2
    lifecycle.finish(store, study, t1.id, TrialState.DONE, v(0.25), user={"k": 1}, info={"w": "a"})
    got = other.trial(seen, t1.id)
    assert got.state is TrialState.DONE and got.value == 0.25 and got.values == v(0.25)
    assert got.user == {"k": 1} and got.info == {"w": "a"}
    lifecycle.finish(other, seen, t2.id, TrialState.FAILED, reason="boom")
    assert store.trial(study, t2.id).reason == "boom"


def test_several_objectives_are_stored_by_name(backend: Backend) -> None:
    from abo.core.outcomes import parse_outcomes

    spec = StudySpec(
        space=record().space, outcomes=parse_outcomes({"a": "minimize", "b": "maximize"}), seed=1
    )
    store = backend.store
    study = store.create_study(StudyRecord("multi", spec))
    assert backend.reopen().load_study("multi").spec == spec
    (t,) = lifecycle.start(store, study, points(1), [None])
    done = lifecycle.finish(store, study, t.id, TrialState.DONE, {"a": 1.5, "b": -2.0})
    assert done.values == {"a": 1.5, "b": -2.0} and done.value is None
    assert lifecycle.finish(store, study, t.id, TrialState.DONE, {"b": -2.0, "a": 1.5}) == done
    with pytest.raises(TrialStateError, match="refusing a different value"):
        lifecycle.finish(store, study, t.id, TrialState.DONE, {"a": 1.5, "b": 0.0})


def test_finish_is_idempotent_for_an_identical_repeat(backend: Backend) -> None:
    store = backend.store
    study = store.create_study(record())
    (t,) = lifecycle.start(store, study, points(1), [None])
    first = lifecycle.finish(store, study, t.id, TrialState.DONE, v(1.5))
    assert lifecycle.finish(store, study, t.id, TrialState.DONE, v(1.5)) == first
    with pytest.raises(TrialStateError, match="value"):
        lifecycle.finish(store, study, t.id, TrialState.DONE, v(2.5))
    with pytest.raises(TrialStateError):
        lifecycle.finish(store, study, t.id, TrialState.FAILED, reason="x")
    with pytest.raises(TrialStateError, match="state"):
        lifecycle.finish(store, study, t.id, TrialState.LOST)
    assert store.trial(study, t.id) == first


def test_trials_filter_by_state(backend: Backend) -> None:
    store = backend.store
    study = store.create_study(record())
    a, b, c, d = lifecycle.start(store, study, points(4), [None] * 4)
    lifecycle.finish(store, study, a.id, TrialState.DONE, v(1.0))
    lifecycle.finish(store, study, b.id, TrialState.FAILED, reason="r")
    lifecycle.lose(store, study, c.id, "worker died")

    def ids(states: list[TrialState] | None) -> list[int]:
        return [t.id for t in store.trials(study, states)]

    assert ids([TrialState.DONE]) == [a.id]
    assert ids([TrialState.FAILED]) == [b.id]
    assert ids([TrialState.LOST]) == [c.id]
    assert ids([TrialState.RUNNING]) == [d.id]
    assert ids([TrialState.DONE, TrialState.RUNNING]) == [a.id, d.id]
    assert ids(None) == [a.id, b.id, c.id, d.id]
    assert store.trial(study, c.id).reason == "worker died"


def test_returned_trials_are_snapshots(backend: Backend) -> None:
    store = backend.store
    study = store.create_study(record())
    (t,) = lifecycle.start(store, study, points(1), [None])
    lifecycle.finish(store, study, t.id, TrialState.DONE, v(3.0))
    assert t.state is TrialState.RUNNING and t.value is None


def test_reap_marks_expired_trials_lost_once_and_requeues(backend: Backend) -> None:
    store = backend.store
    study = store.create_study(record(lease_seconds=10.0, max_retries=1))
    a, b = lifecycle.start(store, study, points(2), [None] * 2)
    assert lifecycle.reap(store, study) == []
    backend.clock.advance(9.0)
    assert lifecycle.reap(store, study) == []
    backend.clock.advance(2.0)
    lost = lifecycle.reap(store, study)
    assert [t.id for t in lost] == [a.id, b.id]
    assert all(t.state is TrialState.LOST and t.reason == "lease expired" for t in lost)
    assert lifecycle.reap(backend.reopen(), study) == []  # exactly once, whoever reaps
    assert [(q.params, q.retry_of, q.attempt) for q in store.queued(study)] == [
        (a.params, a.id, 1),
        (b.params, b.id, 1),
    ]
    retries = lifecycle.start_queued(store, study, 2, {})
    assert [t.proposal.strategy for t in retries] == ["retry", "retry"]
    backend.clock.advance(11.0)
    assert len(lifecycle.reap(store, study)) == 2 and store.queued(study) == []  # no second retry


def test_heartbeat_only_for_running_trials(backend: Backend) -> None:
    store = backend.store
    study = store.create_study(record(lease_seconds=100.0))
    (t,) = lifecycle.start(store, study, points(1), [None])
    backend.clock.advance(50.0)
    beat = lifecycle.heartbeat(store, study, t.id)
    assert beat.lease_expires_at == t.lease_expires_at + 50.0
    lifecycle.finish(store, study, t.id, TrialState.DONE, v(0.0))
    with pytest.raises(TrialStateError, match="trial_id"):
        lifecycle.heartbeat(store, study, t.id)


def test_delete_study_removes_it_with_its_trials_and_queue(backend: Backend) -> None:
    store = backend.store
    doomed = store.create_study(record("doomed"))
    kept = store.create_study(record("kept"))
    lifecycle.start(store, doomed, points(3), [None] * 3)
    lifecycle.enqueue(store, doomed, QueuedPoint(points(1)[0]))
    lifecycle.start(store, kept, points(2), [None] * 2)
    store.delete_study("doomed")
    with pytest.raises(StudyNotFoundError, match="doomed"):
        store.load_study("doomed")
    assert [s.name for s in store.list_studies()] == ["kept"]
    assert store.count(kept) == 2
    with pytest.raises(StudyNotFoundError):
        store.delete_study("doomed")
    again = store.create_study(record("doomed"))
    assert store.trials(again) == [] and store.queued(again) == []


@pytest.mark.parametrize("trial_id", [0, -1, 2**31, 2**40, 2**70])
def test_ids_outside_the_column_range_are_simply_not_found(backend: Backend, trial_id: int) -> None:
    store = backend.store
    study = store.create_study(record())
    lifecycle.start(store, study, points(1), [None])
    with pytest.raises(TrialNotFoundError, match="trial_id"):
        store.trial(study, trial_id)
    with pytest.raises(TrialNotFoundError, match="trial_id"):
        lifecycle.finish(store, study, trial_id, TrialState.DONE, v(1.0))
    with pytest.raises(TrialNotFoundError, match="trial_id"):
        lifecycle.heartbeat(store, study, trial_id)
    assert [t.state for t in store.trials(study)] == [TrialState.RUNNING]


# -- a record is checked before use ---------------------------------------------------------------
def test_a_deleted_study_is_not_found_by_holders_of_its_record(backend: Backend) -> None:
    store = backend.store
    study = store.create_study(record("gone"))
    lifecycle.start(store, study, points(2), [None] * 2)
    backend.reopen().delete_study("gone")  # another process
    for call in (
        lambda: store.trials(study),
        lambda: store.count(study),
        lambda: lifecycle.start(store, study, points(1), [None]),
        lambda: lifecycle.finish(store, study, 1, TrialState.DONE, v(1.0)),
        lambda: lifecycle.enqueue(store, study, QueuedPoint(points(1)[0])),
    ):
        with pytest.raises(StudyNotFoundError, match="name: study 'gone' was deleted since"):
            call()


def test_a_study_created_again_under_its_name_is_not_the_old_record(backend: Backend) -> None:
    """SQLite reuses the deleted row's id: the creation time tells the two studies apart."""
    store = backend.store
    old = store.create_study(record("again"))
    lifecycle.start(store, old, points(3), [None] * 3)
    other = backend.reopen()
    other.delete_study("again")
    backend.clock.advance(1.0)
    new = other.create_study(record("again", direction="maximize"))
    with pytest.raises(StudyNotFoundError, match="deleted and created again"):
        lifecycle.start(store, old, points(2), [None] * 2)
    with pytest.raises(StudyNotFoundError, match="load it again"):
        store.trials(old)
    assert other.trials(new) == []  # nothing of the old study leaked into the new one
    assert store.load_study("again").direction == "maximize"
    with pytest.raises(StudyNotFoundError):
        store.delete_study("again", expected=old)  # deleting the old record spares the new
    assert other.load_study("again") == new


# -- the lifecycle, through every backend -------------------------------------------------------
def test_lose_refuses_finished_trials_and_fail_refuses_lost_ones(backend: Backend) -> None:
    store = backend.store
    study = store.create_study(record())
    done, failed, lost = lifecycle.start(store, study, points(3), [None] * 3)
    lifecycle.finish(store, study, done.id, TrialState.DONE, v(1.0))
    lifecycle.finish(store, study, failed.id, TrialState.FAILED, reason="diverged")
    lifecycle.lose(store, study, lost.id, "worker died")
    for trial_id, state in ((done.id, "done"), (failed.id, "failed")):
        with pytest.raises(TrialStateError, match=f"trial_id: trial {trial_id} is already {state}"):
            lifecycle.lose(store, study, trial_id, "late")
    with pytest.raises(TrialStateError, match=f"trial {lost.id} is already lost"):
        lifecycle.finish(store, study, lost.id, TrialState.FAILED, reason="late failure")
    assert lifecycle.lose(store, study, lost.id, "again").reason == "worker died"  # a repeat: no-op
    states = [(t.state, t.reason) for t in store.trials(study)]
    assert states == [
        (TrialState.DONE, None),
        (TrialState.FAILED, "diverged"),
        (TrialState.LOST, "worker died"),
    ]
    assert len(store.queued(study)) == 1  # the one retry, not two
    late = lifecycle.finish(
        store, study, lost.id, TrialState.DONE, v(7.0)
    )  # its late result is kept
    assert late.state is TrialState.LOST and late.values == v(7.0) and late.info["late"] is True


def test_unique_enqueue_and_add_skip_what_the_study_has(backend: Backend) -> None:
    store = backend.store
    study = store.create_study(record())
    p, q = points(2)
    assert lifecycle.enqueue(store, study, QueuedPoint(p), unique=True)
    assert not lifecycle.enqueue(store, study, QueuedPoint(p), unique=True)  # queued already
    (started,) = lifecycle.start_queued(store, study, 1, {})
    assert not lifecycle.enqueue(
        store, study, QueuedPoint(p), unique=True
    )  # a running trial has it
    lifecycle.lose(store, study, started.id, "worker died")  # its retry is queued...
    assert not lifecycle.enqueue(store, study, QueuedPoint(p), unique=True)  # ...so it is still had
    assert lifecycle.enqueue(store, study, QueuedPoint(p), unique=False)  # on purpose: a duplicate
    assert len(store.queued(study)) == 2
    first = lifecycle.add_done(store, study, q, v(0.5), None, {}, unique=True)
    assert lifecycle.add_done(store, study, q, v(0.5), None, {}, unique=True) == first
    other_value = lifecycle.add_done(
        store, study, q, v(0.7), None, {}, unique=True
    )  # a new observation
    assert other_value.id != first.id
    assert lifecycle.add_done(store, study, q, v(0.5), None, {}, unique=False).id not in (
        first.id,
        other_value.id,
    )
    assert sum(t.params == q for t in store.trials(study)) == 3


def test_a_failed_transaction_changes_nothing(backend: Backend) -> None:
    store = backend.store
    study = store.create_study(record())
    lifecycle.start(store, study, points(2), [None] * 2)
    before = (store.trials(study), store.queued(study))
    with pytest.raises(RuntimeError), store.transaction(study) as tx:
        tx.insert([NewTrial(points(1, 9)[0])])
        tx.enqueue(QueuedPoint(points(1, 8)[0]))
        raise RuntimeError("abandon the transaction")
    assert (store.trials(study), store.queued(study)) == before


# -- intermediate values and the stopped state --------------------------------------------------
def test_reports_are_stored_in_step_order_and_seen_from_a_second_handle(backend: Backend) -> None:
    store = backend.store
    study = store.create_study(record())
    a, b = lifecycle.start(store, study, points(2), [None] * 2)
    for step, value in ((1, 0.9), (2, 0.7), (5, 0.4)):
        lifecycle.report(store, study, a.id, step, value)
    lifecycle.report(store, study, b.id, 1, 0.8)
    other = backend.reopen()
    got = other.reports(other.load_study("s"))
    assert [(r.step, r.value) for r in got[a.id]] == [(1.0, 0.9), (2.0, 0.7), (5.0, 0.4)]
    assert [(r.step, r.value) for r in got[b.id]] == [(1.0, 0.8)]
    assert got[a.id][0].at == backend.clock.now
    assert list(store.reports(study, [b.id])) == [b.id]
    lifecycle.report(store, study, b.id, 3, 0.5)  # the first handle's cache sees the new row
    assert [r.step for r in other.reports(study)[b.id]] == [1.0, 3.0]
    assert [r.step for r in store.reports(study)[b.id]] == [1.0, 3.0]


def test_a_report_renews_the_lease_and_a_repeat_changes_nothing(backend: Backend) -> None:
    store = backend.store
    study = store.create_study(record(lease_seconds=100.0))
    (t,) = lifecycle.start(store, study, points(1), [None])
    backend.clock.advance(60)
    trial, stop = lifecycle.report(store, study, t.id, 1, 0.5)
    assert not stop and trial.lease_expires_at == backend.clock.now + 100.0
    backend.clock.advance(60)  # past the first lease: the report kept it alive
    assert lifecycle.reap(store, study) == []
    assert lifecycle.report(store, study, t.id, 1, 0.5)[1] is False  # identical: a no-op
    assert len(store.reports(study)[t.id]) == 1


def test_bad_reports_are_refused_and_store_nothing(backend: Backend) -> None:
    store = backend.store
    study = store.create_study(record())
    t, done = lifecycle.start(store, study, points(2), [None] * 2)
    lifecycle.report(store, study, t.id, 2, 0.5)
    with pytest.raises(AboError, match="step: trial 1 already reported step 2; steps must"):
        lifecycle.report(store, study, t.id, 1, 0.4)
    with pytest.raises(TrialStateError, match="already reported 0.5 at step 2"):
        lifecycle.report(store, study, t.id, 2, 0.3)
    lifecycle.finish(store, study, done.id, TrialState.DONE, v(0.1))
    with pytest.raises(TrialStateError, match="already done; only a running trial reports"):
        lifecycle.report(store, study, done.id, 1, 0.1)
    with pytest.raises(TrialNotFoundError):
        lifecycle.report(store, study, 99, 1, 0.1)
    assert {k: len(r) for k, r in store.reports(study).items()} == {t.id: 1}


def test_a_stopped_trial_keeps_its_last_value_and_later_tells_only_add_bookkeeping(
    backend: Backend,
) -> None:
    store = backend.store
    study = store.create_study(record())
    (t,) = lifecycle.start(store, study, points(1), [None])

    class StopAtTwo:
        def decide(self, trial_id, reports, sign):  # type: ignore[no-untyped-def]
            from abo.core.stopping import Decision

            return Decision(reports[trial_id][-1].step >= 2, "stopped by test")

    assert lifecycle.report(store, study, t.id, 1, 0.9, StopAtTwo())[1] is False
    stopped, stop = lifecycle.report(store, study, t.id, 2, 0.7, StopAtTwo())
    assert stop and stopped.state is TrialState.STOPPED and stopped.state.is_finished
    assert stopped.value == 0.7 and stopped.values == v(0.7) and stopped.reason == "stopped by test"
    assert stopped.finished_at == backend.clock.now and stopped.lease_expires_at is None
    # the run ends after the decision: what it says then is kept beside, never instead
    assert lifecycle.report(store, study, t.id, 3, 0.6, StopAtTwo())[1] is True
    told = lifecycle.finish(store, study, t.id, TrialState.DONE, v(0.1), info={"worker": "w1"})
    assert told.state is TrialState.STOPPED and told.value == 0.7 and told.info["worker"] == "w1"
    failed = lifecycle.finish(store, study, t.id, TrialState.FAILED, reason="SIGTERM")
    assert failed.state is TrialState.STOPPED and failed.reason == "stopped by test"
    assert lifecycle.lose(store, study, t.id, "cancelled").state is TrialState.STOPPED
    assert len(store.reports(study)[t.id]) == 2  # the report after the stop was not stored
    assert store.queued(study) == []  # nothing re-queued: a stopped trial is not lost


def test_deleting_a_study_removes_its_reports(backend: Backend) -> None:
    store = backend.store
    doomed = store.create_study(record("doomed"))
    (t,) = lifecycle.start(store, doomed, points(1), [None])
    lifecycle.report(store, doomed, t.id, 1, 0.5)
    store.delete_study("doomed")
    again = store.create_study(record("doomed"))
    (u,) = lifecycle.start(store, again, points(1), [None])
    assert u.id == t.id and store.reports(again) == {}
