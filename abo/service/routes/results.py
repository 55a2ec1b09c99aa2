"""``/api/v1/studies/{name}/...``: what a study found, read without changing it: the best
trial, the Pareto front, the hypervolume and its reference point, and intermediate values."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

import abo.service.schemas as s
from abo.service.routes.common import Created, Service, StudyName, trial_out

router = APIRouter(tags=["trials"])


@router.get("/studies/{name}/best", response_model=s.BestOut)
def best(name: StudyName, state: Service, created: Created = None) -> s.BestOut:
    """The best done trial (``null`` before the first result)."""
    trial = state.call(name, created, lambda st: st.best, retry=True)
    return s.BestOut(trial=trial_out(trial) if trial is not None else None)


@router.get("/studies/{name}/best_trials", response_model=s.BestTrialsOut)
def best_trials(name: StudyName, state: Service, created: Created = None) -> s.BestTrialsOut:
    """The Pareto front of done trials (for one objective, the best trial), in id order."""
    trials = state.call(name, created, lambda st: st.best_trials, retry=True)
    return s.BestTrialsOut(trials=[trial_out(t) for t in trials])


@router.get("/studies/{name}/reference_point", response_model=s.ReferencePointOut)
def reference_point(
    name: StudyName, state: Service, created: Created = None
) -> s.ReferencePointOut:
    """The default reference point of the hypervolume (several objectives only)."""
    ref = state.call(name, created, lambda st: st.reference_point(), retry=True)
    return s.ReferencePointOut(reference_point=ref)


@router.post("/studies/{name}/hypervolume", response_model=s.HypervolumeOut)
def hypervolume(
    name: StudyName, body: s.HypervolumeRequest, state: Service, created: Created = None
) -> s.HypervolumeOut:
    """The volume the done trials dominate, bounded by the reference point (several
    objectives only); reads the study, changes nothing."""

    def measure(st: Any) -> s.HypervolumeOut:
        ref = body.reference_point
        ref = st.reference_point() if ref is None else ref
        return s.HypervolumeOut(hypervolume=st.hypervolume(ref), reference_point=ref)

    return state.call(name, created, measure, retry=True)


@router.get("/studies/{name}/reports", response_model=s.ReportsOut)
def reports(
    name: StudyName,
    state: Service,
    trial_id: Annotated[
        int | None, Query(ge=1, le=s.MAX_TRIAL_ID, description="Only this trial's.")
    ] = None,
    created: Created = None,
) -> s.ReportsOut:
    """Every trial's intermediate values (or one trial's), by trial id and step."""
    found = state.call(name, created, lambda st: st.reports(trial_id), retry=True)
    items = [
        s.ReportItem(trial_id=i, step=r.step, value=r.value, at=r.at)
        for i in sorted(found)
        for r in found[i]
    ]
    return s.ReportsOut(reports=items)


__all__ = ["router"]
