"""``DaskExecutor``: evaluations on a Dask cluster (a LocalCluster of worker processes by default).

Every submission carries its own key (``abo-<study>-<trial>-<attempt>-<random token>``, never
``pure``), so two trials with equal parameters are two evaluations, and two studies of one name
on one cluster never share a result. Clusters abo starts blame a task on the first
worker death (``allowed-failures = 0``): the trial is ``lost`` and retried by the loop under a
new key, and a retry that kills its worker again is ``failed`` — so an objective that kills
every worker it touches costs two worker deaths, not Dask's default four.

Example:
    >>> with DaskExecutor(n_workers=2) as ex:  # doctest: +SKIP
    ...     ex.outcome(ex.submit(pow, 2, 3, key="k"))
    8
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Collection
from concurrent.futures import CancelledError
from typing import Any

import dask
from distributed import Client, LocalCluster, wait
from distributed.client import FutureCancelledError
from distributed.scheduler import KilledWorker

from abo.core.exceptions import TrialFailure
from abo.executors.base import Future, LostEvaluation
from abo.executors.dask_spawn import check_spawn_safe, unguarded_script_line
from abo.executors.dask_workers import (
    CLOSE_TIMEOUT,
    _executing,
    _fate,
    _import,
    _QuickExit,
    _Shutdown,
)

log = logging.getLogger("abo")

__all__ = [  # what other modules import from here, the split-out pieces included
    "ABO_DASK_CONFIG",
    "CLOSE_TIMEOUT",
    "DaskExecutor",
    "DaskSender",
    "REPORT_RESEND",
    "REPORT_TIMEOUT",
    "_ReportServer",
    "_Shutdown",
    "_executing",
    "check_spawn_safe",
    "unguarded_script_line",
]

ABO_DASK_CONFIG = {
    "distributed.scheduler.allowed-failures": 0,
    "distributed.scheduler.worker-ttl": "60s",
    # An evaluation is one long black-box task, so Dask's housekeeping for many short tasks
    # buys nothing here, yet it costs: 32 idle local workers took 0.88 of a core (the driver
    # 0.21 more) with the defaults, and 0.05 (driver 0.04) without the statistical profiler
    # (a sample every 10 ms per worker, for a dashboard abo does not start) and with the
    # event-loop tick, memory and system monitors slowed from 20/100/500 ms.
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
}


REPORT_TIMEOUT = 300.0  # seconds a worker waits for the driver to answer a report
REPORT_RESEND = 20.0  # seconds without an answer after which a worker sends its report again
POLL_MAX = 0.25  # seconds between a waiting worker's looks at its answer queue, at most


class DaskSender:
    """The worker's end of the report channel: a request on the driver's Dask queue, the
    answer on a queue of the request's own (so answers never cross), both through the
    scheduler the worker already talks to: no port of its own, on a laptop or a cluster."""

    def __init__(self, name: str, client: Any = None) -> None:
        self.name = name
        self._client = client

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.name,)

    def bind(self) -> DaskSender:
        """This sender with the worker's client, taken in the task's own thread (Dask finds
        it only there), so that threads the objective starts (``Command``'s) can report."""
        from distributed import get_client

        return DaskSender(self.name, get_client())

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        from distributed import Queue

        reply = Queue(f"{self.name}-{uuid.uuid4().hex}", client=self._client)
        requests = Queue(self.name, client=self._client)
        message = {**request, "reply": reply.name}
        deadline = time.monotonic() + REPORT_TIMEOUT
        try:
            while True:
                # sent again while unanswered: a request or answer lost on its way through
                # the scheduler costs REPORT_RESEND seconds, not the whole timeout (the study
                # takes the same step and value again as a no-op, with the same answer)
                requests.put(message)
                answer = _poll(reply, min(deadline, time.monotonic() + REPORT_RESEND))
                if answer is not None:
                    return answer
                if time.monotonic() >= deadline:
                    raise TrialFailure(
                        f"report: the driver did not answer within {REPORT_TIMEOUT:.0f} s",
                        retryable=True,
                    )
        finally:
            requests.close()
            reply.close()


def _poll(queue: Any, until: float) -> dict[str, Any] | None:
    """The first item on ``queue`` before the monotonic time ``until``, else ``None``.

    Polled (``get(batch=True)`` takes what is there without waiting), never a ``get`` with a
    timeout: the scheduler logs each timed-out ``get`` as an ERROR with a traceback, which
    made successful runs look broken. The poll starts fast (answers take milliseconds) and
    slows to ``POLL_MAX`` seconds, so a long wait costs the scheduler little.
    """
    pause = 0.002
    while True:
        items = queue.get(batch=True)
        if items:
            return dict(items[0])
        left = until - time.monotonic()
        if left <= 0:
            return None
        time.sleep(min(pause, left))
        pause = min(pause * 2, POLL_MAX)


class _ReportServer:
    """The driver's end: a thread that answers the reports on the queue, one at a time."""

    def __init__(self, client: Client, answer: Callable[[dict[str, Any]], dict[str, Any]]):
        from distributed import Queue

        self.client, self.answer = client, answer
        self.name = f"abo-reports-{uuid.uuid4().hex}"
        self.queue = Queue(self.name, client=client)
        self.halted = threading.Event()
        self.thread = threading.Thread(target=self._serve, name="abo-reports", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        from distributed import Queue

        while not self.halted.is_set():
            try:
                # no timeout (the scheduler logs a timed-out get as an ERROR): close() wakes
                # it with a request to halt
                request = self.queue.get()
            except Exception:  # noqa: BLE001 - the client is closing
                if self.halted.is_set():
                    return
                time.sleep(0.1)
                continue
            if request.get("halt"):
                return
            try:
                reply = self.answer(request)
            except Exception as exc:  # noqa: BLE001 - never leave a worker waiting
                reply = {"error": f"report: {type(exc).__name__}: {exc}", "type": "AboError"}
            try:
                out = Queue(str(request.get("reply")), client=self.client)
                out.put(reply)
                out.close()
            except Exception:  # noqa: BLE001 - the worker gave up on it
                log.warning("report of trial %s: the answer could not be sent", request.get("id"))

    def close(self) -> None:
        self.halted.set()
        try:
            self.queue.put({"halt": True}, timeout=5)
            woken = True
        except Exception:  # noqa: BLE001 - the client is gone already: so is the thread's get
            woken = False
        self.thread.join(timeout=5 if woken else 0.5)
        try:
            self.queue.close()
        except Exception:  # noqa: BLE001 - the client is gone already
            pass


CANCEL_SETTLE = 5.0  # seconds to learn whether a cancelled evaluation had started on its worker


class DaskExecutor:
    """Runs evaluations on Dask.

    Args:
        n_workers: worker processes of the LocalCluster started when no address/client is given.
        threads_per_worker: threads per worker process.
        address: a running scheduler (``tcp://host:8786``) to connect to instead.
        client: a ``distributed.Client`` the caller built (not closed by ``close``).
    """

    def __init__(
        self,
        n_workers: int = 4,
        threads_per_worker: int = 1,
        address: str | None = None,
        client: Client | None = None,
    ) -> None:
        if not isinstance(n_workers, int) or n_workers < 1:
            raise ValueError(f"n_workers: expected a positive integer, got {n_workers!r}")
        self._cluster: Any = None
        self._reports: _ReportServer | None = None
        self._own_client = client is None
        if client is not None:
            self.client = client
        elif address is not None:
            self.client = Client(address, timeout="30s")
        else:
            check_spawn_safe()
            with dask.config.set(ABO_DASK_CONFIG):
                self._cluster = LocalCluster(
                    n_workers=n_workers,
                    threads_per_worker=threads_per_worker,
                    processes=True,
                    host="127.0.0.1",
                    # the scheduler serves HTTP even without a dashboard, on 8787 by default,
                    # with a UserWarning when another cluster holds it: any free port instead
                    dashboard_address=":0",
                    silence_logs=logging.ERROR,
                )
            self.client = Client(self._cluster)
            self.client.register_plugin(_QuickExit())
        self._shutdown = _Shutdown(self.client if self._own_client else None, self._cluster)
        if client is not None or address is not None:
            info = self.client.scheduler_info()["workers"].values()
            self.n_workers = max(1, sum(w.get("nthreads", 1) for w in info))
        else:
            self.n_workers = n_workers * threads_per_worker

    def preload(self, modules: list[str]) -> None:
        """Have the workers import ``modules`` now, without waiting for them: a worker's first
        evaluation then does not wait while it imports the code that evaluation unpickles
        (0.08-0.16 s a worker on 2 cores, 5 % of a short study's worker time)."""
        try:
            self.client.run(_import, list(modules), wait=False)
        except Exception:  # noqa: BLE001 - an optimisation only: the first evaluation imports
            pass

    def submit(self, fn: Callable[..., Any], *args: Any, key: str) -> Future:
        return self.client.submit(fn, *args, key=key, pure=False, retries=0)

    def wait(self, futures: Collection[Future], timeout: float | None) -> set[Future]:
        try:
            done, _ = wait(list(futures), timeout=timeout, return_when="FIRST_COMPLETED")
        except TimeoutError:
            return set()
        return set(done)

    def outcome(self, future: Future) -> Any:
        try:
            return future.result()
        except KilledWorker as exc:
            raise LostEvaluation(f"worker died: {exc}", worker_died=True) from exc
        except (FutureCancelledError, CancelledError) as exc:
            raise LostEvaluation(f"cancelled: {exc}") from exc
        except (OSError, TimeoutError) as exc:  # the scheduler went away
            raise LostEvaluation(f"scheduler connection lost: {exc}") from exc

    def cancel(self, future: Future) -> None:
        """Cancel the evaluation; if a worker is already running it, restart that worker."""
        holders = self._holders(future)
        future.cancel()
        self._stop_started(future, holders)

    def withdraw(self, future: Future) -> bool:
        """Cancel the evaluation unless a worker is already running it.

        One that starts in the moment between the check and the cancellation is stopped too
        (its worker restarted): a cancelled task runs on in its worker's thread, which would
        keep that worker busy, unseen by the scheduler, for the evaluation's whole length."""
        if future.done() or self._running_on(future):
            return False
        holders = self._holders(future)
        future.cancel()
        self._stop_started(future, holders)
        return True

    def _holders(self, future: Future) -> list[str]:
        """Workers the scheduler gave the evaluation to (running it or holding it on deck)."""
        key = getattr(future, "key", None)
        try:
            return [a for a, keys in self.client.processing().items() if key in keys]
        except Exception:  # noqa: BLE001 - the scheduler is gone: nothing will start it
            return []

    def _stop_started(self, future: Future, holders: list[str]) -> None:
        """After ``future.cancel()``: restart the ``holders`` on which it had started (a
        cancelled task is not interrupted), once each has either released it or shown it
        running; ``CANCEL_SETTLE`` seconds at most."""
        key = getattr(future, "key", None)
        running: list[str] = []
        deadline = time.monotonic() + CANCEL_SETTLE
        while holders:
            try:
                fates = self.client.run(_fate, key, workers=holders)
            except Exception:  # noqa: BLE001 - a holder is gone (and its task with it)
                break
            running += [a for a, fate in fates.items() if fate == "running"]
            holders = [a for a, fate in fates.items() if fate == "pending"]
            if not holders or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        if running:
            try:
                self.client.restart_workers(running, timeout=10, raise_for_error=False)
            except Exception:  # noqa: BLE001 - no nanny (remote workers): the task runs out
                pass

    def _running_on(self, future: Future) -> list[str]:
        """Workers running the evaluation now (not merely holding it on deck); [] if the
        scheduler cannot tell (it may be gone: then nothing will start it either)."""
        key = getattr(future, "key", None)
        holders = self._holders(future)
        if not holders:
            return []
        try:
            running = self.client.run(_executing, key, workers=holders)
            return [addr for addr, yes in running.items() if yes]
        except Exception:  # noqa: BLE001 - best effort
            return []

    def open_reports(self, answer: Callable[[dict[str, Any]], dict[str, Any]]) -> DaskSender:
        """A channel for the objective's reports, answered by ``answer`` in this process."""
        self.close_reports()
        self._reports = _ReportServer(self.client, answer)
        return DaskSender(self._reports.name)

    def close_reports(self) -> None:
        server = self._reports
        if server is not None:
            server.close()
            self._reports = None

    def close(self) -> None:
        """Close the report channel, then the client and the cluster abo started (promptly:
        ``CLOSE_TIMEOUT`` seconds each at most). Also done at exit if never called."""
        self.close_reports()
        self._shutdown()

    def __enter__(self) -> DaskExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
