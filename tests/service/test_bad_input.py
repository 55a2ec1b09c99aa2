"""Gaps bad input used to find: non-finite numbers inside JSON objects, finished trials lost or
failed, a body that stalls, trial ids that are not plain digits, bracketed IPv6 hosts."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import httpx
import pytest

import abo
from abo.service import Client
from abo.service.auth import TokenSet, bind_address, check_bind

from .conftest import SPACE, Server, make_study

RAW = {"content-type": "application/json"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('{"value": 1.0, "metadata": {"loss": NaN}}', "metadata.loss"),
        ('{"value": 1.0, "metadata": {"a": {"b": [1, Infinity]}}}', "metadata.a.b.1"),
        ('{"value": 1.0, "metadata": {"big": 1e400}}', "metadata.big"),
        ('{"value": 1.0, "info": {"t": -Infinity}}', "info.t"),
    ],
)
def test_non_finite_numbers_inside_json_objects_are_422_naming_the_path(
    api: httpx.Client, study_name: str, body: str, field: str
) -> None:
    make_study(api, study_name)
    trial = api.post(f"/studies/{study_name}/ask", json={}).json()["trials"][0]
    r = api.post(f"/studies/{study_name}/trials/{trial['id']}/tell", content=body, headers=RAW)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_value" and error["field"] == field
    assert error["message"].startswith(f"{field}: must be a finite number")
    stored = api.get(f"/studies/{study_name}/trials/{trial['id']}").json()
    assert stored["state"] == "running" and stored["user"] == {}


def test_non_finite_numbers_are_refused_in_every_json_field(
    api: httpx.Client, study_name: str
) -> None:
    make_study(api, study_name)
    trial = api.post(f"/studies/{study_name}/ask", json={}).json()["trials"][0]
    base = f"/studies/{study_name}"
    for path, body, field in [
        ("/ask", '{"info": {"host": NaN}}', "info.host"),
        (f"/trials/{trial['id']}/fail", '{"metadata": {"x": NaN}}', "metadata.x"),
        ("/add", '{"params": {"x": NaN}, "value": 1.0}', "params.x"),
        ("/add", '{"params": {"x": 0.1, "lr": 0.01, "n": 1, "opt": "sgd"}, "value": 1.0, '
         '"metadata": {"m": 1e999}}', "metadata.m"),
    ]:  # fmt: skip
        r = api.post(base + path, content=body, headers=RAW)
        assert r.status_code == 422 and r.json()["error"]["field"] == field, (path, r.text)
    assert api.get(base).json()["n_trials"] == 1
    assert api.get(f"{base}/trials/{trial['id']}").json()["state"] == "running"


def test_lose_on_a_finished_trial_and_fail_on_a_lost_one_are_409(
    server: Server, study_name: str
) -> None:
    with Client(server.url) as client:
        study = client.create_study(SPACE, name=study_name, strategy="random", seed=0)
        done, failed, lost = study.ask_batch(3)
        study.tell(done.id, 1.0)
        study.fail(failed.id, "diverged")
        study.lose(lost.id, "node died")
        for trial_id, state in [(done.id, "done"), (failed.id, "failed")]:
            r = httpx.post(
                f"{server.url}/api/v1/studies/{study_name}/trials/{trial_id}/lose",
                json={"reason": "x"},
            )
            assert r.status_code == 409 and r.json()["error"]["code"] == "trial_state"
            assert state in r.json()["error"]["message"]
            with pytest.raises(abo.TrialStateError, match=state):
                study.lose(trial_id, "x")  # the client's retry logic does not hide it
        r = httpx.post(
            f"{server.url}/api/v1/studies/{study_name}/trials/{lost.id}/fail",
            json={"reason": "x"},
        )
        assert r.status_code == 409 and r.json()["error"]["code"] == "trial_state"
        with pytest.raises(abo.TrialStateError, match="lost"):
            study.fail(lost.id, "x")
        assert study.lose(lost.id, "again").state is abo.TrialState.LOST  # a retried lose
        states = {t.id: t.state.value for t in study.trials}
    assert states == {done.id: "done", failed.id: "failed", lost.id: "lost"}


@pytest.mark.parametrize("raw_id", ["%201", "1%20", "+1", "1_0", "0x1", "%EF%BC%91", "1.0"])
def test_trial_ids_must_be_plain_digits(api: httpx.Client, study_name: str, raw_id: str) -> None:
    make_study(api, study_name)
    trial = api.post(f"/studies/{study_name}/ask", json={}).json()["trials"][0]
    assert trial["id"] == 1
    r = api.get(f"/studies/{study_name}/trials/{raw_id}")
    assert r.status_code == 422 and r.json()["error"]["field"] == "trial_id", r.text
    r = api.post(f"/studies/{study_name}/trials/{raw_id}/tell", json={"value": 1.0})
    assert r.status_code == 422 and r.json()["error"]["field"] == "trial_id", r.text
    assert api.get(f"/studies/{study_name}/trials/1").json()["state"] == "running"
    assert api.get(f"/studies/{study_name}/trials/01").json()["id"] == 1  # digits are digits


@pytest.fixture(scope="module")
def quick_timeout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("slowbody")
    srv = Server(
        f"sqlite:///{folder / 'abo.db'}", folder / "server.log", options={"body_timeout": 1.0}
    ).start()
    yield srv
    srv.stop()


def _raw(port: int, request: bytes) -> bytes:
    """Send ``request`` and read until the server closes (guarded: 60 s without an answer)."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(request)
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
    return out


def test_a_stalled_body_is_408(quick_timeout: Server) -> None:
    with httpx.Client(base_url=quick_timeout.url + "/api/v1") as api:
        make_study(api, "slow")
    body = json.dumps({"value": 1.0}).encode()
    head = (
        "POST /api/v1/studies/slow/ask HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body) + 50}\r\n\r\n"
    ).encode()
    answer = _raw(quick_timeout.port, head + body)  # 50 bytes short: the body never ends
    status, _, rest = answer.partition(b"\r\n")
    assert status.startswith(b"HTTP/1.1 408"), answer[:300]
    error = json.loads(rest.split(b"\r\n\r\n", 1)[1])["error"]
    assert error["code"] == "request_timeout" and error["field"] == "body"
    assert "body_timeout" in error["message"]
    with httpx.Client(base_url=quick_timeout.url + "/api/v1") as api:  # nothing was asked
        assert api.get("/studies/slow").json()["n_trials"] == 0
        assert api.post("/studies/slow/ask", json={}).status_code == 200  # whole bodies: fine


def test_bind_address_strips_ipv6_brackets_and_refuses_garbage() -> None:
    assert check_bind("[::1]", TokenSet()) == "::1"
    assert check_bind("::1", TokenSet()) == "::1"
    assert check_bind("127.0.0.1", TokenSet()) == "127.0.0.1"
    assert check_bind("localhost", TokenSet()) == "localhost"
    assert check_bind("[2001:db8::1]", TokenSet(["t"])) == "2001:db8::1"
    assert bind_address("node-7.cluster.example") == "node-7.cluster.example"
    with pytest.raises(abo.AboError, match="host"):
        check_bind("[2001:db8::1]", TokenSet())  # public without a token
    for bad in ("[::1", "[127.0.0.1]", "[nonsense]", "", "a host", "1.2.3", "::1]"):
        with pytest.raises(abo.AboError, match="^host: "):
            bind_address(bad)


def test_bind_address_binds_ipv6_loopback() -> None:
    """The returned address is what a socket binds (``[::1]`` itself would not)."""
    address = check_bind("[::1]", TokenSet())
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind((address, 0))
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback here: {exc}")
    with pytest.raises(socket.gaierror), socket.socket(socket.AF_INET6) as sock:
        sock.bind(("[::1]", 0))


@pytest.mark.parametrize(
    "body",
    ['{"pace": 0}', '{"pace": -1.5}', '{"pace": NaN}', '{"pace": Infinity}', '{"pace": "1"}',
     '{"pace": true}'],
)  # fmt: skip
def test_an_ask_with_a_bad_pace_is_422_naming_it_and_starts_nothing(
    api: httpx.Client, study_name: str, body: str
) -> None:
    make_study(api, study_name)
    r = api.post(f"/studies/{study_name}/ask", content=body, headers=RAW)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == "pace"
    assert api.get(f"/studies/{study_name}/trials").json()["total"] == 0


def test_an_ask_with_a_pace_is_served_over_http(api: httpx.Client, study_name: str) -> None:
    make_study(api, study_name)
    r = api.post(f"/studies/{study_name}/ask", json={"count": 2, "pace": 0.25})
    assert r.status_code == 200, r.text
    assert len(r.json()["trials"]) == 2
