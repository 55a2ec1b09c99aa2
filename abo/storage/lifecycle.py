"""How a trial moves between states: every transition and retry is decided here, once.

::

    running ──tell──▶ done
       │  ──fail──▶ failed      the parameters caused it (objective raised, diverged, infeasible)
       │  ──report──▶ stopped   the study's stopping rule ended it (``abo.core.stopping``)
       └──lease/worker/driver lost──▶ lost   the infrastructure did; parameters re-queued

``done``, ``failed``, ``stopped`` and ``lost`` are final. Repeats are idempotent (a retried
request must not fail): telling the same values again, failing a failed trial again, losing a
lost one again, reporting the same step and value again change nothing. A stopped trial's run
ends after the decision: what it tells, fails or loses then only adds bookkeeping (its worker,
its files) to the stopped trial. A lost trial may still receive its late result (kept on it for the
record, never modelled: its retry carries its parameters on). Everything else is a
``TrialStateError`` naming the trial and its state.

Each function runs one storage transaction (``Storage.transaction``) and uses only its
reads and compare-and-set writes, so the same rules hold on every backend.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from abo.core.exceptions import AboError, TrialStateError
from abo.core.space import ParamValue
from abo.core.trial import ProposalRecord, Trial, TrialState
from abo.storage.base import NewTrial, QueuedPoint, Storage, StudyRecord, Transaction

RETRY = ProposalRecord("retry")
ENQUEUED = ProposalRecord("enqueued")
Fence = Callable[[Transaction], None]
"""Called inside the transaction that stores new trials; raises to refuse them."""


def check_transition(trial_id: int, old: TrialState, new: TrialState) -> None:
    """Raise ``TrialStateError`` unless ``old -> new`` is a move (only running trials move)."""
    if old is not TrialState.RUNNING or new is TrialState.RUNNING:
        raise TrialStateError(f"trial {trial_id}: cannot move from {old} to {new}")


def primary_value(study: StudyRecord, values: Mapping[str, float]) -> float | None:
    """The value of a single-objective study's objective (``None`` with several)."""
    objectives = study.spec.objectives
    return values.get(objectives[0].name) if len(objectives) == 1 else None


def _per_trial(info: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None, n: int) -> list:
    """One info dict per new trial: a shared one copied, or one each."""
    if info is None or isinstance(info, Mapping):
        return [dict(info or {}) for _ in range(n)]
    if len(info) != n:
        raise ValueError(f"info: expected {n} dicts, got {len(info)}")
    return [dict(i) for i in info]


def _normal(params: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters as any backend gives them back (through JSON), for comparing."""
    return json.loads(json.dumps(dict(params)))


# -- starting ---------------------------------------------------------------------------------
def start(
    storage: Storage,
    study: StudyRecord,
    params: Sequence[dict[str, ParamValue]],
    proposals: Sequence[ProposalRecord | None],
    info: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    fence: Fence | None = None,
) -> list[Trial]:
    """Running trials for proposed parameters, with fresh ids and leases; ``fence`` (called
    inside the transaction) may refuse them (a replica that no longer holds the proposer
    lease must not store a round made without the others' trials)."""
    infos = _per_trial(info, len(params))
    rows = [
        NewTrial(dict(p), proposal=pr, info=i)
        for p, pr, i in zip(params, proposals, infos, strict=True)
    ]
    with storage.transaction(study) as tx:
        if fence is not None:
            fence(tx)
        return tx.insert(rows)


def start_queued(
    storage: Storage,
    study: StudyRecord,
    n: int,
    info: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    fence: Fence | None = None,
) -> list[Trial]:
    """Up to ``n`` queued points (enqueued, or retries of lost trials) as running trials.

    ``info`` is one dict for all, or one per possible trial (the first ones are used);
    ``fence`` as for ``start``.
    """
    if n <= 0:
        return []
    shared: Mapping[str, Any] = info if isinstance(info, Mapping) else {}
    infos = _per_trial(info, n) if info is not None and not isinstance(info, Mapping) else None
    with storage.transaction(study) as tx:
        points = tx.pop_queued(n)
        if not points:
            return []
        if fence is not None:
            fence(tx)
        rows = [
            NewTrial(
                dict(p.params),
                retry_of=p.retry_of,
                attempt=p.attempt,
                proposal=p.proposal or (RETRY if p.retry_of is not None else ENQUEUED),
                info=dict(infos[k] if infos is not None else shared),
            )
            for k, p in enumerate(points)
        ]
        return tx.insert(rows)


# -- finishing ----------------------------------------------------------------------------------
def finish(
    storage: Storage,
    study: StudyRecord,
    trial_id: int,
    state: TrialState,
    values: Mapping[str, float] | None = None,
    reason: str | None = None,
    user: Mapping[str, Any] | None = None,
    info: Mapping[str, Any] | None = None,
) -> Trial:
    """A running trial ``done`` (with its outcome values) or ``failed`` (with a reason).

    ``info`` only adds keys (what the trial holds stays); ``user`` metadata is merged.
    """
    if state not in (TrialState.DONE, TrialState.FAILED):
        raise TrialStateError(f"state: can only finish a trial as done or failed, not {state}")
    values = dict(values or {})
    with storage.transaction(study) as tx:
        trial = tx.trial(trial_id)
        if trial.state is TrialState.STOPPED:
            return _annotate(tx, trial, user, info)
        if trial.state is TrialState.RUNNING:
            check_transition(trial.id, trial.state, state)
            new = replace(
                trial,
                state=state,
                values=values,
                value=primary_value(study, values),
                reason=reason,
                finished_at=tx.now,
                lease_expires_at=None,
                info={**(info or {}), **trial.info},
                user={**trial.user, **(user or {})},
            )
            tx.replace(trial, new)
            return tx.trial(trial_id)
        return _repeat(tx, trial, state, values, info, reason)


def _annotate(
    tx: Transaction,
    trial: Trial,
    user: Mapping[str, Any] | None,
    info: Mapping[str, Any] | None,
) -> Trial:
    """What a stopped trial's run reported when it ended: new keys only, the state stays."""
    extra_user = {k: v for k, v in (user or {}).items() if k not in trial.user}
    extra_info = {k: v for k, v in (info or {}).items() if k not in trial.info}
    if not (extra_user or extra_info):
        return trial
    new = replace(trial, user={**trial.user, **extra_user}, info={**trial.info, **extra_info})
    tx.replace(trial, new)
    return tx.trial(trial.id)


def _repeat(
    tx: Transaction,
    trial: Trial,
    state: TrialState,
    values: dict[str, float],
    info: Mapping[str, Any] | None,
    reason: str | None = None,
) -> Trial:
    """A finish for a trial that is no longer running: no-op, late result, or an error."""
    if trial.state is TrialState.LOST:
        if state is TrialState.DONE and not trial.values:
            late = replace(
                trial,
                values=values,
                value=primary_value(tx.study, values),
                info={**(info or {}), **trial.info, "late": True},
            )
            tx.replace(trial, late)
            return tx.trial(trial.id)
        if state is TrialState.DONE and trial.values != values:
            raise TrialStateError(
                f"value: trial {trial.id} was lost and already holds a late value "
                f"{_shown(trial)}, not {_shown_values(values)}"
            )
        if state is TrialState.FAILED:
            raise TrialStateError(
                f"trial_id: trial {trial.id} is already lost ({trial.reason}); a failure "
                "reported after that is not recorded"
            )
        return trial
    same_state = state is TrialState.FAILED and trial.state is TrialState.FAILED
    if same_state and (reason or "") != (trial.reason or ""):
        raise TrialStateError(
            f"reason: trial {trial.id} already failed ({trial.reason!r}); refusing another "
            f"reason {reason!r}"
        )
    if state is trial.state and (state is TrialState.FAILED or trial.values == values):
        return trial  # an identical repeat (a retried request): nothing changes
    if trial.state is TrialState.DONE and state is TrialState.DONE:
        raise TrialStateError(
            f"value: trial {trial.id} was already told {_shown(trial)}; "
            f"refusing a different value {_shown_values(values)}"
        )
    raise TrialStateError(f"trial_id: trial {trial.id} is already {trial.state}")


def _shown(trial: Trial) -> str:
    return repr(trial.value) if trial.value is not None else _shown_values(trial.values)


def _shown_values(values: Mapping[str, float]) -> str:
    return repr(next(iter(values.values()))) if len(values) == 1 else repr(dict(values))


# -- losing -----------------------------------------------------------------------------------
def _lose(tx: Transaction, trials: Sequence[Trial], reason: str) -> list[Trial]:
    """Mark running ``trials`` lost (compare-and-set) and re-queue them within retries."""
    lost: list[Trial] = []
    for t in trials:
        check_transition(t.id, t.state, TrialState.LOST)
        new = replace(t, state=TrialState.LOST, reason=reason, finished_at=tx.now)
        if not tx.replace(t, new):
            continue  # someone else moved it first
        lost.append(new)
        if t.attempt < tx.study.spec.max_retries:
            tx.enqueue(QueuedPoint(t.params, retry_of=t.id, attempt=t.attempt + 1, proposal=RETRY))
    return [tx.trial(t.id) for t in lost]


def lose(storage: Storage, study: StudyRecord, trial_id: int, reason: str) -> Trial:
    """A running trial ``lost`` (the infrastructure failed), its parameters re-queued."""
    with storage.transaction(study) as tx:
        trial = tx.trial(trial_id)
        if trial.state is TrialState.STOPPED:
            return trial  # its run was ended on purpose; losing it after that changes nothing
        if trial.state in (TrialState.DONE, TrialState.FAILED):
            raise TrialStateError(
                f"trial_id: trial {trial_id} is already {trial.state}; "
                "only a running trial can be lost"
            )
        if trial.state is TrialState.RUNNING:
            _lose(tx, [trial], reason)
        return tx.trial(trial_id)


def reap(storage: Storage, study: StudyRecord, now: float | None = None) -> list[Trial]:
    """Running trials whose lease expired, marked ``lost`` exactly once, re-queued; looked
    for first without the study's write lock (nearly always none expired)."""
    with storage.reading(study) as tx:
        at = tx.now if now is None else now
        if not any(
            t.lease_expires_at is not None and t.lease_expires_at < at
            for t in tx.trials([TrialState.RUNNING])
        ):
            return []
    with storage.transaction(study) as tx:
        at = tx.now if now is None else now
        expired = [
            t
            for t in tx.trials([TrialState.RUNNING])
            if t.lease_expires_at is not None and t.lease_expires_at < at
        ]
        return _lose(tx, expired, "lease expired") if expired else []


def heartbeat(storage: Storage, study: StudyRecord, trial_id: int) -> Trial:
    """A running trial's lease, renewed for the study's ``lease_seconds``."""
    with storage.transaction(study) as tx:
        trial = tx.trial(trial_id)
        if trial.state is not TrialState.RUNNING:
            raise TrialStateError(
                f"trial_id: trial {trial_id} is {trial.state}; only running trials heartbeat"
            )
        renewed = replace(trial, lease_expires_at=tx.now + study.spec.lease_seconds)
        tx.replace(trial, renewed)
        return tx.trial(trial_id)


# -- intermediate values ----------------------------------------------------------------------
def report(
    storage: Storage,
    study: StudyRecord,
    trial_id: int,
    step: float,
    value: float,
    rule: Any = None,
) -> tuple[Trial, bool]:
    """Store a running trial's intermediate value, renew its lease, and apply the stopping
    ``rule`` (``abo.core.stopping``) in the same transaction: ``(trial, stop)``.

    A stopped trial answers ``stop`` again without storing anything; the same step and value
    again is a no-op. A step at or before the trial's last one with another value, or a
    trial that is done, failed or lost, is an error and stores nothing.
    """
    with storage.transaction(study) as tx:
        trial = tx.trial(trial_id)
        if trial.state is TrialState.STOPPED:
            return trial, True
        if trial.state is not TrialState.RUNNING:
            raise TrialStateError(
                f"trial_id: trial {trial_id} is already {trial.state}; only a running trial "
                "reports intermediate values"
            )
        everything = tx.reports()  # read before writing: a read never sees its own rows
        mine = everything.get(trial_id, [])
        if mine and step <= mine[-1].step:
            last = mine[-1]
            if step == last.step and value == last.value:
                return trial, False  # an identical repeat (a retried request)
            if step == last.step:
                raise TrialStateError(
                    f"value: trial {trial_id} already reported {last.value!r} at step "
                    f"{last.step:g}; refusing a different value {value!r}"
                )
            raise AboError(
                f"step: trial {trial_id} already reported step {last.step:g}; steps must "
                f"increase, got {step:g}",
                field="step",
            )
        everything[trial_id] = [*mine, tx.add_report(trial_id, step, value)]
        decision = rule.decide(trial_id, everything, study.spec.objective.sign) if rule else None
        if decision is not None and decision.stop:
            name = study.spec.objective.name
            new = replace(
                trial,
                state=TrialState.STOPPED,
                values={name: value},
                value=value,
                reason=decision.reason,
                finished_at=tx.now,
                lease_expires_at=None,
            )
        else:
            new = replace(trial, lease_expires_at=tx.now + study.spec.lease_seconds)
        tx.replace(trial, new)
        return tx.trial(trial_id), new.state is TrialState.STOPPED


# -- known results and queued points ----------------------------------------------------------
def add_done(
    storage: Storage,
    study: StudyRecord,
    params: dict[str, ParamValue],
    values: Mapping[str, float],
    proposal: ProposalRecord | None,
    user: Mapping[str, Any],
    unique: bool = False,
) -> Trial:
    """A known result as a done trial; with ``unique``, an equal done trial is returned."""
    values = dict(values)
    with storage.transaction(study) as tx:
        if unique:
            wanted = _normal(params)
            for t in tx.trials([TrialState.DONE]):
                if t.params == wanted and t.values == values:
                    return t
        row = NewTrial(
            dict(params),
            state=TrialState.DONE,
            values=values,
            value=primary_value(study, values),
            proposal=proposal,
            user=dict(user),
        )
        return tx.insert([row])[0]


def enqueue(storage: Storage, study: StudyRecord, point: QueuedPoint, unique: bool = False) -> bool:
    """Queue a point for the next ask; with ``unique``, skip one the study already has
    (queued, or a trial that is not lost). Returns whether it was queued."""
    with storage.transaction(study) as tx:
        if unique:
            wanted = _normal(point.params)
            if any(_normal(q.params) == wanted for q in tx.queued()):
                return False
            live = [TrialState.RUNNING, TrialState.DONE, TrialState.FAILED, TrialState.STOPPED]
            if any(t.params == wanted for t in tx.trials(live)):
                return False
        tx.enqueue(point)
        return True
