"""Reading a study: its best trial and a JSON summary, from the storage alone.

One definition of "best" for every view (``Study.best``, the service, the CLI, the
dashboard), and the summary the service's ``/studies`` sends and ``abo studies`` prints. No
torch, no FastAPI: the read commands start fast.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from abo.core.outcomes import Constraint, Objective, feasible
from abo.core.trial import Trial, TrialState
from abo.spec.study_spec import StudySpec
from abo.storage import Storage, StudyRecord


def results(trials: Sequence[Trial], spec: StudySpec) -> list[Trial]:
    """The trials that count as the study's results: all of them, or in a study with a
    fidelity those evaluated at its target (the others are evidence for the model only)."""
    fidelity = spec.fidelity_of
    if fidelity is None:
        return list(trials)
    return [t for t in trials if fidelity.at_target(t)]


def best_trial(trials: Sequence[Trial], spec: StudySpec) -> Trial | None:
    """The feasible done trial with the best objective value (ties: the earliest; with a
    fidelity, among those at its target); ``None`` before the first such result, and for a
    study of several objectives (no single trial is best)."""
    objectives = spec.objectives
    if len(objectives) != 1:
        return None
    best = pareto_trials(results(trials, spec), objectives, spec.constraints)
    return best[0] if best else None


def _told(
    trials: Sequence[Trial],
    objectives: Sequence[Objective],
    constraints: Sequence[Constraint] = (),
) -> list[Trial]:
    """Done trials with a finite value for every objective (and every constraint holding)."""
    names = [o.name for o in objectives]
    return [
        t
        for t in trials
        if t.state is TrialState.DONE
        and all(
            isinstance(t.values.get(n), int | float) and math.isfinite(t.values[n]) for n in names
        )
        and feasible(t.values, constraints)
    ]


def n_feasible(trials: Sequence[Trial], constraints: Sequence[Constraint]) -> int:
    """How many done trials satisfy every constraint (all done ones without constraints)."""
    return sum(1 for t in trials if t.state is TrialState.DONE and feasible(t.values, constraints))


def utilities(trials: Sequence[Trial], objectives: Sequence[Objective]) -> Any:
    """``n x m`` utilities (larger is better) of the trials' objective values, as a tensor."""
    import torch

    rows = [[o.sign * float(t.values[o.name]) for o in objectives] for t in trials]
    return torch.tensor(rows, dtype=torch.double).reshape(-1, len(objectives))


def pareto_trials(
    trials: Sequence[Trial],
    objectives: Sequence[Objective],
    constraints: Sequence[Constraint] = (),
) -> list[Trial]:
    """The feasible done trials no other feasible done trial beats in every objective (the
    Pareto front), in id order; for one objective, the best trial (ties: the earliest; none
    before a feasible result). Without ``constraints`` every done trial is feasible."""
    told = sorted(_told(trials, objectives, constraints), key=lambda t: t.id)
    if len(objectives) == 1:
        o = objectives[0]
        return [max(told, key=lambda t: (o.sign * t.values[o.name], -t.id))] if told else []
    from abo.core.pareto import pareto_mask

    mask = pareto_mask(utilities(told, objectives)).tolist()
    return [t for t, keep in zip(told, mask, strict=True) if keep]


def in_completion_order(
    trials: Sequence[Trial],
    objectives: Sequence[Objective],
    constraints: Sequence[Constraint] = (),
) -> list[Trial]:
    """The done trials with every objective told (and feasible, given ``constraints``), in
    the order their results arrived."""
    told = _told(trials, objectives, constraints)
    return sorted(told, key=lambda t: (t.finished_at or 0.0, t.id))


def default_reference(
    trials: Sequence[Trial], objectives: Sequence[Objective], n_initial: int
) -> Any:
    """The hypervolume's default reference point in utilities (``abo.core.pareto``'s rule over the
    done trials in completion order), ``None`` before any result."""
    from abo.core.pareto import reference_point

    done = in_completion_order(trials, objectives)
    return reference_point(utilities(done, objectives), n_initial) if done else None


def study_reference(spec: Any, trials: Sequence[Trial]) -> Any:
    """The reference point of a study of several objectives in utilities: the spec's
    ``reference_point`` when it has one, else ``default_reference`` (``None`` before any
    result)."""
    objectives = spec.objectives
    if spec.reference_point is not None:
        import torch

        given = spec.reference_point
        return torch.tensor([o.sign * given[o.name] for o in objectives], dtype=torch.double)
    return default_reference(trials, objectives, spec.resolved_n_initial)


SOURCES = ("design", "model", "random", "fallback", "enqueued", "added", "retry")
"""Where a trial's parameters came from (``proposal_source``), in the order counts are shown."""


def proposal_source(trial: Trial) -> str:
    """Where ``trial``'s parameters came from: ``design`` (the initial Sobol design or a warm
    start's points), ``model`` (the study's strategy, from its GP), ``random`` (a strategy
    that uses no model), ``fallback`` (quasi-random points where the model was wanted but not
    to be had: too few results, the first fit still running, or a failed fit), ``enqueued``,
    ``added`` (told with its result by the user) or ``retry`` (a lost trial run again)."""
    proposal = trial.proposal
    if proposal is None:
        return "added"
    if proposal.fallback:
        return "fallback"
    if proposal.strategy in ("sobol", "warm-start"):
        return "design"
    if proposal.strategy in ("enqueued", "added", "retry", "random"):
        return proposal.strategy
    return "model"


def source_counts(trials: Sequence[Trial]) -> dict[str, int]:
    """How many of ``trials`` came from each source (``SOURCES``; those with none left out)."""
    counts = dict.fromkeys(SOURCES, 0)
    for t in trials:
        counts[proposal_source(t)] += 1
    return {k: v for k, v in counts.items() if v}


def sources_line(counts: Mapping[str, int]) -> str:
    """``source_counts`` in words: ``"proposed by: model 7, design 4, fallback 2"``."""
    parts = [f"{k} {counts[k]}" for k in SOURCES if counts.get(k)]
    return "proposed by: " + (", ".join(parts) if parts else "none yet")


def clean(obj: Any, depth: int = 0) -> Any:
    """Strict-JSON-safe copy: non-finite floats become ``None`` and anything nested deeper
    than 64 levels a placeholder string, so no stored value can make a listing fail."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if obj is None or isinstance(obj, str | int | bool):
        return obj
    if depth >= 64:
        return "<nested too deep>"
    if isinstance(obj, Mapping):
        return {str(k): clean(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [clean(v, depth + 1) for v in obj]
    return str(obj)


def trial_json(trial: Trial) -> dict[str, Any]:
    """A trial as the service sends it: ``to_dict`` with its duration, JSON-safe."""
    data = clean(trial.to_dict())
    data["duration"] = clean(trial.duration) if data["finished_at"] is not None else None
    return data


def study_summary(storage: Storage, record: StudyRecord) -> dict[str, Any]:
    """A study's definition and trial counts (no strategy is built, so a study whose
    strategy this process lacks still lists)."""
    trials = storage.trials(record)
    states = {st.value: 0 for st in TrialState}
    for t in trials:
        states[t.state.value] += 1
    best = best_trial(trials, record.spec)
    objs, cons = record.spec.objectives, record.spec.constraints
    front = len(pareto_trials(trials, objs, cons)) if len(objs) > 1 else None
    spec = clean(record.spec.to_json())
    return {
        "name": record.name,
        "spec": spec,
        "space": spec["space"],
        "outcomes": spec["outcomes"],
        "direction": record.direction,
        "strategy": record.strategy,
        "seed": record.seed,
        "config": {k: v for k, v in spec.items() if k not in ("space", "outcomes")},
        "created_at": record.created_at,
        "n_trials": len(trials),
        "states": states,
        "best": trial_json(best) if best is not None else None,
        "front_size": front,  # several objectives: the done trials on the Pareto front
        "n_feasible": n_feasible(trials, cons) if cons else None,  # with outcome constraints
        "sources": source_counts(trials),  # where the trials' parameters came from
    }
