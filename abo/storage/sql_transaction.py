"""The SQL storage's transaction (``_SQLTransaction``) and how a trial row is written and read."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

import abo.storage.schema as schema
from abo.core.exceptions import TrialNotFoundError
from abo.core.trial import ProposalRecord, Report, Trial, TrialState
from abo.storage.base import (
    MAX_ID,
    NewTrial,
    ProposerLease,
    QueuedPoint,
    StudyRecord,
    Transaction,
)

if TYPE_CHECKING:
    from abo.storage.sql import SQLStorage

_studies, _trials, _queue, _reports = schema.studies, schema.trials, schema.queue, schema.reports
_proposers = schema.proposers


def _clean(obj: Any) -> Any:
    """Make ``obj`` strict-JSON safe: non-finite floats become ``None``, unknowns ``str``."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, str | int):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    try:
        as_float = float(obj)
    except (TypeError, ValueError):
        return str(obj)
    return as_float if math.isfinite(as_float) else None


def dumps(obj: Any) -> str:
    """Strict JSON (no NaN / Infinity) of ``obj``, coercing what JSON cannot hold."""
    return json.dumps(_clean(obj), allow_nan=False, separators=(",", ":"))


def _build_trial(study: StudyRecord, row: Any) -> Trial:
    info = json.loads(row.info)
    proposal = ProposalRecord.from_json(json.loads(row.proposal)) if row.proposal else None
    values = json.loads(row.outcomes) if row.outcomes else {}
    return Trial(
        id=row.number,
        study=study.name,
        params=json.loads(row.params),
        state=TrialState(row.state),
        value=row.value,
        values=values,
        reason=row.reason,
        retry_of=row.retry_of,
        attempt=row.attempt,
        proposal=proposal,
        info=info,
        user=json.loads(row.user_attrs),
        created_at=row.created_at,
        finished_at=row.finished_at,
        lease_expires_at=row.lease_expires_at,
    )


def _proposal_json(proposal: ProposalRecord | None) -> str | None:
    return dumps(proposal.to_json()) if proposal is not None else None


class _SQLTransaction(Transaction):
    """A ``Transaction`` on one SQL connection (see ``Storage.transaction``)."""

    def __init__(self, storage: SQLStorage, conn: Connection, study: StudyRecord, now: float):
        self.storage, self.conn, self.study, self.now = storage, conn, study, now

    def _select(
        self, numbers: Sequence[int] | None = None, states: Sequence[TrialState] | None = None
    ) -> list[Trial]:
        q = sa.select(_trials).where(_trials.c.study_id == self.study.id)
        if numbers is not None:
            q = q.where(_trials.c.number.in_(list(numbers)))
        if states is not None:
            q = q.where(_trials.c.state.in_([s.value for s in states]))
        rows = self.conn.execute(q.order_by(_trials.c.number)).all()
        return [self.storage.trial_from_row(self.study, r) for r in rows]

    def trial(self, trial_id: int) -> Trial:
        # ids beyond the INTEGER column overflow the driver (OverflowError, DataError): no such id
        found = self._select(numbers=[trial_id]) if 0 < trial_id < MAX_ID else []
        if not found:
            raise TrialNotFoundError(
                f"trial_id: study {self.study.name!r} has no trial {trial_id}", field="trial_id"
            )
        return found[0]

    def trials(self, states: Sequence[TrialState] | None = None) -> list[Trial]:
        return self._select(states=states)

    def insert(self, rows: Sequence[NewTrial]) -> list[Trial]:
        if not rows:
            return []
        study, now = self.study, self.now
        self.conn.execute(
            _studies.update()
            .where(_studies.c.id == study.id)
            .values(n_trials=_studies.c.n_trials + len(rows))
        )
        total = self.conn.execute(
            sa.select(_studies.c.n_trials).where(_studies.c.id == study.id)
        ).scalar_one()
        numbers = range(total - len(rows) + 1, total + 1)
        values = []
        for number, row in zip(numbers, rows, strict=True):
            running = row.state is TrialState.RUNNING
            values.append(
                {
                    "study_id": study.id,
                    "number": number,
                    "state": row.state.value,
                    "params": dumps(row.params),
                    "value": row.value,
                    "outcomes": dumps(row.values) if row.values else None,
                    "reason": None,
                    "retry_of": row.retry_of,
                    "attempt": row.attempt,
                    "proposal": _proposal_json(row.proposal),
                    "info": dumps(row.info),
                    "user_attrs": dumps(row.user),
                    "created_at": now,
                    "finished_at": None if running else now,
                    "lease_expires_at": now + study.spec.lease_seconds if running else None,
                }
            )
        self.conn.execute(_trials.insert(), values)
        return self._select(numbers=list(numbers))

    def replace(self, old: Trial, new: Trial) -> bool:
        result = self.conn.execute(
            _trials.update()
            .where(
                _trials.c.study_id == self.study.id,
                _trials.c.number == old.id,
                _trials.c.state == old.state.value,
            )
            .values(
                state=new.state.value,
                value=new.value,
                outcomes=dumps(new.values) if new.values else None,
                reason=new.reason,
                proposal=_proposal_json(new.proposal),
                info=dumps(new.info),
                user_attrs=dumps(new.user),
                finished_at=new.finished_at,
                lease_expires_at=new.lease_expires_at,
            )
        )
        return result.rowcount == 1

    def reports(self, trial_ids: Sequence[int] | None = None) -> dict[int, list[Report]]:
        found = self.storage.study_reports(self.conn, self.study)
        wanted = sorted(found) if trial_ids is None else trial_ids
        return {i: list(found[i]) for i in wanted if i in found}

    def add_report(self, trial_id: int, step: float, value: float) -> Report:
        self.conn.execute(
            _reports.insert().values(
                study_id=self.study.id,
                number=trial_id,
                step=float(step),
                value=float(value),
                created_at=self.now,
            )
        )
        return Report(float(step), float(value), self.now)

    def enqueue(self, point: QueuedPoint) -> None:
        self.conn.execute(
            _queue.insert().values(
                study_id=self.study.id,
                params=dumps(point.params),
                retry_of=point.retry_of,
                attempt=point.attempt,
                info=dumps(point.proposal.to_json() if point.proposal else {}),
                created_at=self.now,
            )
        )

    def _queue_rows(self, limit: int | None = None) -> list[Any]:
        q = sa.select(_queue).where(_queue.c.study_id == self.study.id).order_by(_queue.c.id)
        return list(self.conn.execute(q.limit(limit) if limit is not None else q).all())

    @staticmethod
    def _point(row: Any) -> QueuedPoint:
        proposal = ProposalRecord.from_json(json.loads(row.info))
        return QueuedPoint(json.loads(row.params), row.retry_of, row.attempt, proposal)

    def queued(self) -> list[QueuedPoint]:
        return [self._point(r) for r in self._queue_rows()]

    def pop_queued(self, n: int) -> list[QueuedPoint]:
        rows = self._queue_rows(n)
        if rows:
            self.conn.execute(_queue.delete().where(_queue.c.id.in_([r.id for r in rows])))
        return [self._point(r) for r in rows]

    def proposer(self) -> ProposerLease | None:
        row = self.conn.execute(
            sa.select(_proposers).where(_proposers.c.study_id == self.study.id)
        ).first()
        if row is None:
            return None
        return ProposerLease(row.holder, row.address, int(row.epoch), float(row.expires_at))

    def set_proposer(self, lease: ProposerLease | None) -> None:
        self.conn.execute(_proposers.delete().where(_proposers.c.study_id == self.study.id))
        if lease is not None:
            self.conn.execute(
                _proposers.insert().values(
                    study_id=self.study.id,
                    holder=lease.holder,
                    address=lease.address,
                    epoch=lease.epoch,
                    expires_at=lease.expires_at,
                )
            )
