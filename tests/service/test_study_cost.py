"""What one study may cost a service: its space is bounded at creation (422 naming the field),
and a study whose proposals are slow starves no other study's asks (a real server; the slow
study's rounds are held by a test strategy until the test releases them, so nothing is timed).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import abo
from abo.service.limits import MAX_CHOICES, MAX_DIMENSIONS, MAX_PARAMETERS

from .conftest import SPACE, Server

HELD = Path(__file__).with_name("held_strategy.py")


def _create(api: httpx.Client, name: str, space: abo.Space, **extra: object) -> httpx.Response:
    body = {"name": name, "space": space.to_json(), "strategy": "random", **extra}
    return api.post("/studies", json=body)


def test_a_space_beyond_the_limits_is_422_naming_the_field(api: httpx.Client) -> None:
    """A 20,000-choice categorical made one ask take 194 s and 350 MB; now it is refused."""
    huge = abo.Space({"c": abo.Categorical([f"c{i}" for i in range(20_000)])})
    r = _create(api, "cost-choices", huge)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == "space.c"
    assert f"at most {MAX_CHOICES} per categorical" in r.json()["error"]["message"]
    many = abo.Space({f"x{i}": abo.Float(0, 1) for i in range(MAX_PARAMETERS + 1)})
    r = _create(api, "cost-params", many)
    assert r.status_code == 422 and r.json()["error"]["field"] == "space", r.text
    wide = abo.Space({f"c{k}": abo.Categorical(list(range(400))) for k in range(3)})
    r = _create(api, "cost-dims", wide)
    assert r.status_code == 422 and f"at most {MAX_DIMENSIONS}" in r.text, r.text
    assert api.get("/studies/cost-dims").status_code == 404  # nothing was created
    largest = abo.Space({"c": abo.Categorical(list(range(MAX_CHOICES)))})
    assert _create(api, "cost-ok", largest).status_code == 201


@pytest.fixture()
def held_server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Server, Path]]:
    hold = tmp_path / "hold"
    hold.mkdir()
    srv = Server(
        f"sqlite:///{tmp_path / 'cost.db'}",
        tmp_path / "cost.log",
        options=request.param,
        plugins=[HELD],
        env={"ABO_TEST_HOLD": str(hold)},
    ).start()
    try:
        yield srv, hold
    finally:
        (hold / "release").touch()
        srv.stop()


def _until(condition, what: str, seconds: float = 60.0) -> None:
    """Poll until ``condition`` holds (a setup step, not an assertion on time)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def _asking(url: str, name: str, out: list[httpx.Response]) -> threading.Thread:
    def ask() -> None:
        out.append(httpx.post(f"{url}/api/v1/studies/{name}/ask", json={}, timeout=120))

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    return thread


def _waiting(srv: Server) -> int:
    return httpx.get(srv.url + "/readyz").json()["asks_waiting"]


@pytest.mark.parametrize("held_server", [{"max_waiting_asks": 4}], indirect=True)
def test_a_slow_study_s_backlog_does_not_turn_other_studies_away(
    held_server: tuple[Server, Path],
) -> None:
    """The slow study's waiting asks reach the limit; its next is 503, another study's ask is
    still answered (it was 503 busy: the limit was one for all studies)."""
    srv, hold = held_server
    with httpx.Client(base_url=srv.url + "/api/v1", timeout=60) as api:
        assert _create(api, "slow", SPACE, strategy="held", n_initial=1).status_code == 201
        assert api.post("/studies/slow/ask", json={}).status_code == 200  # the design point
        assert _create(api, "quick", SPACE).status_code == 201
        answers: list[httpx.Response] = []
        threads = [_asking(srv.url, "slow", answers)]
        _until(lambda: (hold / "rounds").exists(), "the slow study's round to start")
        threads += [_asking(srv.url, "slow", answers) for _ in range(4)]
        _until(lambda: _waiting(srv) == 4, "four asks waiting")
        busy = api.post("/studies/slow/ask", json={})
        assert busy.status_code == 503 and busy.json()["error"]["code"] == "busy"
        quick = api.post("/studies/quick/ask", json={})
        assert quick.status_code == 200, quick.text  # answered while the slow round is held
        (hold / "release").touch()
        for thread in threads:
            thread.join(120)
        assert [a.status_code for a in answers] == [200] * 5


@pytest.mark.parametrize("held_server", [{"ask_threads": 1}], indirect=True)
def test_studies_take_turns_for_proposal_threads(held_server: tuple[Server, Path]) -> None:
    """With one proposal thread, a study with more asks waiting goes behind another study's
    ask after each round (it kept the thread for all its waiting asks before)."""
    srv, hold = held_server
    with httpx.Client(base_url=srv.url + "/api/v1", timeout=60) as api:
        assert _create(api, "slow", SPACE, strategy="held", n_initial=1).status_code == 201
        assert api.post("/studies/slow/ask", json={}).status_code == 200  # the design point
        assert _create(api, "quick", SPACE).status_code == 201
        slow: list[httpx.Response] = []
        quick: list[httpx.Response] = []
        threads = [_asking(srv.url, "slow", slow)]
        _until(lambda: (hold / "rounds").exists(), "the slow study's first round")
        threads.append(_asking(srv.url, "slow", slow))
        _until(lambda: _waiting(srv) == 1, "the slow study's second ask waiting")
        threads.append(_asking(srv.url, "quick", quick))
        _until(lambda: _waiting(srv) == 2, "the quick study's ask waiting")
        (hold / "release").touch()
        for thread in threads:
            thread.join(120)
        first, second = sorted(r.json()["trials"][0]["created_at"] for r in slow)
        other = quick[0].json()["trials"][0]["created_at"]
        assert first < other < second  # the quick study's round came between the slow two
