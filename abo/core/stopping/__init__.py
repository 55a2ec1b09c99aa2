"""Stopping rules: which running trials to end early, from the intermediate values they report.

A trial reports ``(step, value)`` pairs as it runs (``Study.report``); after each report the
study's rule decides, in the same transaction that stores the report, whether the trial goes
on. A stopped trial ends in the state ``stopped`` with its last reported value, and its worker
is free at once. Decisions read only the stored reports (and the trial ids), so they are
deterministic given the order in which reports arrive.

* ``"none"`` (the default): every trial runs to its end, as in a study without reports.
* ``"asha"``: asynchronous successive halving (``rungs.ASHA``).
* ``"hyperband"``: asynchronous Hyperband, ASHA in brackets of different first rungs, one of
  which never stops (``rungs.Hyperband``).
* ``"pasha"``: progressive ASHA, whose largest step grows only while the rankings at the top
  two rungs disagree (``rungs.PASHA``).
* ``"median"``: the median stopping rule (``median.MedianRule``).
* ``"curve"``: learning-curve matching, stopping a run whose likely end cannot beat the best
  end so far (``extrapolation.CurveRule``).
* ``"predict"``: learning-curve prediction, stopping a run whose predicted end (with its
  uncertainty) is unlikely to beat the best end so far (``prediction.PredictRule``).

Spelled ``stopping="asha"`` (the defaults) or ``stopping={"rule": "asha", "min_step": 1,
"reduction_factor": 3}`` in Python, TOML and HTTP alike.

Example:
    >>> rule = make_rule(parse_stopping("asha"))
    >>> rule.rungs(10.0)
    [1.0, 3.0, 9.0]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, fields
from typing import Any

from abo.core.exceptions import AboError
from abo.core.stopping.base import FIELD, Decision, StoppingRule
from abo.core.stopping.extrapolation import CurveRule
from abo.core.stopping.median import MedianRule
from abo.core.stopping.prediction import PredictRule
from abo.core.stopping.rungs import ASHA, PASHA, Hyperband

__all__ = [
    "ASHA",
    "FIELD",
    "RULES",
    "CurveRule",
    "Decision",
    "Hyperband",
    "MedianRule",
    "PASHA",
    "PredictRule",
    "StoppingRule",
    "make_rule",
    "parse_stopping",
]

RULES: dict[str, Any] = {"asha": ASHA, "hyperband": Hyperband, "pasha": PASHA,
                         "median": MedianRule, "curve": CurveRule,
                         "predict": PredictRule}  # fmt: skip


def parse_stopping(value: Any) -> dict[str, Any] | None:
    """A stopping option (``None``, ``"none"``, a rule's name, or a dict with ``rule`` and the
    rule's settings) as the stored dict with every setting filled in, or ``None`` for no
    rule. ``AboError`` naming the field that is wrong."""
    if value is None or value == "none":
        return None
    if isinstance(value, str):
        value = {"rule": value}
    if not isinstance(value, Mapping):
        raise AboError(
            f"{FIELD}: expected 'none', {', '.join(repr(r) for r in RULES)} or a dict with a "
            f"'rule', got {type(value).__name__}",
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
    out = asdict(cls.parse(settings))
    return {"rule": out.pop("rule"), **out}


def make_rule(config: Mapping[str, Any] | None) -> StoppingRule | None:
    """The rule of a stored stopping option (``None``: no rule)."""
    if config is None:
        return None
    settings = dict(config)
    rule: StoppingRule = RULES[settings.pop("rule")](**settings)
    return rule
