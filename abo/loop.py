"""The asynchronous driver: keep every worker busy, tell → ask → submit the moment one returns.

The loop does the I/O (executor, clock); the study decides what to run. It uses only the
study's public ask/tell surface, so it drives a remote study exactly like a local one.
"""

from __future__ import annotations

import os
import socket
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from abo.exceptions import AboError, InvalidValueError, TrialFailure
from abo.executors.base import Executor, Future, LostEvaluation
from abo.study import check_value
from abo.trial import Trial, TrialState

if TYPE_CHECKING:
    from abo.study import Study


def evaluate(objective: Callable[[dict[str, Any]], Any], params: dict[str, Any]) -> dict[str, Any]:
    """Run the objective on a worker and report what happened (never raises for the objective).

    Returns a dict with ``status`` (``ok``, ``failed`` or ``lost``), ``value`` / ``user`` or
    ``reason`` / ``traceback``, and the worker-side ``started`` / ``finished`` times and ``worker``.
    """
    started = time.time()
    report: dict[str, Any] = {"worker": f"{socket.gethostname()}:{os.getpid()}", "started": started}
    try:
        out = objective(dict(params))
        if isinstance(out, Mapping):
            if "value" not in out:
                raise InvalidValueError("value: the objective returned a dict without 'value'")
            user = {str(k): v for k, v in out.items() if k != "value"}
            out = out["value"]
        else:
            user = {}
        report.update(status="ok", value=out, user=user)
    except TrialFailure as exc:
        report.update(status="lost" if exc.retryable else "failed", reason=exc.reason)
    except Exception as exc:  # noqa: BLE001 - the objective's failure is the trial's, not ours
        report.update(
            status="failed",
            reason=f"{type(exc).__name__}: {exc}",
            traceback=traceback.format_exc(limit=20)[-8000:],
        )
    report["finished"] = time.time()
    return report


@dataclass
class OptimizeResult:
    """What one ``optimize`` call did."""

    n_done: int = 0
    n_failed: int = 0
    n_lost: int = 0
    best: Trial | None = None
    elapsed: float = 0.0
    busy_seconds: float = 0.0
    n_workers: int = 0
    trial_ids: list[int] = field(default_factory=list)

    @property
    def utilization(self) -> float:
        """Busy time / (workers × makespan): 1.0 means no worker ever waited."""
        if self.elapsed <= 0 or self.n_workers <= 0:
            return 0.0
        return min(1.0, self.busy_seconds / (self.n_workers * self.elapsed))

    def summary(self) -> str:
        best = "none" if self.best is None else f"{self.best.value:.6g} (trial {self.best.id})"
        return (
            f"{self.n_done} done, {self.n_failed} failed, {self.n_lost} lost in "
            f"{self.elapsed:.1f} s on {self.n_workers} workers; utilization "
            f"{self.utilization:.2f}; best {best}"
        )


def _record(study: Study, trial: Trial, report: dict[str, Any], result: OptimizeResult) -> Trial:
    """Tell or fail the trial from a worker's report; return the stored trial."""
    info = {k: report[k] for k in ("worker", "started", "finished") if k in report}
    if "started" in report and "finished" in report:
        info["eval_seconds"] = report["finished"] - report["started"]
        result.busy_seconds += info["eval_seconds"]
    status = report["status"]
    if status == "ok":
        try:
            value = check_value(report["value"])
        except InvalidValueError as exc:
            return study.fail(trial.id, reason=f"invalid value: {exc}", info=info)
        return study.tell(trial.id, value, report.get("user") or None, info=info)
    if status == "lost":
        return study.lose(trial.id, report.get("reason", "lost"))
    reason = report.get("reason", "failed")
    if report.get("traceback"):
        info["traceback"] = report["traceback"]
    return study.fail(trial.id, reason=reason, info=info)


def run(
    study: Study,
    objective: Callable[[dict[str, Any]], Any],
    n_trials: int,
    n_workers: int | None = 4,
    executor: Executor | None = None,
    callback: Callable[[Study, Trial], None] | None = None,
    timeout: float | None = None,
) -> OptimizeResult:
    """Finish ``n_trials`` trials of ``study``, ``n_workers`` at a time (see ``Study.optimize``)."""
    if not isinstance(n_trials, int) or n_trials < 1:
        raise AboError(f"n_trials: expected a positive integer, got {n_trials!r}")
    own = executor is None
    if executor is None:
        from abo.executors.dask import DaskExecutor

        executor = DaskExecutor(n_workers=n_workers or 4)
    workers = n_workers or executor.n_workers
    if not isinstance(workers, int) or workers < 1:
        raise AboError(f"n_workers: expected a positive integer, got {workers!r}")
    result = OptimizeResult(n_workers=workers)
    inflight: dict[Future, Trial] = {}
    start = time.time()
    finished = 0
    try:
        while True:
            out_of_time = timeout is not None and time.time() - start > timeout
            want = min(workers - len(inflight), n_trials - finished - len(inflight))
            if want > 0 and not out_of_time:
                for trial in study.ask_batch(want, n_workers=workers):
                    key = f"abo-{study.name}-{trial.id}-{trial.attempt}"
                    inflight[executor.submit(evaluate, objective, trial.params, key=key)] = trial
                    result.trial_ids.append(trial.id)
            if not inflight:
                break
            for future in executor.wait(list(inflight), timeout=1.0):
                trial = inflight.pop(future)
                try:
                    report = executor.outcome(future)
                except LostEvaluation as exc:
                    report = {"status": "lost", "reason": str(exc)}
                stored = _record(study, trial, report, result)
                if stored.state is TrialState.DONE:
                    result.n_done += 1
                    finished += 1
                elif stored.state is TrialState.FAILED:
                    result.n_failed += 1
                    finished += 1
                elif stored.state is TrialState.LOST:
                    result.n_lost += 1
                    if stored.attempt >= study.config.max_retries:
                        finished += 1  # no retry will follow: it counts against the budget
                if callback is not None:
                    callback(study, stored)
    finally:
        result.elapsed = time.time() - start
        for future, trial in inflight.items():  # interrupted: the infrastructure gave up
            future.cancel()
            try:
                study.lose(trial.id, "driver stopped before the evaluation finished")
            except AboError:
                pass
        if own:
            executor.close()
    result.best = study.best
    return result
