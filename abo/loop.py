"""The asynchronous driver: keep every worker busy, tell → ask → submit the moment one returns.

The loop does the I/O (executor, clock, signals); the study decides what to run. It uses only
the study's public ask/tell surface, so it drives a remote study exactly like a local one.

What it promises:

* every worker busy: when a result returns it is told, the next point is asked (all running
  trials are busy points) and submitted at once;
* an objective that raises fails its trial (type, message and traceback stored), the loop goes
  on; a worker that dies makes its trial ``lost`` (retried by the next ask) — unless that trial
  was already a retry whose parameters killed a worker before: then it is ``failed``;
* per-trial timeouts (the evaluation is cancelled, the trial failed with reason ``timeout``);
* a failure-rate guard: over half of at least five finished trials failed → stop, raising
  ``FailureRateExceeded``;
* Ctrl-C / SIGTERM: stop submitting, wait up to ``grace`` seconds for running trials, record
  what finished, mark the rest ``lost`` (a resume retries them) and return with a summary;
* a resumed study: running trials left by a dead driver on this host are marked ``lost`` at
  start (their driver process is gone); those of a driver elsewhere expire with their lease,
  which this loop renews for its own trials by heartbeat;
* ``lookahead="auto"`` (the default): proposals are made in a thread of their own, and as
  many evaluations are queued ahead as the measured times call for (``auto_lookahead``: none
  while a proposal takes under 1 % of an evaluation, about ``2 * workers * ask / evaluation``
  beyond that, at most twice the workers, and none when proposals are over twice too slow to
  keep up), re-sized after every proposal and every result.
  A fixed seed still fixes the initial design and what each proposal is given the data and
  busy points it sees; which results a proposal sees depends on timing. ``lookahead=0``
  proposes in the driver after each tell: with the default ``refit="sync"`` and results told
  in the same order (one worker, or an ask/tell loop), every proposal is reproduced exactly.
* ``lookahead > 0``: proposals are made ahead, in a thread of their own, and handed to the
  executor beyond the free workers: up to ``workers + lookahead`` evaluations are submitted at
  once, the extra ones waiting in the executor's queue (Dask keeps one on deck on each worker),
  so a worker that finishes starts its next evaluation at once, without a round trip to the
  driver, a fit, an acquisition search or the finished trial's tell (a durable write). Each
  was proposed with every running and queued trial as a busy point, but without the results
  that arrived while it waited. That trade (a little staleness for no idle workers) pays when
  proposals take a noticeable share of an evaluation's time divided by the workers; with it
  proposals depend on timing, so runs are not reproducible. A queued trial's ``trial_timeout``
  runs from when it reached the head of the queue (the first ``workers`` submissions still
  unfinished, in order); when the run stops, queued trials are withdrawn and marked ``lost``
  at once (a resume re-queues them), only the running ones are waited for.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import socket
import threading
import time
import traceback
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from abo import budget, progress, signals
from abo.exceptions import (
    AboError,
    FailureRateExceeded,
    InvalidValueError,
    TrialFailure,
    TrialStateError,
)
from abo.executors.base import Executor, Future, LostEvaluation
from abo.outcomes import check_values, split_result
from abo.reporting import Sender, TrialHandle, answer, takes_trial
from abo.summary import proposal_source, sources_line
from abo.trial import BOOKKEEPING, Trial, TrialState
from abo.userdata import storable

if TYPE_CHECKING:
    from abo.protocol import StudyLike as Study

log = logging.getLogger("abo")


def worker_label() -> str:
    """Which worker runs this evaluation: ``host:pid`` for a process's main thread, and
    ``host:pid/thread`` in a pool's thread (threads of one process are workers of their own:
    a ``ThreadExecutor``'s ``abo-worker_0``, ``abo-worker_1``, ...)."""
    label = f"{socket.gethostname()}:{os.getpid()}"
    thread = threading.current_thread()
    return label if thread is threading.main_thread() else f"{label}/{thread.name}"


def evaluation_modules(objective: Callable[..., Any]) -> list[str]:
    """abo's modules a worker imports to run ``objective`` through ``evaluate`` (a user's own
    modules are left to the first evaluation: importing one elsewhere may have side effects)."""
    names = [evaluate.__module__]
    for name in (getattr(objective, "__module__", None), type(objective).__module__):
        if name and name.split(".")[0] == "abo" and name not in names:
            names.append(name)
    return names


def evaluate(
    objective: Callable[..., Any],
    params: dict[str, Any],
    trial: dict[str, Any] | None = None,
    send: Sender | None = None,
) -> dict[str, Any]:
    """Run the objective on a worker and report what happened (never raises for the objective).

    Objectives that take a second argument (``def objective(params, trial)``, or
    ``accepts_trial = True`` such as ``abo.Command``) get a ``TrialHandle`` for
    ``trial={"study", "id", "attempt"}`` whose reports go through ``send``. Returns a dict with
    ``status`` (``ok``, ``failed``, ``lost``, or ``stopped`` when the study stopped the trial),
    ``value`` / ``user`` or ``reason`` / ``traceback``, and the worker-side ``started`` /
    ``finished`` times and ``worker``.
    """
    started = time.time()
    report: dict[str, Any] = {"worker": worker_label(), "started": started}
    context = dict(trial or {})
    bind = getattr(send, "bind", None)
    if bind is not None:
        send = bind()  # in the task's thread, where the executor finds its connection
    handle = TrialHandle(
        str(context.get("study", "")),
        int(context.get("id", 0)),
        int(context.get("attempt", 0)),
        params,
        send,
    )
    try:
        if getattr(objective, "accepts_trial", False):
            out = objective(dict(params), trial=handle)
        elif takes_trial(objective):
            out = objective(dict(params), handle)
        else:
            out = objective(dict(params))
        if isinstance(out, Mapping):
            out = {str(k): v for k, v in out.items()}  # outcomes and metadata, split by the driver
        report.update(status="stopped" if handle.should_stop else "ok", value=out)
    except TrialFailure as exc:
        report.update(
            status="lost" if exc.retryable else "failed",
            reason=exc.reason,
            user=dict(getattr(exc, "metadata", {}) or {}),
        )
    except Exception as exc:  # noqa: BLE001 - the objective's failure is the trial's, not ours
        report.update(
            status="failed",
            reason=f"{type(exc).__name__}: {exc}",
            traceback=traceback.format_exc(limit=20)[-8000:],
        )
    if handle.should_stop and report["status"] != "lost":
        report["status"] = "stopped"  # however the run ended after the study stopped it
    report["finished"] = time.time()
    return report


@dataclass
class OptimizeResult:
    """What one ``optimize`` call did."""

    n_done: int = 0
    n_failed: int = 0
    n_lost: int = 0
    n_stopped: int = 0  # ended early by the study's stopping rule
    best: Trial | None = None
    elapsed: float = 0.0
    busy_seconds: float = 0.0
    n_workers: int = 0
    stopped: str | None = None
    trial_ids: list[int] = field(default_factory=list)
    max_queued: int = 0  # the most evaluations queued at the executor beyond the workers
    front: list[Trial] | None = None  # a study of several objectives: its Pareto front
    # where the started trials' parameters came from (``abo.summary.proposal_source``)
    sources: dict[str, int] = field(default_factory=dict)
    failure_reasons: dict[str, int] = field(default_factory=dict)  # failed trials, by reason

    @property
    def common_failure(self) -> tuple[str, int] | None:
        """The most frequent reason a trial failed and how many failed for it (``None``
        without failures; ties: the one seen first)."""
        if not self.failure_reasons:
            return None
        reason = max(self.failure_reasons, key=lambda r: self.failure_reasons[r])
        return reason, self.failure_reasons[reason]

    @property
    def utilization(self) -> float:
        """Busy time / (workers × makespan): 1.0 means no worker ever waited."""
        if self.elapsed <= 0 or self.n_workers <= 0:
            return 0.0
        return min(1.0, self.busy_seconds / (self.n_workers * self.elapsed))

    def summary(self) -> str:
        best = (
            "none"
            if self.best is None or self.best.value is None
            else f"{self.best.value:.6g} (trial {self.best.id})"
        )
        best = f"best {best}" if self.front is None else f"Pareto front of {len(self.front)}"
        stopped = f" (stopped: {self.stopped})" if self.stopped else ""
        stopped_early = f"{self.n_stopped} stopped, " if self.n_stopped else ""
        sources = f"; {sources_line(self.sources)}" if self.sources else ""
        return (
            f"{self.n_done} done, {stopped_early}{self.n_failed} failed, {self.n_lost} lost in "
            f"{self.elapsed:.1f} s on {self.n_workers} workers; utilization "
            f"{self.utilization:.2f}; {best}{stopped}{sources}"
        )


@dataclass(frozen=True)
class FailureGuard:
    """Stop when more than ``max_rate`` of at least ``min_failures`` finished trials failed."""

    max_rate: float = 0.5
    min_failures: int = 5

    def tripped(self, n_done: int, n_failed: int) -> bool:
        finished = n_done + n_failed
        return n_failed >= self.min_failures and n_failed > self.max_rate * finished


def driver_tag() -> dict[str, Any]:
    """Who runs this loop: recorded on each trial it starts, to reclaim them after a crash."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "run": uuid.uuid4().hex[:12]}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reclaim_orphans(study: Study) -> list[Trial]:
    """Mark ``lost`` the running trials whose driver on this host has died (they re-queue)."""
    host = socket.gethostname()
    lost = []
    for trial in study.pending:
        driver = trial.info.get("driver") or {}
        pid = driver.get("pid")
        if driver.get("host") == host and isinstance(pid, int) and pid != os.getpid():
            if not _pid_alive(pid):
                lost.append(study.lose(trial.id, "driver died before the evaluation finished"))
    return lost


class _Stop:
    """Set by SIGINT/SIGTERM (first: drain; second: stop now) or by the failure guard."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.deadline: float | None = None
        self.hard = False

    def request(self, reason: str, grace: float, now: float | None = None) -> None:
        if self.reason is None:
            self.reason = reason
            self.deadline = (time.time() if now is None else now) + grace
        else:
            self.hard = True


@contextmanager
def _signals(stop: _Stop, grace: float, clock: Callable[[], float]) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: Any) -> None:
        name = signal.Signals(signum).name
        if stop.reason is not None:
            stop.hard = True
            return
        log.warning("%s: no new trials; waiting up to %.0f s for running ones", name, grace)
        stop.request(name, grace, clock())

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    early = signals.take()  # one that came while the run was starting up
    if early is not None:
        log.warning("%s during start-up: no trials will be started", early)
        stop.request(early, grace, clock())
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


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
    more (utilization 0.97 without a queue there, 0.995 with one: ``docs/benchmarks-changelog.md``).
    Past it, one evaluation per worker waits on deck (the executor starts it the moment the
    worker is free), or twice the
    load when that is more, so bursts of results (durations vary; several workers free at
    once) find proposals ready (twice the load alone, 2 for the demo's 4 workers, left
    them waiting in bursts: ``docs/benchmarks-changelog.md``). ``gap_seconds`` is the driver's own
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


class _Asker:
    """Keeps the executor's queue filled with proposals, asking in a background thread.

    It asks once ``batch`` (a quarter of ``lookahead``) places are free, not at every single
    one: a batch of proposals costs little more than one (Thompson's paths are drawn and
    climbed together), so the thread keeps up with many fast workers while the queue still
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

    def __init__(
        self,
        study: Study,
        workers: int,
        lookahead: int,
        n_trials: int,
        info: dict[str, Any],
        auto: bool = False,
    ) -> None:
        self.study, self.workers = study, workers
        self.lookahead = workers if auto else lookahead  # auto: the design's points on deck
        self.batch = max(1, self.lookahead // 4)
        self.auto = auto
        self.ask_seconds: float | None = None  # per model proposal, smoothed
        self.durations: deque[float] = deque(maxlen=max(8, 4 * workers))  # recent evaluations
        self.gap: float | None = None  # the driver's seconds per trial: tell and submission
        self.designing = auto  # the asks return points no result changes (the design) so far
        self.n_trials, self.info = n_trials, info
        self.cond = threading.Condition()
        self.ready: deque[Trial] = deque()
        self.inflight = 0
        self.finished = 0
        self.halted = False
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="abo-asker", daemon=False)
        self.thread.start()

    def _deficit(self) -> int:
        """How many more trials to ask for now, 0 until a batch is due (caller holds ``cond``)."""
        room = self.workers + self.lookahead - self.inflight - len(self.ready)
        budget = self.n_trials - self.finished - self.inflight - len(self.ready)
        want = min(room, budget)
        return want if want > 0 and want >= min(self.batch, budget) else 0

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self.halted and self._deficit() <= 0:
                    self.cond.wait()
                if self.halted:
                    return
                # a batch, or more when more workers have nothing to start: a greedy member's
                # batch of k points costs k, and its first point waits for the last
                idle = self.workers - self.inflight - len(self.ready)
                want = min(self._deficit(), max(self.batch, idle))
                pace = self.pace()
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
                self.ready.extend(trials)
                modelled = any(_modelled(t) for t in trials)
                if trials and modelled:  # the initial design is free
                    per = seconds / len(trials)
                    old = self.ask_seconds
                    self.ask_seconds = per if old is None else 0.5 * old + 0.5 * per
                self.designing = bool(trials) and not modelled
                self._resize()
                self.cond.notify_all()

    def pace(self) -> float | None:
        """Seconds a point may take before a worker waits (``None``: not automatic, or no
        evaluation measured yet; caller holds ``cond``)."""
        if not self.auto or not self.durations:
            return None
        return max(1e-6, sum(self.durations) / len(self.durations) / self.workers)

    def observe(self, report: Mapping[str, Any]) -> None:
        """Note how long a successful evaluation ran on its worker (for the automatic size);
        a failure that returns at once says nothing about what an evaluation costs."""
        started, finished = report.get("started"), report.get("finished")
        if not self.auto or report.get("status") != "ok":
            return
        if not isinstance(started, float) or not isinstance(finished, float):
            return
        with self.cond:
            self.durations.append(max(0.0, finished - started))
            self._resize()
            self.cond.notify_all()

    def overhead(self, seconds: float) -> None:
        """Note the driver's own time for one trial (its durable tell and its submission):
        what a freed worker waits for when nothing is on deck."""
        with self.cond:
            self.gap = seconds if self.gap is None else 0.8 * self.gap + 0.2 * seconds

    def _resize(self) -> None:
        """Re-size an automatic lookahead from the latest measurements (caller holds ``cond``).

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
        sees it (``docs/benchmarks-changelog.md``, "Queued places refilled after the tells").
        The next ``take`` sets the exact counts."""
        with self.cond:
            self.inflight = max(0, self.inflight - 1)
            self.finished += 1
            self.cond.notify_all()

    def take(self, free: int, inflight: int, finished: int) -> list[Trial]:
        """Up to ``free`` ready trials for the free workers (and update the counts)."""
        with self.cond:
            if self.error is not None:
                raise self.error
            out = [self.ready.popleft() for _ in range(min(max(0, free), len(self.ready)))]
            self.inflight = inflight + len(out)
            self.finished = finished
            self.cond.notify_all()
            return out

    def wait_ready(self, timeout: float) -> None:
        """Block until a trial is ready, the thread failed, or ``timeout`` passed."""
        with self.cond:
            self.cond.wait_for(lambda: self.ready or self.error is not None, timeout)

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
            left = list(self.ready)
            self.ready.clear()
            return left


def _record(study: Study, trial: Trial, report: dict[str, Any], result: OptimizeResult) -> Trial:
    """Tell, fail or lose the trial from a worker's report; return the stored trial."""
    info: dict[str, Any] = {k: report[k] for k in ("worker", "started", "finished") if k in report}
    if "started" in report and "finished" in report:
        info["eval_seconds"] = report["finished"] - report["started"]
        result.busy_seconds += info["eval_seconds"]
    user = storable(report.get("user") or None, "metadata")  # NaN kept as "nan", not refused
    status = report["status"]
    try:
        if status == "ok":
            value, metadata = split_result(report["value"], study.outcomes)
            user = storable(metadata or None, "metadata")
            try:
                values = check_values(value, study.outcomes)
            except InvalidValueError as exc:
                reason = f"invalid value: {exc}"
                return study.fail(trial.id, reason=reason, metadata=user, info=info)
            return study.tell(trial.id, values, user, info=info)
        if status == "stopped":
            # the study stopped it at a report: what the run returned is bookkeeping only
            user = storable(report.get("user") or None, "metadata")
            if isinstance(report.get("value"), Mapping):
                extra = split_result(report["value"], study.outcomes)[1]
                user = storable(extra, "metadata") or user
            return study.fail(trial.id, reason="stopped", metadata=user, info=info)
        if status == "lost":
            return study.lose(trial.id, report.get("reason", "lost"))
        if report.get("traceback"):
            info["traceback"] = report["traceback"]
        reason = report.get("reason", "failed")
        return study.fail(trial.id, reason=reason, metadata=user, info=info)
    except TrialStateError as exc:
        # the trial moved on meanwhile (its lease expired and it was lost): its state stands
        log.warning("trial %d: result not recorded: %s", trial.id, exc)
        return study.trial(trial.id)


def run(
    study: Study,
    objective: Callable[..., Any],
    n_trials: int | None = None,
    n_workers: int | None = None,
    executor: Executor | None = None,
    callback: Callable[[Study, Trial], None] | None = None,
    timeout: float | None = None,
    max_trials: int | None = None,
    trial_timeout: float | None = None,
    guard: FailureGuard | None = FailureGuard(),
    grace: float = 30.0,
    lookahead: int | str = "auto",
    clock: Callable[[], float] = time.time,
    verbosity: int | str = "auto",
) -> OptimizeResult:
    """Finish ``n_trials`` trials of ``study``, ``n_workers`` at a time (see ``Study.optimize``),
    stopping once the study holds ``max_trials`` finished ones (``abo.budget``).

    ``lookahead`` (``"auto"``, or a fixed number of evaluations queued at the executor
    beyond the workers; ``0`` proposes in the driver, reproducibly): see the module's notes.
    ``verbosity``: ``"auto"`` shows ``abo run``'s live panel on standard error when it is a
    terminal; 0 never, 1 always, 2 with a line per finished trial (``abo.progress``).

    Raises:
        FailureRateExceeded: the failure guard stopped the run (after draining it).
    """
    budget.check(n_trials, max_trials)
    auto = lookahead == "auto"
    if not auto and (
        isinstance(lookahead, bool) or not isinstance(lookahead, int) or lookahead < 0
    ):
        raise AboError(f"lookahead: expected 'auto' or a non-negative integer, got {lookahead!r}")
    fixed = 0 if auto else int(lookahead)
    level = progress.resolve(verbosity)
    if trial_timeout is not None and not trial_timeout > 0:
        raise AboError(f"trial_timeout: expected a positive number, got {trial_timeout!r}")
    n_trials = budget.trials_to_add(study, n_trials, max_trials)
    if n_trials == 0:  # the study holds max_trials finished trials already: nothing to start
        return OptimizeResult(n_workers=n_workers or 0, stopped=f"max_trials={max_trials} reached")
    own = executor is None
    if executor is None:
        from abo.executors.dask import DaskExecutor

        executor = DaskExecutor(n_workers=n_workers or 4)
    preload = getattr(executor, "preload", None)
    if preload is not None:  # workers import the evaluation code while this driver starts up
        preload(evaluation_modules(objective))
    workers = n_workers or executor.n_workers
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise AboError(f"n_workers: expected a positive integer, got {workers!r}")
    result = OptimizeResult(n_workers=workers)
    tag = driver_tag()
    lease = float(getattr(study.config, "lease_seconds", 3600.0))
    heartbeat_every = max(0.5, min(60.0, lease / 3))

    def capacity() -> int:
        """Evaluations handed to the executor at once."""
        return workers + (asker.lookahead if asker is not None else fixed)

    # submitted, unfinished evaluations in submission order, with the time each reached the
    # head of the queue (the first ``workers``: taken as running) or None while queued
    inflight: dict[Future, tuple[Trial, float | None]] = {}
    stop = _Stop()
    start = clock()
    last_beat = start
    finished = 0
    reclaimed = reclaim_orphans(study)
    if reclaimed:
        log.warning("marked %d trials of a dead driver lost", len(reclaimed))
    asker: _Asker | None = None
    # the objective's reports reach the study through the executor's channel, if it has one
    open_reports = getattr(executor, "open_reports", None)
    send: Sender | None = None
    if open_reports is not None and takes_trial(objective):
        send = open_reports(lambda request: answer(study, request))

    submit_seconds = [0.0]  # the latest submission's driver time (for the automatic size)
    display = ExitStack()  # the live panel, while the loop runs (verbosity)
    shown = display.enter_context(progress.shown(level, n_trials, study, workers))
    if shown is not None:
        users = callback

        def callback(s: Study, t: Trial) -> None:
            shown(s, t)
            if users is not None:
                users(s, t)

    def launch(trials: list[Trial]) -> None:
        for trial in trials:
            t0 = time.perf_counter()
            future = _submit(executor, study, objective, trial, send)
            submit_seconds[0] = time.perf_counter() - t0
            inflight[future] = (trial, None)
            result.trial_ids.append(trial.id)
            source = proposal_source(trial)
            result.sources[source] = result.sources.get(source, 0) + 1
        result.max_queued = max(result.max_queued, len(inflight) - workers)
        _start_clocks(inflight, workers, clock())

    def withdraw_queued() -> None:
        """On stop: queued evaluations never start; a resume re-queues their trials."""
        for future in list(inflight)[workers:]:
            if not executor.withdraw(future):
                continue  # already running (or done): waited for and recorded as usual
            trial, _ = inflight.pop(future)
            try:
                stored = study.lose(trial.id, "driver stopped before the trial started")
                result.n_lost += stored.state is TrialState.LOST
            except AboError:
                pass

    try:
        with _signals(stop, grace, clock):
            if (auto or fixed) and stop.reason is None:  # not when stopped while starting up
                asker = _Asker(study, workers, fixed, n_trials, {"driver": tag}, auto=auto)
            while True:
                now = clock()
                if timeout is not None and now - start > timeout and stop.reason is None:
                    stop.request("timeout", grace, clock())
                want = min(capacity() - len(inflight), n_trials - finished - len(inflight))
                if asker is not None and stop.reason is not None:
                    asker.halt()
                    withdraw_queued()
                if want > 0 and stop.reason is None:
                    if asker is None:
                        new = study.ask_batch(want, n_workers=workers, info={"driver": tag})
                    else:
                        new = asker.take(want, len(inflight), finished)
                    launch(new)
                elif asker is not None:
                    asker.take(0, len(inflight), finished)  # keep its counts current
                if not inflight:
                    if asker is None or stop.reason is not None or want <= 0:
                        break
                    asker.wait_ready(0.5)  # nothing running yet: wait for the first proposals
                    continue
                if stop.hard or (stop.deadline is not None and clock() > stop.deadline):
                    break
                # with free workers and proposals on their way, look again soon
                poll = 0.02 if asker is not None and want > 0 else 0.5
                done = [(f, inflight.pop(f)[0]) for f in executor.wait(list(inflight), poll)]
                if done and asker is not None and stop.reason is None:
                    # freed workers take ready trials before the results are recorded: those
                    # trials do not wait for the tells (durable writes), so neither do workers
                    left = n_trials - finished - len(done) - len(inflight)
                    free = min(capacity() - len(inflight), left)
                    # the finished ones hold their places until each is told (``release``,
                    # before its callback), so the proposal that refills a place sees its
                    # result; the freed workers do not wait for it: they took what was queued
                    launch(asker.take(free, len(inflight) + len(done), finished))
                _start_clocks(inflight, workers, clock())
                for future, trial in done:
                    report = _outcome(executor, future, trial)
                    told = time.perf_counter()
                    stored = _record(study, trial, report, result)
                    if asker is not None:
                        asker.overhead(time.perf_counter() - told + submit_seconds[0])
                        asker.observe(report)
                        asker.release()
                    finished += _count(study, stored, result, callback)
                if trial_timeout is not None:
                    for future, (trial, started) in list(inflight.items()):
                        if started is not None and clock() - started > trial_timeout:
                            del inflight[future]
                            executor.cancel(future)
                            try:
                                stored = study.fail(trial.id, reason="timeout")
                            except TrialStateError:  # lost meanwhile: that stands
                                stored = study.trial(trial.id)
                            finished += _count(study, stored, result, callback)
                if guard is not None and stop.reason is None:
                    if guard.tripped(result.n_done, result.n_failed):
                        stop.request("failure rate", grace, clock())
                if clock() - last_beat > heartbeat_every:
                    last_beat = clock()
                    for trial, _ in inflight.values():
                        try:
                            study.heartbeat(trial.id)
                        except AboError:
                            pass
    finally:
        result.elapsed = clock() - start
        for trial in asker.close() if asker is not None else []:
            try:  # asked ahead but never submitted: a resume re-queues it
                stored = study.lose(trial.id, "driver stopped before the trial was submitted")
                result.n_lost += stored.state is TrialState.LOST
            except AboError:
                pass
        for future, (trial, _) in inflight.items():
            executor.cancel(future)
            try:
                stored = study.lose(trial.id, "driver stopped before the evaluation finished")
                result.n_lost += stored.state is TrialState.LOST
            except AboError:
                pass
        close_reports = getattr(executor, "close_reports", None)
        if send is not None and close_reports is not None:
            close_reports()
        if own:
            executor.close()
        display.close()
    result.stopped = stop.reason
    several = study.direction == "multi"
    result.best = study.best if not several else None  # no single best
    result.front = study.best_trials if several else None
    log.info("%s", result.summary())
    if stop.reason == "failure rate" and guard is not None:
        common = result.common_failure
        cause = (
            f" Most common cause ({common[1]} of {result.n_failed}): {_shorten(common[0])}."
            if common
            else ""
        )
        exc = FailureRateExceeded(
            f"n_failed: {result.n_failed} of {result.n_done + result.n_failed} finished trials "
            f"failed (more than {guard.max_rate:.0%} of at least {guard.min_failures}); "
            f"stopped instead of burning the budget.{cause} {result.summary()}"
        )
        exc.result = result  # type: ignore[attr-defined]
        raise exc
    return result


def _shorten(text: str, limit: int = 200) -> str:
    """``text`` on one line, cut to ``limit`` characters (a failure's reason in a message)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _start_clocks(
    inflight: dict[Future, tuple[Trial, float | None]], workers: int, now: float
) -> None:
    """Start the timeout clock of the first ``workers`` evaluations (the ones taken as running)."""
    for future in list(inflight)[:workers]:
        trial, started = inflight[future]
        if started is None:
            inflight[future] = (trial, now)


def _submit(
    executor: Executor,
    study: Study,
    objective: Callable[..., Any],
    trial: Trial,
    send: Sender | None = None,
) -> Future:
    """Submit one evaluation under its own key (two equal parameter sets are two runs).

    The key ends in a random token: two studies of one name (in two storages, or one study
    run again after its database was replaced) may share a cluster, and Dask answers a key it
    still holds with the result it holds, which would tell one study another's value.
    """
    key = f"abo-{study.name}-{trial.id}-{trial.attempt}-{uuid.uuid4().hex[:12]}"
    context = {"study": study.name, "id": trial.id, "attempt": trial.attempt}
    return executor.submit(evaluate, objective, trial.params, context, send, key=key)


def _outcome(executor: Executor, future: Future, trial: Trial) -> dict[str, Any]:
    """The worker's report, or a ``lost`` one when the infrastructure lost the evaluation."""
    try:
        return executor.outcome(future)
    except LostEvaluation as exc:
        if exc.worker_died and trial.attempt >= 1:
            # its parameters killed a worker on an earlier attempt too: blame them
            return {"status": "failed", "reason": f"killed its worker again: {exc}"}
        return {"status": "lost", "reason": str(exc)}


def _count(study: Study, stored: Trial, result: OptimizeResult, callback: Callable | None) -> int:
    """Tally a finished trial; 1 if it counts against the budget (a retried loss does not)."""
    counts = 1
    if stored.state is TrialState.DONE:
        result.n_done += 1
    elif stored.state is TrialState.FAILED:
        result.n_failed += 1
        reason = stored.reason or "no reason given"
        result.failure_reasons[reason] = result.failure_reasons.get(reason, 0) + 1
    elif stored.state is TrialState.STOPPED:
        result.n_stopped += 1
    elif stored.state is TrialState.LOST:
        result.n_lost += 1
        retries = int(getattr(study.config, "max_retries", 0))
        counts = int(stored.attempt >= retries)  # no retry follows: it uses up budget
    if callback is not None:
        callback(study, stored)
    return counts
