"""``/api/v1/studies/{name}/...``: a trial's lifecycle: ask, enqueue, add, list, read, and
tell, fail, lose, report and heartbeat a running trial.

Ask is ``async``: it waits on a shared proposal round (``abo.service.asks``) without holding a
thread of FastAPI's threadpool; the other endpoints are plain ``def`` run in that threadpool.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

import abo.service.schemas as s
from abo.core.exceptions import ProposerMoved
from abo.core.trial import Trial, TrialState
from abo.service.asks import check_ask_info
from abo.service.forward import FORWARDED_HEADER
from abo.service.routes.common import Created, Service, StudyName, TrialId, trial_out

router = APIRouter(tags=["trials"])


@router.post(
    "/studies/{name}/ask",
    response_model=s.AskResponse,
    responses={503: {"model": s.ErrorBody, "description": "Busy (Retry-After) or storage"}},
)
async def ask(
    name: StudyName,
    body: s.AskRequest,
    state: Service,
    request: Request,
    created: Created = None,
) -> s.AskResponse | Response:
    """Start ``count`` trials (each later one sees the earlier ones as busy points).

    Asks waiting at once share one proposal round; a ``client_id`` that holds running
    trials gets those back first (a retried ask never starts more). With several replicas
    the ask goes to the one proposing for the study (``abo.service.forward``)."""
    info = check_ask_info(body.info)
    forwarded = FORWARDED_HEADER in request.headers
    for attempt in range(2):  # again once when the lease moved during this replica's round
        record, lease = await state.proposer(name, created, forwarded)
        if lease is not None:
            sent = body.model_dump(mode="json", exclude_unset=True)
            state.metrics.forwarded.inc()
            answer = await state.forwarder.ask(record, lease, request, sent)
            if answer is not None:
                return answer
        try:
            trials = await state.ask(
                name, created, body.count, body.n_workers, body.client_id, info, body.pace
            )
            break
        except ProposerMoved:
            if forwarded or attempt:
                raise
    n_obs_ints = [
        t.proposal.n_observations
        for t in trials
        if t.proposal is not None and t.proposal.n_observations is not None
    ]
    return s.AskResponse(
        trials=[trial_out(t) for t in trials], n_observations=max(n_obs_ints, default=0)
    )


@router.post("/studies/{name}/enqueue", response_model=s.EnqueueResponse)
def enqueue(
    name: StudyName, body: s.ParamsRequest, state: Service, created: Created = None
) -> s.EnqueueResponse:
    """Queue parameters to be handed out by the next ask (checked against the space);
    ``queued`` is false when the study already has them (see ``allow_duplicate``)."""
    queued = state.call(
        name,
        created,
        lambda st: st.enqueue(body.params, allow_duplicate=body.allow_duplicate),
        retry=True,
    )
    return s.EnqueueResponse(queued=queued)


@router.post("/studies/{name}/add", response_model=s.TrialOut, status_code=201)
def add(name: StudyName, body: s.AddRequest, state: Service, created: Created = None) -> s.TrialOut:
    """Record a known result as a done trial (an equal done trial is returned instead)."""
    return trial_out(
        state.call(
            name,
            created,
            lambda st: st.add(
                body.params, body.value, body.metadata, allow_duplicate=body.allow_duplicate
            ),
            retry=True,
        )
    )


@router.get("/studies/{name}/trials", response_model=s.TrialPage)
def list_trials(
    name: StudyName,
    state: Service,
    state_: Annotated[
        list[TrialState] | None, Query(alias="state", description="Only these states.")
    ] = None,
    offset: Annotated[int, Query(ge=0, le=2**31)] = 0,
    limit: Annotated[int, Query(ge=1, le=s.MAX_PAGE)] = 1000,
    created: Created = None,
) -> s.TrialPage:
    """Trials in id order, optionally only some states, a page at a time."""
    trials = state.call(
        name, created, lambda st: st.storage.trials(st.record, state_ or None), retry=True
    )
    page = trials[offset : offset + limit]
    nxt = offset + limit if offset + limit < len(trials) else None
    return s.TrialPage(
        trials=[trial_out(t) for t in page], total=len(trials), offset=offset, next_offset=nxt
    )


@router.get("/studies/{name}/trials/{trial_id}", response_model=s.TrialOut)
def get_trial(
    name: StudyName, trial_id: TrialId, state: Service, created: Created = None
) -> s.TrialOut:
    """One trial by id."""
    return trial_out(state.call(name, created, lambda st: st.trial(trial_id), retry=False))


@router.post("/studies/{name}/trials/{trial_id}/tell", response_model=s.TrialOut)
def tell(
    name: StudyName, trial_id: TrialId, body: s.TellRequest, state: Service, created: Created = None
) -> s.TrialOut:
    """Record a running trial's value; the same value again is 200, a different one 409."""
    return trial_out(
        state.call(
            name,
            created,
            lambda st: st.tell(trial_id, body.value, body.metadata, info=body.info),
            retry=False,
        )
    )


@router.post("/studies/{name}/trials/{trial_id}/fail", response_model=s.TrialOut)
def fail(
    name: StudyName, trial_id: TrialId, body: s.FailRequest, state: Service, created: Created = None
) -> s.TrialOut:
    """Mark a running trial failed: its parameters caused it (a lost trial is 409)."""
    return trial_out(
        state.call(
            name,
            created,
            lambda st: st.fail(trial_id, body.reason, body.metadata, info=body.info),
            retry=False,
        )
    )


@router.post("/studies/{name}/trials/{trial_id}/lose", response_model=s.TrialOut)
def lose(
    name: StudyName, trial_id: TrialId, body: s.LoseRequest, state: Service, created: Created = None
) -> s.TrialOut:
    """Mark a running trial lost (infrastructure failure); its parameters are re-queued.
    Losing it again is a no-op; a done or failed trial is 409."""
    return trial_out(
        state.call(name, created, lambda st: st.lose(trial_id, body.reason), retry=False)
    )


@router.post("/studies/{name}/trials/{trial_id}/report", response_model=s.ReportOut)
def report(
    name: StudyName,
    trial_id: TrialId,
    body: s.ReportRequest,
    state: Service,
    created: Created = None,
) -> s.ReportOut:
    """Record a running trial's intermediate value; ``stop`` says the study's stopping
    rule ended the trial (it is ``stopped`` now: end its run). Committed before the
    answer; a step that goes backwards is 422, a finished trial 409."""

    def store(st: Any) -> tuple[bool, Trial]:
        stop = st.report(trial_id, body.step, body.value)
        return stop, st.trial(trial_id)

    stop, trial = state.call(name, created, store, retry=False)
    return s.ReportOut(stop=stop, trial=trial_out(trial))


@router.post("/studies/{name}/trials/{trial_id}/heartbeat", response_model=s.TrialOut)
def heartbeat(
    name: StudyName, trial_id: TrialId, state: Service, created: Created = None
) -> s.TrialOut:
    """Extend a running trial's lease by the study's ``lease_seconds``."""
    return trial_out(state.call(name, created, lambda st: st.heartbeat(trial_id), False))


__all__ = ["router"]
