"""Spaces the encoding cannot hold are 422 naming the parameter, and the connection lives on.

An ``Int`` bound of 401 digits used to raise ``OverflowError`` deep inside and come back as a
500; every malformed parameter now answers 422 with ``error.field`` set to its name, and the
client's keep-alive connection serves the next request.
"""

from __future__ import annotations

import uuid

import httpx
import pytest

from .conftest import SPACE

HUGE = 10**400  # 401 digits: JSON carries it, no float holds it
OK = {"type": "float", "low": 0, "high": 1}

BAD = [
    ({"type": "int", "low": 0, "high": 2**53 + 2}, "high must lie within +-2**53"),
    ({"type": "float", "low": -1e308, "high": 1e308}, "is too wide"),
    ({"type": "float", "low": "0", "high": 1}, "low must be a real number"),
    ({"type": "int", "low": 0, "high": None}, "high must be an integer"),
    ({"type": "int", "low": 3, "high": 3}, "low (3) must be below high (3)"),
    ({"type": "float", "low": 0, "high": 1, "log": "yes"}, "log must be true or false"),
    ({"type": "float", "low": 0, "high": 1, "step": 0.3}, "whole multiple of step"),
    ({"type": "int", "low": 0, "high": 10, "stepp": 2}, "unknown key 'stepp'"),
    ({"type": "categorical", "choices": "abc"}, "choices must be a list"),
    ({"type": "categorical", "choices": {"a": 1}}, "choices must be a list"),
    ({"type": "matrix", "low": 0, "high": 1}, "unknown type 'matrix'"),
    ({"type": "float", "low": 0}, "float is missing 'high'"),
]


# Integers no float holds are refused wherever they are in a body, before the space is read
HUGE_BOUNDS = [
    ({"type": "int", "low": 0, "high": HUGE}, "high"),
    ({"type": "int", "low": -HUGE, "high": 0}, "low"),
    ({"type": "float", "low": 0, "high": HUGE}, "high"),
]


@pytest.mark.parametrize(("spec", "key"), HUGE_BOUNDS)
def test_a_bound_beyond_the_float_range_is_422_naming_its_path(
    api: httpx.Client, spec: dict, key: str
) -> None:
    name = f"s-{uuid.uuid4().hex[:10]}"
    r = api.post("/studies", json={"name": name, "space": {"ok": OK, "n_layers": spec}})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_value" and error["field"] == f"space.n_layers.{key}", error
    assert "beyond the float range" in error["message"], error
    assert api.get(f"/studies/{name}").status_code == 404  # nothing was created


def _local_port(response: httpx.Response) -> int:
    """The client-side port of the connection that carried ``response``."""
    return response.extensions["network_stream"].get_extra_info("client_addr")[1]


@pytest.mark.parametrize(("spec", "reason"), BAD)
def test_a_bad_parameter_is_422_naming_it_and_the_connection_is_kept(
    api: httpx.Client, spec: dict, reason: str
) -> None:
    name = f"s-{uuid.uuid4().hex[:10]}"
    r = api.post("/studies", json={"name": name, "space": {"ok": OK, "n_layers": spec}})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_params" and error["field"] == "n_layers", error
    assert error["message"].startswith("n_layers: ") and reason in error["message"], error
    assert r.headers.get("connection", "").lower() != "close"
    assert api.get(f"/studies/{name}").status_code == 404  # nothing was created
    # the same keep-alive connection serves the next request
    created = api.post("/studies", json={"name": name, "space": SPACE.to_json()})
    assert created.status_code == 201, created.text
    assert _local_port(created) == _local_port(r)


def test_a_stepped_space_is_served_and_proposes_grid_values(api: httpx.Client) -> None:
    name = f"s-{uuid.uuid4().hex[:10]}"
    space = {
        "x": {"type": "float", "low": 0, "high": 1, "step": 0.1},
        "n": {"type": "int", "low": 0, "high": 100, "step": 5},
    }
    r = api.post("/studies", json={"name": name, "space": space, "strategy": "random"})
    assert r.status_code == 201, r.text
    assert r.json()["space"]["x"]["step"] == 0.1
    trials = api.post(f"/studies/{name}/ask", json={"count": 4}).json()["trials"]
    for t in trials:
        assert round(t["params"]["x"] * 10) / 10 == t["params"]["x"]
        assert t["params"]["n"] % 5 == 0
    off = api.post(f"/studies/{name}/enqueue", json={"params": {"x": 0.35, "n": 5}})
    assert off.status_code == 422 and off.json()["error"]["field"] == "x", off.text
