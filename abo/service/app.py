"""The HTTP ask/tell service (FastAPI): ``create_app(storage_url)`` builds it.

Asks are ``async`` endpoints that wait on shared proposal rounds run by a private executor
(``abo.service.asks``), so they never occupy FastAPI's threadpool: health, readiness, tells,
heartbeats and reads (plain ``def`` endpoints in that threadpool) answer while proposals run.
One ``Study`` per name is cached (``abo.service.state``); the storage serialises writers
across processes. Every error is ``{"error": {"code", "message", "field"}}``.

Example:
    >>> from abo.service.app import create_app
    >>> app = create_app("sqlite://")
    >>> "/api/v1/studies/{name}/ask" in app.openapi()["paths"]
    True
"""

from __future__ import annotations

import asyncio
import json
import math
import signal
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path as FilePath
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Header, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BeforeValidator
from starlette.exceptions import HTTPException as StarletteHTTPException

import abo
import abo.service.schemas as s
from abo import summary
from abo.exceptions import AboError, DuplicatedStudyError, StorageError
from abo.options_check import check_options
from abo.outcomes import outcomes_to_json
from abo.service.asks import check_ask_info
from abo.service.auth import TokenSet, read_tokens
from abo.service.errors import AsksBackedUp, abo_error_response, error_response
from abo.service.limits import check_space_cost
from abo.service.middleware import AuthMiddleware, BodyLimitMiddleware, WriteRecorder
from abo.service.state import CREATED_HEADER, ServiceState
from abo.space import Space
from abo.spec import CREATE_OPTIONS, StudySpec
from abo.storage import Storage, StudyRecord, open_storage
from abo.study import Study
from abo.summary import trial_json
from abo.trial import Trial, TrialState

API = "/api/v1"
DEFAULT_MAX_BODY = 1024 * 1024
DEFAULT_BODY_TIMEOUT = 30.0
DEFAULT_MAX_WAITING_ASKS = 256
DEFAULT_MAX_ASK_BATCH = s.MAX_ASK  # a round can serve every waiting ask of 64 clients

DESCRIPTION = f"""Asynchronous Bayesian optimization: ask for trials, tell their values.

**Which study.** Every study-scoped request may carry the header `{CREATED_HEADER}` with the
`created_at` of the study the client loaded (from `GET /api/v1/studies/{{name}}`). When the
study of that name was deleted and created again since, the answer is 404 `study_not_found`,
so a client holding the old study never asks or tells into the new one. Without the header a
request goes to whatever study has the name now, except that a tell, fail, lose or heartbeat
that finds the study replaced is 404 once (its trial id named a trial of the old study). The
Python client sends the header.

**Busy.** Asks wait for shared proposal rounds; when more than `max_waiting_asks` wait, a new
ask is answered 503 `busy` with a `Retry-After` header (seconds) instead of waiting.
"""


def _plain_digits(value: Any) -> Any:
    """Refuse a trial id that is not plain ASCII digits (`" 1"`, `"+1"`, `"1_0"`)."""
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
        raise ValueError("expected a trial id of plain digits")
    return value


def trial_out(trial: Trial) -> s.TrialOut:
    """The API form of a trial, safe to serialise whatever the storage holds."""
    return s.TrialOut.model_validate(trial_json(trial))


def study_summary(storage: Storage, record: StudyRecord) -> s.StudyOut:
    """A study's definition and trial counts (``abo.summary``), as the API sends it."""
    return s.StudyOut.model_validate(summary.study_summary(storage, record))


def _study_out(study: Study) -> s.StudyOut:
    return study_summary(study.storage, study.record)


# -- the application ---------------------------------------------------------------------------
_ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
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


def _routes(state: ServiceState) -> APIRouter:  # noqa: C901 - one small function per endpoint
    r = APIRouter(prefix=API, responses=_ERROR_RESPONSES)

    @r.get("/studies", response_model=s.StudyList, tags=["studies"])
    def list_studies() -> s.StudyList:
        """Every study of the storage with a summary of its trials."""
        records = state.storage.list_studies()
        return s.StudyList(studies=[study_summary(state.storage, r) for r in records])

    def _existing(
        study: Study, body: s.StudyCreate, wanted: StudySpec, given: list[str]
    ) -> s.StudyOut | JSONResponse:
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
        return _study_out(study)

    @r.post(
        "/studies",
        response_model=s.StudyOut,
        status_code=201,
        tags=["studies"],
        responses={200: {"model": s.StudyOut, "description": "An existing study was loaded"}},
    )
    def create_study(body: s.StudyCreate, response: Response) -> s.StudyOut:
        """Create a study; with ``load_if_exists`` an existing one of the same space, outcomes
        and given options is loaded (200): another space or direction is 409, and so is an
        option given that differs from the stored one (unless ``load_if_exists`` is "keep").
        The options are validated (422) whether the study exists or not."""
        space = Space.from_json(body.space)
        # only the options the body holds are compared with a stored study's
        given = {k: getattr(body, k) for k in CREATE_OPTIONS if k in body.model_fields_set}
        wanted = StudySpec.create(space, **given)
        try:
            found = state.call(
                body.name, None, lambda st: _existing(st, body, wanted, list(given)), True
            )
        except abo.StudyNotFoundError:
            found = None
        if isinstance(found, JSONResponse):
            return found  # type: ignore[return-value]
        if found is not None:
            response.status_code = 200
            return found
        check_space_cost(space)  # a new study: bound what its asks may cost
        study = abo.create_study(
            space,
            name=body.name,
            storage=state.storage,
            load_if_exists=body.load_if_exists,
            **given,
        )
        return _study_out(state.remember(study))

    @r.get("/studies/{name}", response_model=s.StudyOut, tags=["studies"])
    def get_study(name: StudyName, created: Created = None) -> s.StudyOut:
        """One study with a summary of its trials."""
        return state.call(name, created, _study_out, retry=True)

    @r.delete("/studies/{name}", status_code=204, tags=["studies"])
    def delete_study(name: StudyName, created: Created = None) -> Response:
        """Delete a study with all its trials; its other users get 404 from then on."""
        expected = state.study(name, created).record if created is not None else state.load(name)
        state.storage.delete_study(name, expected)
        state.forget(name)
        return Response(status_code=204)

    @r.post(
        "/studies/{name}/ask",
        response_model=s.AskResponse,
        tags=["trials"],
        responses={503: {"model": s.ErrorBody, "description": "Busy (Retry-After) or storage"}},
    )
    async def ask(name: StudyName, body: s.AskRequest, created: Created = None) -> s.AskResponse:
        """Start ``count`` trials (each later one sees the earlier ones as busy points).

        Asks waiting at once share one proposal round; a ``client_id`` that holds running
        trials gets those back first (a retried ask never starts more)."""
        info = check_ask_info(body.info)
        trials = await state.ask(
            name, created, body.count, body.n_workers, body.client_id, info, body.pace
        )
        n_obs_ints = [
            t.proposal.n_observations
            for t in trials
            if t.proposal is not None and t.proposal.n_observations is not None
        ]
        return s.AskResponse(
            trials=[trial_out(t) for t in trials], n_observations=max(n_obs_ints, default=0)
        )

    @r.post("/studies/{name}/enqueue", response_model=s.EnqueueResponse, tags=["trials"])
    def enqueue(
        name: StudyName, body: s.ParamsRequest, created: Created = None
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

    @r.post("/studies/{name}/add", response_model=s.TrialOut, status_code=201, tags=["trials"])
    def add(name: StudyName, body: s.AddRequest, created: Created = None) -> s.TrialOut:
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

    @r.get("/studies/{name}/trials", response_model=s.TrialPage, tags=["trials"])
    def list_trials(
        name: StudyName,
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

    @r.get("/studies/{name}/best", response_model=s.BestOut, tags=["trials"])
    def best(name: StudyName, created: Created = None) -> s.BestOut:
        """The best done trial (``null`` before the first result)."""
        trial = state.call(name, created, lambda st: st.best, retry=True)
        return s.BestOut(trial=trial_out(trial) if trial is not None else None)

    @r.get("/studies/{name}/best_trials", response_model=s.BestTrialsOut, tags=["trials"])
    def best_trials(name: StudyName, created: Created = None) -> s.BestTrialsOut:
        """The Pareto front of done trials (for one objective, the best trial), in id order."""
        trials = state.call(name, created, lambda st: st.best_trials, retry=True)
        return s.BestTrialsOut(trials=[trial_out(t) for t in trials])

    @r.get("/studies/{name}/reference_point", response_model=s.ReferencePointOut, tags=["trials"])
    def reference_point(name: StudyName, created: Created = None) -> s.ReferencePointOut:
        """The default reference point of the hypervolume (several objectives only)."""
        ref = state.call(name, created, lambda st: st.reference_point(), retry=True)
        return s.ReferencePointOut(reference_point=ref)

    @r.post("/studies/{name}/hypervolume", response_model=s.HypervolumeOut, tags=["trials"])
    def hypervolume(
        name: StudyName, body: s.HypervolumeRequest, created: Created = None
    ) -> s.HypervolumeOut:
        """The volume the done trials dominate, bounded by the reference point (several
        objectives only); reads the study, changes nothing."""

        def measure(st: Any) -> s.HypervolumeOut:
            ref = body.reference_point
            ref = st.reference_point() if ref is None else ref
            return s.HypervolumeOut(hypervolume=st.hypervolume(ref), reference_point=ref)

        return state.call(name, created, measure, retry=True)

    @r.get("/studies/{name}/trials/{trial_id}", response_model=s.TrialOut, tags=["trials"])
    def get_trial(name: StudyName, trial_id: TrialId, created: Created = None) -> s.TrialOut:
        """One trial by id."""
        return trial_out(state.call(name, created, lambda st: st.trial(trial_id), retry=False))

    @r.post("/studies/{name}/trials/{trial_id}/tell", response_model=s.TrialOut, tags=["trials"])
    def tell(
        name: StudyName, trial_id: TrialId, body: s.TellRequest, created: Created = None
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

    @r.post("/studies/{name}/trials/{trial_id}/fail", response_model=s.TrialOut, tags=["trials"])
    def fail(
        name: StudyName, trial_id: TrialId, body: s.FailRequest, created: Created = None
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

    @r.post("/studies/{name}/trials/{trial_id}/lose", response_model=s.TrialOut, tags=["trials"])
    def lose(
        name: StudyName, trial_id: TrialId, body: s.LoseRequest, created: Created = None
    ) -> s.TrialOut:
        """Mark a running trial lost (infrastructure failure); its parameters are re-queued.
        Losing it again is a no-op; a done or failed trial is 409."""
        return trial_out(
            state.call(name, created, lambda st: st.lose(trial_id, body.reason), retry=False)
        )

    @r.post("/studies/{name}/trials/{trial_id}/report", response_model=s.ReportOut, tags=["trials"])
    def report(
        name: StudyName, trial_id: TrialId, body: s.ReportRequest, created: Created = None
    ) -> s.ReportOut:
        """Record a running trial's intermediate value; ``stop`` says the study's stopping
        rule ended the trial (it is ``stopped`` now: end its run). Committed before the
        answer; a step that goes backwards is 422, a finished trial 409."""

        def store(st: Any) -> tuple[bool, Trial]:
            stop = st.report(trial_id, body.step, body.value)
            return stop, st.trial(trial_id)

        stop, trial = state.call(name, created, store, retry=False)
        return s.ReportOut(stop=stop, trial=trial_out(trial))

    @r.get("/studies/{name}/reports", response_model=s.ReportsOut, tags=["trials"])
    def reports(
        name: StudyName,
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

    @r.post(
        "/studies/{name}/trials/{trial_id}/heartbeat", response_model=s.TrialOut, tags=["trials"]
    )
    def heartbeat(name: StudyName, trial_id: TrialId, created: Created = None) -> s.TrialOut:
        """Extend a running trial's lease by the study's ``lease_seconds``."""
        return trial_out(state.call(name, created, lambda st: st.heartbeat(trial_id), False))

    return r


def _positive(name: str, value: Any, kind: type = int) -> None:
    ok = isinstance(value, int | float) if kind is float else isinstance(value, int)
    if isinstance(value, bool) or not ok or not math.isfinite(value) or value <= 0:
        raise AboError(f"{name}: expected a positive {kind.__name__}, got {value!r}")


def _on_sighup(callback: Callable[[], None]) -> bool:
    """Call ``callback`` on SIGHUP (the token file's reload); ``False`` where the event loop
    cannot take signals (not the main thread, or Windows)."""
    try:
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, callback)
    except (AttributeError, NotImplementedError, RuntimeError, ValueError):
        return False
    return True


def _validation_error(exc: RequestValidationError) -> JSONResponse:
    """422 naming the field (and, inside a JSON object, the path to the offending value)."""
    first = exc.errors()[0] if exc.errors() else {}
    kind = first.get("type", "")
    if kind == "json_invalid":
        why = (first.get("ctx") or {}).get("error", "")
        return error_response(422, "malformed_json", f"body: malformed JSON {why}", "body")
    loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path", "header")]
    path = (first.get("ctx") or {}).get("path")
    if kind in (s.NON_FINITE, "finite_number") and path is not None:
        loc.append(str(path))
    field = ".".join(loc) or None
    code = "invalid_value" if kind in ("finite_number", s.NON_FINITE) else "invalid_request"
    message = f"{field or 'body'}: {first.get('msg', 'invalid request')}"
    return error_response(422, code, message, field)


def create_app(
    storage_url: str | Storage | None,
    token: str | Iterable[str] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    max_waiting_asks: int = DEFAULT_MAX_WAITING_ASKS,
    max_ask_batch: int = DEFAULT_MAX_ASK_BATCH,
    ask_threads: int = 4,
    token_file: str | FilePath | None = None,
) -> FastAPI:
    """The service on ``storage_url`` (SQLite file or PostgreSQL URL).

    Args:
        storage_url: where studies live; ``sqlite://`` keeps them in memory.
        token: one bearer token or several; ``None`` (and no ``token_file``) turns auth off
            (bind loopback only).
        token_file: a file of tokens, one a line, followed while serving: a token removed
            from it stops working (with its sessions) at the next request; SIGHUP reads it
            at once. Accepted beside ``token``.
        max_body_bytes: larger request bodies are refused with 413.
        body_timeout: seconds a request's body may take to arrive; later is 408.
        max_waiting_asks: asks that may wait for a proposal round (all studies together);
            beyond it an ask gets 503 ``busy`` with ``Retry-After``.
        max_ask_batch: most trials one proposal round starts for the asks waiting together.
        ask_threads: proposal rounds that run at once (for different studies).

    Raises:
        StorageError: the storage cannot be opened or written (read-only, immutable, a
            read-only replica): a service that cannot record a tell must not start.
    """
    from abo.service.analysis_routes import analysis_routes
    from abo.service.dashboard import dashboard_routes

    _positive("max_body_bytes", max_body_bytes)
    _positive("body_timeout", body_timeout, float)
    _positive("max_waiting_asks", max_waiting_asks)
    _positive("max_ask_batch", max_ask_batch)
    _positive("ask_threads", ask_threads)
    if token_file is not None:
        read_tokens(token_file, env=False)  # AboError now for a missing or empty file
    tokens = TokenSet([token] if isinstance(token, str) else (token or []), token_file)
    storage = open_storage(storage_url)
    try:
        storage.check_writable()
    except StorageError as exc:
        raise StorageError(f"{exc} (the service needs storage it can write)") from None
    state = ServiceState(storage, max_waiting_asks, max_ask_batch, ask_threads)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        reload_on_hangup = token_file is not None and _on_sighup(tokens.reload)
        yield
        if reload_on_hangup:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
        state.asks.close()  # no new proposal rounds once the server stops

    app = FastAPI(
        lifespan=lifespan,
        title="abo",
        version=abo.__version__,
        description=DESCRIPTION,
        docs_url=None,  # served from the package's own Swagger UI files (abo.service.dashboard)
        redoc_url=None,
    )
    app.state.abo = state
    app.state.tokens = tokens

    @app.exception_handler(AboError)
    async def _on_abo(_request: Request, exc: AboError) -> JSONResponse:
        if isinstance(exc, StorageError):  # for /readyz: the storage failed a request
            state.health.failed(str(exc).split("[SQL:", 1)[0].rstrip())
        return abo_error_response(exc)

    @app.exception_handler(AsksBackedUp)
    async def _on_busy(_request: Request, exc: AsksBackedUp) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _on_invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return _validation_error(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _on_http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}
        return error_response(exc.status_code, codes.get(exc.status_code, "http_error"), exc.detail)

    @app.exception_handler(Exception)
    async def _on_crash(_request: Request, exc: Exception) -> JSONResponse:
        return error_response(500, "internal", f"internal error: {type(exc).__name__}")

    @app.get("/healthz", response_model=s.Health, tags=["health"])
    async def healthz() -> s.Health:
        """The process is alive (no auth needed; answered on the event loop, never queued)."""
        return s.Health(status="ok")

    @app.get(
        "/readyz",
        response_model=s.Ready,
        tags=["health"],
        responses={
            503: {
                "model": s.ErrorBody,
                "description": "Storage cannot be written, or most recent writes failed",
            }
        },
    )
    def readyz() -> s.Ready | JSONResponse:
        """The storage can be written now (a real, empty write; no auth needed) and most of
        the service's recent writes succeeded (``abo.service.health``: a probe may fit where
        a trial does not), and how many asks wait for a proposal round."""
        try:
            state.storage.check_writable()
        except StorageError as exc:
            state.health.failed(str(exc))
            return abo_error_response(exc)
        state.health.succeeded()
        problem = state.health.problem()
        if problem is not None:
            return error_response(503, "storage_unavailable", problem, None)
        return s.Ready(status="ready", asks_waiting=state.asks.waiting)

    app.include_router(_routes(state))
    app.include_router(analysis_routes(state), prefix=API, responses=_ERROR_RESPONSES)
    app.include_router(dashboard_routes())
    app.add_middleware(WriteRecorder, health=state.health, prefix=API)
    app.add_middleware(BodyLimitMiddleware, limit=max_body_bytes, timeout=float(body_timeout))
    app.add_middleware(AuthMiddleware, tokens=tokens)  # added last: runs first
    return app


__all__ = ["API", "create_app", "error_response", "study_summary", "trial_out"]
