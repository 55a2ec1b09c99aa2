"""``GET /metrics``: Prometheus' text format, counting what a real ``abo serve`` did."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from abo.service.metrics import Counter, Gauge, Histogram, Metrics
from tests.service.conftest import Server, make_study, objective

LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$")
ASK = "/api/v1/studies/{name}/ask"


def parse(text: str) -> dict[tuple[str, frozenset], float]:
    """Each sample of the exposition as ``(name, labels) -> value``, checking every line is
    a comment or a well-formed sample."""
    samples: dict[tuple[str, frozenset], float] = {}
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        match = LINE.match(line)
        assert match, f"not a sample line: {line!r}"
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(3) or ""))
        samples[(match.group(1), labels)] = float(match.group(4))
    return samples


def sample(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_histogram_buckets_are_cumulative_and_labels_escaped():
    h = Histogram("t_seconds", "help", (0.1, 1.0), ("route",))
    for v in (0.05, 0.5, 0.5, 3.0):
        h.observe(v, 'a"b')
    s = parse("\n".join(h.lines()))
    assert sample(s, "t_seconds_bucket", route='a\\"b', le="0.1") == 1
    assert sample(s, "t_seconds_bucket", route='a\\"b', le="1") == 3
    assert sample(s, "t_seconds_bucket", route='a\\"b', le="+Inf") == 4
    assert sample(s, "t_seconds_count", route='a\\"b') == 4
    assert sample(s, "t_seconds_sum", route='a\\"b') == pytest.approx(4.05)
    c = Counter("t_total", "help", ("k",))
    c.inc("x")
    c.inc("x", by=2)
    assert parse("\n".join(c.lines()))[("t_total", frozenset({("k", "x")}))] == 3
    text = Metrics().render([Gauge("g", "help", 2, {"v": "1"})])
    assert "# TYPE g gauge" in text and 'g{v="1"} 2' in text and text.endswith("\n")


def test_metrics_count_what_the_service_did(server: Server, api: httpx.Client, study_name: str):
    before = parse(httpx.get(server.url + "/metrics", timeout=30).text)
    make_study(api, study_name)
    for k in range(4):
        trial = api.post(f"/studies/{study_name}/ask", json={}).json()["trials"][0]
        path = f"/studies/{study_name}/trials/{trial['id']}"
        if k < 3:
            told = api.post(path + "/tell", json={"value": objective(trial["params"])})
        else:
            told = api.post(path + "/fail", json={"reason": "boom"})
        assert told.status_code == 200
    assert api.post(f"/studies/{study_name}/trials/999/tell", json={"value": 1}).status_code == 404
    assert httpx.get(server.url + "/no/such/page", timeout=30).status_code == 404
    response = httpx.get(server.url + "/metrics", timeout=30)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    after = parse(response.text)

    def grew(name: str, **labels: str) -> float:
        return sample(after, name, **labels) - sample(before, name, **labels)

    assert grew("abo_requests_total", method="POST", route=ASK, status="200") == 4
    tell = "/api/v1/studies/{name}/trials/{trial_id}/tell"
    assert grew("abo_requests_total", method="POST", route=tell, status="404") == 1
    assert grew("abo_requests_total", method="GET", route="unmatched", status="404") == 1
    assert grew("abo_tells_total", outcome="done") == 3  # the 404 tell is not counted
    assert grew("abo_tells_total", outcome="failed") == 1
    assert grew("abo_trials_proposed_total") == 4
    assert grew("abo_proposal_round_seconds_count") == 4
    assert grew("abo_request_seconds_count", route=ASK) == 4
    assert sample(after, "abo_request_seconds_sum", route=ASK) > 0
    assert sample(after, "abo_asks_waiting") == 0
    assert sample(after, "abo_proposer_leases_held") >= 1  # this study's, just used
    assert sample(after, "abo_studies_cached") >= 1
    assert sample(after, "abo_process_start_time_seconds") > 1.7e9
    info = [k for k in after if k[0] == "abo_info"]
    assert len(info) == 1 and dict(info[0][1])["replica"]


def test_metrics_need_the_token_like_the_api(tmp_path: Path):
    srv = Server(f"sqlite:///{tmp_path / 'abo.db'}", tmp_path / "log", token="t0ken").start()
    try:
        assert httpx.get(srv.url + "/metrics", timeout=30).status_code == 401
        ok = httpx.get(srv.url + "/metrics", headers={"Authorization": "Bearer t0ken"})
        assert ok.status_code == 200
        samples = parse(ok.text)
        denied = ("abo_requests_total", frozenset(
            {("method", "GET"), ("route", "unmatched"), ("status", "401")}))  # fmt: skip
        assert samples[denied] == 1  # the refused scrape was counted before auth answered
    finally:
        srv.stop()
