"""``abo serve --log-format json``: every line a JSON object, one access record a request."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from abo.service.logs import JsonFormatter, log_config
from tests.service.conftest import SPACE, Server


def test_json_formatter_keeps_fields_and_the_traceback():
    try:
        raise RuntimeError("kaput")
    except RuntimeError:
        record = logging.getLogger("abo").makeRecord(
            "abo", logging.ERROR, __file__, 1, "round failed for %r", ("s1",), sys.exc_info(),
            extra={"study": "s1", "epoch": 3},
        )  # fmt: skip
    out = json.loads(JsonFormatter().format(record))
    assert out["message"] == "round failed for 's1'" and out["level"] == "error"
    assert out["study"] == "s1" and out["epoch"] == 3 and out["logger"] == "abo"
    assert "RuntimeError: kaput" in out["exception"] and out["ts"].endswith("+00:00")
    assert "args" not in out and "msg" not in out  # the record's own machinery is left out


def test_an_unknown_log_format_is_refused_naming_it():
    assert log_config("info", "text") is None
    with pytest.raises(ValueError, match="log_format: expected one of text, json"):
        log_config("info", "xml")
    done = subprocess.run(
        [sys.executable, "-m", "abo.cli.main", "serve", "--storage", "sqlite://",
         "--log-format", "xml"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "log_format" in done.stderr


def test_serve_writes_json_lines_with_an_access_record_per_request(tmp_path: Path):
    log = tmp_path / "serve.log"
    srv = Server(f"sqlite:///{tmp_path / 'abo.db'}", log, args=("--log-format", "json"))
    srv.start()
    try:
        body = {"name": "logged", "space": SPACE.to_json(), "strategy": "random", "seed": 0}
        api = srv.url + "/api/v1"
        assert httpx.post(api + "/studies", json=body).status_code == 201
        asked = httpx.post(api + "/studies/logged/ask", json={}, headers={"X-Request-Id": "r-42"})
        assert asked.status_code == 200
        assert httpx.post(api + "/studies/nope/ask", json={}).status_code == 404
    finally:
        srv.stop()
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is JSON, the banner too
    assert any("abo service on" in r["message"] and r["url"] == srv.url for r in records)
    access = [r for r in records if r["logger"] == "abo.access"]
    ask = [r for r in access if r["request_id"] == "r-42"]
    assert len(ask) == 1
    assert ask[0]["route"] == "/api/v1/studies/{name}/ask" and ask[0]["status"] == 200
    assert ask[0]["path"] == "/api/v1/studies/logged/ask" and ask[0]["duration_ms"] > 0
    assert ask[0]["replica"] and ask[0]["client"].startswith("127.0.0.1:")
    missing = [r for r in access if r["path"] == "/api/v1/studies/nope/ask"]
    assert [r["status"] for r in missing] == [404]
    assert any(r["logger"].startswith("uvicorn") for r in records)  # uvicorn's own, as JSON
    assert not any(r["logger"] == "uvicorn.access" for r in records)  # replaced by abo.access
    assert any(r.get("study") == "logged" and "released" in r["message"] for r in records)
