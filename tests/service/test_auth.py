"""Bearer-token auth on a real server: 401 without a valid token, health open, no token logs."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest

import abo
from abo.service import Client
from abo.service.auth import TokenSet, check_bind, is_loopback, read_tokens

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


def test_browser_login_sets_a_cookie(auth_server: Server) -> None:
    page = httpx.get(auth_server.url + "/", headers={"Accept": "text/html"})
    assert page.status_code == 401 and "<form" in page.text and "studies" not in page.text
    with httpx.Client(base_url=auth_server.url) as browser:
        bad = browser.post("/login", data={"token": "nope"})
        assert bad.status_code == 401 and not browser.cookies
        r = browser.post("/login", data={"token": TOKEN})
        assert r.status_code == 303 and r.headers["location"] == "/"
        assert "httponly" in r.headers["set-cookie"].lower()
        assert browser.get("/").status_code == 200
        assert browser.get("/api/v1/studies").status_code == 200


def test_token_set_and_token_file(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    tokens = TokenSet(["a", " b "])
    assert tokens.check("a") and tokens.check("b") and not tokens.check("c")
    assert not tokens.check(None) and not TokenSet([])
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
    check_bind("0.0.0.0", TokenSet(["t"]))  # a token makes any address fine
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
