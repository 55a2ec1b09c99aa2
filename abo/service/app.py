"""The HTTP ask/tell service (FastAPI): ``create_app(storage_url)`` builds it.

Blocking ``Study`` calls run in FastAPI's threadpool (plain ``def`` endpoints); one ``Study``
per name is cached so its in-process lock serialises asks, and the storage serialises writers
across processes. Every error is ``{"error": {"code", "message", "field"}}``.

Example:
    >>> from abo.service.app import create_app
    >>> app = create_app("sqlite://")
    >>> "/api/v1/studies" in [r.path for r in app.routes]
    True
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import abo
from abo.exceptions import (
    AboError,
    DuplicatedStudyError,
    InvalidValueError,
    SearchSpaceError,
    StorageError,
    StudyNotFoundError,
    TrialNotFoundError,
    TrialStateError,
    UnknownStrategyError,
)
from abo.service import schemas as s
from abo.service.auth import COOKIE, OPEN_PATHS, TokenSet, bearer
from abo.space import Space
from abo.storage import Storage, StudyRecord, open_storage
from abo.study import Study
from abo.trial import Trial, TrialState

API = "/api/v1"
DEFAULT_MAX_BODY = 1024 * 1024

# exception type -> (HTTP status, machine-readable code); the first match wins.
ERRORS: list[tuple[type[AboError], int, str]] = [
    (InvalidValueError, 422, "invalid_value"),
    (SearchSpaceError, 422, "invalid_params"),
    (UnknownStrategyError, 422, "unknown_strategy"),
    (StudyNotFoundError, 404, "study_not_found"),
    (TrialNotFoundError, 404, "trial_not_found"),
    (TrialStateError, 409, "trial_state"),
    (DuplicatedStudyError, 409, "study_exists"),
    (StorageError, 503, "storage_unavailable"),
    (AboError, 422, "invalid_argument"),
]
_FIELD = re.compile(r"^([A-Za-z_][A-Za-z0-9_.\[\]-]{0,127}): ")


def error_response(status: int, code: str, message: str, field: str | None = None) -> JSONResponse:
    """The one error shape of the API."""
    body = {"error": {"code": code, "message": message, "field": field}}
    return JSONResponse(body, status_code=status)


def _abo_error(exc: AboError) -> JSONResponse:
    message = str(exc)
    match = _FIELD.match(message)
    for kind, status, code in ERRORS:
        if isinstance(exc, kind):
            return error_response(status, code, message, match.group(1) if match else None)
    raise AssertionError("unreachable: AboError is last")  # pragma: no cover


def _clean(obj: Any, depth: int = 0) -> Any:
    """Strict-JSON-safe copy: non-finite floats become ``None`` and anything nested deeper
    than 64 levels a placeholder string, so no stored value can make a listing fail."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if obj is None or isinstance(obj, str | int | bool):
        return obj
    if depth >= 64:
        return "<nested too deep>"
    if isinstance(obj, Mapping):
        return {str(k): _clean(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v, depth + 1) for v in obj]
    return str(obj)


def trial_out(trial: Trial) -> s.TrialOut:
    """The API form of a trial, safe to serialise whatever the storage holds."""
    data = _clean(trial.to_dict())
    data["duration"] = _clean(trial.duration) if data["finished_at"] is not None else None
    return s.TrialOut.model_validate(data)


class _State:
    """What the endpoints share: the storage and one cached ``Study`` per name.

    Studies are opened with ``refit="background"``: an ask never waits for a GP fit; it
    proposes from the newest hyperparameters conditioned on the current data while one thread
    refits, its fit running in a child process (see ``abo.refit`` and ``abo.fitproc``).
    """

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._studies: dict[str, Study] = {}
        self._lock = threading.Lock()
        self._client_locks: dict[str, threading.Lock] = {}

    def study(self, name: str) -> Study:
        with self._lock:
            study = self._studies.get(name)
        if study is None:
            study = Study(self.storage, self.storage.load_study(name), refit="background")
            with self._lock:
                study = self._studies.setdefault(name, study)
        return study

    def forget(self, name: str) -> None:
        """Drop the cached study of that name (deleted, or found stale)."""
        with self._lock:
            self._studies.pop(name, None)

    def remember(self, study: Study) -> Study:
        study = Study(self.storage, study.record, refit="background")
        with self._lock:
            return self._studies.setdefault(study.name, study)

    def client_lock(self, name: str) -> threading.Lock:
        with self._lock:
            return self._client_locks.setdefault(name, threading.Lock())

    def ask(
        self,
        study: Study,
        count: int,
        n_workers: int | None,
        client_id: str | None,
        info: Mapping[str, Any] | None,
    ) -> list[Trial]:
        """Running trials of ``client_id`` first (Vizier semantics), then new ones."""
        if client_id is None:
            return study.ask_batch(count, n_workers=n_workers, info=info)
        with self.client_lock(study.name):
            mine = [t for t in study.pending if t.info.get("client_id") == client_id][:count]
            need = count - len(mine)
            if need <= 0:
                return mine
            extra = {**(info or {}), "client_id": client_id}
            return mine + study.ask_batch(need, n_workers=n_workers, info=extra)


def _best(trials: list[Trial], direction: str) -> Trial | None:
    """The best done trial with a finite value (ties: the earliest), as ``Study.best``."""
    done = [t for t in trials if t.state is TrialState.DONE and _finite(t.value)]
    if not done:
        return None
    if direction == "minimize":
        return min(done, key=lambda t: (t.value, t.id))
    return max(done, key=lambda t: (t.value, -t.id))


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def study_summary(storage: Storage, record: StudyRecord) -> s.StudyOut:
    """A study's definition and trial counts, read from the storage alone (no strategy is
    built, so a study whose strategy this process lacks still lists)."""
    trials = storage.trials(record)
    states = {st.value: 0 for st in TrialState}
    for t in trials:
        states[t.state.value] += 1
    best = _best(trials, record.direction)
    return s.StudyOut(
        name=record.name,
        space=_clean(record.space.to_json()),
        direction=record.direction,
        strategy=record.strategy,
        seed=record.seed,
        config=_clean(record.config.to_json()),
        created_at=record.created_at,
        n_trials=len(trials),
        states=states,
        best=trial_out(best) if best is not None else None,
    )


def _study_out(study: Study) -> s.StudyOut:
    return study_summary(study.storage, study.record)


# -- ASGI middleware -------------------------------------------------------------------------
class AuthMiddleware:
    """401 for every path but the open ones unless a valid bearer token (or cookie) comes."""

    def __init__(self, app: ASGIApp, tokens: TokenSet) -> None:
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.tokens or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        token = bearer(request.headers.get("authorization")) or request.cookies.get(COOKIE)
        if self.tokens.check(token):
            await self.app(scope, receive, send)
            return
        if scope["path"] == "/" and "text/html" in request.headers.get("accept", ""):
            from abo.service.dashboard import login_page

            response: Response = login_page(status_code=401)
        else:
            why = "missing" if token is None else "invalid"
            response = error_response(
                401, "unauthorized", f"authorization: {why} bearer token", "authorization"
            )
        response.headers["WWW-Authenticate"] = "Bearer"
        await response(scope, receive, send)


class BodyLimitMiddleware:
    """413 for a body over ``limit`` bytes, by its Content-Length or as it streams in."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    def _too_large(self) -> JSONResponse:
        return error_response(
            413, "payload_too_large", f"body: larger than the limit of {self.limit} bytes", "body"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = Request(scope).headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await self._too_large()(scope, receive, send)
            return
        chunks: list[bytes] = []
        total = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            total += len(chunk)
            if total > self.limit:
                await self._too_large()(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


# -- the application ---------------------------------------------------------------------------
_ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": s.ErrorBody, "description": text}
    for code, text in {
        401: "Missing or invalid bearer token",
        404: "Unknown study or trial",
        409: "Conflicting state (a second, different tell; a different space)",
        413: "Body over the size limit",
        422: "Invalid input (the field is named)",
        503: "Storage unavailable",
    }.items()
}
StudyName = Annotated[str, Path(min_length=1, max_length=128, description="The study's name.")]
TrialId = Annotated[int, Path(ge=1, le=s.MAX_TRIAL_ID, description="The trial's id.")]


def _routes(state: _State) -> APIRouter:  # noqa: C901 - one small function per endpoint
    r = APIRouter(prefix=API, responses=_ERROR_RESPONSES)

    @r.get("/studies", response_model=s.StudyList, tags=["studies"])
    def list_studies() -> s.StudyList:
        """Every study of the storage with a summary of its trials."""
        records = state.storage.list_studies()
        return s.StudyList(studies=[study_summary(state.storage, r) for r in records])

    @r.post(
        "/studies",
        response_model=s.StudyOut,
        status_code=201,
        tags=["studies"],
        responses={200: {"model": s.StudyOut, "description": "An existing study was loaded"}},
    )
    def create_study(body: s.StudyCreate, response: Response) -> s.StudyOut:
        """Create a study; with ``load_if_exists`` an existing one of the same space is loaded
        (200), and a different space or direction is 409."""
        space = Space.from_json(body.space)
        try:
            existing: Study | None = state.study(body.name)
        except StudyNotFoundError:
            existing = None
        if existing is not None:
            if not body.load_if_exists:
                raise DuplicatedStudyError(f"name: a study called {body.name!r} exists already")
            if existing.space != space:
                return error_response(  # type: ignore[return-value]
                    409,
                    "space_conflict",
                    f"space: study {body.name!r} exists with a different space "
                    f"{json.dumps(existing.space.to_json())}",
                    "space",
                )
            if existing.direction != body.direction:
                return error_response(  # type: ignore[return-value]
                    409,
                    "direction_conflict",
                    f"direction: study {body.name!r} exists with direction {existing.direction!r}",
                    "direction",
                )
            response.status_code = 200
            return _study_out(existing)
        _check_space(space)
        study = abo.create_study(
            space,
            name=body.name,
            storage=state.storage,
            direction=body.direction,
            strategy=body.strategy,
            seed=body.seed,
            load_if_exists=body.load_if_exists,
            n_initial=body.n_initial,
            lease_seconds=body.lease_seconds,
            max_retries=body.max_retries,
            noise=body.noise,
            max_staleness=body.max_staleness,
            max_exact=body.max_exact,
        )
        return _study_out(state.remember(study))

    @r.get("/studies/{name}", response_model=s.StudyOut, tags=["studies"])
    def get_study(name: StudyName) -> s.StudyOut:
        """One study with a summary of its trials."""
        return _study_out(state.study(name))

    @r.delete("/studies/{name}", status_code=204, tags=["studies"])
    def delete_study(name: StudyName) -> Response:
        """Delete a study with all its trials; its other users get 404 from then on."""
        state.storage.delete_study(name)
        state.forget(name)
        return Response(status_code=204)

    @r.post("/studies/{name}/ask", response_model=s.AskResponse, tags=["trials"])
    def ask(name: StudyName, body: s.AskRequest) -> s.AskResponse:
        """Start ``count`` trials (each later one sees the earlier ones as busy points)."""
        study = state.study(name)
        trials = state.ask(study, body.count, body.n_workers, body.client_id, body.info)
        n_obs = [t.info.get("n_observations") for t in trials]
        n_obs_ints = [n for n in n_obs if isinstance(n, int) and not isinstance(n, bool)]
        return s.AskResponse(
            trials=[trial_out(t) for t in trials], n_observations=max(n_obs_ints, default=0)
        )

    @r.post("/studies/{name}/enqueue", response_model=s.EnqueueResponse, tags=["trials"])
    def enqueue(name: StudyName, body: s.ParamsRequest) -> s.EnqueueResponse:
        """Queue parameters to be handed out by the next ask (checked against the space);
        ``queued`` is false when the study already has them (see ``allow_duplicate``)."""
        queued = state.study(name).enqueue(body.params, allow_duplicate=body.allow_duplicate)
        return s.EnqueueResponse(queued=queued)

    @r.post("/studies/{name}/add", response_model=s.TrialOut, status_code=201, tags=["trials"])
    def add(name: StudyName, body: s.AddRequest) -> s.TrialOut:
        """Record a known result as a done trial (an equal done trial is returned instead)."""
        study = state.study(name)
        return trial_out(
            study.add(body.params, body.value, body.metadata, allow_duplicate=body.allow_duplicate)
        )

    @r.get("/studies/{name}/trials", response_model=s.TrialPage, tags=["trials"])
    def list_trials(
        name: StudyName,
        state_: Annotated[
            list[TrialState] | None, Query(alias="state", description="Only these states.")
        ] = None,
        offset: Annotated[int, Query(ge=0, le=2**31)] = 0,
        limit: Annotated[int, Query(ge=1, le=s.MAX_PAGE)] = 1000,
    ) -> s.TrialPage:
        """Trials in id order, optionally only some states, a page at a time."""
        study = state.study(name)
        trials = state.storage.trials(study.record, state_ or None)
        page = trials[offset : offset + limit]
        nxt = offset + limit if offset + limit < len(trials) else None
        return s.TrialPage(
            trials=[trial_out(t) for t in page], total=len(trials), offset=offset, next_offset=nxt
        )

    @r.get("/studies/{name}/best", response_model=s.BestOut, tags=["trials"])
    def best(name: StudyName) -> s.BestOut:
        """The best done trial (``null`` before the first result)."""
        trial = state.study(name).best
        return s.BestOut(trial=trial_out(trial) if trial is not None else None)

    @r.get("/studies/{name}/trials/{trial_id}", response_model=s.TrialOut, tags=["trials"])
    def get_trial(name: StudyName, trial_id: TrialId) -> s.TrialOut:
        """One trial by id."""
        return trial_out(state.study(name).trial(trial_id))

    @r.post("/studies/{name}/trials/{trial_id}/tell", response_model=s.TrialOut, tags=["trials"])
    def tell(name: StudyName, trial_id: TrialId, body: s.TellRequest) -> s.TrialOut:
        """Record a running trial's value; the same value again is 200, a different one 409."""
        study = state.study(name)
        return trial_out(study.tell(trial_id, body.value, body.metadata, info=body.info))

    @r.post("/studies/{name}/trials/{trial_id}/fail", response_model=s.TrialOut, tags=["trials"])
    def fail(name: StudyName, trial_id: TrialId, body: s.FailRequest) -> s.TrialOut:
        """Mark a running trial failed: its parameters caused it."""
        study = state.study(name)
        return trial_out(study.fail(trial_id, body.reason, body.metadata, info=body.info))

    @r.post("/studies/{name}/trials/{trial_id}/lose", response_model=s.TrialOut, tags=["trials"])
    def lose(name: StudyName, trial_id: TrialId, body: s.LoseRequest) -> s.TrialOut:
        """Mark a running trial lost (infrastructure failure); its parameters are re-queued."""
        return trial_out(state.study(name).lose(trial_id, body.reason))

    @r.post(
        "/studies/{name}/trials/{trial_id}/heartbeat", response_model=s.TrialOut, tags=["trials"]
    )
    def heartbeat(name: StudyName, trial_id: TrialId) -> s.TrialOut:
        """Extend a running trial's lease by the study's ``lease_seconds``."""
        return trial_out(state.study(name).heartbeat(trial_id))

    return r


def _check_space(space: Space) -> None:
    """Reject spaces the unit-cube encoding cannot represent (bounds whose width overflows)."""
    for name, param in space.items():
        low, high = getattr(param, "low", 0.0), getattr(param, "high", 0.0)
        if not math.isfinite(float(high) - float(low)):
            raise SearchSpaceError(f"{name}: the range [{low}, {high}] is too wide to encode")


def create_app(
    storage_url: str | Storage | None,
    token: str | Iterable[str] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY,
) -> FastAPI:
    """The service on ``storage_url`` (SQLite file or PostgreSQL URL).

    Args:
        storage_url: where studies live; ``sqlite://`` keeps them in memory.
        token: one bearer token or several; ``None`` turns auth off (bind loopback only).
        max_body_bytes: larger request bodies are refused with 413.
    """
    from abo.service.dashboard import dashboard_routes

    if not isinstance(max_body_bytes, int) or max_body_bytes < 1:
        raise AboError(f"max_body_bytes: expected a positive integer, got {max_body_bytes!r}")
    tokens = TokenSet([token] if isinstance(token, str) else (token or []))
    storage = open_storage(storage_url)
    state = _State(storage)
    app = FastAPI(
        title="abo",
        version=abo.__version__,
        description="Asynchronous Bayesian optimization: ask for trials, tell their values.",
    )
    app.state.abo = state
    app.state.tokens = tokens

    @app.exception_handler(AboError)
    async def _on_abo(_request: Request, exc: AboError) -> JSONResponse:
        return _abo_error(exc)

    @app.exception_handler(RequestValidationError)
    async def _on_invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        kind = first.get("type", "")
        if kind == "json_invalid":
            why = (first.get("ctx") or {}).get("error", "")
            return error_response(422, "malformed_json", f"body: malformed JSON {why}", "body")
        loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")]
        field = ".".join(loc) or None
        code = "invalid_value" if kind == "finite_number" else "invalid_request"
        message = f"{field or 'body'}: {first.get('msg', 'invalid request')}"
        return error_response(422, code, message, field)

    @app.exception_handler(StarletteHTTPException)
    async def _on_http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}
        return error_response(exc.status_code, codes.get(exc.status_code, "http_error"), exc.detail)

    @app.exception_handler(Exception)
    async def _on_crash(_request: Request, exc: Exception) -> JSONResponse:
        return error_response(500, "internal", f"internal error: {type(exc).__name__}")

    @app.get("/healthz", response_model=s.Health, tags=["health"])
    def healthz() -> s.Health:
        """The process is alive (no auth needed)."""
        return s.Health(status="ok")

    @app.get(
        "/readyz",
        response_model=s.Health,
        tags=["health"],
        responses={503: {"model": s.ErrorBody, "description": "Storage unreachable"}},
    )
    def readyz() -> s.Health:
        """The storage answers (no auth needed)."""
        state.storage.list_studies()
        return s.Health(status="ready")

    app.include_router(_routes(state))
    app.include_router(dashboard_routes())
    app.add_middleware(BodyLimitMiddleware, limit=max_body_bytes)
    app.add_middleware(AuthMiddleware, tokens=tokens)  # added last: runs first
    return app


__all__ = ["API", "create_app", "error_response", "trial_out"]
