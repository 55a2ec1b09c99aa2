"""What one ``optimize`` call did (``OptimizeResult``), and the failure-rate guard that stops it."""

from __future__ import annotations

from dataclasses import dataclass, field

from abo.analysis.summary import sources_line
from abo.core.exceptions import FailureRateExceeded
from abo.core.trial import Trial, TrialState


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
    # where the started trials' parameters came from (``abo.analysis.summary.proposal_source``)
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

    def tally(self, stored: Trial, max_retries: int) -> int:
        """Count a finished trial; 1 if it counts against the budget (a retried loss does not)."""
        counts = 1
        if stored.state is TrialState.DONE:
            self.n_done += 1
        elif stored.state is TrialState.FAILED:
            self.n_failed += 1
            reason = stored.reason or "no reason given"
            self.failure_reasons[reason] = self.failure_reasons.get(reason, 0) + 1
        elif stored.state is TrialState.STOPPED:
            self.n_stopped += 1
        elif stored.state is TrialState.LOST:
            self.n_lost += 1
            counts = int(stored.attempt >= max_retries)  # no retry follows: it uses up budget
        return counts


@dataclass(frozen=True)
class FailureGuard:
    """Stop when more than ``max_rate`` of at least ``min_failures`` finished trials failed."""

    max_rate: float = 0.5
    min_failures: int = 5

    def tripped(self, n_done: int, n_failed: int) -> bool:
        finished = n_done + n_failed
        return n_failed >= self.min_failures and n_failed > self.max_rate * finished

    def error(self, result: OptimizeResult) -> FailureRateExceeded:
        """The error a run this guard stopped raises, carrying its ``result``."""
        common = result.common_failure
        cause = (
            f" Most common cause ({common[1]} of {result.n_failed}): {_shorten(common[0])}."
            if common
            else ""
        )
        exc = FailureRateExceeded(
            f"n_failed: {result.n_failed} of {result.n_done + result.n_failed} finished trials "
            f"failed (more than {self.max_rate:.0%} of at least {self.min_failures}); "
            f"stopped instead of burning the budget.{cause} {result.summary()}"
        )
        exc.result = result  # type: ignore[attr-defined]
        return exc


def _shorten(text: str, limit: int = 200) -> str:
    """``text`` on one line, cut to ``limit`` characters (a failure's reason in a message)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
