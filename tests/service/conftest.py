"""A real ``abo serve`` in a subprocess on a free 127.0.0.1 port, on a real SQLite file.

``Server(..., options={...}, plugins=[...])`` serves ``create_app`` with options the CLI does
not expose (``run_app.py``), after importing plugin files (a test strategy).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

import abo


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """``python -m abo.cli.main serve`` on ``storage``; ``url`` once it answers ``/healthz``."""

    def __init__(
        self,
        storage: str,
        log: Path,
        token: str | None = None,
        args: tuple[str, ...] = (),
        options: Mapping[str, Any] | None = None,
        plugins: Sequence[Path] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.storage = storage
        self.token = token
        self.log = log
        self.args = args
        self.options = dict(options or {})
        self.plugins = [str(p) for p in plugins]
        self.env = dict(env or {})
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 90.0) -> Server:
        env = {k: v for k, v in os.environ.items() if k != "ABO_TOKEN"} | self.env
        if self.token:
            env["ABO_TOKEN"] = self.token
        if self.options or self.plugins:
            spec = {"storage": self.storage, "port": self.port}
            spec |= {"options": self.options, "plugins": self.plugins}
            cmd = [sys.executable, str(Path(__file__).with_name("run_app.py")), json.dumps(spec)]
        else:
            cmd = [sys.executable, "-m", "abo.cli.main", "serve", "--storage", self.storage]
            cmd += ["--port", str(self.port), "--log-level", "info", *self.args]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}: {self.log.read_text()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1.0).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server did not start in {timeout} s: {self.log.read_text()}")

    def kill(self) -> None:
        """SIGKILL: no shutdown handler runs (a crash)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One unauthenticated service for the session's tests (each uses its own study names)."""
    folder = tmp_path_factory.mktemp("service")
    srv = Server(f"sqlite:///{folder / 'abo.db'}", folder / "server.log").start()
    yield srv
    srv.stop()


@pytest.fixture()
def api(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url + "/api/v1", timeout=60.0) as client:
        yield client


SPACE = abo.Space(
    {
        "x": abo.Float(-2.0, 2.0),
        "lr": abo.Float(1e-4, 1e-1, log=True),
        "n": abo.Int(1, 8),
        "opt": abo.Categorical(["sgd", "adam"]),
    }
)


def objective(p: dict) -> float:
    return (p["x"] - 0.5) ** 2 + abs(p["n"] - 3) / 10 + (0.0 if p["opt"] == "adam" else 0.3)


@pytest.fixture()
def study_name() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


def make_study(api: httpx.Client, name: str, **extra: object) -> dict:
    body = {"name": name, "space": SPACE.to_json(), "strategy": "random", "seed": 0, **extra}
    response = api.post("/studies", json=body)
    assert response.status_code == 201, response.text
    return response.json()
