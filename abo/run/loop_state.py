"""The loop's decisions without I/O: how many to ask, what to withdraw or time out, when to stop.

In the spirit of Dask's worker state machine: the driver (``abo.run.loop_driver``) tells a
``LoopState`` what happened (a turn began at some time, evaluations were submitted, results
came back, a signal arrived, a trial was stored) and does what it answers (ask so many, wait
for results or for proposals, withdraw these, cancel those, beat, end). It never reads a
clock, touches an executor or a storage, so its tests need no Dask, threads or sleeps.
Evaluations are known by opaque hashable keys (``K``) (the executor's futures, for the driver).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from abo.analysis.summary import proposal_source
from abo.core.trial import Trial
from abo.run.optimize_result import FailureGuard, OptimizeResult

K = TypeVar("K")  # how the driver knows an evaluation (its executor's future)


class Stop:
    """Why and until when the run drains: SIGINT/SIGTERM (first: drain; second: stop now), the
    run's timeout or the failure guard."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.deadline: float | None = None
        self.hard = False

    def request(self, reason: str, grace: float, now: float) -> None:
        """Stop submitting and wait up to ``grace`` for running trials; a second request
        stops at once."""
        if self.reason is None:
            self.reason = reason
            self.deadline = now + grace
        else:
            self.hard = True


@dataclass
class Slot:
    """A submitted, unfinished evaluation: its trial, and when it reached the head of the
    queue (the first ``workers`` submissions, taken as running), ``None`` while queued."""

    trial: Trial
    started: float | None = None


class Move(enum.Enum):
    """What the driver does after a turn's asks and launches."""

    END = "end"  # leave the loop: nothing left to run, or the stop's grace is over
    AWAIT_PROPOSALS = "await proposals"  # nothing running yet: wait for the first proposals
    AWAIT_RESULTS = "await results"  # wait for evaluations to finish, then record them


@dataclass(frozen=True)
class Turn:
    """The start of one turn: the places to fill (``want``, maybe <= 0), how many to ask for
    now (``ask``, 0 for none) and whether to halt the asker and withdraw queued evaluations."""

    want: int
    ask: int
    halt: bool


class LoopState(Generic[K]):
    """The loop's bookkeeping and decisions: evaluations in flight (in submission order),
    trials finished against the budget, the stop, the heartbeat and the run's tally."""

    def __init__(
        self,
        workers: int,
        n_trials: int,
        start: float,
        *,
        timeout: float | None = None,
        trial_timeout: float | None = None,
        guard: FailureGuard | None = None,
        grace: float = 30.0,
        heartbeat_every: float = 60.0,
    ) -> None:
        self.workers, self.n_trials, self.start = workers, n_trials, start
        self.timeout, self.trial_timeout, self.guard = timeout, trial_timeout, guard
        self.grace, self.heartbeat_every = grace, heartbeat_every
        self.inflight: dict[K, Slot] = {}
        self.finished = 0  # trials finished that count against the budget
        self.stop = Stop()
        self.last_beat = start
        self.result = OptimizeResult(n_workers=workers)

    @property
    def stopping(self) -> bool:
        """Whether a stop was requested: nothing more is asked or submitted."""
        return self.stop.reason is not None

    def request_stop(self, reason: str, now: float) -> None:
        """Stop for ``reason`` (a second request: stop at once)."""
        self.stop.request(reason, self.grace, now)

    def on_signal(self, name: str, now: float) -> bool:
        """SIGINT or SIGTERM arrived; whether it was the first (drain) rather than a second
        (stop now)."""
        if self.stop.reason is not None:
            self.stop.hard = True
            return False
        self.request_stop(name, now)
        return True

    def capacity(self, lookahead: int) -> int:
        """Evaluations handed to the executor at once."""
        return self.workers + lookahead

    def begin(self, now: float, lookahead: int, asking: bool) -> Turn:
        """A turn begins at ``now``: stop past the run's timeout; how many places to fill."""
        if self.timeout is not None and now - self.start > self.timeout and not self.stopping:
            self.request_stop("timeout", now)
        left = self.n_trials - self.finished - len(self.inflight)
        want = min(self.capacity(lookahead) - len(self.inflight), left)
        stopping = self.stopping
        return Turn(
            want=want, ask=want if want > 0 and not stopping else 0, halt=asking and stopping
        )

    def queued(self) -> list[K]:
        """The evaluations waiting in the executor's queue (beyond the first ``workers``)."""
        return list(self.inflight)[self.workers :]

    def on_withdrawn(self, key: K) -> Trial:
        """A queued evaluation was withdrawn before it started: its trial."""
        return self.inflight.pop(key).trial

    def on_submitted(self, key: K, trial: Trial) -> None:
        """``trial``'s evaluation was handed to the executor as ``key``."""
        self.inflight[key] = Slot(trial)
        self.result.trial_ids.append(trial.id)
        source = proposal_source(trial)
        self.result.sources[source] = self.result.sources.get(source, 0) + 1

    def on_launched(self, now: float) -> None:
        """A launch (of any number of submissions) ended at ``now``."""
        self.result.max_queued = max(self.result.max_queued, len(self.inflight) - self.workers)
        self.start_clocks(now)

    def start_clocks(self, now: float) -> None:
        """Start the timeout clock of the first ``workers`` evaluations (taken as running)."""
        for key in list(self.inflight)[: self.workers]:
            slot = self.inflight[key]
            if slot.started is None:
                slot.started = now

    def move(self, now: float, asking: bool, want: int) -> Move:
        """After the turn's launches: end, wait for the asker's first proposals, or for results."""
        if not self.inflight:
            if not asking or self.stopping or want <= 0:
                return Move.END
            return Move.AWAIT_PROPOSALS
        if self.stop.hard or (self.stop.deadline is not None and now > self.stop.deadline):
            return Move.END
        return Move.AWAIT_RESULTS

    def poll_seconds(self, asking: bool, want: int) -> float:
        """How long to wait for results: look again soon with free workers and proposals on
        their way."""
        return 0.02 if asking and want > 0 else 0.5

    def on_results(self, keys: Iterable[K]) -> list[tuple[K, Trial]]:
        """These evaluations finished (their results not yet recorded): they leave the flight."""
        return [(key, self.inflight.pop(key).trial) for key in keys]

    def refill(self, n_done: int, lookahead: int, asking: bool) -> tuple[int, int] | None:
        """``n_done`` evaluations just finished: how many ready proposals the freed workers
        take before the results are recorded, and the flight the asker should count (the
        finished ones hold their places until each is told, so the proposal that refills a
        place sees its result); ``None`` when there is nothing to take."""
        if not n_done or not asking or self.stopping:
            return None
        left = self.n_trials - self.finished - n_done - len(self.inflight)
        free = min(self.capacity(lookahead) - len(self.inflight), left)
        return free, len(self.inflight) + n_done

    def on_finished(self, stored: Trial, max_retries: int) -> None:
        """A trial reached its stored end state: tally it (a retried loss uses no budget)."""
        self.finished += self.result.tally(stored, max_retries)

    def expired(self, now: float) -> list[tuple[K, Trial]]:
        """The running evaluations past ``trial_timeout`` at ``now``: they leave the flight (the
        driver cancels them and fails their trials)."""
        if self.trial_timeout is None:
            return []
        out = []
        for key, slot in list(self.inflight.items()):
            if slot.started is not None and now - slot.started > self.trial_timeout:
                del self.inflight[key]
                out.append((key, slot.trial))
        return out

    def check_guard(self, now: float) -> None:
        """Stop when the failure guard trips on the trials finished so far."""
        if self.guard is None or self.stopping:
            return
        if self.guard.tripped(self.result.n_done, self.result.n_failed):
            self.request_stop("failure rate", now)

    def beat_due(self, now: float) -> bool:
        """Whether to renew the running trials' leases now (and note that it was done)."""
        if now - self.last_beat > self.heartbeat_every:
            self.last_beat = now
            return True
        return False

    def running(self) -> list[Trial]:
        """The trials of the evaluations in flight (running or queued)."""
        return [slot.trial for slot in self.inflight.values()]

    def unfinished(self) -> list[tuple[K, Trial]]:
        """On the way out: what is still in flight, to cancel and mark lost."""
        return [(key, slot.trial) for key, slot in self.inflight.items()]
