"""The dashboard, the sign-in form and the API docs page: static pages served from package
files (no CDN), so they work on a cluster without internet access.

The dashboard (HTML + JS + inline SVG) polls the JSON API at ``/``. ``/docs`` is Swagger UI
from the vendored ``swagger-ui-dist`` files in ``static/swagger``. With auth on, a browser
posts its token once to ``/login`` and keeps a session cookie (``abo.service.auth``) that does
not hold the token; failed logins are limited per client address (429 with Retry-After), a
correct token always gets in.
"""

from __future__ import annotations

import asyncio
import html
from pathlib import Path
from urllib.parse import parse_qs

from fastapi import APIRouter, Request, Response
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse

from abo.service.auth import COOKIE, SESSION_SECONDS, LoginLimiter

STATIC = Path(__file__).parent / "static"
SWAGGER = STATIC / "swagger"
_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".png": "image/png"}
LIMITED_DELAY = 1.0  # seconds added to each sign-in from an address over the limit
NEXT_PATHS = ("/", "/docs")  # where a sign-in may lead (never an arbitrary URL)

_LOGIN = """<!doctype html><html><head><meta charset="utf-8"><title>abo — sign in</title>
<link rel="stylesheet" href="/static/style.css"></head><body class="login">
<form method="post" action="/login"><h1>abo</h1><p>{message}</p>
<input type="hidden" name="next" value="{next_path}">
<label>Token <input type="password" name="token" autofocus></label>
<button type="submit">Open dashboard</button></form></body></html>"""


def login_page(
    status_code: int = 200,
    message: str = "This server needs a token.",
    next_path: str = "/",
    headers: dict[str, str] | None = None,
) -> Response:
    """The sign-in form (it holds no study data, so it is served without auth)."""
    body = _LOGIN.format(
        message=html.escape(message),
        next_path=next_path if next_path in NEXT_PATHS else "/",
    ).replace(
        '<link rel="stylesheet" href="/static/style.css">',
        f"<style>{(STATIC / 'style.css').read_text(encoding='utf-8')}</style>",
    )
    return HTMLResponse(body, status_code=status_code, headers=headers)


def _file(folder: Path, filename: str) -> Response:
    path = folder / filename
    if path.suffix not in _TYPES or path.parent != folder or not path.is_file():
        return Response(status_code=404)
    return FileResponse(path, media_type=_TYPES[path.suffix])


def dashboard_routes() -> APIRouter:
    """``/`` (the page), ``/static/<file>`` (its assets), ``/docs`` (Swagger UI) and
    ``/login``."""
    r = APIRouter(include_in_schema=False)
    limiter = LoginLimiter()

    @r.get("/")
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @r.get("/static/{filename}")
    def static(filename: str) -> Response:
        return _file(STATIC, filename)

    @r.get("/static/swagger/{filename}")
    def swagger_static(filename: str) -> Response:
        return _file(SWAGGER, filename)

    @r.get("/docs")
    def docs(request: Request) -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=request.app.openapi_url,
            title=f"{request.app.title} — API",
            swagger_js_url="/static/swagger/swagger-ui-bundle.js",
            swagger_css_url="/static/swagger/swagger-ui.css",
            swagger_favicon_url="/static/swagger/favicon-32x32.png",
            swagger_ui_parameters={"validatorUrl": None},  # else it would call a public host
        )

    @r.get("/login")
    def login_form() -> Response:
        return login_page()

    @r.post("/login")
    async def login(request: Request) -> Response:
        """Trade a token for a session cookie (see ``_sign_in``)."""
        return await _sign_in(request, limiter)

    return r


async def _sign_in(request: Request, limiter: LoginLimiter) -> Response:
    """Trade a token for a session cookie. A correct token always gets in; after
    ``limiter.attempts`` wrong ones a minute from one client address, further wrong ones
    are 429 and every attempt from that address is answered ``LIMITED_DELAY`` seconds late
    (a right token still gets in, so guessing on must be slow). The address is the one
    the packets came from (uvicorn trusts a proxy's ``X-Forwarded-For`` only from the
    addresses ``--forwarded-allow-ips`` names)."""
    address = request.client.host if request.client else "unknown"
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    token = (form.get("token") or [""])[0].strip()
    next_path = (form.get("next") or ["/"])[0]
    tokens = request.app.state.tokens
    wait = limiter.retry_after(address)
    if wait is not None:  # limited: every answer, right or wrong, comes a second later,
        await asyncio.sleep(LIMITED_DELAY)  # so guessing on stays slow (no thread held)
    if not tokens or not tokens.check(token):
        if wait is not None:  # not counted: the limit stays ``attempts`` a window
            return login_page(
                429,
                f"Too many failed sign-ins from your address; try again in {wait} s.",
                headers={"Retry-After": str(wait)},
            )
        limiter.failed(address)
        return login_page(401, "That token is not valid.", next_path)
    response = RedirectResponse(next_path if next_path in NEXT_PATHS else "/", 303)
    response.set_cookie(
        COOKIE,
        tokens.session(token),
        max_age=SESSION_SECONDS,
        httponly=True,
        samesite="strict",
        # HTTPS as uvicorn sees it: TLS of its own, or X-Forwarded-Proto from a proxy
        # the operator named (--forwarded-allow-ips; none by default); a header from
        # anyone else is ignored, so a client cannot talk the server out of Secure.
        secure=request.url.scheme == "https",
    )
    return response
