"""Trials: the frozen record of one evaluation and the states it moves through.

::

    running ──tell──▶ done
       │  ──fail──▶ failed      the parameters caused it (objective raised, diverged, infeasible)
       │  ──report──▶ stopped   a stopping rule ended it early (``abo.core.stopping``)
       └──lease/worker/driver lost──▶ lost   the infrastructure did; parameters re-queued

``done``, ``failed``, ``stopped`` and ``lost`` are final. A stopped trial ran well enough to
report but was not worth finishing: it keeps its last reported value (an observation at a
lower step, not a final result: never the study's best), where a failed trial has none. A
lost trial is not evidence about the objective: its parameters come back as a new trial whose
``retry_of`` names it. Which moves are allowed, and what a repeat does, is decided in
``abo.storage.lifecycle``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from abo.core.space import ParamValue


class TrialState(enum.StrEnum):
    """Where a trial is in its life; every state but ``running`` is final."""

    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    LOST = "lost"
    STOPPED = "stopped"

    def __str__(self) -> str:
        return self.value

    @property
    def is_finished(self) -> bool:
        return self is not TrialState.RUNNING


@dataclass(frozen=True)
class ModelRecord:
    """The GP hyperparameters a proposal used, so any process can continue from them.

    Attributes:
        hypers: raw hyperparameters by parameter name (exact through JSON).
        key: a digest of the observed trial ids the hyperparameters were fitted on.
        n: how many observations the fit saw.
    """

    hypers: dict[str, list[float]]
    key: str
    n: int

    def to_json(self) -> dict[str, Any]:
        return {
            "hypers": {k: list(v) for k, v in self.hypers.items()},
            "key": self.key,
            "n": self.n,
        }

    @classmethod
    def from_json(cls, data: Any) -> ModelRecord | None:
        """The record, or ``None`` when ``data`` is not a well-formed one (never raises)."""
        if not isinstance(data, Mapping):
            return None
        hypers, key, n = data.get("hypers"), data.get("key"), data.get("n")
        if not (isinstance(hypers, Mapping) and isinstance(key, str)):
            return None
        if isinstance(n, bool) or not isinstance(n, int):
            return None
        clean: dict[str, list[float]] = {}
        for name, values in hypers.items():
            if not isinstance(values, list) or not all(_finite(v) for v in values):
                return None
            clean[str(name)] = [float(v) for v in values]
        return cls(clean, key, n)


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


BOOKKEEPING = frozenset({"sobol", "warm-start", "enqueued", "added", "retry"})
"""``ProposalRecord.strategy`` values that no strategy chose (the design, queues, retries)."""


@dataclass(frozen=True)
class ProposalRecord:
    """How a trial's parameters were chosen: abo's own record, apart from the caller's ``info``.

    Attributes:
        strategy: ``"sobol"`` (initial design), ``"warm-start"`` (a warm start's source point,
            ``abo.spec.warm_start``), ``"enqueued"``, ``"added"``, ``"retry"``, or the
            strategy's name (``"random"`` with ``fallback`` when the model could not be had).
        arm: the arm of a portfolio-like strategy (AEGiS), if any.
        seconds: proposal time per point; ``fit_seconds``: of which fitting the GP.
        n_observations: observations the model saw; ``gp_points``: of which the GP was fitted
            on (fewer above ``max_exact``); ``fit_observations``: what its hyperparameters saw.
        model: the GP's hyperparameters (``ModelRecord``), read back by the next proposal.
        deduplicated: the strategy's point repeated one the study had; a random one replaced it.
        fallback: the strategy could not propose (no model) and random points were used.
        details: anything else the strategy reported (e.g. UCB's ``beta``).
    """

    strategy: str
    arm: str | None = None
    seconds: float | None = None
    fit_seconds: float | None = None
    n_observations: int | None = None
    gp_points: int | None = None
    fit_observations: int | None = None
    model: ModelRecord | None = None
    deduplicated: bool = False
    fallback: bool = False
    details: dict[str, Any] = field(default_factory=dict)

    _KEYS = (
        "strategy", "arm", "seconds", "fit_seconds", "n_observations", "gp_points",
        "fit_observations", "model", "deduplicated", "fallback",
    )  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"strategy": self.strategy}
        for key in self._KEYS[1:]:
            value = getattr(self, key)
            if value is None or value is False:
                continue
            out[key] = value.to_json() if isinstance(value, ModelRecord) else value
        if self.details:
            out["details"] = dict(self.details)
        return out

    @classmethod
    def from_json(cls, data: Any) -> ProposalRecord | None:
        """The record ``to_json`` wrote (or an older release's info keys); ``None`` if none."""
        if not isinstance(data, Mapping) or not isinstance(data.get("strategy"), str):
            return None
        details = dict(data.get("details") or {})
        details.update({k: v for k, v in data.items() if k not in cls._KEYS and k != "details"})
        seconds = data.get("seconds", data.get("proposal_seconds"))
        return cls(
            strategy=data["strategy"],
            arm=data.get("arm") if isinstance(data.get("arm"), str) else None,
            seconds=float(seconds) if _finite(seconds) else None,
            fit_seconds=float(data["fit_seconds"]) if _finite(data.get("fit_seconds")) else None,
            n_observations=_int(data.get("n_observations")),
            gp_points=_int(data.get("gp_points")),
            fit_observations=_int(data.get("fit_observations")),
            model=ModelRecord.from_json(data.get("model")),
            deduplicated=data.get("deduplicated") is True,
            fallback=data.get("fallback") is True,
            details=details,
        )


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@dataclass(frozen=True)
class Report:
    """One intermediate value a running trial reported: ``value`` after ``step`` (an epoch,
    an iteration, a mesh level), at ``at`` seconds since the epoch."""

    step: float
    value: float
    at: float = 0.0

    def to_json(self) -> dict[str, float]:
        step = int(self.step) if float(self.step).is_integer() else self.step
        return {"step": step, "value": self.value, "at": self.at}


@dataclass(frozen=True)
class Trial:
    """One evaluation of the objective at ``params``: a snapshot, never updated in place.

    Attributes:
        id: the trial's number in its study (1, 2, ...), assigned by the storage.
        params: decoded parameter values (ints are ``int``, categoricals one of the choices).
        state: ``running``, ``done``, ``failed``, ``stopped`` or ``lost``.
        value: the objective's value once ``done`` (as told, not sign-flipped), in a study of
            one objective; ``None`` in a study of several (see ``values``). A ``stopped``
            trial holds its last reported value.
        values: every outcome's value by name once ``done`` (``{}`` before).
        reason: why the trial failed or was lost.
        retry_of: id of the lost trial whose parameters this one retries.
        attempt: 0 for a first evaluation, 1 for its first retry, ...
        proposal: how its parameters were chosen (``ProposalRecord``): abo's own record.
        info: the caller's and the loop's bookkeeping: driver, worker, timings, client id.
        user: metadata the objective returned beside its outcomes.
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
    values: dict[str, float] = field(default_factory=dict)
    proposal: ProposalRecord | None = None
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
            "values": dict(self.values),
            "proposal": self.proposal.to_json() if self.proposal is not None else None,
            "info": dict(self.info),
            "user": dict(self.user),
            "created_at": self.created_at,
            "finished_at": self.finished_at,
            "lease_expires_at": self.lease_expires_at,
        }
