"""The loop's I/O: the executor, the clock, signals and the study's storage calls, driven by a
``LoopState``'s decisions (``abo.run.loop.run`` builds one and turns it until it ends)."""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from abo.core.exceptions import AboError, InvalidValueError, TrialStateError
from abo.core.outcomes import check_values, split_result
from abo.core.trial import Trial, TrialState
from abo.core.userdata import storable
from abo.executors.base import Executor, Future, LostEvaluation
from abo.run import signals
from abo.run.asker import _Asker
from abo.run.loop_state import LoopState, Move
from abo.run.optimize_result import OptimizeResult
from abo.run.reporting import Sender

if TYPE_CHECKING:
    from abo.study.protocol import StudyLike as Study

log = logging.getLogger("abo")


class _Driver:
    """Does what a ``LoopState`` decides, one turn at a time, and tells it what happened."""

    def __init__(
        self,
        study: Study,
        objective: Callable[..., Any],
        executor: Executor,
        state: LoopState[Future],
        *,
        task: Callable[..., Any],
        clock: Callable[[], float],
        callback: Callable[[Study, Trial], None] | None = None,
        send: Sender | None = None,
        tag: dict[str, Any] | None = None,
    ) -> None:
        self.study, self.objective, self.executor, self.state = study, objective, executor, state
        self.task, self.clock, self.callback, self.send = task, clock, callback, send
        self.info = {"driver": tag or driver_tag()}
        self.fixed = 0  # the lookahead without an asker
        self.asker: _Asker | None = None
        self.submit_seconds = 0.0  # the latest submission's driver time (for the automatic size)

    def start_asker(self, auto: bool, fixed: int) -> None:
        """Propose ahead in a thread of its own (``auto``, or a fixed lookahead), unless the
        run was stopped while starting up."""
        self.fixed = fixed
        if (auto or fixed) and not self.state.stopping:
            state = self.state
            self.asker = _Asker(
                self.study, state.workers, fixed, state.n_trials, self.info, auto=auto
            )

    def lookahead(self) -> int:
        """Evaluations queued at the executor beyond the workers, as now sized."""
        return self.asker.lookahead if self.asker is not None else self.fixed

    def turn(self) -> bool:
        """One turn: ask, launch, wait, record, time out, guard, beat; whether to go on."""
        state, asker = self.state, self.asker
        turn = state.begin(self.clock(), self.lookahead(), asker is not None)
        if turn.halt and asker is not None:
            asker.halt()
            self.withdraw_queued()
        if turn.ask:
            self.launch(self.ask(turn.ask))
        elif asker is not None:
            asker.take(0, len(state.inflight), state.finished)  # keep its counts current
        move = state.move(self.clock(), asker is not None, turn.want)
        if move is Move.END:
            return False
        if move is Move.AWAIT_PROPOSALS and asker is not None:
            asker.wait_ready(0.5)  # nothing running yet: wait for the first proposals
            return True
        self.await_results(turn.want)
        self.expire()
        state.check_guard(self.clock())
        if state.beat_due(self.clock()):
            self.heartbeat()
        return True

    def ask(self, want: int) -> list[Trial]:
        """``want`` new trials: asked now, or taken from the asker's ready ones."""
        state = self.state
        if self.asker is None:
            return self.study.ask_batch(want, n_workers=state.workers, info=dict(self.info))
        return self.asker.take(want, len(state.inflight), state.finished)

    def launch(self, trials: list[Trial]) -> None:
        """Hand the trials' evaluations to the executor."""
        for trial in trials:
            t0 = time.perf_counter()
            future = _submit(self.executor, self.study, self.task, self.objective, trial, self.send)
            self.submit_seconds = time.perf_counter() - t0
            self.state.on_submitted(future, trial)
        self.state.on_launched(self.clock())

    def withdraw_queued(self) -> None:
        """On stop: queued evaluations never start; a resume re-queues their trials."""
        for future in self.state.queued():
            if not self.executor.withdraw(future):
                continue  # already running (or done): waited for and recorded as usual
            trial = self.state.on_withdrawn(future)
            self._lose(trial, "driver stopped before the trial started")

    def await_results(self, want: int) -> None:
        """Wait a while for evaluations to finish; refill the freed workers, record results."""
        state, asker = self.state, self.asker
        poll = state.poll_seconds(asker is not None, want)
        done = state.on_results(self.executor.wait(list(state.inflight), poll))
        refill = state.refill(len(done), self.lookahead(), asker is not None)
        if refill is not None and asker is not None:
            # freed workers take ready trials before the results are recorded: those trials
            # do not wait for the tells (durable writes), so neither do workers
            self.launch(asker.take(refill[0], refill[1], state.finished))
        state.start_clocks(self.clock())
        for future, trial in done:
            self.record(future, trial)

    def record(self, future: Future, trial: Trial) -> None:
        """Store a finished evaluation's outcome and tell the asker what it measured."""
        report = _outcome(self.executor, future, trial)
        told = time.perf_counter()
        stored = _record(self.study, trial, report, self.state.result)
        if self.asker is not None:
            self.asker.overhead(time.perf_counter() - told + self.submit_seconds)
            self.asker.observe(report)
            self.asker.release()  # before the callback: its place may be refilled
        self.finish(stored)

    def finish(self, stored: Trial) -> None:
        """Tally a trial in its end state and show it to the callback."""
        self.state.on_finished(stored, int(getattr(self.study.config, "max_retries", 0)))
        if self.callback is not None:
            self.callback(self.study, stored)

    def expire(self) -> None:
        """Cancel the evaluations past ``trial_timeout`` and fail their trials."""
        if self.state.trial_timeout is None:
            return
        for future, trial in self.state.expired(self.clock()):
            self.executor.cancel(future)
            try:
                stored = self.study.fail(trial.id, reason="timeout")
            except TrialStateError:  # lost meanwhile: that stands
                stored = self.study.trial(trial.id)
            self.finish(stored)

    def heartbeat(self) -> None:
        """Renew the leases of the trials in flight."""
        for trial in self.state.running():
            try:
                self.study.heartbeat(trial.id)
            except AboError:
                pass

    def close(self) -> None:
        """On the way out: what was asked or submitted but never finished is ``lost``."""
        state = self.state
        state.result.elapsed = self.clock() - state.start
        for trial in self.asker.close() if self.asker is not None else []:
            # asked ahead but never submitted: a resume re-queues it
            self._lose(trial, "driver stopped before the trial was submitted")
        for future, trial in state.unfinished():
            self.executor.cancel(future)
            self._lose(trial, "driver stopped before the evaluation finished")
        close_reports = getattr(self.executor, "close_reports", None)
        if self.send is not None and close_reports is not None:
            close_reports()

    def _lose(self, trial: Trial, reason: str) -> None:
        """Mark a trial lost (a resume retries it), unless it moved on meanwhile."""
        try:
            stored = self.study.lose(trial.id, reason)
            self.state.result.n_lost += stored.state is TrialState.LOST
        except AboError:
            pass


@contextmanager
def signals_stop(state: LoopState[Future], clock: Callable[[], float]) -> Iterator[None]:
    """While the loop runs in the main thread, SIGINT/SIGTERM stop it (first: drain; second:
    stop now), as does one that came while the run was starting up."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: Any) -> None:
        name = signal.Signals(signum).name
        if state.on_signal(name, clock()):
            log.warning(
                "%s: no new trials; waiting up to %.0f s for running ones", name, state.grace
            )

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    early = signals.take()  # one that came while the run was starting up
    if early is not None:
        log.warning("%s during start-up: no trials will be started", early)
        state.request_stop(early, clock())
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


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


def _submit(
    executor: Executor,
    study: Study,
    task: Callable[..., Any],
    objective: Callable[..., Any],
    trial: Trial,
    send: Sender | None = None,
) -> Future:
    """Submit one evaluation (``task`` runs ``objective`` on a worker: ``abo.run.loop.evaluate``)
    under its own key (two equal parameter sets are two runs).

    The key ends in a random token: two studies of one name (in two storages, or one study
    run again after its database was replaced) may share a cluster, and Dask answers a key it
    still holds with the result it holds, which would tell one study another's value.
    """
    key = f"abo-{study.name}-{trial.id}-{trial.attempt}-{uuid.uuid4().hex[:12]}"
    context = {"study": study.name, "id": trial.id, "attempt": trial.attempt}
    return executor.submit(task, objective, trial.params, context, send, key=key)


def _outcome(executor: Executor, future: Future, trial: Trial) -> dict[str, Any]:
    """The worker's report, or a ``lost`` one when the infrastructure lost the evaluation."""
    try:
        return executor.outcome(future)
    except LostEvaluation as exc:
        if exc.worker_died and trial.attempt >= 1:
            # its parameters killed a worker on an earlier attempt too: blame them
            return {"status": "failed", "reason": f"killed its worker again: {exc}"}
        return {"status": "lost", "reason": str(exc)}


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
