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
import os
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

from abo.core.exceptions import AboError, TrialFailure
from abo.core.quiet import sweep
from abo.core.trial import Trial
from abo.executors.base import Executor
from abo.run import budget, progress
from abo.run.asker import AUTO_CAP, QUEUE_LOAD, SATURATED, auto_lookahead
from abo.run.loop_driver import _Driver, driver_tag, reclaim_orphans, signals_stop
from abo.run.loop_state import LoopState
from abo.run.optimize_result import FailureGuard, OptimizeResult
from abo.run.reporting import Sender, TrialHandle, answer, takes_trial

if TYPE_CHECKING:
    from abo.study.protocol import StudyLike as Study

__all__ = [  # what other modules and users import from here
    "AUTO_CAP",
    "QUEUE_LOAD",
    "SATURATED",
    "FailureGuard",
    "OptimizeResult",
    "auto_lookahead",
    "driver_tag",
    "evaluate",
    "evaluation_modules",
    "reclaim_orphans",
    "run",
    "worker_label",
]

log = logging.getLogger("abo")
_GUARD = FailureGuard()  # the default: over half of at least five finished trials failed


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
    guard: FailureGuard | None = _GUARD,
    grace: float = 30.0,
    lookahead: int | str = "auto",
    clock: Callable[[], float] = time.time,
    verbosity: int | str = "auto",
    proposals: Any = None,
) -> OptimizeResult:
    """Finish ``n_trials`` trials of ``study``, ``n_workers`` at a time (see ``Study.optimize``),
    stopping once the study holds ``max_trials`` finished ones (``abo.run.budget``).

    ``lookahead`` (``"auto"``, or a fixed number of evaluations queued at the executor
    beyond the workers; ``0`` proposes in the driver, reproducibly): see the module's notes.
    ``verbosity``: ``"auto"`` shows ``abo run``'s live panel on standard error when it is a
    terminal; 0 never, 1 always, 2 with a line per finished trial (``abo.run.progress``).
    ``proposals``: a Dask scheduler's address (or ``distributed.Client``) whose workers make
    the model-based proposals and GP fits instead of this process (``abo.propose.remote``).

    Raises:
        FailureRateExceeded: the failure guard stopped the run (after draining it).
    """
    budget.check(n_trials, max_trials)
    auto, fixed = _lookahead(lookahead)
    level = progress.resolve(verbosity)
    if trial_timeout is not None and not trial_timeout > 0:
        raise AboError(f"trial_timeout: expected a positive number, got {trial_timeout!r}")
    n_trials = budget.trials_to_add(study, n_trials, max_trials)
    if n_trials == 0:  # the study holds max_trials finished trials already: nothing to start
        return OptimizeResult(n_workers=n_workers or 0, stopped=f"max_trials={max_trials} reached")
    executor, own, workers = _open_executor(executor, n_workers, objective)
    try:
        with _proposals_on(study, proposals):  # for this run, on that cluster's workers
            return _loop(
                study, objective, n_trials, executor, workers, callback,
                dict(timeout=timeout, trial_timeout=trial_timeout, guard=guard, grace=grace),
                (auto, fixed), clock, level,
            )  # fmt: skip
    finally:
        if own:
            executor.close()


def _loop(
    study: Study,
    objective: Callable[..., Any],
    n_trials: int,
    executor: Executor,
    workers: int,
    callback: Callable[[Study, Trial], None] | None,
    limits: dict[str, Any],
    lookahead: tuple[bool, int],
    clock: Callable[[], float],
    level: int,
) -> OptimizeResult:
    """The loop of ``run`` once its arguments are checked and its executor open: drive the
    executor to the end (``run`` closes it)."""
    lease = float(getattr(study.config, "lease_seconds", 3600.0))  # renewed a third at a time
    state: LoopState[Any] = LoopState(
        workers, n_trials, clock(), **limits, heartbeat_every=max(0.5, min(60.0, lease / 3))
    )
    _reclaim(study)
    send = _open_reports(executor, objective, study)
    display = ExitStack()  # the live panel, while the loop runs (verbosity)
    callback = _shown(display, level, n_trials, study, workers, callback)
    driver = _Driver(
        study, objective, executor, state,
        task=evaluate, clock=clock, callback=callback, send=send,
    )  # fmt: skip
    try:
        with signals_stop(state, clock):
            driver.start_asker(*lookahead)
            while driver.turn():  # one turn: ask, launch, wait, record, time out, guard
                pass
    finally:
        driver.close()
        display.close()
        sweep()  # the asker's last proposal may have put back a filter list with abo's entries
    return _finish(study, state, limits["guard"])


@contextmanager
def _proposals_on(study: Study, target: Any) -> Iterator[None]:
    """While the run lasts, the study proposes on the Dask cluster at ``target`` (``None``:
    here, unchanged); afterwards as before."""
    if target is None:
        yield
        return
    if not hasattr(study, "proposals"):
        raise AboError(
            "proposals: a study on a service proposes on the service; start it with "
            "`abo serve --dask-scheduler ADDRESS` instead",
            field="proposals",
        )
    from abo.propose.remote import ClusterProposals

    previous = getattr(study, "proposals")  # noqa: B009 - not on the StudyLike protocol
    cluster = ClusterProposals(target, field="proposals")
    setattr(study, "proposals", cluster)  # noqa: B010 - a local Study's (checked above)
    try:
        yield
    finally:
        setattr(study, "proposals", previous)  # noqa: B010 - as above
        cluster.close()


def _reclaim(study: Study) -> None:
    """Mark lost the running trials left by a dead driver on this host (a resume)."""
    reclaimed = reclaim_orphans(study)
    if reclaimed:
        log.warning("marked %d trials of a dead driver lost", len(reclaimed))


def _lookahead(lookahead: int | str) -> tuple[bool, int]:
    """Whether the lookahead is automatic, and its fixed size otherwise (checked)."""
    auto = lookahead == "auto"
    if not auto and (
        isinstance(lookahead, bool) or not isinstance(lookahead, int) or lookahead < 0
    ):
        raise AboError(f"lookahead: expected 'auto' or a non-negative integer, got {lookahead!r}")
    return auto, 0 if auto else int(lookahead)


def _open_executor(
    executor: Executor | None, n_workers: int | None, objective: Callable[..., Any]
) -> tuple[Executor, bool, int]:
    """The executor (a Dask one of our own when none is given), whether it is ours to close,
    and the workers to keep busy; its workers start importing the evaluation code."""
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
    return executor, own, workers


def _open_reports(executor: Executor, objective: Callable[..., Any], study: Study) -> Sender | None:
    """The channel that takes the objective's reports to the study, if the executor has one
    and the objective takes a trial."""
    open_reports = getattr(executor, "open_reports", None)
    if open_reports is not None and takes_trial(objective):
        return open_reports(lambda request: answer(study, request))
    return None


def _shown(
    display: ExitStack,
    level: int,
    n_trials: int,
    study: Study,
    workers: int,
    callback: Callable[[Study, Trial], None] | None,
) -> Callable[[Study, Trial], None] | None:
    """The callback, showing each finished trial on the live panel first when there is one."""
    shown = display.enter_context(progress.shown(level, n_trials, study, workers))
    if shown is None:
        return callback

    def both(s: Study, t: Trial) -> None:
        shown(s, t)
        if callback is not None:
            callback(s, t)

    return both


def _finish(study: Study, state: LoopState[Any], guard: FailureGuard | None) -> OptimizeResult:
    """The run's result, with its best trial (or Pareto front); raises when the guard stopped it."""
    result = state.result
    result.stopped = state.stop.reason
    several = study.direction == "multi"
    result.best = study.best if not several else None  # no single best
    result.front = study.best_trials if several else None
    log.info("%s", result.summary())
    if state.stop.reason == "failure rate" and guard is not None:
        raise guard.error(result)
    return result
