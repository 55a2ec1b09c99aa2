"""Schemathesis against the live /openapi.json: no input it generates makes the server 5xx,
and every answer matches the schema it publishes.

Each operation gets a bounded number of examples (``EXAMPLES``); half of the cases aim at a
real study, so ask/tell/fail/lose run against real trials, not only 404s.
"""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from .conftest import SPACE, Server

FUZZ_STUDY = "fuzz"
EXAMPLES = 30


def _fuzz(operation: schemathesis.APIOperation, url: str, seen: list[int]) -> None:
    """Run ``EXAMPLES`` generated cases of one operation; record their status codes."""

    @given(case=operation.as_strategy())
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(case: schemathesis.Case) -> None:
        aim = case.method != "DELETE"  # deleting the real study would end the other cases
        if "name" in (case.path_parameters or {}) and len(seen) % 2 and aim:
            case.path_parameters["name"] = FUZZ_STUDY
        response = case.call_and_validate(
            base_url=url,
            checks=[not_a_server_error, response_schema_conformance, status_code_conformance],
            timeout=30,
        )
        seen.append(response.status_code)

    check()


@pytest.mark.slow
def test_no_generated_input_makes_the_server_fail(server: Server) -> None:
    body = {"name": FUZZ_STUDY, "space": SPACE.to_json(), "strategy": "random", "seed": 0}
    httpx.post(server.url + "/api/v1/studies", json=body).raise_for_status()
    schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15
    calls: dict[str, list[int]] = {}
    for operation in operations:
        _fuzz(operation, server.url, calls.setdefault(operation.label, []))
    study = httpx.get(f"{server.url}/api/v1/studies/{FUZZ_STUDY}").json()
    assert all(calls.values()), [label for label, codes in calls.items() if not codes]
    assert all(code < 500 for codes in calls.values() for code in codes)
    assert study["n_trials"] > 0  # the fuzzer did reach a real study and start trials
    ask = calls["POST /api/v1/studies/{name}/ask"]
    assert 200 in ask and 422 in ask  # both accepted and refused requests were generated
