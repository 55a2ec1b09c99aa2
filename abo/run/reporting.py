"""How a running objective reports intermediate values: ``TrialHandle`` and its answers.

An objective that takes a second argument, ``def objective(params, trial)``, gets a
``TrialHandle``; ``trial.report(step, value)`` sends the value to the study (through the
executor's channel: a direct call on threads, a Dask queue from worker processes and batch
jobs) and returns whether the run should stop::

    def objective(params, trial):
        for epoch in range(1, 51):
            loss = train_one_epoch(params)
            if trial.report(epoch, loss):
                return loss          # the study stopped it: end the run now
        return loss

Each report is stored, durably, before ``report`` returns, and judged by the study's stopping
rule (``abo.core.stopping``). The driver side, ``answer``, turns the study's verdict into a small
JSON-able dict, so every channel carries the same thing.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from abo.core.exceptions import AboError, InvalidValueError, TrialStateError
from abo.core.outcomes import check_number
from abo.core.trial import TrialState
from abo.executors.base import Sender

if TYPE_CHECKING:
    from abo.study.protocol import StudyLike


_ERRORS: dict[str, type[AboError]] = {
    "InvalidValueError": InvalidValueError,
    "TrialStateError": TrialStateError,
}


def answer(study: StudyLike, request: dict[str, Any]) -> dict[str, Any]:
    """The study's answer to one report request ``{"id", "step", "value"}``: ``{"stop": bool}``,
    or ``{"error", "type", "field"}`` for a report the study refused (nothing was stored).

    A trial that is no longer running (lost meanwhile, or stopped) is told to stop.
    """
    trial_id: Any = request.get("id")
    try:
        return {"stop": bool(study.report(trial_id, request.get("step"), request.get("value")))}
    except TrialStateError as exc:
        try:
            running = study.trial(trial_id).state is TrialState.RUNNING
        except AboError:
            running = False
        if not running:
            return {"stop": True, "reason": str(exc)}
        return {"error": str(exc), "type": "TrialStateError", "field": exc.field}
    except AboError as exc:
        return {"error": str(exc), "type": type(exc).__name__, "field": exc.field}
    except Exception as exc:  # noqa: BLE001 - the storage or the service failed: say so
        return {"error": f"report: not recorded: {type(exc).__name__}: {exc}", "type": "AboError"}


def takes_trial(objective: Callable[..., Any]) -> bool:
    """Whether the objective takes the trial's handle: ``accepts_trial = True`` (``Command``),
    or a second positional parameter that has no default or is named ``trial``
    (``def objective(params, trial)``). A second parameter with a default, as in
    ``def objective(params, scale=1.0)``, is the objective's own option: it keeps its value."""
    if getattr(objective, "accepts_trial", False):
        return True
    try:
        parameters = inspect.signature(objective).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) < 2:
        return False
    second = positional[1]
    return second.default is inspect.Parameter.empty or second.name == "trial"


class TrialHandle:
    """A running trial as its objective sees it: ``id``, ``study``, ``attempt``, ``params``,
    and ``report`` for intermediate values.

    ``trial["id"]`` and ``trial.get("study")`` work too, as for the plain dict objectives
    with ``accepts_trial`` were given before.
    """

    def __init__(
        self,
        study: str,
        id: int,
        attempt: int = 0,
        params: dict[str, Any] | None = None,
        send: Sender | None = None,
    ) -> None:
        self.study, self.id, self.attempt = study, id, attempt
        self.params = dict(params or {})
        self._send = send
        self.should_stop = False
        self.stop_reason: str | None = None
        self.last: tuple[float, float] | None = None

    def __repr__(self) -> str:
        return f"TrialHandle(study={self.study!r}, id={self.id}, attempt={self.attempt})"

    def __getitem__(self, key: str) -> Any:
        if key not in ("study", "id", "attempt"):
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in ("study", "id", "attempt") else default

    def report(self, step: Any, value: Any) -> bool:
        """Report ``value`` after ``step`` (steps increase); ``True`` means stop now.

        Raises:
            InvalidValueError: a NaN, infinite or non-numeric value or step (not sent).
            AboError: the study refused the report (a step that goes backwards), or this
                trial was not started by ``optimize``, which provides the channel.
        """
        step_f = check_number(step, "step")
        value_f = check_number(value, "value")
        if self._send is None:
            raise AboError(
                "report: this trial has no channel to its study (only trials run by "
                "optimize have one; an ask/tell loop calls study.report)",
                field="report",
            )
        reply = self._send(
            {"id": self.id, "attempt": self.attempt, "step": step_f, "value": value_f}
        )
        if "error" in reply:
            cls = _ERRORS.get(str(reply.get("type")), AboError)
            raise cls(str(reply["error"]), field=reply.get("field"))
        self.last = (step_f, value_f)
        if reply.get("stop"):
            self.should_stop = True
            self.stop_reason = reply.get("reason")
        return self.should_stop
