"""A study deleted, or deleted and created again with another space, by another process while
the server has it cached: the server drops its stale copy, a ``RemoteStudy`` that loaded the
old study gets ``StudyNotFoundError`` (never asks or tells into the new one), and no trial of
the old space ever lands in the new study."""

from __future__ import annotations

import threading

import httpx
import pytest

import abo
from abo.service import Client
from abo.storage import SQLStorage

from .conftest import SPACE, Server, make_study

OTHER = abo.Space({"y": abo.Float(10.0, 20.0)})


def _recreate(server: Server, name: str) -> None:
    """Another process's view: its own storage on the same file deletes and re-creates."""
    other = SQLStorage(server.storage)
    try:
        abo.delete_study(name, storage=other)
        abo.create_study(OTHER, name=name, storage=other, strategy="random", seed=1)
    finally:
        other.dispose()


def test_a_stale_remote_study_is_refused_and_a_fresh_one_works(
    server: Server, study_name: str
) -> None:
    with Client(server.url, retries=0) as client:
        stale = client.create_study(SPACE, name=study_name, strategy="random", seed=0)
        done = stale.ask()
        stale.tell(done.id, 1.0)
        running = stale.ask()
        _recreate(server, study_name)
        for call in (
            stale.ask,
            lambda: stale.tell(running.id, 2.0),
            lambda: stale.heartbeat(running.id),
            lambda: stale.lose(running.id, "gone"),
            lambda: stale.trial(running.id),
            lambda: stale.trials,
            lambda: stale.best,
            lambda: stale.enqueue({"x": 0.0, "lr": 0.01, "n": 1, "opt": "sgd"}),
            stale.delete,  # never deletes the new study
        ):
            with pytest.raises(abo.StudyNotFoundError, match="created again since this client"):
                call()
        fresh = client.load_study(study_name)
        assert fresh.space == OTHER and fresh.created_at != stale.created_at
        trial = fresh.ask()
        assert set(trial.params) == {"y"} and 10.0 <= trial.params["y"] <= 20.0
        assert fresh.tell(trial.id, 3.0).value == 3.0
        with pytest.raises(abo.StudyNotFoundError):
            stale.ask()  # still refused after the server loaded the new study
    local = abo.load_study(study_name, storage=server.storage)
    assert [(t.id, set(t.params), t.value) for t in local.trials] == [(1, {"y"}, 3.0)]


def test_requests_without_the_header_reach_the_current_study(
    server: Server, api: httpx.Client, study_name: str
) -> None:
    make_study(api, study_name)
    held = api.post(f"/studies/{study_name}/ask", json={}).json()["trials"][0]  # now cached
    _recreate(server, study_name)
    # a tell names a trial of the study the caller knew: refused once, the cache is dropped
    r = api.post(f"/studies/{study_name}/trials/{held['id']}/tell", json={"value": 1.0})
    assert r.status_code == 404 and r.json()["error"]["code"] == "study_not_found"
    assert "created again" in r.json()["error"]["message"]
    asked = api.post(f"/studies/{study_name}/ask", json={}).json()["trials"][0]
    assert set(asked["params"]) == {"y"}
    assert api.get(f"/studies/{study_name}").json()["space"] == OTHER.to_json()

    _recreate(server, study_name)  # a read or an ask reloads at once (no stale 404)
    assert api.get(f"/studies/{study_name}").json()["n_trials"] == 0
    _recreate(server, study_name)
    asked = api.post(f"/studies/{study_name}/ask", json={"count": 2})
    assert asked.status_code == 200 and [t["id"] for t in asked.json()["trials"]] == [1, 2]

    abo.delete_study(study_name, storage=server.storage)  # deleted, not re-created: 404
    for _ in range(2):
        r = api.post(f"/studies/{study_name}/ask", json={})
        assert r.status_code == 404 and r.json()["error"]["code"] == "study_not_found", r.text


def test_a_bad_created_header_is_422(api: httpx.Client, study_name: str) -> None:
    make_study(api, study_name)
    for value in ("yesterday", "nan", "inf"):
        r = api.get(f"/studies/{study_name}", headers={"X-Abo-Study-Created": value})
        assert r.status_code == 422, r.text
        assert r.json()["error"]["field"] == "X-Abo-Study-Created"


@pytest.mark.slow
def test_no_trial_of_the_old_space_lands_in_the_new_study(server: Server, study_name: str) -> None:
    """Clients ask and tell in a loop while another process replaces the study under them."""
    with Client(server.url) as client:
        client.create_study(SPACE, name=study_name, strategy="random", seed=0)
    told: list[int] = []
    refused: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        with Client(server.url, retries=0) as c:
            study = c.load_study(study_name)
            while True:
                try:
                    trial = study.ask()
                    study.tell(trial.id, float(trial.params["x"]))
                except abo.StudyNotFoundError:
                    with lock:
                        refused.append(1)
                    return
                with lock:
                    told.append(trial.id)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for th in threads:
        th.start()
    while len(told) < 30 and all(th.is_alive() for th in threads):
        threads[0].join(0.02)
    _recreate(server, study_name)
    for th in threads:
        th.join(60)
    assert len(refused) == 4 and len(told) >= 30
    with Client(server.url) as client:
        fresh = client.load_study(study_name)
        trial = fresh.ask()
        fresh.tell(trial.id, 1.0)
    new = abo.load_study(study_name, storage=server.storage).trials
    assert all(set(t.params) == {"y"} for t in new), [t.params for t in new]
    assert [t.id for t in new] == [1]
