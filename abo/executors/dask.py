"""``DaskExecutor``: evaluations on a Dask cluster (a LocalCluster of worker processes by default).

Every submission carries its own key (``abo-<study>-<trial>-<attempt>``, never ``pure``), so two
trials with equal parameters are two evaluations. The scheduler blames a task after one worker
death (``allowed-failures = 1``), so an objective that kills its worker fails its trial quickly
instead of taking three workers with it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import Any

import dask
from distributed import Client, LocalCluster, wait
from distributed.client import FutureCancelledError
from distributed.scheduler import KilledWorker

from abo.executors.base import Future, LostEvaluation


class DaskExecutor:
    """Runs evaluations on Dask.

    Args:
        n_workers: worker processes of the LocalCluster started when no address/client is given.
        threads_per_worker: threads per worker process.
        address: a running scheduler (``tcp://host:8786``) to connect to instead.
        client: a ``distributed.Client`` the caller built (not closed by ``close``).

    Example:
        >>> ex = DaskExecutor(n_workers=2)  # doctest: +SKIP
    """

    def __init__(
        self,
        n_workers: int = 4,
        threads_per_worker: int = 1,
        address: str | None = None,
        client: Client | None = None,
    ) -> None:
        self._cluster: LocalCluster | None = None
        self._own_client = client is None
        if client is not None:
            self.client = client
        elif address is not None:
            self.client = Client(address)
        else:
            with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
                self._cluster = LocalCluster(
                    n_workers=n_workers,
                    threads_per_worker=threads_per_worker,
                    processes=True,
                    host="127.0.0.1",
                    dashboard_address=None,
                    silence_logs=logging.ERROR,
                )
            self.client = Client(self._cluster)
        if client is not None or address is not None:
            n_workers = max(
                1,
                sum(w.get("nthreads", 1) for w in self.client.scheduler_info()["workers"].values()),
            )
        else:
            n_workers = n_workers * threads_per_worker
        self.n_workers = n_workers

    def submit(self, fn: Callable[..., Any], *args: Any, key: str) -> Future:
        return self.client.submit(fn, *args, key=key, pure=False)

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
            raise LostEvaluation(f"worker died: {exc}") from exc
        except FutureCancelledError as exc:
            raise LostEvaluation(f"cancelled: {exc}") from exc

    def close(self) -> None:
        if self._own_client:
            self.client.close()
        if self._cluster is not None:
            self._cluster.close()

    def __enter__(self) -> DaskExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
