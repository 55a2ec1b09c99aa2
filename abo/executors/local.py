"""``ThreadExecutor``: evaluations on threads of this process, for cheap objectives and tests.

Threads cannot be killed: a timed-out or cancelled evaluation that is already running finishes
in the background (its result is ignored). Use ``DaskExecutor`` when that matters.
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable, Collection
from typing import Any

from abo.executors.base import Future, LostEvaluation, Sender


class ThreadExecutor:
    """Runs evaluations on ``n_workers`` threads of this process.

    Example:
        >>> with ThreadExecutor(2) as ex:
        ...     fut = ex.submit(pow, 2, 3, key="k")
        ...     ex.outcome(fut)
        8
    """

    def __init__(self, n_workers: int = 4) -> None:
        if not isinstance(n_workers, int) or n_workers < 1:
            raise ValueError(f"n_workers: expected a positive integer, got {n_workers!r}")
        self.n_workers = n_workers
        self._pool = cf.ThreadPoolExecutor(n_workers, thread_name_prefix="abo-worker")

    def submit(self, fn: Callable[..., Any], *args: Any, key: str) -> Future:
        return self._pool.submit(fn, *args)

    def wait(self, futures: Collection[Future], timeout: float | None) -> set[Future]:
        done, _ = cf.wait(list(futures), timeout=timeout, return_when=cf.FIRST_COMPLETED)  # type: ignore[arg-type]
        return set(done)

    def outcome(self, future: Future) -> Any:
        try:
            return future.result()
        except cf.CancelledError as exc:
            raise LostEvaluation("cancelled") from exc

    def cancel(self, future: Future) -> None:
        """Cancel a queued evaluation; a running thread cannot be stopped and runs out."""
        future.cancel()

    def withdraw(self, future: Future) -> bool:
        return bool(future.cancel())  # False once a thread has picked it up

    def open_reports(self, answer: Callable[[dict[str, Any]], dict[str, Any]]) -> Sender:
        """The objective's reports: a direct call (the threads share the driver's process)."""
        return answer

    def close_reports(self) -> None:
        """Nothing to release: the channel is a plain call."""

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> ThreadExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
