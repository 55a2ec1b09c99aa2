"""``POST /studies`` and ``Client.create_study`` on a study that exists, over a real server:
the options are validated (422), one given that differs from the stored one is 409
``options_conflict`` naming each, stored against given, and ``load_if_exists: "keep"``
loads the stored study whatever is given."""

from __future__ import annotations

import httpx
import pytest

import abo
from abo.service import Client

from .conftest import SPACE, Server, make_study


def _spec(api: httpx.Client, name: str) -> dict:
    return api.get(f"/studies/{name}").json()["spec"]


def test_create_compares_the_given_options_with_the_stored_ones(
    api: httpx.Client, study_name: str
) -> None:
    make_study(api, study_name, lease_seconds=600, max_retries=2)
    before = _spec(api, study_name)
    body = {"name": study_name, "space": SPACE.to_json(), "load_if_exists": True}
    conflict = api.post(
        "/studies", json={**body, "strategy": "auto", "lease_seconds": 60, "max_retries": 2}
    )
    assert conflict.status_code == 409, conflict.text
    error = conflict.json()["error"]
    assert error["code"] == "options_conflict" and error["field"] == "strategy"
    assert "strategy: stored 'random', given 'auto'" in error["message"]
    assert "lease_seconds: stored 600, given 60" in error["message"]
    assert "max_retries" not in error["message"]
    assert 'load_if_exists "keep"' in error["message"]
    # options left out are not compared; the same ones load the study
    assert api.post("/studies", json=body).status_code == 200
    same = api.post("/studies", json={**body, "strategy": "random", "seed": 0, "max_retries": 2})
    assert same.status_code == 200, same.text
    # "keep" loads the stored options whatever is given
    kept = api.post("/studies", json={**body, "load_if_exists": "keep", "lease_seconds": 5})
    assert kept.status_code == 200 and kept.json()["spec"]["lease_seconds"] == 600
    assert _spec(api, study_name) == before


@pytest.mark.parametrize("load", [True, "keep"])
def test_invalid_options_are_refused_for_a_study_that_exists(
    api: httpx.Client, study_name: str, load: object
) -> None:
    make_study(api, study_name)
    body = {"name": study_name, "space": SPACE.to_json(), "load_if_exists": load}
    for option, value in [("lease_seconds", -1), ("strategy", "nope"), ("stopping", "x")]:
        bad = api.post("/studies", json={**body, option: value})
        assert bad.status_code == 422, (option, bad.text)
        assert bad.json()["error"]["field"].startswith(option), bad.text
    odd = api.post("/studies", json={**body, "load_if_exists": "sometimes"})
    assert odd.status_code == 422 and odd.json()["error"]["field"].startswith("load_if_exists")


def test_client_sends_only_the_options_given(server: Server, study_name: str) -> None:
    with Client(server.url) as client:
        client.create_study(SPACE, study_name, strategy="random", lease_seconds=600)
        again = client.create_study(SPACE, study_name, load_if_exists=True)  # no seed drawn
        assert again.strategy == "random" and again.spec.lease_seconds == 600
        with pytest.raises(abo.OptionsConflictError, match="lease_seconds: stored 600") as err:
            client.create_study(SPACE, study_name, lease_seconds=60, load_if_exists=True)
        assert err.value.field == "lease_seconds"
        kept = client.create_study(SPACE, study_name, lease_seconds=60, load_if_exists="keep")
        assert kept.spec.lease_seconds == 600
        with pytest.raises(abo.AboError, match="load_if_exists"):
            client.create_study(SPACE, study_name, load_if_exists="maybe")
