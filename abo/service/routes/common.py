"""What the routers share: the API prefix, the error responses every route documents, the
path and header parameters, the ``Service`` dependency and the API form of trials and studies.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Header, Path, Request
from pydantic import BeforeValidator

import abo.service.schemas as s
from abo.analysis import summary
from abo.analysis.summary import trial_json
from abo.core.trial import Trial
from abo.service.state import CREATED_HEADER, ServiceState
from abo.storage import Storage, StudyRecord
from abo.study.study import Study

API = "/api/v1"

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": s.ErrorBody, "description": text}
    for code, text in {
        401: "Missing or invalid bearer token",
        404: "Unknown study or trial (or the study was replaced since the client loaded it)",
        408: "The body did not arrive within the body timeout",
        409: "Conflicting state (a second, different tell; a different space)",
        413: "Body over the size limit",
        422: "Invalid input (the field is named)",
        503: "Storage unavailable, or too many asks waiting (`busy`, with Retry-After)",
    }.items()
}
"""The error answers every ``/api/v1`` route may give, for the OpenAPI schema."""


def _plain_digits(value: Any) -> Any:
    """Refuse a trial id that is not plain ASCII digits (`" 1"`, `"+1"`, `"1_0"`)."""
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
        raise ValueError("expected a trial id of plain digits")
    return value


async def service_state(request: Request) -> ServiceState:
    """The ``ServiceState`` of the app serving ``request`` (set by ``create_app``); ``async``
    so that resolving it never takes a thread of FastAPI's threadpool."""
    state: ServiceState = request.app.state.abo
    return state


Service = Annotated[ServiceState, Depends(service_state)]
StudyName = Annotated[str, Path(min_length=1, max_length=128, description="The study's name.")]
TrialId = Annotated[
    int,
    BeforeValidator(_plain_digits),
    Path(ge=1, le=s.MAX_TRIAL_ID, description="The trial's id (plain digits)."),
]
Created = Annotated[
    float | None,
    Header(
        alias=CREATED_HEADER,
        description="The `created_at` of the study the client loaded: 404 if the study of "
        "this name is another one now (deleted and created again).",
        allow_inf_nan=False,
    ),
]


def trial_out(trial: Trial) -> s.TrialOut:
    """The API form of a trial, safe to serialise whatever the storage holds."""
    return s.TrialOut.model_validate(trial_json(trial))


def study_summary(storage: Storage, record: StudyRecord) -> s.StudyOut:
    """A study's definition and trial counts (``abo.analysis.summary``), as the API sends it."""
    return s.StudyOut.model_validate(summary.study_summary(storage, record))


def study_out(study: Study) -> s.StudyOut:
    """``study_summary`` of a loaded study."""
    return study_summary(study.storage, study.record)


__all__ = [
    "API",
    "ERROR_RESPONSES",
    "Created",
    "Service",
    "StudyName",
    "TrialId",
    "service_state",
    "study_out",
    "study_summary",
    "trial_out",
]
