"""What became of a job queue executor's submissions, turned into an error when none can run."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable

from distributed.core import Status

from abo.core.exceptions import AboError
from abo.executors.batch import _SUBMIT_TOOL

log = logging.getLogger("abo")


def _submit_error(tool: str, exc: BaseException) -> str:
    """One line on why a submission failed (the submit command's exit status and stderr)."""
    if isinstance(exc, FileNotFoundError):
        return f"{tool!r} is not on PATH (any more)"
    text = str(exc)
    code = re.search(r"Exit code: (-?\d+)", text)
    if code is None:  # not the command's failure: an unparsable answer, a broken script
        return f"submitting with {tool!r} failed: {type(exc).__name__}: {text[:500]}"
    err = " ".join(text.split("stderr:", 1)[-1].split())
    return f"{tool!r} refused the job (exit status {code[1]}): {err[:500] or 'no message'}"


class _JobWatch:
    """What became of the jobs: failed submissions, and how long work waited with no worker.

    dask-jobqueue submits in the background, logs a refused or impossible submission and
    never retries it, so without this a run waited, with its trials ``running``, until their
    lease ran out. ``check`` turns that into an ``AboError`` at the executor's next wait.
    """

    def __init__(self, system: str, start_timeout: float | None) -> None:
        self.system, self.tool = system, _SUBMIT_TOOL[system]
        self.start_timeout = start_timeout
        self.failures: list[str] = []
        self.submitted = 0
        self.idle_since: float | None = None
        self.warned = 0

    def job_class(self, base: type) -> type:
        """``base`` (the system's dask-jobqueue job) recording how each submission went."""
        watch = self

        class Watched(base):
            async def start(self) -> None:
                try:
                    await super().start()
                except Exception as exc:  # noqa: BLE001 - recorded; the run fails on it
                    watch.failures.append(_submit_error(watch.tool, exc))
                    # a placeholder that Dask closes like any job (there is none to cancel)
                    # instead of a traceback logged from inside its event loop
                    self.status = Status.running
                    return
                watch.submitted += 1

        Watched.__name__ = Watched.__qualname__ = base.__name__
        return Watched

    def check(self, workers: int, jobs: Callable[[], str]) -> None:
        """Raise when nothing can run the waiting work: every submission so far failed, or no
        worker connected for ``start_timeout`` seconds. ``workers`` connected now; ``jobs``
        describes the queue, for the message."""
        if self.failures and not self.submitted and not workers:
            raise AboError(f"{self.system}: no job could be submitted: {self.failures[-1]}")
        if len(self.failures) > self.warned:  # some failed, others were submitted
            for failure in self.failures[self.warned :]:
                log.warning("%s: a job submission failed: %s", self.system, failure)
            self.warned = len(self.failures)
        if workers:
            self.idle_since = None
            return
        now = time.monotonic()
        if self.idle_since is None:
            self.idle_since = now
        elif self.start_timeout is not None and now - self.idle_since > self.start_timeout:
            raise AboError(
                f"start_timeout: no {self.system} job started within {self.start_timeout:g} s "
                f"of work waiting ({jobs()}); on a busy cluster give a longer start_timeout "
                "(None waits as long as it takes), else look at the jobs' logs"
            )
