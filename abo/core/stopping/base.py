"""What every stopping rule shares: its verdict, its protocol, and reading a curve at a step."""

from __future__ import annotations

import bisect
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from abo.core.exceptions import AboError, InvalidValueError
from abo.core.outcomes import finite_float, shown
from abo.core.trial import Report

FIELD = "stopping"
Reports = Mapping[int, Sequence[Report]]  # each trial's reports, in step order


@dataclass(frozen=True)
class Decision:
    """Whether a trial stops after its latest report, and why (the stopped trial's reason)."""

    stop: bool
    reason: str | None = None


GO_ON = Decision(False)


class StoppingRule(Protocol):
    """Decides after each report whether the reporting trial stops."""

    rule: str

    def decide(self, trial_id: int, reports: Reports, sign: float) -> Decision:
        """``reports``: every trial's reports in step order, the reporting trial's latest one
        last; ``sign`` is ``+1`` when larger values are better, ``-1`` when smaller are."""
        ...


def value_at(reports: Sequence[Report], step: float) -> float | None:
    """The value a curve had on reaching ``step``: its first report at or after it (``None``
    when it never got there)."""
    k = bisect.bisect_left([r.step for r in reports], step)
    return reports[k].value if k < len(reports) else None


def horizon(reports: Reports, max_step: float | None) -> float:
    """A run's last step: ``max_step`` when set, else the furthest step any trial reported."""
    if max_step is not None:
        return max_step
    return max(theirs[-1].step for theirs in reports.values() if theirs)


def reached(reports: Sequence[Report], step: float) -> float:
    """The value of a curve that went past ``step`` on reaching it."""
    value = value_at(reports, step)
    assert value is not None, "only finished curves are read, and they reached every step"
    return value


def judged_against(
    trial_id: int, reports: Reports, max_step: float | None, warmup_steps: float, least: int
) -> tuple[float, list[int]] | None:
    """For the rules that read finished curves: the last step and the other trials that reached
    it (in id order), or ``None`` when the trial is not judged now (before ``warmup_steps``, at
    its last step, or with fewer than ``least`` finished curves)."""
    step = reports[trial_id][-1].step
    end = horizon(reports, max_step)
    if step < warmup_steps or step >= end:
        return None
    finished = sorted(t for t, r in reports.items() if t != trial_id and r and r[-1].step >= end)
    return (end, finished) if len(finished) >= least else None


def step_text(x: float) -> str:
    """A step as a reason shows it (``3``, not ``3.0``)."""
    return f"{x:g}"


def number(value: Any, name: str, low: float, integer: bool = False, above: bool = False) -> Any:
    """A rule's setting checked: a finite number (an integer if ``integer``) within the float
    range (``10**400`` is refused, not an ``OverflowError``), above or at least ``low``."""
    got = finite_float(value)
    ok = got is not None and (got > low if above else got >= low)
    ok = ok and (not integer or isinstance(value, numbers.Integral))
    if not ok:
        what = "an integer" if integer else "a finite number"
        bound = f"above {low:g}" if above else f"of at least {low:g}"
        raise (InvalidValueError if got is None else AboError)(
            f"{FIELD}.{name}: expected {what} {bound}, got {shown(value)}",
            field=f"{FIELD}.{name}",
        )
    return int(value) if integer else got


def optional_step(settings: dict[str, Any], name: str, above: float = 0.0) -> float | None:
    """An optional step setting (``None`` when absent), which must lie above ``above``."""
    if settings.get(name) is None:
        return None
    step = number(settings[name], name, 0.0, above=True)
    if step <= above:
        raise AboError(
            f"{FIELD}.{name}: must be above min_step ({above:g}), got {step:g}",
            field=f"{FIELD}.{name}",
        )
    return float(step)
