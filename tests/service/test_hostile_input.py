"""Hostile numbers and repeats on a real server: integers beyond the float range anywhere in a
body, a report step given as a string, a second fail with another reason, a 404 that names
only the study asked for, and a hypervolume beyond the float range."""

from __future__ import annotations

import json

import httpx
import pytest

import abo
from abo.service import Client

from .conftest import Server, make_study

HUGE = [10**400, 2**1024, -(2**1024)]


def _post(api: httpx.Client, path: str, body: dict) -> httpx.Response:
    """``body`` as JSON text: Python writes big integers out in full, as a hostile client can."""
    return api.post(path, content=json.dumps(body), headers={"Content-Type": "application/json"})


def _refused(r: httpx.Response, field: str) -> None:
    assert r.status_code == 422, (r.status_code, r.text)
    error = r.json()["error"]
    assert error["field"] == field and error["code"] == "invalid_value", error
    assert "float range" in error["message"]


@pytest.mark.parametrize("huge", HUGE, ids=["10**400", "2**1024", "-2**1024"])
def test_integers_beyond_the_float_range_are_422_naming_the_field(
    api: httpx.Client, study_name: str, huge: int
) -> None:
    """They were 500 (OverflowError) or a reset connection on tell, add and create."""
    make_study(api, study_name)
    multi = f"{study_name}-m"
    make_study(api, multi, outcomes={"f": "minimize", "g": "maximize"})
    ok = {"x": 0.5, "lr": 0.01, "n": 2, "opt": "sgd"}
    trial = api.post(f"/studies/{study_name}/ask", json={}).json()["trials"][0]
    tell = f"/studies/{study_name}/trials/{trial['id']}/tell"
    _refused(_post(api, tell, {"value": huge}), "value")
    _refused(
        _post(api, tell, {"value": 1.0, "metadata": {"loss": {"last": huge}}}), "metadata.loss.last"
    )
    _refused(_post(api, tell, {"value": 1.0, "info": {"k": [1, huge]}}), "info.k.1")
    report = f"/studies/{study_name}/trials/{trial['id']}/report"
    _refused(_post(api, report, {"step": huge, "value": 1.0}), "step")
    _refused(_post(api, report, {"step": 1, "value": huge}), "value")
    add = f"/studies/{study_name}/add"
    _refused(_post(api, add, {"params": ok, "value": huge}), "value")
    _refused(_post(api, add, {"params": {**ok, "x": huge}, "value": 1.0}), "params.x")
    _refused(
        _post(api, f"/studies/{study_name}/enqueue", {"params": {**ok, "n": huge}}), "params.n"
    )
    _refused(_post(api, f"/studies/{study_name}/ask", {"pace": huge}), "pace")
    m = api.post(f"/studies/{multi}/ask", json={}).json()["trials"][0]
    _refused(
        _post(api, f"/studies/{multi}/trials/{m['id']}/tell", {"value": {"f": 1, "g": huge}}),
        "value.g",
    )
    _refused(
        _post(api, f"/studies/{multi}/add", {"params": ok, "value": {"f": huge, "g": 1}}), "value.f"
    )
    space = {"x": {"type": "float", "low": 0, "high": 1, "log": False}}
    create = {"name": f"{study_name}-c", "space": space, "strategy": "random"}
    _refused(_post(api, "/studies", {**create, "lease_seconds": huge}), "lease_seconds")
    stopping = {"rule": "asha", "min_step": huge}
    _refused(_post(api, "/studies", {**create, "stopping": stopping}), "stopping.min_step")
    bad_space = {"x": {"type": "float", "low": 0, "high": huge}}
    _refused(_post(api, "/studies", {**create, "space": bad_space}), "space.x.high")
    # nothing changed: the trial still runs, and no study was created
    assert api.get(f"/studies/{study_name}/trials/{trial['id']}").json()["state"] == "running"
    assert api.get(f"/studies/{study_name}/reports").json()["reports"] == []
    assert api.get(f"/studies/{study_name}-c").status_code == 404
    told = _post(api, tell, {"value": 1.0})  # the connection and the server still serve
    assert told.status_code == 200 and told.json()["value"] == 1.0


def test_a_report_step_or_value_as_a_string_is_refused_like_a_tell(
    api: httpx.Client, study_name: str
) -> None:
    make_study(api, study_name)
    trial = api.post(f"/studies/{study_name}/ask", json={}).json()["trials"][0]
    report = f"/studies/{study_name}/trials/{trial['id']}/report"
    for body, field in [
        ({"step": "3", "value": 1.0}, "step"),
        ({"step": 3, "value": "1"}, "value"),
    ]:
        r = api.post(report, json=body)
        assert r.status_code == 422 and r.json()["error"]["field"] == field, r.text
    tell = api.post(f"/studies/{study_name}/trials/{trial['id']}/tell", json={"value": "1.0"})
    assert tell.status_code == 422  # as a tell refuses it
    assert api.get(f"/studies/{study_name}/reports").json()["reports"] == []
    assert api.post(report, json={"step": 3, "value": 1.0}).status_code == 200


def test_a_second_fail_with_another_reason_is_409_and_the_first_stays(
    api: httpx.Client, study_name: str
) -> None:
    make_study(api, study_name)
    trial = api.post(f"/studies/{study_name}/ask", json={}).json()["trials"][0]
    fail = f"/studies/{study_name}/trials/{trial['id']}/fail"
    assert api.post(fail, json={"reason": "out of memory"}).status_code == 200
    again = api.post(fail, json={"reason": "out of memory"})  # a retried request
    assert again.status_code == 200 and again.json()["reason"] == "out of memory"
    other = api.post(fail, json={"reason": "segfault"})
    assert other.status_code == 409, other.text
    assert other.json()["error"]["code"] == "trial_state"
    assert "out of memory" in other.json()["error"]["message"]
    assert (
        api.get(f"/studies/{study_name}/trials/{trial['id']}").json()["reason"] == "out of memory"
    )


def test_a_404_names_only_the_study_asked_for(api: httpx.Client, study_name: str) -> None:
    make_study(api, study_name)
    unknown = f"{study_name}-nope"
    for method, path in [
        ("GET", f"/studies/{unknown}"),
        ("POST", f"/studies/{unknown}/ask"),
        ("GET", f"/studies/{unknown}/trials"),
        ("DELETE", f"/studies/{unknown}"),
    ]:
        r = api.request(method, path, json={} if method == "POST" else None)
        assert r.status_code == 404, (method, path, r.text)
        assert r.json()["error"]["message"] == f"name: no study called {unknown!r}"
        assert study_name + '"' not in r.text and "studies here" not in r.text


def test_a_hypervolume_beyond_the_float_range_is_an_error_never_null(
    server: Server, api: httpx.Client, study_name: str
) -> None:
    """It came back as ``null`` (an ``inf`` in JSON); now 422 with its order of magnitude."""
    make_study(api, study_name, outcomes={"f": "maximize", "g": "maximize"})
    ok = {"x": 0.5, "lr": 0.01, "n": 2, "opt": "sgd"}
    r = api.post(
        f"/studies/{study_name}/add", json={"params": ok, "value": {"f": 1e300, "g": 1e300}}
    )
    assert r.status_code == 201, r.text
    far = {"reference_point": {"f": -1e300, "g": -1e300}}  # about 4e600
    r = api.post(f"/studies/{study_name}/hypervolume", json=far)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == "hypervolume" and "1e600" in error["message"], error
    remote = Client(server.url).load_study(study_name)
    with pytest.raises(abo.AboError, match="beyond the float range"):
        remote.hypervolume(far["reference_point"])
