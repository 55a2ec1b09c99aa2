"""Bearer-token auth on a real server: 401 without a valid token, health open, no token logs."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import httpx
import pytest

import abo
from abo.service import Client
from abo.service.auth import (
    COOKIE,
    SESSION_SECONDS,
    TokenSet,
    check_bind,
    is_loopback,
    read_tokens,
)

from .conftest import SPACE, Server

TOKEN = "s3cret-token-for-tests-0123456789"


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("auth")
    srv = Server(f"sqlite:///{folder / 'auth.db'}", folder / "auth.log", token=TOKEN).start()
    yield srv
    srv.stop()


PATHS = [
    ("GET", "/api/v1/studies"),
    ("POST", "/api/v1/studies"),
    ("GET", "/api/v1/studies/x/trials"),
    ("POST", "/api/v1/studies/x/ask"),
    ("POST", "/api/v1/studies/x/trials/1/tell"),
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
    ("GET", "/"),
    ("GET", "/static/app.js"),
]


@pytest.mark.parametrize("header", [None, "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x"])
def test_every_endpoint_but_health_needs_the_token(auth_server: Server, header: str | None) -> None:
    headers = {"Authorization": header} if header else {}
    for method, path in PATHS:
        r = httpx.request(method, auth_server.url + path, headers=headers, json={"value": 1.0})
        assert r.status_code == 401, (method, path, r.status_code)
        assert r.json()["error"]["code"] == "unauthorized"
        assert r.headers["www-authenticate"] == "Bearer"
    assert httpx.get(auth_server.url + "/healthz", headers=headers).status_code == 200
    assert httpx.get(auth_server.url + "/readyz", headers=headers).status_code == 200


def test_the_right_token_works_and_is_never_logged(auth_server: Server) -> None:
    with Client(auth_server.url, token=TOKEN) as client:
        study = client.create_study(SPACE, name="authed", strategy="random", seed=0)
        trial = study.ask()
        assert study.tell(trial.id, 1.0).value == 1.0
    with (
        Client(auth_server.url, token="wrong") as client,
        pytest.raises(abo.AboError, match="auth"),
    ):
        client.studies()
    ok = httpx.get(auth_server.url + "/openapi.json", headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200
    log = auth_server.log.read_text()
    assert "POST /api/v1/studies/authed/ask" in log  # the access log is on ...
    assert TOKEN not in log  # ... and holds no token


def test_browser_login_sets_a_session_cookie_that_does_not_hold_the_token(
    auth_server: Server,
) -> None:
    page = httpx.get(auth_server.url + "/", headers={"Accept": "text/html"})
    assert page.status_code == 401 and "<form" in page.text and "studies" not in page.text
    with httpx.Client(base_url=auth_server.url) as browser:
        bad = browser.post("/login", data={"token": "nope"})
        assert bad.status_code == 401 and not browser.cookies
        r = browser.post("/login", data={"token": TOKEN})
        assert r.status_code == 303 and r.headers["location"] == "/"
        cookie = r.headers["set-cookie"]
        assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
        assert "secure" not in cookie.lower()  # plain HTTP: a Secure cookie would never return
        value = browser.cookies[COOKIE]
        digest = hashlib.sha256(TOKEN.encode()).hexdigest()
        assert TOKEN not in cookie and digest not in cookie and TOKEN not in value
        assert browser.get("/").status_code == 200
        assert browser.get("/api/v1/studies").status_code == 200
    for forged in (TOKEN, "9999999999." + "0" * 64, value.replace(value[-1], "x")):
        r = httpx.get(auth_server.url + "/api/v1/studies", cookies={COOKIE: forged})
        assert r.status_code == 401, forged  # the raw token in a cookie is no session
    log = auth_server.log.read_text()
    assert TOKEN not in log


def test_login_sets_secure_over_https_and_leads_only_to_own_pages(auth_server: Server) -> None:
    proxied = {"X-Forwarded-Proto": "https"}  # from 127.0.0.1, a proxy uvicorn trusts
    r = httpx.post(auth_server.url + "/login", data={"token": TOKEN}, headers=proxied)
    assert r.status_code == 303 and "; secure" in r.headers["set-cookie"].lower()
    docs = httpx.get(auth_server.url + "/docs", headers={"Accept": "text/html"})
    assert docs.status_code == 401 and 'name="next" value="/docs"' in docs.text
    for wanted, location in [("/docs", "/docs"), ("https://evil.example/", "/"), ("//x", "/")]:
        r = httpx.post(auth_server.url + "/login", data={"token": TOKEN, "next": wanted})
        assert r.status_code == 303 and r.headers["location"] == location


def test_failed_logins_are_limited_per_address(tmp_path) -> None:
    srv = Server(f"sqlite:///{tmp_path / 'l.db'}", tmp_path / "l.log", token=TOKEN).start()
    try:
        # uvicorn trusts X-Forwarded-For from 127.0.0.1 (a local proxy): two client addresses
        far = {"X-Forwarded-For": "203.0.113.7"}
        for _ in range(5):
            r = httpx.post(srv.url + "/login", data={"token": "guess"}, headers=far)
            assert r.status_code == 401
        for token in ("guess", TOKEN):  # locked out, even with the right token
            r = httpx.post(srv.url + "/login", data={"token": token}, headers=far)
            assert r.status_code == 429 and "Too many failed sign-ins" in r.text
            assert 1 <= int(r.headers["retry-after"]) <= 60
        near = httpx.post(srv.url + "/login", data={"token": TOKEN})  # another address
        assert near.status_code == 303
    finally:
        srv.stop()


@pytest.mark.slow
def test_a_session_ends_when_its_token_is_removed_on_restart(tmp_path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN}\nother-token-0123456789\n")
    args = ("--token-file", str(tokens))
    srv = Server(f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "r.log", args=args).start()
    try:
        with httpx.Client(base_url=srv.url) as browser:
            assert browser.post("/login", data={"token": TOKEN}).status_code == 303
            session = browser.cookies[COOKIE]
        studies = srv.url + "/api/v1/studies"
        assert httpx.get(studies, cookies={COOKIE: session}).status_code == 200
        srv.stop()
        tokens.write_text("other-token-0123456789\n")  # TOKEN revoked
        srv.start()
        assert httpx.get(studies, cookies={COOKIE: session}).status_code == 401
        other = {"Authorization": "Bearer other-token-0123456789"}
        assert httpx.get(studies, headers=other).status_code == 200
    finally:
        srv.stop()


def test_token_set_and_token_file(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    tokens = TokenSet(["a", " b "])
    assert tokens.check("a") and tokens.check("b") and not tokens.check("c")
    assert not tokens.check(None) and not TokenSet([])
    session = tokens.session("a", now=1000.0)
    assert tokens.check_session(session, now=1000.0)
    assert not tokens.check_session(session, now=1000.0 + SESSION_SECONDS + 1)  # expired
    assert not TokenSet(["a"]).check_session(session, now=1000.0)  # another process's key
    assert not TokenSet(["b"]).check_session(session) and not tokens.check_session("a")
    path = tmp_path / "tokens"
    path.write_text("# ops\nfirst\n\nsecond\n")
    monkeypatch.delenv("ABO_TOKEN", raising=False)
    assert read_tokens(path) == ["first", "second"]
    monkeypatch.setenv("ABO_TOKEN", "third")
    assert read_tokens(path) == ["first", "second", "third"]
    (tmp_path / "empty").write_text("# nothing\n")
    with pytest.raises(abo.AboError, match="token_file"):
        read_tokens(tmp_path / "empty")
    with pytest.raises(abo.AboError, match="token_file"):
        read_tokens(tmp_path / "missing")
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.1")
    assert check_bind("0.0.0.0", TokenSet(["t"])) == "0.0.0.0"  # a token: any address
    with pytest.raises(abo.AboError, match="host"):
        check_bind("0.0.0.0", TokenSet([]))


@pytest.mark.slow
def test_serve_refuses_a_public_address_without_a_token(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ABO_TOKEN"}
    cmd = [sys.executable, "-m", "abo.cli", "serve", "--storage", f"sqlite:///{tmp_path}/x.db"]
    proc = subprocess.run(
        [*cmd, "--host", "0.0.0.0"], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert "refusing to bind" in proc.stderr and "0.0.0.0" in proc.stderr
    assert not (tmp_path / "x.db").exists()  # it stopped before touching anything
