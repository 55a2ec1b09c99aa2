"""The HTTP ask/tell service (FastAPI): ``create_app(storage_url)`` builds it.

Asks are ``async`` endpoints that wait on shared proposal rounds run by a private executor
(``abo.service.asks``), so they never occupy FastAPI's threadpool: health, readiness, tells,
heartbeats and reads (plain ``def`` endpoints in that threadpool) answer while proposals run.
One ``Study`` per name is cached (``abo.service.state``); the storage serialises writers
across processes. Every error is ``{"error": {"code", "message", "field"}}``.
The routes live in ``abo.service.routes``, one ``APIRouter`` per resource; this module
assembles them with the error handlers and the middleware.

Example:
    >>> from abo.service.app import create_app
    >>> app = create_app("sqlite://")
    >>> "/api/v1/studies/{name}/ask" in app.openapi()["paths"]
    True
"""

from __future__ import annotations

import asyncio
import math
import signal
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path as FilePath
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

import abo.service.schemas as s
from abo import __version__
from abo.core.exceptions import AboError, ProposerMoved, StorageError
from abo.service.auth import TokenSet, read_tokens
from abo.service.errors import AsksBackedUp, abo_error_response, error_response
from abo.service.middleware import (
    AuthMiddleware,
    BodyLimitMiddleware,
    RequestRecorder,
    WriteRecorder,
)
from abo.service.proposers import DEFAULT_LEASE_SECONDS
from abo.service.routes import health, results, studies, trials
from abo.service.routes.common import API, ERROR_RESPONSES, study_summary, trial_out
from abo.service.state import CREATED_HEADER, ServiceState
from abo.storage import Storage, open_storage

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


def _positive(name: str, value: Any, kind: type = int) -> None:
    """Refuse a size or time that is not a positive number of ``kind`` (naming it)."""
    ok = isinstance(value, int | float) if kind is float else isinstance(value, int)
    if isinstance(value, bool) or not ok or not math.isfinite(value) or value <= 0:
        raise AboError(f"{name}: expected a positive {kind.__name__}, got {value!r}")


def _check_options(sizes: dict[str, Any], times: dict[str, Any]) -> None:
    """Refuse a size or a time that is not positive (naming it)."""
    for name, value in sizes.items():
        _positive(name, value)
    for name, value in times.items():
        _positive(name, value, float)


def _cluster(address: str | None) -> Any:
    """Proposals on the Dask cluster at ``address`` (``None``: in this process)."""
    if address is None:
        return None
    from abo.propose.remote import ClusterProposals

    return ClusterProposals(address)


def _check_places(url: Any, device: str | None) -> None:
    """Refuse an advertised address that is not an ``http(s)://host[:port]`` URL, and a
    device this machine does not have."""
    from urllib.parse import urlsplit

    if device is not None:
        from abo.model.device import resolve_device

        resolve_device(device)
    if url is None:
        return
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise AboError(
            f"advertise_url: expected http(s)://host:port (how the other replicas reach this "
            f"one), got {url!r}",
            field="advertise_url",
        )


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


def _handle_errors(app: FastAPI, state: ServiceState) -> None:
    """Answer every exception in the API's one error shape (``abo.service.errors``)."""

    @app.exception_handler(AboError)
    async def _on_abo(_request: Request, exc: AboError) -> JSONResponse:
        if isinstance(exc, StorageError):  # for /readyz: the storage failed a request
            state.health.failed(str(exc).split("[SQL:", 1)[0].rstrip())
            state.metrics.storage_errors.inc()
        return abo_error_response(exc)

    @app.exception_handler(ProposerMoved)
    async def _on_moved(_request: Request, exc: ProposerMoved) -> JSONResponse:
        response = abo_error_response(exc)
        response.headers["Retry-After"] = "1"
        return response

    @app.exception_handler(AsksBackedUp)
    async def _on_busy(_request: Request, exc: AsksBackedUp) -> JSONResponse:
        state.metrics.refused.inc()
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


def _writable_storage(storage_url: str | Storage | None) -> Storage:
    """The storage at ``storage_url``, refused unless it can be written now."""
    storage = open_storage(storage_url)
    try:
        storage.check_writable()
    except StorageError as exc:
        raise StorageError(f"{exc} (the service needs storage it can write)") from None
    return storage


def _lifespan(
    state: ServiceState, tokens: TokenSet, follow_sighup: bool
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """While serving: renew this replica's proposer leases and reload the token file on
    SIGHUP (when it has one); on stopping, close the ask lines so no proposal round starts,
    and release the leases."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        reload_on_hangup = follow_sighup and _on_sighup(tokens.reload)
        state.leases.start()
        yield
        if reload_on_hangup:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
        state.asks.close()  # no new proposal rounds once the server stops
        await run_in_threadpool(state.leases.close)  # the other replicas take over at once
        await state.forwarder.close()
        if state.proposals is not None:
            await run_in_threadpool(state.proposals.close)

    return lifespan


def _assemble(
    app: FastAPI, state: ServiceState, tokens: TokenSet, max_body: int, timeout: float
) -> None:
    """Mount the routers (health first, then the API's resources, then the dashboard) and
    the middleware (the last added runs first: the request recorder, then auth)."""
    from abo.service.analysis_routes import analysis_routes
    from abo.service.dashboard import dashboard_routes

    app.include_router(health.router)
    for resource in (studies, trials, results):
        app.include_router(resource.router, prefix=API, responses=ERROR_RESPONSES)
    app.include_router(analysis_routes(state), prefix=API, responses=ERROR_RESPONSES)
    app.include_router(dashboard_routes())
    app.add_middleware(WriteRecorder, health=state.health, prefix=API)
    app.add_middleware(BodyLimitMiddleware, limit=max_body, timeout=timeout)
    app.add_middleware(AuthMiddleware, tokens=tokens)
    app.add_middleware(RequestRecorder, metrics=state.metrics, replica=state.leases.holder)


def create_app(
    storage_url: str | Storage | None,
    token: str | Iterable[str] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    max_waiting_asks: int = DEFAULT_MAX_WAITING_ASKS,
    max_ask_batch: int = DEFAULT_MAX_ASK_BATCH,
    ask_threads: int = 4,
    token_file: str | FilePath | None = None,
    device: str | None = None,
    advertise_url: str | None = None,
    proposer_lease: float = DEFAULT_LEASE_SECONDS,
    dask_scheduler: str | None = None,
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
        device: where this service's GPs and searches run for every study ('cpu', 'cuda',
            'cuda:N' or 'auto'), instead of each study's own ``device``.
        advertise_url, proposer_lease: where the other replicas on the same database reach
            this one, and its proposer leases' seconds (``abo.service.proposers``).
        dask_scheduler: run proposal rounds on this Dask cluster (``abo.propose.remote``).

    Raises:
        StorageError: the storage cannot be opened or written (read-only, immutable, a
            read-only replica): a service that cannot record a tell must not start.
    """
    sizes = {"max_body_bytes": max_body_bytes, "max_waiting_asks": max_waiting_asks,
             "max_ask_batch": max_ask_batch, "ask_threads": ask_threads}  # fmt: skip
    _check_options(sizes, {"body_timeout": body_timeout, "proposer_lease": proposer_lease})
    _check_places(advertise_url, device)
    if token_file is not None:
        read_tokens(token_file, env=False)  # AboError now for a missing or empty file
    tokens = TokenSet([token] if isinstance(token, str) else (token or []), token_file)
    storage = _writable_storage(storage_url)
    lease = (advertise_url.rstrip("/") if advertise_url else None, float(proposer_lease))
    state = ServiceState(storage, max_waiting_asks, max_ask_batch, ask_threads, device, *lease,
                         _cluster(dask_scheduler))  # fmt: skip
    app = FastAPI(
        lifespan=_lifespan(state, tokens, token_file is not None), title="abo",
        version=__version__, description=DESCRIPTION,
        docs_url=None, redoc_url=None,  # the package's own Swagger UI (abo.service.dashboard)
    )  # fmt: skip
    app.state.abo = state  # what the routers' ``Service`` dependency hands their endpoints
    app.state.tokens = tokens
    _handle_errors(app, state)
    _assemble(app, state, tokens, max_body_bytes, float(body_timeout))
    return app


__all__ = ["API", "create_app", "error_response", "study_summary", "trial_out"]
