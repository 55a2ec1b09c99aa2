"""A conditional space over HTTP: created from JSON, valid proposals, bad params refused."""

from __future__ import annotations

import httpx

SPACE = {
    "optimizer": {"type": "categorical", "choices": ["sgd", "adam"]},
    "momentum": {"type": "float", "low": 0, "high": 0.99, "when": {"optimizer": "sgd"}},
    "beta2": {"type": "float", "low": 0.9, "high": 0.9999, "when": {"optimizer": ["adam"]}},
}


def test_a_conditional_space_over_http(api: httpx.Client, study_name: str) -> None:
    r = api.post("/studies", json={"name": study_name, "space": SPACE, "seed": 3})
    assert r.status_code == 201, r.text
    assert r.json()["space"]["beta2"]["when"] == {"optimizer": ["adam"]}
    asked = api.post(f"/studies/{study_name}/ask", json={"count": 6}).json()["trials"]
    for t in asked:
        active = {"optimizer", "momentum" if t["params"]["optimizer"] == "sgd" else "beta2"}
        assert set(t["params"]) == active
    bad = api.post(f"/studies/{study_name}/add", json={
        "params": {"optimizer": "adam", "beta2": 0.95, "momentum": 0.5}, "value": 1.0})  # fmt: skip
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "momentum", bad.text
    assert "inactive" in bad.json()["error"]["message"]
    missing = api.post(f"/studies/{study_name}/enqueue", json={"params": {"optimizer": "sgd"}})
    assert missing.status_code == 422 and missing.json()["error"]["field"] == "momentum"
    trials = api.get(f"/studies/{study_name}/trials").json()["trials"]
    assert len(trials) == 6  # the refused requests changed nothing
    cycle = {**SPACE, "optimizer": {**SPACE["optimizer"], "when": {"momentum": 0.5}}}
    r = api.post("/studies", json={"name": study_name + "-bad", "space": cycle})
    assert r.status_code == 422, r.text
