"""The HTTP API end to end on a real uvicorn + SQLite: ask/tell, errors, limits, concurrency."""

from __future__ import annotations

import ast
import json
import sqlite3
import threading
from pathlib import Path

import httpx
import pytest

import abo

from .conftest import SPACE, Server, make_study, objective


def _state(api: httpx.Client, name: str) -> tuple[int, dict, list]:
    study = api.get(f"/studies/{name}").json()
    trials = api.get(f"/studies/{name}/trials").json()["trials"]
    return study["n_trials"], study["states"], trials


def test_ask_tell_round_trip(api: httpx.Client, study_name: str) -> None:
    created = make_study(api, study_name)
    assert created["space"] == SPACE.to_json() and created["n_trials"] == 0
    told = {}
    for _ in range(3):
        out = api.post(f"/studies/{study_name}/ask", json={"count": 2}).json()
        assert len(out["trials"]) == 2 and isinstance(out["n_observations"], int)
        for t in out["trials"]:
            assert t["state"] == "running" and t["lease_expires_at"] > t["created_at"]
            SPACE.validate(t["params"])  # decodes to valid parameters
            value = objective(t["params"])
            r = api.post(f"/studies/{study_name}/trials/{t['id']}/tell", json={"value": value})
            assert r.status_code == 200 and r.json()["value"] == value
            told[t["id"]] = value
    assert sorted(told) == list(range(1, 7))
    best = api.get(f"/studies/{study_name}/best").json()["trial"]
    assert best["value"] == min(told.values())
    n, states, trials = _state(api, study_name)
    assert n == 6 and states["done"] == 6
    assert {t["id"]: t["value"] for t in trials} == told
    listing = api.get("/studies").json()["studies"]
    assert study_name in [s["name"] for s in listing]


@pytest.mark.slow
def test_ask_reports_model_observations(api: httpx.Client, study_name: str) -> None:
    make_study(api, study_name, strategy="qlognei", n_initial=2)
    for _ in range(3):
        t = api.post(f"/studies/{study_name}/ask", json={}).json()["trials"][0]
        api.post(
            f"/studies/{study_name}/trials/{t['id']}/tell", json={"value": objective(t["params"])}
        )
    out = api.post(f"/studies/{study_name}/ask", json={"count": 1}).json()
    assert out["n_observations"] == 3
    assert out["trials"][0]["proposal"]["n_observations"] == 3


def test_create_is_create_or_load_and_409_on_other_space(
    api: httpx.Client, study_name: str
) -> None:
    make_study(api, study_name)
    again = api.post("/studies", json={"name": study_name, "space": SPACE.to_json()})
    assert again.status_code == 200 and again.json()["name"] == study_name
    other = {"x": {"type": "float", "low": 0.0, "high": 1.0}}
    r = api.post("/studies", json={"name": study_name, "space": other})
    assert r.status_code == 409
    assert r.json()["error"]["code"] == "space_conflict" and r.json()["error"]["field"] == "space"
    r = api.post(
        "/studies", json={"name": study_name, "space": SPACE.to_json(), "load_if_exists": False}
    )
    assert r.status_code == 409 and r.json()["error"]["code"] == "study_exists"


def test_idempotent_tell_and_conflicting_tell(api: httpx.Client, study_name: str) -> None:
    make_study(api, study_name)
    t = api.post(f"/studies/{study_name}/ask", json={}).json()["trials"][0]
    url = f"/studies/{study_name}/trials/{t['id']}/tell"
    first = api.post(url, json={"value": 1.5})
    again = api.post(url, json={"value": 1.5})
    assert first.status_code == again.status_code == 200
    assert first.json()["finished_at"] == again.json()["finished_at"]  # nothing rewritten
    other = api.post(url, json={"value": 2.5})
    assert other.status_code == 409
    assert other.json()["error"] == {
        "code": "trial_state",
        "message": other.json()["error"]["message"],
        "field": "value",
    }
    assert "2.5" in other.json()["error"]["message"]
    assert api.get(f"/studies/{study_name}/trials/{t['id']}").json()["value"] == 1.5


@pytest.mark.parametrize("raw", ["NaN", "Infinity", "-Infinity", '"nan"', "1e400", '"1.0"', "true"])
def test_non_finite_values_are_422_and_change_nothing(
    api: httpx.Client, study_name: str, raw: str
) -> None:
    make_study(api, study_name)
    t = api.post(f"/studies/{study_name}/ask", json={}).json()["trials"][0]
    before = _state(api, study_name)
    r = api.post(
        f"/studies/{study_name}/trials/{t['id']}/tell",
        content=f'{{"value": {raw}}}',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["field"] == "value" and err["message"].startswith("value:")
    assert _state(api, study_name) == before


BAD_CREATE = [
    ({"x": {"type": "float", "low": 1.0, "high": 0.0}}, "invalid_params"),
    ({"x": {"type": "unknown"}}, "invalid_params"),
    ({"x": {"type": "float", "low": 0.0}}, "invalid_params"),
    ({"x": {"type": "float", "low": -1e308, "high": 1e308}}, "invalid_params"),
    ({}, "invalid_params"),
]


@pytest.mark.parametrize(("space", "code"), BAD_CREATE)
def test_bad_spaces_are_422_and_create_nothing(
    api: httpx.Client, study_name: str, space: dict, code: str
) -> None:
    r = api.post("/studies", json={"name": study_name, "space": space})
    assert r.status_code == 422 and r.json()["error"]["code"] == code, r.text
    assert api.get(f"/studies/{study_name}").status_code == 404


def test_bad_create_fields_are_named(api: httpx.Client, study_name: str) -> None:
    base = {"name": study_name, "space": SPACE.to_json()}
    for extra, field in [
        ({"strategy": "nope"}, "strategy"),
        ({"direction": "up"}, "direction"),
        ({"seed": -1}, "seed"),
        ({"name": "bad name!"}, "name"),
        ({"surprise": 1}, "surprise"),
    ]:
        r = api.post("/studies", json={**base, **extra})
        assert r.status_code == 422, (extra, r.text)
        assert r.json()["error"]["field"] == field, r.json()
    assert api.get(f"/studies/{study_name}").status_code == 404


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"x": 3.0, "lr": 0.01, "n": 2, "opt": "sgd"}, "x"),
        ({"x": 0.0, "lr": 0.01, "n": 2.5, "opt": "sgd"}, "n"),
        ({"x": 0.0, "lr": 0.01, "n": 2, "opt": "rmsprop"}, "opt"),
        ({"x": 0.0, "lr": 0.01, "n": 2, "opt": "sgd", "extra": 1}, "extra"),
        ({"x": 0.0, "lr": 0.01, "n": 2}, "opt"),
    ],
)
def test_bad_enqueue_is_422_and_queues_nothing(
    api: httpx.Client, study_name: str, params: dict, field: str
) -> None:
    make_study(api, study_name)
    r = api.post(f"/studies/{study_name}/enqueue", json={"params": params})
    assert r.status_code == 422 and r.json()["error"]["field"] == field, r.text
    good = {"x": 0.25, "lr": 0.01, "n": 2, "opt": "adam"}
    r = api.post(f"/studies/{study_name}/enqueue", json={"params": good})
    assert r.status_code == 200 and r.json() == {"queued": True}
    asked = api.post(f"/studies/{study_name}/ask", json={"count": 2}).json()["trials"]
    assert asked[0]["params"] == good and asked[0]["proposal"]["strategy"] == "enqueued"
    assert asked[1]["proposal"]["strategy"] != "enqueued"  # the bad point was never queued


def test_unknown_ids_are_404(api: httpx.Client, study_name: str) -> None:
    make_study(api, study_name)
    before = _state(api, study_name)
    for method, path, body in [
        ("POST", f"/studies/{study_name}/trials/99/tell", {"value": 1.0}),
        ("POST", f"/studies/{study_name}/trials/99/fail", {"reason": "x"}),
        ("POST", f"/studies/{study_name}/trials/99/heartbeat", None),
        ("GET", f"/studies/{study_name}/trials/99", None),
    ]:
        r = api.request(method, path, json=body)
        assert r.status_code == 404 and r.json()["error"]["code"] == "trial_not_found", r.text
        assert r.json()["error"]["field"] == "trial_id"
    r = api.post("/studies/no-such-study/ask", json={})
    assert r.status_code == 404 and r.json()["error"]["code"] == "study_not_found"
    assert api.get("/nowhere").json()["error"]["code"] == "not_found"
    assert _state(api, study_name) == before


def test_ask_count_is_capped(api: httpx.Client, study_name: str) -> None:
    make_study(api, study_name)
    for count in (0, 65, -1):
        r = api.post(f"/studies/{study_name}/ask", json={"count": count})
        assert r.status_code == 422 and r.json()["error"]["field"] == "count"
    assert _state(api, study_name)[0] == 0


def test_malformed_json_and_oversized_body(api: httpx.Client, study_name: str) -> None:
    make_study(api, study_name)
    r = api.post(
        f"/studies/{study_name}/ask",
        content=b'{"count": ',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 422 and r.json()["error"]["code"] == "malformed_json"
    big = json.dumps({"params": {"x": [0.0] * 300_000}}).encode()
    assert len(big) > 1 << 20
    r = api.post(
        f"/studies/{study_name}/enqueue", content=big, headers={"content-type": "application/json"}
    )
    assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"

    def chunks():  # no Content-Length: the limit applies to the streamed body
        for _ in range(20):
            yield b" " * 100_000

    r = api.post(
        f"/studies/{study_name}/ask", content=chunks(), headers={"content-type": "application/json"}
    )
    assert r.status_code == 413
    assert _state(api, study_name)[0] == 0


def test_fail_lose_heartbeat(api: httpx.Client, study_name: str) -> None:
    make_study(api, study_name)
    a, b, c = api.post(f"/studies/{study_name}/ask", json={"count": 3}).json()["trials"]
    hb = api.post(f"/studies/{study_name}/trials/{a['id']}/heartbeat")
    assert hb.status_code == 200 and hb.json()["lease_expires_at"] >= a["lease_expires_at"]
    r = api.post(f"/studies/{study_name}/trials/{a['id']}/fail", json={"reason": "diverged"})
    assert r.json()["state"] == "failed" and r.json()["reason"] == "diverged"
    r = api.post(f"/studies/{study_name}/trials/{b['id']}/lose", json={"reason": "node died"})
    assert r.json()["state"] == "lost"
    r = api.post(f"/studies/{study_name}/trials/{a['id']}/heartbeat")
    assert r.status_code == 409 and r.json()["error"]["code"] == "trial_state"
    retry = api.post(f"/studies/{study_name}/ask", json={}).json()["trials"][0]
    assert retry["retry_of"] == b["id"] and retry["params"] == b["params"]
    running = api.get(f"/studies/{study_name}/trials", params={"state": "running"}).json()
    assert sorted(t["id"] for t in running["trials"]) == sorted([c["id"], retry["id"]])


def test_listing_paginates_and_filters(api: httpx.Client, study_name: str) -> None:
    make_study(api, study_name)
    trials = api.post(f"/studies/{study_name}/ask", json={"count": 7}).json()["trials"]
    for t in trials[:4]:
        api.post(f"/studies/{study_name}/trials/{t['id']}/tell", json={"value": float(t["id"])})
    seen, offset = [], 0
    while offset is not None:
        page = api.get(
            f"/studies/{study_name}/trials", params={"offset": offset, "limit": 3}
        ).json()
        assert page["total"] == 7 and len(page["trials"]) <= 3
        seen += [t["id"] for t in page["trials"]]
        offset = page["next_offset"]
    assert seen == list(range(1, 8))
    done = api.get(f"/studies/{study_name}/trials", params={"state": ["done", "failed"]}).json()
    assert [t["id"] for t in done["trials"]] == [1, 2, 3, 4]
    r = api.get(f"/studies/{study_name}/trials", params={"state": "finished"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "state.0"


def test_client_id_gets_its_running_trial_back(api: httpx.Client, study_name: str) -> None:
    make_study(api, study_name)
    first = api.post(f"/studies/{study_name}/ask", json={"client_id": "w1"}).json()["trials"]
    again = api.post(f"/studies/{study_name}/ask", json={"client_id": "w1"}).json()["trials"]
    other = api.post(f"/studies/{study_name}/ask", json={"client_id": "w2"}).json()["trials"]
    assert first[0]["id"] == again[0]["id"] != other[0]["id"]
    api.post(f"/studies/{study_name}/trials/{first[0]['id']}/tell", json={"value": 1.0})
    after = api.post(f"/studies/{study_name}/ask", json={"client_id": "w1"}).json()["trials"]
    assert after[0]["id"] not in (first[0]["id"], other[0]["id"])


@pytest.mark.slow
def test_concurrent_clients_get_distinct_trials_and_tell_once(
    server: Server, study_name: str
) -> None:
    with httpx.Client(base_url=server.url + "/api/v1", timeout=120) as api:
        make_study(api, study_name)
    results: dict[int, float] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(64)

    def worker(i: int) -> None:
        try:
            with httpx.Client(base_url=server.url + "/api/v1", timeout=120) as c:
                start.wait()
                for _ in range(2):
                    t = c.post(f"/studies/{study_name}/ask", json={}).json()["trials"][0]
                    value = float(i * 10 + t["id"])
                    r = c.post(
                        f"/studies/{study_name}/trials/{t['id']}/tell", json={"value": value}
                    )
                    assert r.status_code == 200, r.text
                    with lock:
                        assert t["id"] not in results, f"trial {t['id']} handed out twice"
                        results[t["id"]] = value
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(64)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[:3]
    assert len(results) == 128
    with httpx.Client(base_url=server.url + "/api/v1", timeout=60) as api:
        n, states, trials = _state(api, study_name)
    assert n == 128 and states["done"] == 128
    assert {t["id"]: t["value"] for t in trials} == results  # every tell stored exactly once


def test_stored_nan_cannot_break_a_listing(
    server: Server, api: httpx.Client, study_name: str
) -> None:
    make_study(api, study_name)
    t = api.post(f"/studies/{study_name}/ask", json={}).json()["trials"][0]
    api.post(f"/studies/{study_name}/trials/{t['id']}/tell", json={"value": 1.0})
    db = server.storage.removeprefix("sqlite:///")
    with sqlite3.connect(db, timeout=30) as conn:  # a value no abo API would ever store
        conn.execute(
            "UPDATE abo_trials SET value = ?, info = ? WHERE number = ? AND study_id = "
            "(SELECT id FROM abo_studies WHERE name = ?)",
            (float("nan"), '{"weird": NaN, "big": Infinity}', t["id"], study_name),
        )
        conn.execute(  # a strategy this server does not have (a plugin of another host)
            "UPDATE abo_studies SET spec = json_set(spec, '$.strategy', 'plugin-only') "
            "WHERE name = ?",
            (study_name,),
        )
    r = api.get(f"/studies/{study_name}/trials")
    assert r.status_code == 200, r.text
    assert r.json()["trials"][0]["info"] == {"weird": None, "big": None}
    listing = api.get("/studies")
    assert listing.status_code == 200, listing.text
    mine = next(s for s in listing.json()["studies"] if s["name"] == study_name)
    assert mine["strategy"] == "plugin-only" and mine["n_trials"] == 1
    assert api.get(f"/studies/{study_name}").status_code == 200


def test_health_readiness_and_openapi(server: Server) -> None:
    assert httpx.get(server.url + "/healthz").json() == {"status": "ok"}
    assert httpx.get(server.url + "/readyz").json() == {"status": "ready", "asks_waiting": 0}
    schema = httpx.get(server.url + "/openapi.json").json()
    paths = schema["paths"]
    for path in [
        "/api/v1/studies",
        "/api/v1/studies/{name}/ask",
        "/api/v1/studies/{name}/trials/{trial_id}/tell",
        "/api/v1/studies/{name}/trials/{trial_id}/lose",
        "/api/v1/studies/{name}/best",
        "/healthz",
        "/readyz",
    ]:
        assert path in paths, path
    tell = paths["/api/v1/studies/{name}/trials/{trial_id}/tell"]["post"]
    assert tell["responses"]["409"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/ErrorBody"
    )


def test_service_never_unpickles() -> None:
    """The server must not deserialise client bytes with pickle-like loaders."""
    import abo.service

    banned = {"pickle", "cloudpickle", "dill", "marshal", "shelve", "joblib"}
    folder = Path(abo.service.__file__).parent
    for path in folder.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                names = {(node.module or "").split(".")[0]}
            elif isinstance(node, ast.Attribute) and node.attr in ("loads", "load"):
                base = node.value
                names = {base.id} if isinstance(base, ast.Name) else set()
            else:
                continue
            assert not names & banned, f"{path.name}:{node.lineno} uses {names & banned}"
    assert len(list(folder.rglob("*.py"))) >= 6


@pytest.mark.slow
@pytest.mark.postgres
def test_service_on_postgres(pg_url: str, tmp_path: Path) -> None:
    """The same API on PostgreSQL (the storage for many hosts): 16 concurrent clients."""
    srv = Server(pg_url, tmp_path / "pg.log").start()
    try:
        with httpx.Client(base_url=srv.url + "/api/v1", timeout=120) as api:
            make_study(api, "pg")
        told: dict[int, float] = {}
        lock = threading.Lock()

        def worker(i: int) -> None:
            with httpx.Client(base_url=srv.url + "/api/v1", timeout=120) as c:
                for _ in range(3):
                    t = c.post("/studies/pg/ask", json={"client_id": f"w{i}"}).json()["trials"][0]
                    r = c.post(f"/studies/pg/trials/{t['id']}/tell", json={"value": float(i)})
                    assert r.status_code == 200
                    with lock:
                        told[t["id"]] = float(i)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        with httpx.Client(base_url=srv.url + "/api/v1", timeout=60) as api:
            n, states, trials = _state(api, "pg")
            assert api.get(srv.url + "/readyz").status_code == 200
        assert n == 48 and states["done"] == 48
        assert {t["id"]: t["value"] for t in trials} == told
    finally:
        srv.stop()


def test_deep_nesting_is_refused_and_cannot_break_a_listing(
    server: Server, api: httpx.Client, study_name: str
) -> None:
    make_study(api, study_name)
    t = api.post(f"/studies/{study_name}/ask", json={}).json()["trials"][0]
    deep = '{"value": 1.0, "metadata": {"a": ' + "[" * 900 + "]" * 900 + "}}"
    r = api.post(
        f"/studies/{study_name}/trials/{t['id']}/tell",
        content=deep,
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 422 and r.json()["error"]["field"] == "metadata"
    assert api.get(f"/studies/{study_name}/trials/{t['id']}").json()["state"] == "running"
    nested: list = []
    inner = nested
    for _ in range(300):  # stored by a local process, which has no such limit
        inner.append([])
        inner = inner[0]
    local = abo.load_study(study_name, storage=server.storage)
    local.tell(t["id"], 2.0, {"deep": nested})
    r = api.get(f"/studies/{study_name}/trials")
    assert r.status_code == 200 and r.json()["trials"][0]["value"] == 2.0


def test_enqueue_and_add_skip_what_the_study_has_unless_told(
    api: httpx.Client, study_name: str
) -> None:
    make_study(api, study_name)
    point = {"x": 0.25, "lr": 0.01, "n": 2, "opt": "adam"}
    url = f"/studies/{study_name}"
    assert api.post(f"{url}/enqueue", json={"params": point}).json() == {"queued": True}
    assert api.post(f"{url}/enqueue", json={"params": point}).json() == {"queued": False}
    again = {"params": point, "allow_duplicate": True}
    assert api.post(f"{url}/enqueue", json=again).json() == {"queued": True}
    first = api.post(f"{url}/add", json={"params": point, "value": 0.5}).json()
    assert api.post(f"{url}/add", json={"params": point, "value": 0.5}).json()["id"] == first["id"]
    forced = {"params": point, "value": 0.5, "allow_duplicate": True}
    assert api.post(f"{url}/add", json=forced).json()["id"] != first["id"]
    assert api.get(f"{url}/trials").json()["total"] == 2


def test_delete_study_and_its_users_get_404(api: httpx.Client, study_name: str) -> None:
    make_study(api, study_name)
    trial = api.post(f"/studies/{study_name}/ask", json={"count": 1}).json()["trials"][0]
    assert api.delete(f"/studies/{study_name}").status_code == 204
    for method, path, body in [
        ("GET", f"/studies/{study_name}", None),
        ("POST", f"/studies/{study_name}/ask", {"count": 1}),
        ("POST", f"/studies/{study_name}/trials/{trial['id']}/tell", {"value": 1.0}),
        ("DELETE", f"/studies/{study_name}", None),
    ]:
        r = api.request(method, path, json=body)
        assert r.status_code == 404 and r.json()["error"]["code"] == "study_not_found", r.text
    names = [s["name"] for s in api.get("/studies").json()["studies"]]
    assert study_name not in names


@pytest.mark.parametrize("path", ["ask", "trials/1/tell"])
def test_info_never_reaches_abos_own_record(api: httpx.Client, study_name: str, path: str) -> None:
    """The repro: ``{"info": {"model": "resnet50"}}`` with an ask was stored over abo's GP
    record, and every later ask of the study failed with a 500, for good. ``info`` is now the
    caller's namespace; abo's record is the trial's ``proposal``."""
    make_study(api, study_name)
    if path.startswith("trials"):
        api.post(f"/studies/{study_name}/ask", json={"count": 1})
        body: dict = {"value": 1.0, "info": {"model": "resnet50"}}
    else:
        body = {"count": 1, "info": {"model": "resnet50"}}
    r = api.post(f"/studies/{study_name}/{path}", json=body)
    assert r.status_code == 200, r.text
    trial = r.json()["trials"][0] if path == "ask" else r.json()
    assert trial["info"]["model"] == "resnet50" and trial["proposal"]["strategy"]
    for _ in range(4):  # past the initial design: the model proposes, from its own record
        asked = api.post(f"/studies/{study_name}/ask", json={"count": 1})
        assert asked.status_code == 200, asked.text
        t = asked.json()["trials"][0]
        api.post(f"/studies/{study_name}/trials/{t['id']}/tell", json={"value": 0.5})


def test_every_study_option_is_in_the_api(api: httpx.Client, study_name: str) -> None:
    """The create body takes every option of ``abo.spec.study_spec`` (strategy_options and refit
    were
    missing before), validated with the same errors as in Python."""
    from abo.spec.study_spec import OPTIONS

    created = make_study(
        api,
        study_name,
        strategy="thompson",
        strategy_options={"raw_samples": 64, "num_restarts": 2},
        refit="background",
        max_staleness=7,
        outcomes={"loss": "minimize"},
    )
    spec = created["spec"]
    assert set(OPTIONS) <= set(spec)
    assert spec["strategy_options"] == {"raw_samples": 64, "num_restarts": 2}
    assert (spec["refit"], spec["max_staleness"]) == ("background", 7)
    assert created["outcomes"] == [{"name": "loss", "kind": "objective", "direction": "minimize"}]
    bad = {"name": "other", "space": created["space"], "refit": "sometimes"}
    r = api.post("/studies", json=bad)
    assert r.status_code == 422 and r.json()["error"]["field"] == "refit", r.text
    bad = {"name": "other", "space": created["space"], "strategy_options": {"nope": 1}}
    r = api.post("/studies", json=bad)
    assert r.status_code == 422 and r.json()["error"]["field"] == "strategy_options", r.text
    # an option the strategy takes, with a value it refuses (auto's trust region)
    bad = {"name": "other", "space": created["space"], "strategy_options": {"trust_region": "x"}}
    r = api.post("/studies", json=bad)
    assert r.status_code == 422 and r.json()["error"]["field"] == "strategy_options", r.text
    assert "trust_region" in r.json()["error"]["message"]
    assert api.get("/studies/other").status_code == 404  # nothing was created


def test_several_outcomes_over_http_and_the_client(server: Server, study_name: str) -> None:
    from abo.service import Client

    with Client(server.url) as client:
        study = client.create_study(
            SPACE, name=study_name, outcomes={"error": "minimize", "cost": "maximize"},
            strategy="random", seed=0,
        )  # fmt: skip
        assert [o.name for o in study.outcomes] == ["error", "cost"]
        t = study.ask()
        with pytest.raises(abo.InvalidValueError, match="value.cost: missing"):
            study.tell(t.id, {"error": 0.5})
        done = study.tell(t.id, {"error": 0.5, "cost": 2.0})
        assert done.values == {"error": 0.5, "cost": 2.0} and done.value is None
        with httpx.Client(base_url=server.url + "/api/v1") as api:
            t2 = api.post(f"/studies/{study_name}/ask", json={}).json()["trials"][0]
            r = api.post(
                f"/studies/{study_name}/trials/{t2['id']}/tell",
                json={"value": {"error": 1.0, "cost": "NaN"}},
            )
            assert r.status_code == 422 and r.json()["error"]["field"] == "value.cost", r.text
            r = api.post(
                f"/studies/{study_name}/trials/{t2['id']}/tell",
                json={"value": {"error": 1.0, "costs": 1.0}},
            )
            assert r.status_code == 422 and r.json()["error"]["field"] == "value.costs", r.text
            assert api.get(f"/studies/{study_name}/trials/{t2['id']}").json()["state"] == "running"


def test_reports_answer_stop_or_continue_and_bad_ones_change_nothing(
    api: httpx.Client, study_name: str
) -> None:
    created = make_study(api, study_name, stopping={"rule": "asha", "reduction_factor": 2})
    assert created["spec"]["stopping"]["rule"] == "asha"
    ids = [
        t["id"] for t in api.post(f"/studies/{study_name}/ask", json={"count": 3}).json()["trials"]
    ]
    base = f"/studies/{study_name}/trials"
    first = api.post(f"{base}/{ids[0]}/report", json={"step": 1, "value": 0.2})
    assert first.status_code == 200 and first.json()["stop"] is False
    assert first.json()["trial"]["state"] == "running"
    worse = api.post(f"{base}/{ids[1]}/report", json={"step": 1, "value": 0.9}).json()
    assert worse["stop"] is True and worse["trial"]["state"] == "stopped"
    assert worse["trial"]["value"] == 0.9 and "asha" in worse["trial"]["reason"]
    again = api.post(f"{base}/{ids[1]}/report", json={"step": 1, "value": 0.9}).json()
    assert again["stop"] is True  # a retried request gets the same answer
    api.post(f"{base}/{ids[0]}/report", json={"step": 2.5, "value": 0.1})
    before = api.get(f"/studies/{study_name}/reports").json()
    bad = [
        (ids[0], '{"step": 3, "value": NaN}', 422, "value"),
        (ids[0], '{"step": -1, "value": 0.1}', 422, "step"),
        (ids[0], '{"step": 2, "value": 0.1}', 422, "step"),  # before the last step, 2.5
        (ids[0], '{"step": 3}', 422, "value"),
        (ids[0], '{"step": 3, "value": 0.1, "extra": 1}', 422, "extra"),
        (ids[0], "{not json", 422, None),
        (99, '{"step": 1, "value": 0.1}', 404, "trial_id"),
    ]
    for trial_id, raw, code, field in bad:
        r = api.post(
            f"{base}/{trial_id}/report", content=raw, headers={"content-type": "application/json"}
        )
        assert r.status_code == code, (raw, r.text)
        if field is not None:
            assert r.json()["error"]["field"] == field, (raw, r.text)
    api.post(f"{base}/{ids[2]}/tell", json={"value": 0.5})
    finished = api.post(f"{base}/{ids[2]}/report", json={"step": 1, "value": 0.5})
    assert finished.status_code == 409 and "already done" in finished.json()["error"]["message"]
    after = api.get(f"/studies/{study_name}/reports").json()
    assert after == before
    assert [(r["trial_id"], r["step"], r["value"]) for r in after["reports"]] == [
        (ids[0], 1.0, 0.2), (ids[0], 2.5, 0.1), (ids[1], 1.0, 0.9),
    ]  # fmt: skip
    one = api.get(f"/studies/{study_name}/reports", params={"trial_id": ids[1]}).json()
    assert [r["trial_id"] for r in one["reports"]] == [ids[1]]
    assert api.get(f"/studies/{study_name}").json()["states"]["stopped"] == 1
    bad_rule = api.post(
        "/studies", json={"name": study_name + "-x", "space": SPACE.to_json(), "stopping": "hb"}
    )
    assert bad_rule.status_code == 422 and bad_rule.json()["error"]["field"] == "stopping.rule"
    curve = make_study(api, study_name + "-c", stopping="curve")["spec"]["stopping"]
    assert curve == {"rule": "curve", "min_curves": 4, "neighbours": 5, "warmup_steps": 0.0,
                     "max_step": None}  # fmt: skip
    predict = {"rule": "predict", "probability": 0.1}
    made = make_study(api, study_name + "-p", stopping=predict)["spec"]["stopping"]
    assert made == {"rule": "predict", "probability": 0.1, "min_curves": 6,
                    "warmup_steps": 0.0, "max_step": None}  # fmt: skip
    bad_chance = api.post(
        "/studies",
        json={"name": study_name + "-q", "space": SPACE.to_json(),
              "stopping": {"rule": "predict", "probability": 1.5}},
    )  # fmt: skip
    assert bad_chance.status_code == 422
    assert bad_chance.json()["error"]["field"] == "stopping.probability"
    bands = {"rule": "hyperband", "max_step": 27, "brackets": 0}
    bad_setting = api.post(
        "/studies", json={"name": study_name + "-h", "space": SPACE.to_json(), "stopping": bands}
    )
    assert bad_setting.status_code == 422
    assert bad_setting.json()["error"]["field"] == "stopping.brackets"


def test_a_study_with_a_fidelity_over_http_counts_only_target_results(
    api: httpx.Client, study_name: str
) -> None:
    fidelity = {"parameter": "n", "cost": {"fixed": 1, "per_unit": 1}}
    created = make_study(api, study_name, fidelity=fidelity, strategy="auto")
    assert created["spec"]["fidelity"] == {
        "parameter": "n", "target": 8, "cost": {"fixed": 1.0, "per_unit": 1.0}
    }  # fmt: skip
    cheap = {"x": 0.5, "lr": 0.01, "n": 2, "opt": "adam"}
    assert api.post(f"/studies/{study_name}/add", json={"params": cheap, "value": 0.01}).is_success
    full = {"x": 0.1, "lr": 0.01, "opt": "adam"}  # no n: the target fidelity
    added = api.post(f"/studies/{study_name}/add", json={"params": full, "value": 0.5}).json()
    assert added["params"]["n"] == 8
    summary = api.get(f"/studies/{study_name}").json()
    assert summary["best"]["id"] == added["id"]  # the cheap, lower value is not a result
    trials = api.post(f"/studies/{study_name}/ask", json={"count": 2}).json()["trials"]
    assert all(1 <= t["params"]["n"] <= 8 for t in trials)
    for body, field in [
        ({"fidelity": "depth"}, "fidelity.parameter"),
        ({"fidelity": {"parameter": "n", "target": 9}}, "fidelity.target"),
        ({"fidelity": "n", "strategy": "thompson"}, "strategy"),
    ]:
        r = api.post("/studies", json={"name": study_name + "-x", "space": SPACE.to_json(), **body})
        assert r.status_code == 422 and r.json()["error"]["field"] == field, r.text
