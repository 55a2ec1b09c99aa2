"""Bearer-token auth on a real server: 401 without a valid token, health open, no token logs."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time

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
from abo.service.dashboard import LIMITED_DELAY

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


def test_login_leads_only_to_own_pages_and_ignores_unnamed_proxies(auth_server: Server) -> None:
    forged = {"X-Forwarded-Proto": "https"}  # from 127.0.0.1, but no proxy was named
    r = httpx.post(auth_server.url + "/login", data={"token": TOKEN}, headers=forged)
    assert r.status_code == 303 and "; secure" not in r.headers["set-cookie"].lower()
    docs = httpx.get(auth_server.url + "/docs", headers={"Accept": "text/html"})
    assert docs.status_code == 401 and 'name="next" value="/docs"' in docs.text
    for wanted, location in [("/docs", "/docs"), ("https://evil.example/", "/"), ("//x", "/")]:
        r = httpx.post(auth_server.url + "/login", data={"token": TOKEN, "next": wanted})
        assert r.status_code == 303 and r.headers["location"] == location


def _login(url: str, token: str, client: str | None = None) -> httpx.Response:
    headers = {"X-Forwarded-For": client} if client else {}
    return httpx.post(url + "/login", data={"token": token}, headers=headers)


@pytest.mark.slow
def test_failed_logins_are_limited_by_the_sending_address_and_never_lock_out_the_token(
    tmp_path,
) -> None:
    """From loopback, a rotating X-Forwarded-For is not another client (uvicorn used to trust
    it from 127.0.0.1: 1,968 guesses in 5 s, no 429); the right token gets in regardless."""
    srv = Server(f"sqlite:///{tmp_path / 'l.db'}", tmp_path / "l.log", token=TOKEN).start()
    try:
        for i in range(5):
            assert _login(srv.url, "guess", f"203.0.113.{i}").status_code == 401
        for i in range(5, 8):  # a new forwarded address each time: the same sender
            started = time.monotonic()
            r = _login(srv.url, "guess", f"203.0.113.{i}")
            assert r.status_code == 429 and "Too many failed sign-ins" in r.text
            assert 1 <= int(r.headers["retry-after"]) <= 60
            assert time.monotonic() - started >= LIMITED_DELAY  # guessing on is slowed
        assert _login(srv.url, TOKEN, "203.0.113.9").status_code == 303  # still gets in
        assert _login(srv.url, TOKEN).status_code == 303
    finally:
        srv.stop()


def test_a_named_proxy_is_trusted_for_addresses_and_https(tmp_path) -> None:
    args = ("--forwarded-allow-ips", "127.0.0.1")
    srv = Server(f"sqlite:///{tmp_path / 'p.db'}", tmp_path / "p.log", token=TOKEN, args=args)
    srv.start()
    try:
        proxied = {"X-Forwarded-Proto": "https"}
        r = httpx.post(srv.url + "/login", data={"token": TOKEN}, headers=proxied)
        assert r.status_code == 303 and "; secure" in r.headers["set-cookie"].lower()
        for _ in range(5):
            assert _login(srv.url, "guess", "203.0.113.7").status_code == 401
        assert _login(srv.url, "guess", "203.0.113.7").status_code == 429
        assert _login(srv.url, "guess", "198.51.100.1").status_code == 401  # another client
        assert _login(srv.url, TOKEN, "203.0.113.7").status_code == 303
    finally:
        srv.stop()


@pytest.mark.slow
def test_a_token_removed_from_the_file_stops_working_without_a_restart(tmp_path) -> None:
    """Bearer and session cookie alike; at the next request after the file changes, and on
    SIGHUP for a change its size and modification time do not show."""
    tokens = tmp_path / "tokens"
    other, third = "other-token-0123456789", "third-token-0123456789"
    tokens.write_text(f"{TOKEN}\n{other}\n")
    args = ("--token-file", str(tokens))
    srv = Server(f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "r.log", args=args).start()
    studies = srv.url + "/api/v1/studies"

    def status(token: str | None = None, session: str | None = None) -> int:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        cookies = {COOKIE: session} if session else {}
        return httpx.get(studies, headers=headers, cookies=cookies).status_code

    try:
        with httpx.Client(base_url=srv.url) as browser:
            assert browser.post("/login", data={"token": TOKEN}).status_code == 303
            session = browser.cookies[COOKIE]
        assert status(TOKEN) == status(session=session) == status(other) == 200
        tokens.write_text(f"{other}\n")  # TOKEN revoked while serving
        assert status(TOKEN) == status(session=session) == 401
        assert status(other) == 200
        assert _login(srv.url, TOKEN).status_code == 401

        stat = tokens.stat()  # same size, same mtime, same inode: only SIGHUP shows it
        with tokens.open("r+") as out:
            out.write(f"{third}\n")
        os.utime(tokens, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert status(other) == 200 and status(third) == 401
        assert srv.proc is not None
        srv.proc.send_signal(signal.SIGHUP)
        _until(lambda: status(third) == 200)
        assert status(other) == 401 and srv.proc.poll() is None

        tokens.write_text("# none left\n")  # an empty file never turns auth off
        assert status() == status(third) == 401
    finally:
        srv.stop()


def _until(condition, seconds: float = 30.0) -> None:
    """Poll until ``condition`` holds (a signal is handled soon, not at once)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "gave up waiting"
        time.sleep(0.05)


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
    cmd = [sys.executable, "-m", "abo.cli.main", "serve", "--storage", f"sqlite:///{tmp_path}/x.db"]
    proc = subprocess.run(
        [*cmd, "--host", "0.0.0.0"], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert "refusing to bind" in proc.stderr and "0.0.0.0" in proc.stderr
    assert not (tmp_path / "x.db").exists()  # it stopped before touching anything
