"""Warm start over HTTP: the service resolves source names in its own storage."""

from __future__ import annotations

import httpx

import abo
from abo.service import Client

from .conftest import SPACE, Server, make_study, objective


def test_a_study_created_over_http_warm_starts_from_one_on_the_service(
    api: httpx.Client, server: Server, study_name: str
) -> None:
    old = study_name + "-old"
    make_study(api, old)
    asked = api.post(f"/studies/{old}/ask", json={"count": 6}).json()["trials"]
    for t in asked:
        api.post(f"/studies/{old}/trials/{t['id']}/tell", json={"value": objective(t["params"])})
    best = min(asked, key=lambda t: objective(t["params"]))
    with Client(server.url) as client:
        new = client.create_study(SPACE, study_name, seed=1, warm_start_from=[old])
        (snap,) = new.spec.warm_start_from
        assert snap["study"] == old and len(snap["trials"]) == 6
        first = new.ask()
        assert first.proposal.strategy == "warm-start" and first.params == best["params"]
        local = abo.create_study(SPACE, seed=2, strategy="random")  # another storage
        for _ in range(3):
            t = local.ask()
            local.tell(t.id, objective(t.params))
        mixed = client.create_study(SPACE, study_name + "-mixed", warm_start_from=[local, old])
        assert [s["study"] for s in mixed.spec.warm_start_from] == [local.name, old]
    bad = api.post("/studies", json={"name": study_name + "-bad", "space": SPACE.to_json(),
                                     "warm_start_from": ["no-such-study"]})  # fmt: skip
    assert bad.status_code == 422, bad.text
    error = bad.json()["error"]
    assert error["field"] == "warm_start_from" and "no-such-study" in error["message"]
    assert api.get(f"/studies/{study_name}-bad").status_code == 404
