"""Warm start: the finished trials of earlier, related studies as prior knowledge for a new one.

``create_study(..., warm_start_from=["old"])`` takes a *snapshot* of each source's results at
creation (the parameters the new space shares with it, the objective's value and direction)
and stores it in the new study's spec: the new study proposes the same whatever happens to the
old one later, and a source may live in another storage (pass the ``Study`` itself).

The sources stay apart from the new study's own observations. They get a GP of their own,
fitted once on the shared parameters (each source's values standardised on their own, so a
source in other units or a shifted copy of the problem contributes its shape, not its level),
and its posterior mean ``m`` becomes the *prior mean* of the new study's GP
(``abo.propose.warm_prior``)::

    mean(x) = c + w * m(x_shared)

``c`` and ``w`` are hyperparameters of the new GP, fitted by marginal likelihood with its
others (``w`` under a Normal(1, 1) prior: related until the data say otherwise), so a source
that turns out unrelated is weighed down to nothing while the new GP models the rest. Pooling
the old trials with the new ones instead (the simple alternative) makes old values count as
observations of the new objective: a shifted optimum is then fought by every old point near
the old one. ``docs/surrogate.md`` has the choice and ``benchmarks/warm_start.py`` its measure.

Before the study's first results there is no GP of its own: its first proposals are the sources'
best configurations (best first, each away from the better ones, so that every optimum the
sources found is visited once; parameters the sources lack come from the study's Sobol
design): they replace the quasi-random initial design, which shrinks to 2 points.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from abo.core.exceptions import AboError

if TYPE_CHECKING:
    from abo.core.space import Space
    from abo.spec.study_spec import StudySpec

FIELD = "warm_start_from"
WARM = "warm-start"  # the proposal record of a source's configuration proposed as it is
WEIGHT_PRIOR = (1.0, 1.0)  # Normal(loc, scale) of the prior mean's weight w
MIN_TRIALS = 2  # a source GP needs at least this many results
SPREAD = 0.05  # the least distance between two of the sources' points proposed first


def error(message: str) -> AboError:
    return AboError(f"{FIELD}: {message}", field=FIELD)


def _objective(spec: Any, wanted: str) -> tuple[str, str]:
    """The source objective that corresponds to the new study's ``wanted`` one: its only
    objective, or the one of the same name in a study of several."""
    objectives = spec.objectives
    if len(objectives) == 1:
        return objectives[0].name, objectives[0].direction
    for o in objectives:
        if o.name == wanted:
            return o.name, o.direction
    names = ", ".join(o.name for o in objectives)
    raise error(f"the source has several objectives ({names}) and none is called {wanted!r}")


def _shared(space: Space, params: Mapping[str, Any]) -> dict[str, Any] | None:
    """``params`` restricted to ``space``'s parameters, ``None`` when one of them does not fit
    the new space (out of its bounds, not one of its choices)."""
    out = {}
    for name, value in params.items():
        if name not in space:
            continue
        try:
            out[name] = space[name].check(name, value)
        except AboError:
            return None
    return out


def snapshot(source: Any, space: Space, objective: str) -> dict[str, Any]:
    """The stored form of a source study (an ``abo.Study`` or a ``RemoteStudy``): its name, the
    objective's direction, and every done trial's shared parameters and value (at the target,
    with a fidelity; trials whose values do not fit ``space`` are left out)."""
    spec = source.spec
    name, direction = _objective(spec, objective)
    fidelity = spec.fidelity_of
    rows = []
    for t in source.trials:
        if t.state.value != "done" or (fidelity is not None and not fidelity.at_target(t)):
            continue
        value = t.values.get(name) if t.values else t.value
        if not isinstance(value, int | float) or not math.isfinite(value):
            continue
        params = _shared(space, t.params)
        if params:
            rows.append({"params": params, "value": float(value)})
    return {"study": source.name, "direction": direction, "trials": rows}


def resolve(
    entries: Any, load: Callable[[str], Any], space: Space, objective: str
) -> tuple[Any, ...]:
    """``warm_start_from`` as given (study names, which ``load`` opens, ``Study`` objects,
    stored snapshots) as snapshots."""
    if entries is None:
        return ()
    if isinstance(entries, str) or hasattr(entries, "trials"):
        entries = [entries]  # one source
    if not isinstance(entries, Sequence):
        raise error(f"expected a list of studies, got {type(entries).__name__}")
    out: list[Any] = []
    for entry in entries:
        if isinstance(entry, str):
            from abo.core.exceptions import StudyNotFoundError

            try:
                entry = load(entry)
            except StudyNotFoundError:
                raise error(f"no study called {entry!r} in this storage") from None
        if hasattr(entry, "trials") and hasattr(entry, "spec"):
            out.append(snapshot(entry, space, objective))
        else:
            out.append(entry)  # a stored snapshot; ``check`` says whether it is one
    return tuple(out)


def check(entries: Any, spec: StudySpec) -> tuple[Any, ...]:
    """``warm_start_from`` of a spec, checked: study names (resolved when the study is
    created) or snapshots whose trials fit the space. Raises ``AboError`` naming the field."""
    if not entries:
        return ()
    if isinstance(entries, str | Mapping) or not isinstance(entries, Sequence):
        raise error(f"expected a list of studies, got {type(entries).__name__}")
    if len(spec.objectives) != 1:
        raise error("a warm start is for a study of one objective")
    if spec.fidelity is not None:
        raise error("a warm start does not combine with a fidelity")
    out: list[Any] = []
    for entry in entries:
        if isinstance(entry, str):
            out.append(entry)
            continue
        if not isinstance(entry, Mapping) or set(entry) != {"study", "direction", "trials"}:
            raise error(
                "expected study names, studies, or snapshots {study, direction, trials}, got "
                f"{entry!r:.80}"
            )
        name, direction, trials = entry["study"], entry["direction"], entry["trials"]
        if direction not in ("minimize", "maximize"):
            raise error(f"{name!r}: direction {direction!r} is not minimize or maximize")
        if not isinstance(trials, Sequence) or isinstance(trials, str):
            raise error(f"{name!r}: trials must be a list")
        rows = []
        for row in trials:
            params = row.get("params") if isinstance(row, Mapping) else None
            value = row.get("value") if isinstance(row, Mapping) else None
            if not isinstance(params, Mapping) or not isinstance(value, int | float):
                raise error(f"{name!r}: a trial must be {{params, value}}, got {row!r:.80}")
            if not math.isfinite(value) or isinstance(value, bool):
                raise error(f"{name!r}: a trial's value must be a finite number, got {value!r}")
            unknown = sorted(set(params) - set(spec.space))
            if unknown:
                raise error(f"{name!r}: parameter {unknown[0]!r} is not in the space")
            shared = _shared(spec.space, params)
            if shared is None:
                raise error(f"{name!r}: the trial {dict(params)!r:.80} does not fit the space")
            rows.append({"params": shared, "value": float(value)})
        if len(rows) < MIN_TRIALS:
            raise error(
                f"study {name!r} has {len(rows)} finished trial(s) in this space; a warm start "
                f"needs at least {MIN_TRIALS}"
            )
        out.append({"study": str(name), "direction": direction, "trials": rows})
    return tuple(out)


def unresolved(spec: StudySpec) -> list[str]:
    """The sources of ``spec`` still given by name (a spec made outside ``create_study``)."""
    return [e for e in spec.warm_start_from if isinstance(e, str)]


def span(space: Space, name: str) -> tuple[int, int]:
    """The unit cube's columns of parameter ``name`` (a categorical has one per choice)."""
    columns = space._slices[name]
    return columns.start or 0, columns.stop or 0


def ranked(spec: StudySpec) -> list[dict[str, Any]]:
    """The sources' configurations, best first (on each source's own scale), each at least
    ``SPREAD`` (root-mean-square over the unit cube's shared coordinates) from the better ones:
    a finished study holds many near-copies of its best point, and the first proposals
    should visit each of its optima once, not one of them four times."""
    rows = []
    for s in (e for e in spec.warm_start_from if isinstance(e, Mapping)):
        sign = 1.0 if s["direction"] == "maximize" else -1.0
        values = [sign * r["value"] for r in s["trials"]]
        mean = sum(values) / len(values)
        spread = math.sqrt(sum((v - mean) ** 2 for v in values) / max(1, len(values) - 1))
        for r, v in zip(s["trials"], values, strict=True):
            rows.append(((v - mean) / (spread or 1.0), r["params"]))
    rows.sort(key=lambda row: -row[0])  # stable: ties keep the sources' order
    space = spec.space
    chosen: list[tuple[dict[str, Any], dict[str, list[float]]]] = []
    for _, params in rows:
        unit = {n: space[n].encode(v) for n, v in params.items()}
        if all(_rms(unit, other) >= SPREAD for _, other in chosen):
            chosen.append((dict(params), unit))
    return [params for params, _ in chosen]


def _rms(a: Mapping[str, list[float]], b: Mapping[str, list[float]]) -> float:
    """Root-mean-square distance of two encodings over the coordinates they share."""
    diffs = [(u - v) ** 2 for n in a.keys() & b.keys() for u, v in zip(a[n], b[n], strict=True)]
    return math.sqrt(sum(diffs) / len(diffs)) if diffs else math.inf
