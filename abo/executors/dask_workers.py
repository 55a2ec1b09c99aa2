"""Plumbing of the Dask clusters abo starts: closing once, quick worker exits, worker probes."""

from __future__ import annotations

import atexit
import importlib
import logging
import os
import sys
from typing import Any

from distributed import Client, WorkerPlugin

log = logging.getLogger("abo")

CLOSE_TIMEOUT = 5.0  # seconds closing the client, then the cluster, may take at most


class _Shutdown:
    """Closes what an executor started, once: at ``close()``, or at the interpreter's exit
    when the script never called it.

    Registered with ``atexit`` after Dask's own exit handler, so it runs first: the client is
    closed (its futures released) before the cluster, with short timeouts. Left to Dask, an
    unclosed LocalCluster closed under a client that still wanted its results: every worker
    shut down while the scheduler recomputed them (an ERROR per trial, a heartbeat traceback)
    and the exit took 4-14 s.
    """

    def __init__(self, client: Client | None, cluster: Any, timeout: float = CLOSE_TIMEOUT):
        self.client, self.cluster, self.timeout = client, cluster, timeout
        self.done = client is None and cluster is None  # nothing of its own to close
        if not self.done:
            atexit.register(self)

    def __call__(self) -> None:
        if self.done:
            return
        self.done = True
        atexit.unregister(self)
        if self.client is not None:
            try:
                self.client.close(timeout=self.timeout)
            except Exception as exc:  # noqa: BLE001 - the cluster is closed all the same
                log.debug("closing the Dask client: %s", exc)
        if self.cluster is not None:
            self.cluster.close(timeout=self.timeout)


def _exit_now() -> None:
    """At a worker process's exit, after its worker closed: flush and leave at once."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream: nothing to flush
            pass
    os._exit(0)


class _ShutdownNoise(logging.Filter):
    """Drops a worker's heartbeat failure: in a LocalCluster abo started, the scheduler lives in
    the driver's process, so a worker that cannot reach it is one the driver is closing (on two
    busy cores the scheduler can stop a moment before its workers, and each logged an ERROR
    with a traceback after a successful run)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Failed to communicate with scheduler")


class _QuickExit(WorkerPlugin):
    """In each worker process of a LocalCluster abo started: once the worker has closed, the
    process leaves without the interpreter's teardown (freeing every module torch and the
    objective loaded took 0.2-0.5 s a worker, and seconds when eight shared two busy cores,
    while the driver waited for them to exit); its shutdown's heartbeat failure is not logged."""

    idempotent = True
    name = "abo-quick-exit"

    def setup(self, worker: Any) -> None:
        atexit.register(_exit_now)
        logging.getLogger("distributed.worker").addFilter(_ShutdownNoise())


async def _import(modules: list[str]) -> None:
    """On a worker: import ``modules``; a coroutine, which Dask runs without the driver
    waiting for it (``run(wait=False)``)."""
    for name in modules:
        importlib.import_module(name)


def _executing(key: str, dask_worker: Any = None) -> bool:
    """On a worker: is it running ``key`` now (not merely holding it in its queue)?"""
    return any(ts.key == key for ts in dask_worker.state.executing)


def _fate(key: str, dask_worker: Any = None) -> str:
    """On a worker, after ``key`` was cancelled: ``running`` (it had started: a cancelled task
    runs on in its thread), ``gone`` (released before it started), or ``pending`` (the
    cancellation has not reached this worker yet)."""
    if any(ts.key == key for ts in dask_worker.state.executing):
        return "running"
    return "pending" if key in dask_worker.state.tasks else "gone"
