"""A study's fidelity: the parameter that trades an evaluation's accuracy against its cost.

Many objectives can be measured cheaply and roughly or expensively and exactly: a training
run for 3 epochs or for 81, a simulation on a coarse mesh or a fine one, a coin cell or a
pouch cell. A study declares such a parameter its *fidelity*; the objective reads it like any
other parameter (``params["epochs"]``), and the default strategy (``multifidelity``) proposes
each point together with the fidelity to evaluate it at, weighing what a cheap evaluation
teaches about the *target* fidelity (where the study is optimised) against what it costs.

* ``fidelity="epochs"``: the parameter called ``epochs`` of the space (``Float``, ``Int`` or
  ``Categorical``, whose choices are listed cheapest first); the target is its highest value
  (the last choice), and the cost of each fidelity is learned from how long evaluations took.
* ``fidelity={"parameter": "cell", "target": "pouch", "cost": {"coin": 1, "pouch": 20}}``:
  an explicit target and a given cost: for a numeric fidelity ``{"fixed": a, "per_unit": b}``
  (an evaluation at ``s`` costs ``a + b * s``), for a categorical one a cost per choice.

Only trials at the target fidelity are results: ``study.best``, ``abo best`` and the
dashboard's best value count those alone; the others are evidence for the model.

With a numeric fidelity, a trial's reports (``study.report``, ``trial.report``) are
observations at lower fidelities of the same point: the report at step ``s`` is the value at
fidelity ``s`` (report steps are in the fidelity's units, epochs for epochs). So early stopping
and the model work together: a stopping rule decides what stops, the model what starts.

Example:
    >>> import abo
    >>> space = abo.Space({"x": abo.Float(0, 1), "epochs": abo.Int(1, 81, log=True)})
    >>> f = Fidelity.parse("epochs", space)
    >>> f.target, f.cost_of(81) / f.cost_of(1)
    (81, 10.0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from abo.core.exceptions import AboError, InvalidValueError
from abo.core.outcomes import finite_float, shown
from abo.core.space import Categorical, Float, Int, ParamValue, Space
from abo.core.trial import Report, Trial, TrialState

FIELD = "fidelity"
N_LEVELS = 9
"""How many fidelities of a numeric fidelity a proposal weighs (evenly spread over its own
encoding, so a log-scaled one gets as many small values as large ones)."""
PRIOR_RATIO = 10.0
"""Before durations say otherwise, the target costs this many times the lowest fidelity."""
MIN_COST_SAMPLES = 3
"""Finished trials at two or more fidelities before the cost is learned from durations."""
RUNGS = 8
"""Of a trial's reports, the model sees the first to reach each ninth of the fidelity's
encoded range (and a stopped trial's last): at most nine per trial, stable as reports arrive."""


@dataclass(frozen=True)
class Fidelity:
    """A study's fidelity parameter, its target and its cost model (see the module).

    Attributes:
        parameter: the name of the fidelity parameter in the space.
        param: that parameter.
        target: the fidelity the study is optimised at.
        cost: the given cost (``{"fixed", "per_unit"}`` or a cost per choice), or ``None``:
            learned from the trials' evaluation times.
    """

    parameter: str
    param: Float | Int | Categorical
    target: ParamValue
    cost: Mapping[str, float] | None = None

    # -- parsing ------------------------------------------------------------------------------
    @classmethod
    def parse(cls, value: Any, space: Space) -> Fidelity:
        """The fidelity of a ``fidelity=`` option (a parameter name or a dict), checked
        against ``space``; ``AboError`` naming the field that is wrong."""
        if isinstance(value, str):
            value = {"parameter": value}
        if not isinstance(value, Mapping):
            raise AboError(
                f"{FIELD}: expected a parameter name or a dict with 'parameter', got "
                f"{type(value).__name__}",
                field=FIELD,
            )
        settings = {str(k): v for k, v in value.items()}
        unknown = sorted(set(settings) - {"parameter", "target", "cost"})
        if unknown:
            raise AboError(
                f"{FIELD}.{unknown[0]}: not a setting of a fidelity (settings: parameter, "
                "target, cost)",
                field=f"{FIELD}.{unknown[0]}",
            )
        name = settings.get("parameter")
        if not isinstance(name, str) or name not in space:
            raise AboError(
                f"{FIELD}.parameter: expected the name of a parameter of the space "
                f"({', '.join(space)}), got {name!r}",
                field=f"{FIELD}.parameter",
            )
        if len(space) < 2:
            raise AboError(
                f"{FIELD}.parameter: the space needs a parameter beside the fidelity {name!r}",
                field=f"{FIELD}.parameter",
            )
        param = space[name]
        default = param.choices[-1] if isinstance(param, Categorical) else param.high
        raw_target = settings.get("target")
        if raw_target is None:
            target: ParamValue = default
        else:
            try:
                target = param.check(f"{FIELD}.target", raw_target)
            except AboError as exc:
                raise AboError(str(exc), field=f"{FIELD}.target") from None
        cost = _check_cost(settings.get("cost"), param)
        made = cls(name, param, target, cost)
        if not isinstance(param, Categorical) and made.cost is not None:
            low = made.cost_of(param.low)
            if not low > 0:
                raise AboError(
                    f"{FIELD}.cost: an evaluation at {param.low} would cost {low:g}; every "
                    "fidelity must cost more than 0",
                    field=f"{FIELD}.cost",
                )
            high = made.cost_of(param.high)
            if not math.isfinite(high):
                raise AboError(
                    f"{FIELD}.cost: an evaluation at {param.high} would cost {high:g}, beyond "
                    "the float range; give smaller fixed and per_unit costs",
                    field=f"{FIELD}.cost",
                )
        return made

    @classmethod
    def from_stored(cls, stored: Mapping[str, Any], space: Space) -> Fidelity:
        """The fidelity of a stored spec (``to_json``'s form)."""
        return cls.parse(stored, space)

    def to_json(self) -> dict[str, Any]:
        return {
            "parameter": self.parameter,
            "target": self.target,
            "cost": None if self.cost is None else dict(self.cost),
        }

    # -- values --------------------------------------------------------------------------------
    @property
    def numeric(self) -> bool:
        """Whether the fidelity is a number (``Float``/``Int``): reports can then be read as
        observations at lower fidelities."""
        return not isinstance(self.param, Categorical)

    def at_target(self, trial: Trial) -> bool:
        """Whether ``trial`` was evaluated at the target fidelity (a result of the study)."""
        value = trial.params.get(self.parameter)
        if isinstance(self.param, Categorical):
            return self.param._index(value) == self.param._index(self.target)
        return isinstance(value, int | float) and math.isclose(
            float(value), float(self.target), rel_tol=1e-12, abs_tol=1e-12
        )

    def levels(self) -> list[ParamValue]:
        """The fidelities a proposal weighs, cheapest first, the target last: every choice of a
        categorical fidelity; ``N_LEVELS`` values of a numeric one up to the target."""
        param = self.param
        if isinstance(param, Categorical):
            return list(param.choices)
        top = param.encode(self.target)[0]
        out: list[ParamValue] = []
        for k in range(N_LEVELS):
            value = param.decode([top * k / (N_LEVELS - 1)])
            if value not in out:
                out.append(value)
        if out[-1] != self.target:
            out.append(self.target)
        return out

    def encode(self, value: ParamValue | float) -> list[float]:
        """The fidelity's columns in the unit cube for ``value`` (a report's step too)."""
        return self.param.encode(value)

    # -- cost ----------------------------------------------------------------------------------
    def cost_of(self, value: ParamValue, model: Mapping[str, float] | None = None) -> float:
        """What an evaluation at ``value`` costs: by ``model`` (``cost_model``'s), else the
        given cost, else the prior (the target ``PRIOR_RATIO`` times the lowest fidelity)."""
        model = model if model is not None else self.cost or self.prior()
        if isinstance(self.param, Categorical):
            return float(model[str(value)])
        return float(model["fixed"]) + float(model["per_unit"]) * float(value)

    def prior(self) -> dict[str, float]:
        """The cost before any duration is known: linear in the fidelity (in positions of
        the choices), the target ``PRIOR_RATIO`` times the lowest."""
        param = self.param
        if isinstance(param, Categorical):
            top = param._index(self.target) or 0
            return {
                str(c): (1.0 + (PRIOR_RATIO - 1.0) * i / max(1, top))
                for i, c in enumerate(param.choices)
            }
        low, high = float(param.low), float(self.target)
        span = high - low if high > low else float(param.high) - low
        # cost(s) = s - low + span / (ratio - 1): the target costs `ratio` times the lowest
        return {"fixed": span / (PRIOR_RATIO - 1.0) - low, "per_unit": 1.0}

    def cost_model(self, trials: Sequence[Trial], reports: Mapping[int, Sequence[Report]]) -> dict:
        """The cost per fidelity: the given one, or learned from the finished trials'
        evaluation seconds (the loop's ``eval_seconds``, else creation to end) once
        ``MIN_COST_SAMPLES`` of them span two fidelities: least squares of ``a + b * s`` with
        ``a, b >= 0`` for a numeric fidelity (a stopped trial at its last reported step), the
        mean per choice of a categorical one. Before that, ``prior``."""
        if self.cost is not None:
            return dict(self.cost)
        samples: list[tuple[ParamValue, float]] = []
        for t in trials:
            if t.state not in (TrialState.DONE, TrialState.STOPPED, TrialState.FAILED):
                continue
            seconds = t.info.get("eval_seconds", t.duration)
            if not isinstance(seconds, int | float) or not math.isfinite(seconds) or seconds <= 0:
                continue
            value = t.params.get(self.parameter)
            if t.state is TrialState.STOPPED and self.numeric and reports.get(t.id):
                value = reports[t.id][-1].step
            samples.append((value, float(seconds)))  # type: ignore[arg-type]
        distinct = {str(v) for v, _ in samples}
        if len(samples) < MIN_COST_SAMPLES or len(distinct) < 2:
            return self.prior()
        if isinstance(self.param, Categorical):
            by: dict[str, list[float]] = {}
            for v, s in samples:
                by.setdefault(str(v), []).append(s)
            prior = self.prior()
            seen = [c for c in prior if c in by]
            mean = {c: sum(by[c]) / len(by[c]) for c in seen}
            # unseen choices: the prior, scaled to the seen ones
            scale = sum(mean[c] for c in seen) / sum(prior[c] for c in seen)
            return {c: mean.get(c, scale * p) for c, p in prior.items()}
        return _affine([float(v) for v, _ in samples], [s for _, s in samples])


def _affine(s: list[float], y: list[float]) -> dict[str, float]:
    """Least squares of ``y = a + b * s`` with ``a, b >= 0`` (and a cost above zero at the
    lowest ``s``)."""
    n = len(s)
    ms, my = sum(s) / n, sum(y) / n
    sxx = sum((v - ms) ** 2 for v in s)
    b = sum((v - ms) * (w - my) for v, w in zip(s, y, strict=True)) / sxx if sxx > 0 else 0.0
    a = my - b * ms
    if b < 0:
        a, b = my, 0.0
    elif a < 0:
        sxx0 = sum(v * v for v in s)
        a, b = 0.0, (sum(v * w for v, w in zip(s, y, strict=True)) / sxx0 if sxx0 > 0 else 0.0)
    floor = 1e-3 * max(y)  # no fidelity is free
    if a + b * min(s) < floor:
        a = floor - b * min(s)
    return {"fixed": a, "per_unit": b}


def _check_cost(value: Any, param: Float | Int | Categorical) -> dict[str, float] | None:
    """A given cost, checked (``None``/``"learned"``: learned from durations)."""
    if value is None or value == "learned":
        return None
    name = f"{FIELD}.cost"
    if not isinstance(value, Mapping):
        raise AboError(
            f"{name}: expected 'learned' or a dict, got {type(value).__name__}", field=name
        )

    def number(v: Any, key: str, positive: bool) -> float:
        x = finite_float(v)  # None for 10**400 too (no OverflowError)
        if x is None or not (x > 0 if positive else x >= 0):
            what = "a positive" if positive else "a non-negative"
            raise (InvalidValueError if x is None else AboError)(
                f"{name}.{key}: expected {what} finite number, got {shown(v)}", field=name
            )
        return x

    if isinstance(param, Categorical):
        names = [str(c) for c in param.choices]
        given = {str(k): v for k, v in value.items()}
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise AboError(f"{name}.{unknown[0]}: not a choice ({', '.join(names)})", field=name)
        missing = [c for c in names if c not in given]
        if missing:
            raise AboError(f"{name}.{missing[0]}: missing (every choice needs a cost)", field=name)
        return {c: number(given[c], c, positive=True) for c in names}
    unknown = sorted(set(map(str, value)) - {"fixed", "per_unit"})
    if unknown:
        raise AboError(
            f"{name}.{unknown[0]}: not a setting of a numeric fidelity's cost (fixed, per_unit: "
            "an evaluation at s costs fixed + per_unit * s)",
            field=name,
        )
    return {
        "fixed": number(value.get("fixed", 0.0), "fixed", positive=False),
        "per_unit": number(value.get("per_unit", 1.0), "per_unit", positive=False),
    }


def report_rows(
    fidelity: Fidelity, trial: Trial, reports: Sequence[Report]
) -> list[tuple[int, Report]]:
    """The reports of ``trial`` the model sees as observations at lower fidelities, each with
    its slot (``0 .. RUNGS`` for the first report to reach each rung of the fidelity's encoded
    range, ``RUNGS + 1`` for a stopped trial's last), in step order.

    A done trial's reports at or beyond its own fidelity are left out (the trial's result is
    that observation); so are steps outside the parameter's range.
    """
    if not fidelity.numeric or not reports:
        return []
    param = fidelity.param
    assert not isinstance(param, Categorical)
    own = trial.params.get(fidelity.parameter)
    rows: dict[int, tuple[int, Report]] = {}
    for r in reports:
        if not param.low <= r.step <= param.high:
            continue
        if trial.state is TrialState.DONE and isinstance(own, int | float) and r.step >= own:
            continue
        rung = math.floor(param.encode(r.step)[0] * RUNGS + 1e-9)
        if rung not in rows:
            rows[rung] = (rung, r)
    if trial.state is TrialState.STOPPED:
        last = reports[-1]
        if param.low <= last.step <= param.high and all(r is not last for _, r in rows.values()):
            rows[RUNGS + 1] = (RUNGS + 1, last)
    return sorted(rows.values(), key=lambda row: row[1].step)
