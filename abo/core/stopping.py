"""Stopping rules: which running trials to end early, from the intermediate values they report.

A trial reports ``(step, value)`` pairs as it runs (``Study.report``); after each report the
study's rule decides, in the same transaction that stores the report, whether the trial goes
on. A stopped trial ends in the state ``stopped`` with its last reported value, and its worker
is free at once. Decisions read only the stored reports, so they are deterministic given the
order in which reports arrive.

* ``"none"`` (the default): every trial runs to its end, as in a study without reports.
* ``"asha"``: asynchronous successive halving (Li et al., 2020). Rungs lie at
  ``min_step * reduction_factor**k`` (below ``max_step`` when given). When a trial's report
  first reaches a rung, its value there is ranked against the values every trial had when it
  reached that rung (stopped and running ones included): of ``n`` trials there, the best
  ``max(1, n // reduction_factor)`` go on and the others stop. No trial waits for a rung to
  fill, which is what makes it asynchronous.
* ``"median"``: the median stopping rule (Golovin et al., 2017). From ``warmup_steps`` on, a
  trial stops when its best value so far is worse than the median, over the other trials that
  reached the same step (at least ``min_trials`` of them), of their best values up to that
  step.

Spelled ``stopping="asha"`` (the defaults below) or ``stopping={"rule": "asha",
"min_step": 1, "reduction_factor": 3}`` in Python, TOML and HTTP alike.

Example:
    >>> rule = make_rule(parse_stopping("asha"))
    >>> rule.rungs(10.0)
    [1.0, 3.0, 9.0]
"""

from __future__ import annotations

import bisect
import math
import numbers
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, Protocol

from abo.core.exceptions import AboError, InvalidValueError
from abo.core.outcomes import finite_float, shown
from abo.core.trial import Report

FIELD = "stopping"


@dataclass(frozen=True)
class Decision:
    """Whether a trial stops after its latest report, and why (the stopped trial's reason)."""

    stop: bool
    reason: str | None = None


class StoppingRule(Protocol):
    """Decides after each report whether the reporting trial stops."""

    rule: str

    def decide(
        self, trial_id: int, reports: Mapping[int, Sequence[Report]], sign: float
    ) -> Decision:
        """``reports``: every trial's reports in step order, the reporting trial's latest one
        last; ``sign`` is ``+1`` when larger values are better, ``-1`` when smaller are."""
        ...


def _steps(reports: Sequence[Report]) -> list[float]:
    return [r.step for r in reports]


def _shown(x: float) -> str:
    return f"{x:g}"


@dataclass(frozen=True)
class ASHA:
    """Asynchronous successive halving (the module docstring says how it decides)."""

    min_step: float = 1.0
    reduction_factor: int = 3
    max_step: float | None = None
    rule: str = "asha"

    def rungs(self, up_to: float) -> list[float]:
        """The rungs at or below ``up_to`` (and below ``max_step``)."""
        out: list[float] = []
        rung = float(self.min_step)
        while rung <= up_to and (self.max_step is None or rung < self.max_step):
            out.append(rung)
            rung *= self.reduction_factor
        return out

    def decide(
        self, trial_id: int, reports: Mapping[int, Sequence[Report]], sign: float
    ) -> Decision:
        mine = reports[trial_id]
        latest = mine[-1]
        before = mine[-2].step if len(mine) > 1 else -math.inf
        mine_u = sign * latest.value
        for rung in self.rungs(latest.step):
            if rung <= before:
                continue  # judged at this rung by an earlier report
            there = [mine_u]
            for other, theirs in reports.items():
                if other == trial_id:
                    continue
                k = bisect.bisect_left(_steps(theirs), rung)
                if k < len(theirs):
                    there.append(sign * theirs[k].value)  # its value on reaching the rung
            keep = max(1, len(there) // self.reduction_factor)
            better = sum(1 for u in there[1:] if u > mine_u)
            if better >= keep:
                return Decision(
                    True,
                    f"stopped by asha at step {_shown(latest.step)}: rung {_shown(rung)}, "
                    f"ranked {better + 1} of {len(there)} there, the best {keep} go on",
                )
        return Decision(False)


@dataclass(frozen=True)
class MedianRule:
    """The median stopping rule (the module docstring says how it decides)."""

    warmup_steps: float = 0.0
    min_trials: int = 5
    rule: str = "median"

    def decide(
        self, trial_id: int, reports: Mapping[int, Sequence[Report]], sign: float
    ) -> Decision:
        mine = reports[trial_id]
        step = mine[-1].step
        if step < self.warmup_steps:
            return Decision(False)
        best = max(sign * r.value for r in mine)
        others: list[float] = []
        for other, theirs in reports.items():
            if other == trial_id or theirs[-1].step < step:
                continue
            upto = [sign * r.value for r in theirs if r.step <= step]
            if upto:
                others.append(max(upto))
        if len(others) < self.min_trials:
            return Decision(False)
        median = statistics.median(others)
        if best < median:
            return Decision(
                True,
                f"stopped by median at step {_shown(step)}: best so far {sign * best:g} is "
                f"worse than the median {sign * median:g} of {len(others)} trials there",
            )
        return Decision(False)


RULES: dict[str, type] = {"asha": ASHA, "median": MedianRule}


def _number(value: Any, name: str, low: float, integer: bool = False, above: bool = False) -> Any:
    """A rule's setting checked: a finite number (an integer if ``integer``) within the float
    range (``10**400`` is refused, not an ``OverflowError``), above or at least ``low``."""
    number = finite_float(value)
    ok = number is not None and (number > low if above else number >= low)
    ok = ok and (not integer or isinstance(value, numbers.Integral))
    if not ok:
        what = "an integer" if integer else "a finite number"
        bound = f"above {low:g}" if above else f"of at least {low:g}"
        raise (InvalidValueError if number is None else AboError)(
            f"{FIELD}.{name}: expected {what} {bound}, got {shown(value)}",
            field=f"{FIELD}.{name}",
        )
    return int(value) if integer else number


def parse_stopping(value: Any) -> dict[str, Any] | None:
    """A stopping option (``None``, ``"none"``, ``"asha"``, ``"median"``, or a dict with
    ``rule`` and the rule's settings) as the stored dict with every setting filled in, or
    ``None`` for no rule. ``AboError`` naming the field that is wrong."""
    if value is None or value == "none":
        return None
    if isinstance(value, str):
        value = {"rule": value}
    if not isinstance(value, Mapping):
        raise AboError(
            f"{FIELD}: expected 'none', 'asha', 'median' or a dict with a 'rule', got "
            f"{type(value).__name__}",
            field=FIELD,
        )
    settings = {str(k): v for k, v in value.items()}
    name = settings.pop("rule", None)
    if name == "none" and not settings:
        return None
    if name not in RULES:
        raise AboError(
            f"{FIELD}.rule: expected one of none, {', '.join(RULES)}, got {name!r}",
            field=f"{FIELD}.rule",
        )
    cls = RULES[name]
    known = [f.name for f in fields(cls) if f.name != "rule"]
    unknown = sorted(set(settings) - set(known))
    if unknown:
        raise AboError(
            f"{FIELD}.{unknown[0]}: not a setting of {name} (settings: {', '.join(known)})",
            field=f"{FIELD}.{unknown[0]}",
        )
    if name == "asha":
        rule: Any = ASHA(
            min_step=_number(settings.get("min_step", 1.0), "min_step", 0.0, above=True),
            reduction_factor=_number(
                settings.get("reduction_factor", 3), "reduction_factor", 2, integer=True
            ),
            max_step=None
            if settings.get("max_step") is None
            else _number(settings["max_step"], "max_step", 0.0, above=True),
        )
        if rule.max_step is not None and rule.max_step <= rule.min_step:
            raise AboError(
                f"{FIELD}.max_step: must be above min_step ({rule.min_step:g}), got "
                f"{rule.max_step:g}",
                field=f"{FIELD}.max_step",
            )
    else:
        rule = MedianRule(
            warmup_steps=_number(settings.get("warmup_steps", 0.0), "warmup_steps", 0.0),
            min_trials=_number(settings.get("min_trials", 5), "min_trials", 1, integer=True),
        )
    out = asdict(rule)
    return {"rule": out.pop("rule"), **out}


def make_rule(config: Mapping[str, Any] | None) -> StoppingRule | None:
    """The rule of a stored stopping option (``None``: no rule)."""
    if config is None:
        return None
    settings = dict(config)
    cls = RULES[settings.pop("rule")]
    return cls(**settings)
