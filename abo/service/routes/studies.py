"""``/api/v1/studies``: list, create (or load), read and delete studies."""

from __future__ import annotations

import json

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse

import abo.service.schemas as s
from abo.core.exceptions import DuplicatedStudyError, StudyNotFoundError
from abo.core.outcomes import outcomes_to_json
from abo.core.space import Space
from abo.service.errors import error_response
from abo.service.limits import check_space_cost
from abo.service.routes.common import Created, Service, StudyName, study_out, study_summary
from abo.service.state import ServiceState
from abo.spec.options_check import check_options
from abo.spec.study_spec import CREATE_OPTIONS, StudySpec
from abo.study.study import Study
from abo.study.study import create_study as new_study

router = APIRouter(tags=["studies"])


@router.get("/studies", response_model=s.StudyList)
def list_studies(state: Service) -> s.StudyList:
    """Every study of the storage with a summary of its trials."""
    records = state.storage.list_studies()
    return s.StudyList(studies=[study_summary(state.storage, r) for r in records])


def _existing(
    study: Study, body: s.StudyCreate, wanted: StudySpec, given: list[str]
) -> s.StudyOut | JSONResponse:
    """The existing ``study`` when ``body`` may load it; 409 when its space or outcomes
    differ, ``DuplicatedStudyError`` without ``load_if_exists``."""
    if not body.load_if_exists:
        raise DuplicatedStudyError(f"name: a study called {body.name!r} exists already")
    if study.space != wanted.space:
        return error_response(
            409,
            "space_conflict",
            f"space: study {body.name!r} exists with a different space "
            f"{json.dumps(study.space.to_json())}",
            "space",
        )
    if study.spec.outcomes != wanted.outcomes:
        return error_response(
            409,
            "outcomes_conflict",
            f"outcomes: study {body.name!r} exists with outcomes "
            f"{json.dumps(outcomes_to_json(study.spec.outcomes))}",
            "outcomes",
        )
    hint = 'load_if_exists "keep" loads it with them'  # 409 options_conflict otherwise
    check_options(body.name, study.spec, wanted, given, body.load_if_exists, hint)
    return study_out(study)


def _find(
    state: ServiceState, body: s.StudyCreate, wanted: StudySpec, given: list[str]
) -> s.StudyOut | JSONResponse | None:
    """What ``_existing`` says of the study called ``body.name``; ``None`` when there is none."""
    try:
        return state.call(body.name, None, lambda st: _existing(st, body, wanted, given), True)
    except StudyNotFoundError:
        return None


@router.post(
    "/studies",
    response_model=s.StudyOut,
    status_code=201,
    responses={200: {"model": s.StudyOut, "description": "An existing study was loaded"}},
)
def create_study(body: s.StudyCreate, response: Response, state: Service) -> s.StudyOut:
    """Create a study; with ``load_if_exists`` an existing one of the same space, outcomes
    and given options is loaded (200): another space or direction is 409, and so is an
    option given that differs from the stored one (unless ``load_if_exists`` is "keep").
    The options are validated (422) whether the study exists or not."""
    space = Space.from_json(body.space)
    # only the options the body holds are compared with a stored study's
    given = {k: getattr(body, k) for k in CREATE_OPTIONS if k in body.model_fields_set}
    wanted = StudySpec.create(space, **given)
    found = _find(state, body, wanted, list(given))
    if isinstance(found, JSONResponse):
        return found  # type: ignore[return-value]
    if found is not None:
        response.status_code = 200
        return found
    check_space_cost(space)  # a new study: bound what its asks may cost
    study = new_study(
        space,
        name=body.name,
        storage=state.storage,
        load_if_exists=body.load_if_exists,
        **given,
    )
    return study_out(state.remember(study))


@router.get("/studies/{name}", response_model=s.StudyOut)
def get_study(name: StudyName, state: Service, created: Created = None) -> s.StudyOut:
    """One study with a summary of its trials."""
    return state.call(name, created, study_out, retry=True)


@router.delete("/studies/{name}", status_code=204)
def delete_study(name: StudyName, state: Service, created: Created = None) -> Response:
    """Delete a study with all its trials; its other users get 404 from then on."""
    expected = state.study(name, created).record if created is not None else state.load(name)
    state.storage.delete_study(name, expected)
    state.forget(name)
    return Response(status_code=204)


__all__ = ["router"]
