"""ASGI middleware of the service: bearer-token auth, a size limit and deadline on bodies, the
record of committed writes that ``/readyz`` reads, and the per-request metrics and access
records."""

from __future__ import annotations

import logging
import time

import anyio
from fastapi import Request, Response
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from abo.service.auth import COOKIE, OPEN_PATHS, TokenSet, bearer
from abo.service.errors import error_response
from abo.service.health import WriteHealth
from abo.service.logs import ACCESS
from abo.service.metrics import Metrics

access_log = logging.getLogger(ACCESS)

HTML_LOGIN_PATHS = frozenset({"/", "/docs"})


class AuthMiddleware:
    """401 for every path but the open ones unless a valid bearer token (or session cookie)
    comes; a browser asking for a page gets the sign-in form instead of JSON."""

    def __init__(self, app: ASGIApp, tokens: TokenSet) -> None:
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.tokens or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        token = bearer(request.headers.get("authorization"))
        if self.tokens.check(token) or (
            token is None and self.tokens.check_session(request.cookies.get(COOKIE))
        ):
            await self.app(scope, receive, send)
            return
        if scope["path"] in HTML_LOGIN_PATHS and "text/html" in request.headers.get("accept", ""):
            from abo.service.dashboard import login_page

            response: Response = login_page(status_code=401, next_path=scope["path"])
        else:
            why = "missing" if token is None else "invalid"
            response = error_response(
                401, "unauthorized", f"authorization: {why} bearer token", "authorization"
            )
        response.headers["WWW-Authenticate"] = "Bearer"
        await response(scope, receive, send)


class BodyLimitMiddleware:
    """413 for a body over ``limit`` bytes (by its Content-Length or as it streams in), and
    408 for a body not fully received within ``timeout`` seconds of the request's start: a
    client that stalls mid-body would otherwise hold its connection (and a slot) for good."""

    def __init__(self, app: ASGIApp, limit: int, timeout: float) -> None:
        self.app = app
        self.limit = limit
        self.timeout = timeout

    def _too_large(self) -> JSONResponse:
        return error_response(
            413, "payload_too_large", f"body: larger than the limit of {self.limit} bytes", "body"
        )

    def _too_slow(self) -> JSONResponse:
        return error_response(
            408,
            "request_timeout",
            f"body: not received within {self.timeout:g} s (body_timeout); send the whole "
            "body at once",
            "body",
            headers={"Connection": "close"},
        )

    async def _read(self, receive: Receive) -> bytes | None:
        """The whole body (cut short just past the limit), or ``None`` if the client left."""
        chunks: list[bytes] = []
        total = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            total += len(chunk)
            chunks.append(chunk)
            if total > self.limit or not message.get("more_body", False):
                return b"".join(chunks)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = Request(scope).headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await self._too_large()(scope, receive, send)
            return
        try:
            with anyio.fail_after(self.timeout):
                body = await self._read(receive)
        except TimeoutError:
            await self._too_slow()(scope, receive, send)
            return
        if body is None:
            return  # the client went away
        if len(body) > self.limit:
            await self._too_large()(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class WriteRecorder:
    """Counts each committed write (a 2xx answer to a POST or DELETE of the API) as a success
    for ``/readyz`` (``abo.service.health``); the storage errors are counted where they are
    answered (the app's error handler)."""

    def __init__(self, app: ASGIApp, health: WriteHealth, prefix: str) -> None:
        self.app = app
        self.health = health
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        writes = (
            scope["type"] == "http"
            and scope["method"] in ("POST", "DELETE")
            and scope["path"].startswith(self.prefix)
            and not scope["path"].endswith("/hypervolume")  # a POST that only reads
        )
        if not writes:
            await self.app(scope, receive, send)
            return

        async def record(message: Message) -> None:
            if message["type"] == "http.response.start" and 200 <= message["status"] < 300:
                self.health.succeeded()
            await send(message)

        await self.app(scope, receive, record)


def _template(scope: Scope) -> str:
    """The matched route's path template with the prefix it was mounted under
    (``/api/v1/studies/{name}/ask``), or ``unmatched``: a bounded label, never a study name.
    Some FastAPI versions keep the router's own path on the route, without the prefix; the
    prefix is then the request path's leading segments (prefixes hold no parameters)."""
    template = getattr(scope.get("route"), "path", None)
    if not isinstance(template, str):
        return "unmatched"
    parts, own = scope["path"].split("/"), template.split("/")
    if len(parts) > len(own):
        return "/".join(parts[: len(parts) - len(own) + 1]) + template
    return template


class RequestRecorder:
    """Counts each request by its route template and status, times it (``/metrics``), and
    writes one ``abo.access`` record for it when that logger is on (``--log-format json``).
    Outermost, so a request refused by auth or the body limit is counted too."""

    def __init__(self, app: ASGIApp, metrics: Metrics, replica: str) -> None:
        self.app = app
        self.metrics = metrics
        self.replica = replica

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500  # unless an answer starts

        async def record(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, record)
        finally:
            self._done(scope, status, time.perf_counter() - start)

    def _done(self, scope: Scope, status: int, seconds: float) -> None:
        route = _template(scope)
        method = scope["method"]
        self.metrics.answered(method, route, status, seconds)
        if access_log.isEnabledFor(logging.INFO):
            path = scope["path"]
            headers = dict(scope.get("headers") or ())
            client = scope.get("client")
            access_log.info(
                "%s %s %d", method, path, status,
                extra={
                    "method": method, "path": path, "route": route, "status": status,
                    "duration_ms": round(1000.0 * seconds, 3),
                    "client": f"{client[0]}:{client[1]}" if client else None,
                    "request_id": headers.get(b"x-request-id", b"").decode("latin-1") or None,
                    "replica": self.replica,
                },
            )  # fmt: skip
