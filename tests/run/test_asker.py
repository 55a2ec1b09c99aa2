"""What the asker asks for and when (``abo.run.asker.AskPlan``), without its thread or a study."""

from __future__ import annotations

from abo.core.trial import ProposalRecord, Trial, TrialState
from abo.run.asker import AskPlan, auto_lookahead


def _trials(n: int, strategy: str) -> list[Trial]:
    return [Trial(i, "s", {"x": 0.0}, TrialState.RUNNING, proposal=ProposalRecord(strategy))
            for i in range(1, n + 1)]  # fmt: skip


def test_a_fixed_lookahead_asks_a_batch_at_a_time_within_the_budget() -> None:
    plan = AskPlan(workers=4, lookahead=8, n_trials=100)
    assert plan.batch == 2 and plan.deficit() == 12  # the workers and the queue, all free
    plan.asked(_trials(11, "ei"), seconds=1.0)
    assert plan.deficit() == 0  # one free place: less than a batch
    plan.asked(_trials(1, "ei"), seconds=0.1)
    assert len(plan.take(4, inflight=0, finished=0)) == 4 and plan.inflight == 4
    assert plan.deficit() == 0  # the workers run four, eight wait: all places taken
    plan.take(0, inflight=2, finished=2)  # two finished and were told
    assert plan.deficit() == 2 and plan.ask_size() == 2
    plan = AskPlan(workers=4, lookahead=8, n_trials=3)
    assert plan.deficit() == 3  # the budget's last trials, fewer than a batch
    plan.asked(_trials(2, "ei"), seconds=0.1)
    assert plan.deficit() == 1


def test_idle_workers_get_a_point_each_in_one_ask() -> None:
    plan = AskPlan(workers=8, lookahead=4, n_trials=100)
    assert plan.batch == 1 and plan.ask_size() == 8  # eight workers with nothing to start
    plan.take(0, inflight=7, finished=0)
    assert plan.ask_size() == 1


def test_release_frees_a_place_before_the_next_take_sets_the_counts() -> None:
    plan = AskPlan(workers=2, lookahead=0, n_trials=3)
    plan.take(0, inflight=2, finished=0)
    assert plan.deficit() == 0
    plan.release()
    assert (plan.inflight, plan.finished, plan.deficit()) == (1, 1, 1)


def test_the_automatic_size_keeps_the_design_on_deck_then_follows_the_times() -> None:
    plan = AskPlan(workers=4, lookahead=0, n_trials=100, auto=True)
    assert plan.lookahead == 4 and plan.pace() is None
    plan.asked(_trials(4, "sobol"), seconds=0.0)
    assert plan.designing and plan.lookahead == 4 and plan.ask_seconds is None
    assert not plan.observe({"status": "failed", "started": 0.0, "finished": 0.1})
    assert plan.observe({"status": "ok", "started": 0.0, "finished": 2.0})
    assert plan.pace() == 0.5  # a mean evaluation over the workers
    plan.asked(_trials(2, "thompson"), seconds=1.0)  # 0.5 s a point: a load of 1
    assert not plan.designing and plan.ask_seconds == 0.5
    assert plan.lookahead == auto_lookahead(4, 0.5, 2.0) == 4 and plan.batch == 1
    plan.overhead(0.1)
    plan.overhead(0.2)
    assert plan.gap is not None and abs(plan.gap - 0.15) < 1e-12


def test_one_slow_tell_does_not_queue_cheap_proposals() -> None:
    """The driver's time per trial is a median: one slow write among fast ones queues nothing,
    a driver slow at every trial queues one per worker."""
    plan = AskPlan(workers=3, lookahead=0, n_trials=100, auto=True)
    plan.asked(_trials(3, "sobol"), seconds=0.0)
    plan.observe({"status": "ok", "started": 0.0, "finished": 1.0})
    plan.asked(_trials(3, "random"), seconds=0.003)
    for seconds in (0.5, 0.001, 0.001):
        plan.overhead(seconds)
    assert plan.gap == 0.001 and plan.lookahead == 0
    for _ in range(4):
        plan.overhead(0.05)
    assert plan.lookahead == 3


def test_a_fixed_lookahead_ignores_the_times_and_gives_no_pace() -> None:
    plan = AskPlan(workers=2, lookahead=3, n_trials=10)
    assert not plan.observe({"status": "ok", "started": 0.0, "finished": 5.0})
    plan.asked(_trials(1, "ei"), seconds=9.0)
    assert plan.lookahead == 3 and plan.pace() is None
