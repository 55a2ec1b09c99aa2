"""Proposals made ahead: the lookahead's size (``auto_lookahead``, ``AskPlan``) and its thread."""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from abo.core.trial import BOOKKEEPING, Trial

if TYPE_CHECKING:
    from abo.study.protocol import StudyLike as Study

AUTO_CAP = 2  # an automatic lookahead never exceeds this many times the workers
SATURATED = 2.0  # proposals this many times too slow for the results: queue nothing
QUEUE_LOAD = 0.1  # proposals busy this share of the time: queue even when each is cheap


def auto_lookahead(
    workers: int, ask_seconds: float, eval_seconds: float, gap_seconds: float = 0.0
) -> int:
    """Evaluations to queue ahead so that freed workers find a proposal waiting.

    Results arrive at ``workers / eval_seconds`` per second and each takes ``ask_seconds`` to
    replace, so about ``load = workers * ask_seconds / eval_seconds`` proposals are being made
    at any moment. A proposal under 1 % of an evaluation queues nothing while that load is
    under ``QUEUE_LOAD``: a freed worker waits at most that 1 %, and every proposal sees every
    result. With many workers the load passes it even for cheap proposals (32 workers, 1.25 s
    evaluations, ``thompson`` points of 0.009 s: load 0.23), the waits add up to that 1 % and
    more (utilization 0.97 without a queue there, 0.995 with one: ``docs/benchmarks.md``).
    Past it, one evaluation per worker waits on deck (the executor starts it the moment the
    worker is free), or twice the
    load when that is more, so bursts of results (durations vary; several workers free at
    once) find proposals ready (twice the load alone, 2 for the demo's 4 workers, left
    them waiting in bursts: ``docs/benchmarks.md``). ``gap_seconds`` is the driver's own
    time per trial (its durable tell and its submission), which a freed worker waits for
    when nothing is on deck: past 1 % of an evaluation it queues one per worker too.
    Capped at ``AUTO_CAP`` times the workers, where the queue's staleness costs more than the
    idle time it saves. Past ``SATURATED`` (proposals more than twice too slow to keep up)
    nothing is queued: such a queue never fills, and its trials only add busy points that make
    every later proposal slower (32 workers, ``believer``: utilization 0.24 without a queue,
    0.17 with one). The default strategy then proposes with ``thompson`` (the asks carry a
    pace), whose batches are cheap per point, measures a lower ``ask_seconds`` and gets its
    queue back.
    """
    if eval_seconds <= 0:
        return 0
    ratio = ask_seconds / eval_seconds
    load = workers * ratio
    if load > SATURATED:
        return 0
    if ratio < 0.01 and load < QUEUE_LOAD and gap_seconds / eval_seconds < 0.01:
        return 0
    return min(AUTO_CAP * workers, max(workers, math.ceil(2 * load)))


def _modelled(trial: Trial) -> bool:
    """Whether the study's strategy proposed the trial (not the initial design, a queue or a
    retry, which cost nothing and say nothing about the next proposals' cost)."""
    proposal = trial.proposal
    return proposal is not None and proposal.strategy not in BOOKKEEPING


class AskPlan:
    """What to ask ahead and when, from counts and measured times: the asker without I/O.

    It asks once ``batch`` (a quarter of ``lookahead``) places are free, not at every single
    one: a batch of proposals costs little more than one (Thompson's paths are drawn and
    climbed together), so the asks keep up with many fast workers while the queue still
    holds three quarters of the lookahead. When it falls behind, one point for each worker
    with nothing to start is asked for together, so slow proposals come in larger batches by
    themselves; otherwise a batch at a time, so that a greedy member (whose batch of ``k``
    points costs ``k``, its first point ready only with its last) does not keep a freed
    worker waiting for points it does not need yet (the quadratic example: 0.89 to 0.90).

    ``auto``: the lookahead follows the measured seconds per proposal, per evaluation and
    between evaluations (``auto_lookahead``), re-sized after every ask and every result, and
    each ask carries its pace (the mean evaluation over the workers: what a point may take
    before a worker waits), so the study may trade exact reproducibility for speed.
    """

    def __init__(self, workers: int, lookahead: int, n_trials: int, auto: bool = False) -> None:
        self.workers, self.n_trials, self.auto = workers, n_trials, auto
        self.lookahead = workers if auto else lookahead  # auto: the design's points on deck
        self.batch = max(1, self.lookahead // 4)
        self.ask_seconds: float | None = None  # per model proposal, smoothed
        self.durations: deque[float] = deque(maxlen=max(8, 4 * workers))  # recent evaluations
        self.gaps: deque[float] = deque(maxlen=max(8, 4 * workers))  # driver's time per trial
        self.designing = auto  # the asks return points no result changes (the design) so far
        self.ready: deque[Trial] = deque()
        self.inflight = 0
        self.finished = 0

    def deficit(self) -> int:
        """How many more trials to ask for now, 0 until a batch is due."""
        room = self.workers + self.lookahead - self.inflight - len(self.ready)
        budget = self.n_trials - self.finished - self.inflight - len(self.ready)
        want = min(room, budget)
        return want if want > 0 and want >= min(self.batch, budget) else 0

    def ask_size(self) -> int:
        """How many to ask for now that an ask is due: a batch, or more when more workers have
        nothing to start (a greedy member's batch of k points costs k; its first waits for
        the last)."""
        idle = self.workers - self.inflight - len(self.ready)
        return min(self.deficit(), max(self.batch, idle))

    def asked(self, trials: list[Trial], seconds: float) -> None:
        """``trials`` came from an ask of ``seconds``: they are ready, and the size follows."""
        self.ready.extend(trials)
        modelled = any(_modelled(t) for t in trials)
        if trials and modelled:  # the initial design is free
            per = seconds / len(trials)
            old = self.ask_seconds
            self.ask_seconds = per if old is None else 0.5 * old + 0.5 * per
        self.designing = bool(trials) and not modelled
        self.resize()

    def pace(self) -> float | None:
        """Seconds a point may take before a worker waits (``None``: not automatic, or no
        evaluation measured yet)."""
        if not self.auto or not self.durations:
            return None
        return max(1e-6, sum(self.durations) / len(self.durations) / self.workers)

    def observe(self, report: Mapping[str, Any]) -> bool:
        """Note how long a successful evaluation ran on its worker (for the automatic size);
        a failure that returns at once says nothing about what an evaluation costs. Whether
        it was noted."""
        started, finished = report.get("started"), report.get("finished")
        if not self.auto or report.get("status") != "ok":
            return False
        if not isinstance(started, float) or not isinstance(finished, float):
            return False
        self.durations.append(max(0.0, finished - started))
        self.resize()
        return True

    def overhead(self, seconds: float) -> None:
        """Note the driver's own time for one trial (its durable tell and its submission):
        what a freed worker waits for when nothing is on deck."""
        self.gaps.append(seconds)
        self.resize()

    @property
    def gap(self) -> float | None:
        """The driver's typical time per trial: the median of the recent ones, so that one
        slow write (the file's first commit, a busy disk for a moment) does not set the queue."""
        return statistics.median(self.gaps) if self.gaps else None

    def resize(self) -> None:
        """Re-size an automatic lookahead from the latest measurements.

        Before any model proposal is measured, the design's points cost nothing to ask; while
        the asks return such points (the initial design, enqueued ones), which no result can
        change, one per worker waits on deck, so no worker waits for the driver between them.
        """
        if not self.auto:
            return
        size = 0
        if self.durations:
            mean = sum(self.durations) / len(self.durations)
            size = auto_lookahead(self.workers, self.ask_seconds or 0.0, mean, self.gap or 0.0)
        if self.designing:
            size = max(size, self.workers)
        self.lookahead = size
        self.batch = max(1, size // 4)

    def release(self) -> None:
        """A finished trial's result is stored: its place may be refilled, by a proposal that
        sees it (``docs/benchmarks.md``, "Queued places refilled after the tells"). The next
        ``take`` sets the exact counts."""
        self.inflight = max(0, self.inflight - 1)
        self.finished += 1

    def take(self, free: int, inflight: int, finished: int) -> list[Trial]:
        """Up to ``free`` ready trials for the free workers (and update the counts)."""
        out = [self.ready.popleft() for _ in range(min(max(0, free), len(self.ready)))]
        self.inflight = inflight + len(out)
        self.finished = finished
        return out


class _Asker:
    """Keeps the executor's queue filled with proposals, asking in a background thread; what
    and when to ask is its ``AskPlan``'s, read and changed under one lock."""

    def __init__(
        self,
        study: Study,
        workers: int,
        lookahead: int,
        n_trials: int,
        info: dict[str, Any],
        auto: bool = False,
    ) -> None:
        self.study, self.workers, self.info = study, workers, info
        self.plan = AskPlan(workers, lookahead, n_trials, auto)
        self.cond = threading.Condition()
        self.halted = False
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="abo-asker", daemon=False)
        self.thread.start()

    @property
    def lookahead(self) -> int:
        """Evaluations to queue at the executor beyond the workers, as now sized."""
        return self.plan.lookahead

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self.halted and self.plan.deficit() <= 0:
                    self.cond.wait()
                if self.halted:
                    return
                want, pace = self.plan.ask_size(), self.plan.pace()
            try:
                t0 = time.perf_counter()
                if pace is None:
                    trials = self.study.ask_batch(want, n_workers=self.workers, info=self.info)
                else:
                    trials = self.study.ask_batch(
                        want, n_workers=self.workers, info=self.info, pace=pace
                    )
                seconds = time.perf_counter() - t0
            except BaseException as exc:  # noqa: BLE001 - handed to the driver, raised there
                with self.cond:
                    self.error = exc
                    self.cond.notify_all()
                return
            with self.cond:
                self.plan.asked(trials, seconds)
                self.cond.notify_all()

    def observe(self, report: Mapping[str, Any]) -> None:
        """Note a finished evaluation's time (``AskPlan.observe``)."""
        with self.cond:
            if self.plan.observe(report):
                self.cond.notify_all()

    def overhead(self, seconds: float) -> None:
        """Note the driver's own time for one trial (``AskPlan.overhead``)."""
        with self.cond:
            self.plan.overhead(seconds)

    def release(self) -> None:
        """A finished trial's result is stored: its place may be refilled."""
        with self.cond:
            self.plan.release()
            self.cond.notify_all()

    def take(self, free: int, inflight: int, finished: int) -> list[Trial]:
        """Up to ``free`` ready trials for the free workers (and update the counts); raises
        what the asking thread raised."""
        with self.cond:
            if self.error is not None:
                raise self.error
            out = self.plan.take(free, inflight, finished)
            self.cond.notify_all()
            return out

    def wait_ready(self, timeout: float) -> None:
        """Block until a trial is ready, the thread failed, or ``timeout`` passed."""
        with self.cond:
            self.cond.wait_for(lambda: self.plan.ready or self.error is not None, timeout)

    def halt(self) -> None:
        """Ask for nothing more (a running ask finishes)."""
        with self.cond:
            self.halted = True
            self.cond.notify_all()

    def close(self) -> list[Trial]:
        """Stop the thread; the trials that were asked but never taken."""
        self.halt()
        self.thread.join()
        with self.cond:
            left = list(self.plan.ready)
            self.plan.ready.clear()
            return left
