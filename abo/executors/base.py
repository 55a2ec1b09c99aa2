"""The one Executor protocol: where evaluations run.

Executors speak futures: ``submit`` returns a future with ``done()``, ``result()`` and
``cancel()``; ``wait`` returns the futures that finished, at the first completion or after a
timeout. Foreign errors (a dead worker, a cancelled job) are translated here, once, into
``LostEvaluation`` so the loop never needs to know which backend ran the trial.

An executor may also carry an objective's intermediate values back to the driver:
``open_reports(answer)`` returns a ``Sender`` (picklable where evaluations run in other
processes) that calls ``answer(request)`` in the driver's process and returns its reply;
``close_reports()`` releases it. An executor without them runs objectives that report, but
their ``trial.report`` says it has no channel. ``preload(modules)``, also optional, has the
workers import the modules evaluations will need, without waiting for them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, Protocol, runtime_checkable

Sender = Callable[[dict[str, Any]], dict[str, Any]]  # a report request in, the answer out


class LostEvaluation(Exception):
    """The infrastructure lost an evaluation (worker died, job cancelled): not the params' fault.

    ``worker_died`` is true when a worker process died while running it: a retry that kills
    its worker again is blamed on the parameters.
    """

    def __init__(self, message: str, worker_died: bool = False) -> None:
        super().__init__(message)
        self.worker_died = worker_died


@runtime_checkable
class Future(Protocol):
    def done(self) -> bool: ...

    def result(self, timeout: float | None = None) -> Any: ...

    def cancel(self) -> Any: ...


@runtime_checkable
class Executor(Protocol):
    """Runs evaluations asynchronously on ``n_workers`` workers."""

    n_workers: int

    def submit(self, fn: Callable[..., Any], *args: Any, key: str) -> Future:
        """Start ``fn(*args)``; ``key`` is unique per trial attempt (never deduplicated)."""
        ...

    def wait(self, futures: Collection[Future], timeout: float | None) -> set[Future]:
        """Block until at least one of ``futures`` is done or ``timeout`` passes."""
        ...

    def outcome(self, future: Future) -> Any:
        """The future's result; ``LostEvaluation`` when the infrastructure lost it."""
        ...

    def cancel(self, future: Future) -> None:
        """Stop an evaluation (a running one too, where the backend can)."""
        ...

    def withdraw(self, future: Future) -> bool:
        """Cancel an evaluation that has not started yet; ``False`` (and nothing done) if it
        is running or finished. Lets the loop drop what waits in the queue when it stops."""
        ...

    def close(self) -> None:
        """Release what the executor started (clusters, threads)."""
        ...
