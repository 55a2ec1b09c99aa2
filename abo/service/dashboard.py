"""The dashboard: a static page (HTML + JS + inline SVG, no CDN) that polls the JSON API.

Served from package files by the same process as the API, at ``/``. With auth on, a browser
posts its token once to ``/login`` and keeps it in an HttpOnly cookie.
"""

from __future__ import annotations

import html
from pathlib import Path
from urllib.parse import parse_qs

from fastapi import APIRouter, Request, Response
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse

from abo.service.auth import COOKIE

STATIC = Path(__file__).parent / "static"
_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}

_LOGIN = """<!doctype html><html><head><meta charset="utf-8"><title>abo — sign in</title>
<link rel="stylesheet" href="/static/style.css"></head><body class="login">
<form method="post" action="/login"><h1>abo</h1><p>{message}</p>
<label>Token <input type="password" name="token" autofocus></label>
<button type="submit">Open dashboard</button></form></body></html>"""


def login_page(status_code: int = 200, message: str = "This server needs a token.") -> Response:
    """The sign-in form (it holds no study data, so it is served without auth)."""
    body = _LOGIN.format(message=html.escape(message)).replace(
        '<link rel="stylesheet" href="/static/style.css">',
        f"<style>{(STATIC / 'style.css').read_text(encoding='utf-8')}</style>",
    )
    return HTMLResponse(body, status_code=status_code)


def dashboard_routes() -> APIRouter:
    """``/`` (the page), ``/static/<file>`` (its assets) and ``/login``."""
    r = APIRouter(include_in_schema=False)

    @r.get("/")
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @r.get("/static/{filename}")
    def static(filename: str) -> Response:
        path = STATIC / filename
        if path.suffix not in _TYPES or path.parent != STATIC or not path.is_file():
            return Response(status_code=404)
        return FileResponse(path, media_type=_TYPES[path.suffix])

    @r.get("/login")
    def login_form() -> Response:
        return login_page()

    @r.post("/login")
    async def login(request: Request) -> Response:
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        token = (form.get("token") or [""])[0].strip()
        tokens = request.app.state.tokens
        if not tokens or not tokens.check(token):
            return login_page(401, "That token is not valid.")
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict")
        return response

    return r
