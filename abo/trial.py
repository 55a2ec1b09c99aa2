"""Trials: the frozen record of one evaluation and the states it moves through.

::

    running ──tell──▶ done
       │  ──fail──▶ failed      the parameters caused it (objective raised, diverged, infeasible)
       └──lease/worker/driver lost──▶ lost   the infrastructure did; parameters re-queued

``done``, ``failed`` and ``lost`` are final. A lost trial is not evidence about the objective:
its parameters come back as a new trial whose ``retry_of`` names it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from abo.exceptions import TrialStateError
from abo.space import ParamValue


class TrialState(enum.StrEnum):
    """Where a trial is in its life; every state but ``running`` is final."""

    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    LOST = "lost"

    def __str__(self) -> str:
        return self.value

    @property
    def is_finished(self) -> bool:
        return self is not TrialState.RUNNING


def check_transition(trial_id: int, old: TrialState, new: TrialState) -> None:
    """Raise ``TrialStateError`` unless ``old -> new`` is allowed (only running moves)."""
    if old is not TrialState.RUNNING or new is TrialState.RUNNING:
        raise TrialStateError(f"trial {trial_id}: cannot move from {old} to {new}")


@dataclass(frozen=True)
class Trial:
    """One evaluation of the objective at ``params``: a snapshot, never updated in place.

    Attributes:
        id: the trial's number in its study (1, 2, ...), assigned by the storage.
        params: decoded parameter values (ints are ``int``, categoricals one of the choices).
        state: ``running``, ``done``, ``failed`` or ``lost``.
        value: the objective value once ``done`` (as told, not sign-flipped).
        reason: why the trial failed or was lost.
        retry_of: id of the lost trial whose parameters this one retries.
        attempt: 0 for a first evaluation, 1 for its first retry, ...
        info: abo's own record: strategy, arm, proposal seconds, worker, timings.
        user: metadata the objective returned beside its value.
        created_at, finished_at: seconds since the epoch.
        lease_expires_at: when a running trial without a heartbeat is declared lost.

    Example:
        >>> t = Trial(id=1, study="s", params={"x": 0.5}, state=TrialState.DONE, value=1.0)
        >>> t.state.is_finished
        True
    """

    id: int
    study: str
    params: dict[str, ParamValue]
    state: TrialState
    value: float | None = None
    reason: str | None = None
    retry_of: int | None = None
    attempt: int = 0
    info: dict[str, Any] = field(default_factory=dict)
    user: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    finished_at: float | None = None
    lease_expires_at: float | None = None

    @property
    def duration(self) -> float | None:
        """Seconds from creation to the end (``None`` while running)."""
        if self.finished_at is None:
            return None
        return self.finished_at - self.created_at

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the trial."""
        return {
            "id": self.id,
            "study": self.study,
            "params": dict(self.params),
            "state": self.state.value,
            "value": self.value,
            "reason": self.reason,
            "retry_of": self.retry_of,
            "attempt": self.attempt,
            "info": dict(self.info),
            "user": dict(self.user),
            "created_at": self.created_at,
            "finished_at": self.finished_at,
            "lease_expires_at": self.lease_expires_at,
        }
