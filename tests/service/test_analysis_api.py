"""``GET /api/v1/studies/{name}/analysis`` on a real server: what each kind holds, its
errors, and its cache (recomputed when a trial is done, shared by concurrent requests)."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import torch

import abo

from .conftest import SPACE, Server, make_study


def _only_x(p: dict) -> float:
    """An objective of ``x`` alone: the other parameters change nothing."""
    return 10.0 * (p["x"] - 0.5) ** 2


def _tell_all(
    api: httpx.Client, name: str, n: int, fn: Callable[[dict], float] = _only_x
) -> list[dict]:
    told = []
    for t in api.post(f"/studies/{name}/ask", json={"count": n}).json()["trials"]:
        r = api.post(f"/studies/{name}/trials/{t['id']}/tell", json={"value": fn(t["params"])})
        assert r.status_code == 200, r.text
        told.append(r.json())
    return told


def _analysis(api: httpx.Client, name: str, **query: str) -> dict:
    r = api.get(f"/studies/{name}/analysis", params=query)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.slow
def test_importance_ranks_the_only_parameter_that_matters_first(
    api: httpx.Client, study_name: str
) -> None:
    make_study(api, study_name)
    _tell_all(api, study_name, 14)
    out = _analysis(api, study_name, kind="importance")
    assert (out["kind"], out["objective"], out["direction"]) == ("importance", "value", "minimize")
    assert out["n_done"] == out["n_analysed"] == 14
    assert "slices" not in out and "contour" not in out and "cv" not in out
    rows = out["importance"]
    assert sorted(r["name"] for r in rows) == sorted(SPACE)
    first, *others = rows
    assert first["name"] == "x"
    assert first["total"] > 0.8 and first["sobol"] > 0.7
    assert all(r["total"] < 0.2 and first["total"] > 4 * r["total"] for r in others), rows
    assert first["eta2"] > max(r["eta2"] for r in others)
    assert all(0.0 <= r[k] <= 1.0 for r in rows for k in ("sobol", "total", "eta2"))
    assert all(r["lengthscale"] > 0 for r in rows)


def test_slices_hold_the_results_only_in_completion_order(
    api: httpx.Client, study_name: str
) -> None:
    """With a fidelity only trials at its target are results; running and failed trials have
    none; infeasible results are flagged."""
    fidelity = {"parameter": "n", "cost": {"fixed": 1, "per_unit": 1}}
    make_study(api, study_name, fidelity=fidelity, outcomes={"loss": "minimize", "stress": "<= 1"})
    rows = [
        ({"x": 0.5, "lr": 0.01, "n": 2, "opt": "adam"}, {"loss": 0.01, "stress": 0.0}),  # cheap
        ({"x": -1.0, "lr": 0.001, "n": 8, "opt": "sgd"}, {"loss": 2.0, "stress": 0.0}),
        ({"x": 1.5, "lr": 0.05, "n": 8, "opt": "adam"}, {"loss": 1.0, "stress": 2.0}),  # infeasible
        ({"x": 0.25, "lr": 0.0001, "n": 8, "opt": "adam"}, {"loss": 0.5, "stress": 0.5}),
    ]
    ids = []
    for params, values in rows:
        r = api.post(f"/studies/{study_name}/add", json={"params": params, "value": values})
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    asked = api.post(f"/studies/{study_name}/ask", json={"count": 2}).json()["trials"]
    api.post(f"/studies/{study_name}/trials/{asked[0]['id']}/fail", json={"reason": "boom"})
    out = _analysis(api, study_name, kind="slice", objective="loss")
    assert out["objective"] == "loss" and out["n_done"] == 4 and out["n_analysed"] == 3
    slices = out["slices"]
    assert [s["name"] for s in slices] == list(SPACE)
    assert [s["type"] for s in slices] == ["float", "float", "int", "categorical"]
    results = rows[1:]
    for s in slices:
        assert [p["trial_id"] for p in s["points"]] == ids[1:]  # the order they were told
        assert [p["x"] for p in s["points"]] == [params[s["name"]] for params, _ in results]
        assert [p["value"] for p in s["points"]] == [v["loss"] for _, v in results]
        assert [p["feasible"] for p in s["points"]] == [True, False, True]
        assert all(0.0 <= p["u"] <= 1.0 for p in s["points"])
    lr = slices[1]
    expected = [math.log(v / 1e-4) / math.log(1e-1 / 1e-4) for v in (0.001, 0.05, 0.0001)]
    assert [p["u"] for p in lr["points"]] == pytest.approx(expected)  # a log axis
    assert lr["ticks"][0] == [0.0, "0.0001"] and lr["ticks"][-1] == [1.0, "0.1"]
    opt = slices[3]
    assert [label for _, label in opt["ticks"]] == ["sgd", "adam"]
    assert [p["u"] for p in opt["points"]] == [0.25, 0.75, 0.75]


def _direct_loo(spec: abo.spec.study_spec.StudySpec, trials: list) -> list[float]:
    """Each result's prediction from the others by an explicit solve on the other points,
    with the hyperparameters of abo's GP fitted to all of them (in the objective's units)."""
    from abo.analysis import gp as analysis

    _, X, y = analysis.observations(spec, trials)
    model = analysis.fit(spec, X, y)
    with torch.no_grad():
        Xt = model.transform_inputs(X)
        noise = model.likelihood.noise.reshape(())
        K = model.covar_module(Xt).to_dense() + noise * torch.eye(len(y), dtype=torch.double)
        prior = model.mean_module(Xt)
        loc = model.outcome_transform.means.reshape(())
        scale = model.outcome_transform.stdvs.reshape(())
        z = (y - loc) / scale - prior
        out = []
        for k in range(len(y)):
            rest = [i for i in range(len(y)) if i != k]
            weights = torch.linalg.solve(K[rest][:, rest], K[rest, k])
            out.append(float(loc + scale * (prior[k] + weights @ z[rest])))
    return out


@pytest.mark.slow
def test_cross_validation_agrees_with_a_direct_leave_one_out(
    server: Server, api: httpx.Client, study_name: str
) -> None:
    make_study(api, study_name)
    told = _tell_all(api, study_name, 12, lambda p: 2.0 * p["x"] + 0.1 * p["n"])
    out = _analysis(api, study_name, kind="cv")
    cv = out["cv"]
    assert [p["trial_id"] for p in cv] == sorted(t["id"] for t in told)
    assert [p["observed"] for p in cv] == [t["value"] for t in sorted(told, key=lambda t: t["id"])]
    assert all(p["std"] > 0 for p in cv)
    study = abo.load_study(study_name, storage=server.storage)
    direct = _direct_loo(study.spec, study.trials)
    spread = max(p["observed"] for p in cv) - min(p["observed"] for p in cv)
    assert [p["predicted"] for p in cv] == pytest.approx(direct, abs=1e-3 * spread)
    # a smooth objective: leaving one point out hardly moves the prediction
    errors = sorted(abs(p["predicted"] - p["observed"]) for p in cv)
    assert errors[len(errors) // 2] < 0.1 * spread, errors


@pytest.mark.slow
def test_contour_is_the_mean_over_a_grid_of_two_parameters(
    api: httpx.Client, study_name: str
) -> None:
    make_study(api, study_name)
    told = _tell_all(api, study_name, 14)
    out = _analysis(api, study_name, kind="contour", x="x", y="lr")
    c = out["contour"]
    assert (c["x_name"], c["y_name"]) == ("x", "lr")
    assert len(c["x"]) == len(c["y"]) == len(c["u"]) == len(c["z"]) == 40
    assert all(len(row) == 40 for row in c["z"])
    assert c["x"][0] == pytest.approx(-2.0) and c["x"][-1] == pytest.approx(2.0)
    assert c["y"][0] == pytest.approx(1e-4) and c["y"][-1] == pytest.approx(0.1)
    assert c["y"][20] == pytest.approx(math.exp(math.log(1e-4) + 20 / 39 * math.log(1e3)))
    assert c["u"][0] == 0.0 and c["u"][-1] == 1.0
    best = min(told, key=lambda t: t["value"])
    assert c["fixed"] == {"n": best["params"]["n"], "opt": best["params"]["opt"]}
    assert len(c["points"]) == 14
    assert sorted(p["value"] for p in c["points"]) == sorted(t["value"] for t in told)
    # the mean follows x (the objective's only input): it changes across, hardly up
    across = min(max(row) - min(row) for row in c["z"])
    up = max(max(col) - min(col) for col in zip(*c["z"], strict=True))
    assert across > 10 * up, (across, up)
    lowest = min(range(40), key=lambda i: c["z"][20][i])
    assert abs(c["x"][lowest] - 0.5) < 0.4  # the minimum of 10 (x - 0.5)^2


def _snapshot(api: httpx.Client, name: str) -> tuple[dict, list]:
    study = api.get(f"/studies/{name}").json()
    return study, api.get(f"/studies/{name}/trials").json()["trials"]


def test_bad_requests_are_4xx_naming_the_field_and_change_nothing(
    api: httpx.Client, study_name: str
) -> None:
    make_study(api, study_name)
    _tell_all(api, study_name, 4)
    few = f"{study_name}-few"
    make_study(api, few)
    _tell_all(api, few, 2)
    api.post(f"/studies/{few}/ask", json={"count": 1})  # running: no result either
    two = f"{study_name}-two"
    make_study(api, two, outcomes={"loss": "minimize", "cost": "minimize"})
    before = {n: _snapshot(api, n) for n in (study_name, few, two)}
    cases = [
        (study_name, {"kind": "plot"}, 422, "kind", "'importance'"),
        (study_name, {}, 422, "kind", "required"),
        (study_name, {"kind": "contour", "x": "depth", "y": "x"}, 422, "x", "not a parameter"),
        (study_name, {"kind": "contour", "x": "x", "y": "depth"}, 422, "y", "not a parameter"),
        (study_name, {"kind": "contour", "x": "x", "y": "x"}, 422, "y", "same parameter"),
        (study_name, {"kind": "contour", "x": "opt", "y": "x"}, 422, "x", "categorical"),
        (study_name, {"kind": "contour", "x": "x"}, 422, "y", "two numeric"),
        (study_name, {"kind": "importance", "x": "x"}, 422, "x", "only kind=contour"),
        (study_name, {"kind": "cv", "objective": "loss"}, 422, "objective", "not an objective"),
        (few, {"kind": "importance"}, 422, "trials", "2 done trials"),
        (few, {"kind": "slice"}, 422, "trials", "at least 3"),
        (two, {"kind": "importance"}, 422, "objective", "name the one"),
        (f"{study_name}-none", {"kind": "cv"}, 404, "name", "no study"),
    ]
    for name, query, status, field, words in cases:
        r = api.get(f"/studies/{name}/analysis", params=query)
        assert r.status_code == status, (query, r.text)
        error = r.json()["error"]
        assert error["field"] == field and words in error["message"], (query, error)
        assert error["code"] in ("invalid_argument", "invalid_request", "study_not_found")
    assert {n: _snapshot(api, n) for n in before} == before


@pytest.mark.slow
def test_a_result_is_computed_once_per_number_of_done_trials(
    api: httpx.Client, study_name: str
) -> None:
    make_study(api, study_name)
    _tell_all(api, study_name, 5)
    answers: list[dict] = []

    def fetch() -> None:
        with httpx.Client(base_url=str(api.base_url), timeout=120.0) as client:
            answers.append(_analysis(client, study_name, kind="cv"))

    threads = [threading.Thread(target=fetch) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = answers[0]
    assert len(answers) == 3 and all(a == first for a in answers)  # one computation, shared
    again = _analysis(api, study_name, kind="cv")
    assert again["computed_at"] == first["computed_at"]  # cached
    asked = api.post(f"/studies/{study_name}/ask", json={"count": 2}).json()["trials"]
    api.post(f"/studies/{study_name}/trials/{asked[0]['id']}/fail", json={"reason": "x"})
    same = _analysis(api, study_name, kind="cv")  # no new result: still the cached one
    assert same["computed_at"] == first["computed_at"] and same["n_done"] == 5
    api.post(f"/studies/{study_name}/trials/{asked[1]['id']}/tell", json={"value": 3.0})
    fresh = _analysis(api, study_name, kind="cv")
    assert fresh["n_done"] == 6 and fresh["computed_at"] > first["computed_at"]
    assert [p["trial_id"] for p in fresh["cv"]][-1] == asked[1]["id"]
    other = _analysis(api, study_name, kind="importance")  # another kind: its own result
    assert other["computed_at"] > fresh["computed_at"]


def test_the_endpoint_is_in_the_api_schema_with_its_errors(server: Server) -> None:
    schema = httpx.get(server.url + "/openapi.json").json()
    op = schema["paths"]["/api/v1/studies/{name}/analysis"]["get"]
    kind = next(p for p in op["parameters"] if p["name"] == "kind")
    assert kind["required"] and kind["schema"]["enum"] == ["importance", "slice", "contour", "cv"]
    assert {p["name"] for p in op["parameters"]} >= {"name", "x", "y", "objective"}
    for status in ("404", "422"):
        ref = op["responses"][status]["content"]["application/json"]["schema"]["$ref"]
        assert ref.endswith("/ErrorBody")
    assert op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/AnalysisOut"
    )


@pytest.mark.slow
def test_the_endpoint_needs_the_token_like_every_other(tmp_path: Path) -> None:
    token = "analysis-token-0123456789abcdef"
    srv = Server(f"sqlite:///{tmp_path / 'a.db'}", tmp_path / "a.log", token=token).start()
    try:
        auth = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=srv.url + "/api/v1", headers=auth, timeout=60.0) as api:
            make_study(api, "guarded")
            url = "/studies/guarded/analysis?kind=slice"
            assert httpx.get(srv.url + "/api/v1" + url).status_code == 401
            r = api.get(url)  # in: too few trials, said as for anyone
            assert r.status_code == 422 and r.json()["error"]["field"] == "trials"
    finally:
        srv.stop()
