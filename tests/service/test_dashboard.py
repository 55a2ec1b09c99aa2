"""The dashboard in a real headless Chromium: plots and table show the trials, and update live."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

import abo

from .conftest import Server, make_study, objective

CHROMIUM = "/usr/bin/chromium"
SPACE_FOR_TIMELINE = {"x": abo.Float(0.0, 1.0)}
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def _tell(api: httpx.Client, name: str, n: int) -> list[dict]:
    out = []
    for t in api.post(f"/studies/{name}/ask", json={"count": n}).json()["trials"]:
        r = api.post(
            f"/studies/{name}/trials/{t['id']}/tell", json={"value": objective(t["params"])}
        )
        out.append(r.json())
    return out


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module's tests (each gets a context of its own: no
    cookie, storage or cache of one test reaches the next)."""
    if not shutil.which(CHROMIUM):
        why = f"{CHROMIUM} is not installed (apt-get install chromium)"
        if os.environ.get("ABO_REQUIRE_BROWSER"):
            pytest.fail(f"{why}; ABO_REQUIRE_BROWSER is set: this test must run")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@contextmanager
def _page(browser: Any) -> Iterator[Any]:
    """A page of a new context of ``browser``, closed afterwards."""
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    try:
        yield context.new_page()
    finally:
        context.close()


@contextmanager
def _dashboard(browser: Any, url: str) -> Iterator[tuple[Any, list[str]]]:
    """A page of headless Chromium at ``url``, and the page errors it raised."""
    with _page(browser) as page:
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url)
        yield page, errors


def _wait(page, expression: str, timeout: float = 20.0) -> None:
    page.wait_for_function(expression, timeout=timeout * 1000)


@pytest.mark.slow
def test_dashboard_shows_and_follows_a_running_study(
    browser: Any, server: Server, api: httpx.Client, study_name: str, tmp_path: Path
) -> None:
    make_study(api, study_name)
    first = _tell(api, study_name, 5)
    running = api.post(f"/studies/{study_name}/ask", json={"count": 1}).json()["trials"][0]
    with _dashboard(browser, f"{server.url}/?interval=300#{study_name}") as (page, errors):
        _wait(page, "document.querySelectorAll('#trials-table tbody tr').length === 6")
        rows = page.locator("#trials-table tbody tr")
        ids = sorted(int(rows.nth(i).get_attribute("data-trial-id")) for i in range(6))
        assert ids == [t["id"] for t in first] + [running["id"]]
        assert page.locator(f"#study-list a[href='#{study_name}']").count() == 1
        state = page.locator(f"#trials-table tr[data-trial-id='{running['id']}']")
        assert state.get_attribute("data-state") == "running"
        best = min(first, key=lambda t: t["value"])
        assert page.locator("#trials-table tr.best").get_attribute("data-trial-id") == str(
            best["id"]
        )
        for plot in ("#conv-trials svg", "#conv-time svg"):
            assert page.locator(plot).get_attribute("data-points") == "5"
            assert page.locator(f"{plot} circle.obs").count() == 5
            assert page.locator(f"{plot} path.best").count() == 1
        assert page.locator("#parallel svg polyline.pc").count() == 5

        more = _tell(api, study_name, 4)  # told while the page is open
        api.post(f"/studies/{study_name}/trials/{running['id']}/tell", json={"value": 9.0})
        _wait(page, "document.querySelector('#conv-trials svg').dataset.points === '10'")
        _wait(page, "document.querySelectorAll('#parallel svg polyline.pc').length === 10")
        assert rows.count() == 10
        assert page.locator(f"#trials-table tr[data-trial-id='{more[-1]['id']}']").count()
        # the summary has its own request, which may land one poll after the trials'
        _wait(page, "document.querySelector('#study-summary').innerText.includes('10 done')")
        text = page.locator("#study-summary").inner_text()
        assert "10 done" in text and "0 running" in text
        page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
        if os.environ.get("ABO_SCREENSHOT"):  # keep a copy to look at
            shutil.copy(tmp_path / "dashboard.png", os.environ["ABO_SCREENSHOT"])
        assert not errors, errors
    assert (tmp_path / "dashboard.png").stat().st_size > 10_000


@pytest.mark.slow
def test_api_docs_render_offline_from_the_package(
    browser: Any, server: Server, tmp_path: Path
) -> None:
    """``/docs`` shows the operations, and the page asks no host but the server for anything
    (it used to load Swagger UI from a public CDN: blank on an offline cluster)."""
    origin = server.url
    with _page(browser) as page:
        requests: list[str] = []
        failed: list[str] = []
        errors: list[str] = []
        page.on("request", lambda req: requests.append(req.url))
        page.on("requestfailed", lambda req: failed.append(req.url))
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{origin}/docs")
        ask = page.locator(
            ".opblock-post .opblock-summary-path[data-path='/api/v1/studies/{name}/ask']"
        )
        ask.wait_for(timeout=30_000)
        assert ask.count() == 1
        tell = "/api/v1/studies/{name}/trials/{trial_id}/tell"
        assert page.locator(f".opblock-summary-path[data-path='{tell}']").count() == 1
        assert page.locator(".opblock").count() >= 15
        assert "abo" in page.locator(".info .title").inner_text()
        page.screenshot(path=str(tmp_path / "docs.png"), full_page=False)
        assert not errors, errors
    outside = [u for u in requests if not u.startswith(origin + "/") and not u.startswith("data:")]
    assert not outside, outside
    assert f"{origin}/static/swagger/swagger-ui-bundle.js" in requests
    assert f"{origin}/openapi.json" in requests
    assert not failed, failed
    assert httpx.get(f"{origin}/redoc").status_code == 404  # not vendored: dropped


def _trade_off(p: dict) -> dict[str, float]:
    """Two objectives that pull ``x`` apart: the error falls as the cost rises."""
    return {"error": (p["x"] - 2.0) ** 2 + abs(p["n"] - 3) / 10, "cost": (p["x"] + 2.0) ** 2}


def _dominated(a: dict, others: list[dict]) -> bool:
    return any(
        all(o[k] <= a[k] for k in a) and any(o[k] < a[k] for k in a) for o in others if o is not a
    )


@pytest.mark.slow
def test_the_pareto_scatter_of_a_study_of_two_objectives_grows_as_results_arrive(
    browser: Any, server: Server, api: httpx.Client, study_name: str, tmp_path: Path
) -> None:

    outcomes = {"error": "minimize", "cost": "minimize"}
    make_study(api, study_name, outcomes=outcomes)

    def tell(n: int) -> list[dict]:
        asked = api.post(f"/studies/{study_name}/ask", json={"count": n}).json()["trials"]
        for t in asked:
            r = api.post(
                f"/studies/{study_name}/trials/{t['id']}/tell",
                json={"value": _trade_off(t["params"])},
            )
            assert r.status_code == 200, r.text
        return [{"id": t["id"], **_trade_off(t["params"])} for t in asked]

    told = tell(6)
    with _dashboard(browser, f"{server.url}/?interval=300#{study_name}") as (page, errors):
        _wait(page, "document.querySelector('#pareto').dataset.points === '6'")
        assert page.locator("#convergence").is_hidden()
        panel = page.locator("#pareto svg")
        assert panel.count() == 1  # one pair of objectives
        assert (panel.get_attribute("data-x"), panel.get_attribute("data-y")) == (
            "error",
            "cost",
        )
        front = sorted(t["id"] for t in told if not _dominated(t, told))
        ringed = page.locator("#pareto svg circle.front")
        assert (
            sorted(int(ringed.nth(i).get_attribute("data-trial-id")) for i in range(ringed.count()))
            == front
        )
        assert page.locator("#pareto svg circle.obs-mo").count() == 6
        assert page.locator("#pareto svg path.front-line").count() == 1
        # completion order is the colour order: the first told is drawn as the first done
        first = page.locator(f"#pareto circle[data-trial-id='{told[0]['id']}']")
        assert first.get_attribute("data-order") == "1"
        highlighted = page.locator("#trials-table tr.best")
        assert (
            sorted(
                int(highlighted.nth(i).get_attribute("data-trial-id"))
                for i in range(highlighted.count())
            )
            == front
        )
        head = page.locator("#trials-table thead th").all_inner_texts()
        assert head[:4] == ["id", "state", "error", "cost"]
        summary = page.locator("#study-summary").inner_text()
        assert "error (minimize), cost (minimize)" in summary
        assert f"Pareto front of {len(front)}" in summary and "hypervolume" in summary
        assert page.locator("#parallel svg polyline.pc").count() == 6

        told += tell(5)  # told while the page is open: the scatter grows
        _wait(page, "document.querySelector('#pareto').dataset.points === '11'")
        front = sorted(t["id"] for t in told if not _dominated(t, told))
        _wait(page, f"document.querySelector('#pareto').dataset.front === '{len(front)}'")
        ringed = page.locator("#pareto svg circle.front")
        assert (
            sorted(int(ringed.nth(i).get_attribute("data-trial-id")) for i in range(ringed.count()))
            == front
        )
        assert page.locator("#pareto svg circle.obs-mo").count() == 11
        page.screenshot(path=str(tmp_path / "pareto.png"), full_page=True)
        if os.environ.get("ABO_SCREENSHOT"):  # keep a copy to look at
            shutil.copy(tmp_path / "pareto.png", os.environ["ABO_SCREENSHOT"])

        # three objectives: one panel per pair, the front ringed in each, no staircase
        three = f"{study_name}-3"
        make_study(api, three, outcomes={**outcomes, "size": "maximize"})
        for t in api.post(f"/studies/{three}/ask", json={"count": 4}).json()["trials"]:
            values = {**_trade_off(t["params"]), "size": float(t["params"]["n"])}
            api.post(f"/studies/{three}/trials/{t['id']}/tell", json={"value": values})
        page.goto(f"{server.url}/?interval=300#{three}")
        _wait(page, "document.querySelector('#pareto').dataset.points === '4'")
        axes = [
            (p.get_attribute("data-x"), p.get_attribute("data-y"))
            for p in page.locator("#pareto svg").all()
        ]
        assert axes == [("error", "cost"), ("error", "size"), ("cost", "size")]
        assert page.locator("#pareto svg path.front-line").count() == 0
        assert "size (maximize)" in page.locator("#study-summary").inner_text()
        assert not errors, errors
    assert (tmp_path / "pareto.png").stat().st_size > 10_000


def _stressed(p: dict) -> dict[str, float]:
    """A loss and a stress that is over its bound (1.0) for large ``x``."""
    return {"loss": objective(p), "stress": p["x"] + 1.0}


@pytest.mark.slow
def test_infeasible_and_failed_trials_are_marked_apart_from_feasible_ones(
    browser: Any, server: Server, api: httpx.Client, study_name: str
) -> None:
    make_study(api, study_name, outcomes={"loss": "minimize", "stress": "<= 1"})
    told: list[dict] = []
    failed = []
    for t in api.post(f"/studies/{study_name}/ask", json={"count": 10}).json()["trials"]:
        if len(failed) < 2 and t["params"]["x"] < -1.0:  # two failures, on the left
            r = api.post(f"/studies/{study_name}/trials/{t['id']}/fail", json={"reason": "nan"})
            failed.append(t["id"])
        else:
            r = api.post(
                f"/studies/{study_name}/trials/{t['id']}/tell",
                json={"value": _stressed(t["params"])},
            )
            told.append({"id": t["id"], **_stressed(t["params"])})
        assert r.status_code == 200, r.text
    bad = sorted(t["id"] for t in told if t["stress"] > 1.0)
    good = [t for t in told if t["stress"] <= 1.0]
    assert bad and good and failed, (told, failed)  # the seed gives all three kinds
    best = min(good, key=lambda t: t["loss"])
    with _dashboard(browser, f"{server.url}/?interval=300#{study_name}") as (page, errors):
        n_rows = len(told) + len(failed)
        _wait(page, f"document.querySelectorAll('#trials-table tbody tr').length === {n_rows}")
        conv = page.locator("#conv-trials svg")
        assert conv.get_attribute("data-points") == str(len(told))
        assert conv.get_attribute("data-infeasible") == str(len(bad))
        crosses = page.locator("#conv-trials svg path.obs.infeasible")
        assert sorted(int(c.get_attribute("data-trial-id")) for c in crosses.all()) == bad
        assert page.locator("#conv-trials svg circle.obs").count() == len(good)
        ticks = page.locator("#conv-time svg path.failed-mark")
        assert sorted(int(c.get_attribute("data-trial-id")) for c in ticks.all()) == failed
        # the best row is the best feasible trial, not the lowest loss overall
        assert page.locator("#trials-table tr.best").get_attribute("data-trial-id") == str(
            best["id"]
        )
        rows = page.locator("#trials-table tr.infeasible")
        assert sorted(int(r.get_attribute("data-trial-id")) for r in rows.all()) == bad
        head = page.locator("#trials-table thead th").all_inner_texts()
        assert head[:5] == ["id", "state", "value", "stress <= 1", "feasible"]
        cell = page.locator(f"#trials-table tr[data-trial-id='{bad[0]}'] td").nth(4)
        assert cell.inner_text() == "no"
        assert page.locator("#parallel svg polyline.pc.infeasible").count() == len(bad)
        dashed = page.locator("#parallel svg polyline.pc-failed")
        assert sorted(int(c.get_attribute("data-trial-id")) for c in dashed.all()) == failed
        summary = page.locator("#study-summary").inner_text()
        assert f"{len(good)} feasible (stress <= 1)" in summary
        assert f"(trial {best['id']})" in summary

        # two objectives and the constraint: infeasible trials are hollow rings, off the front
        two = f"{study_name}-2"
        make_study(api, two, outcomes={"loss": "minimize", "n": "minimize", "stress": "<= 1"})
        infeasible = []
        for t in api.post(f"/studies/{two}/ask", json={"count": 8}).json()["trials"]:
            values = {**_stressed(t["params"]), "n": float(t["params"]["n"])}
            api.post(f"/studies/{two}/trials/{t['id']}/tell", json={"value": values})
            if values["stress"] > 1.0:
                infeasible.append(t["id"])
        assert infeasible
        page.goto(f"{server.url}/?interval=300#{two}")
        _wait(page, "document.querySelector('#pareto').dataset.points === '8'")
        assert page.locator("#pareto").get_attribute("data-infeasible") == str(len(infeasible))
        rings = page.locator("#pareto svg circle.obs-mo.infeasible")
        assert sorted(int(c.get_attribute("data-trial-id")) for c in rings.all()) == infeasible
        front = page.locator("#pareto svg circle.front")
        assert not {int(c.get_attribute("data-trial-id")) for c in front.all()} & set(infeasible)
        assert not errors, errors


@pytest.mark.slow
def test_learning_curves_follow_the_reports_and_mark_stopped_trials(
    browser: Any, server: Server, api: httpx.Client, study_name: str
) -> None:
    make_study(api, study_name, stopping={"rule": "asha", "reduction_factor": 2})
    trials = api.post(f"/studies/{study_name}/ask", json={"count": 4}).json()["trials"]
    ids = [t["id"] for t in trials]
    base = f"/studies/{study_name}/trials"
    stopped = []
    for k, trial_id in enumerate(ids):  # later trials worse at step 1: some are stopped
        for step in (1, 2, 4):
            answer = api.post(
                f"{base}/{trial_id}/report", json={"step": step, "value": 1.0 + k + 1.0 / step}
            ).json()
            if answer["stop"]:
                stopped.append(trial_id)
                break
    api.post(f"{base}/{ids[0]}/tell", json={"value": 1.2})
    assert stopped
    with _dashboard(browser, f"{server.url}/?interval=300#{study_name}") as (page, errors):
        _wait(page, "document.querySelector('#curves svg') !== null")
        svg = page.locator("#curves svg")
        assert svg.get_attribute("data-curves") == str(len(ids))
        assert svg.get_attribute("data-stopped") == str(len(stopped))
        marks = page.locator("#curves svg path.stop-mark")
        assert sorted(int(m.get_attribute("data-trial-id")) for m in marks.all()) == stopped
        assert page.locator("#curves svg polyline.curve-done").get_attribute(
            "data-trial-id"
        ) == str(ids[0])
        assert f"{len(stopped)} stopped" in page.locator("#study-summary").inner_text()
        # a new report shows up at the next poll
        running = [i for i in ids[1:] if i not in stopped]
        if running:
            api.post(f"{base}/{running[0]}/report", json={"step": 8, "value": 0.5})
            _wait(
                page,
                f"document.querySelector(\"#curves polyline[data-trial-id='{running[0]}']\")"
                ".getAttribute('points').split(' ').length === 4",
            )
        assert not errors, errors


@pytest.mark.slow
def test_a_study_with_a_fidelity_plots_its_best_target_result_against_cost(
    browser: Any, server: Server, api: httpx.Client, study_name: str
) -> None:
    make_study(api, study_name, fidelity={"parameter": "n", "cost": {"fixed": 1, "per_unit": 1}})
    base = {"lr": 0.01, "opt": "adam"}
    told = [({"x": 0.5, "n": 2}, 0.01), ({"x": 0.1, "n": 8}, 0.6), ({"x": 0.4, "n": 8}, 0.3)]
    for params, value in told:  # the cheap one has the lowest value, but is no result
        api.post(f"/studies/{study_name}/add", json={"params": {**base, **params}, "value": value})
    with _dashboard(browser, f"{server.url}/?interval=300#{study_name}") as (page, errors):
        _wait(page, "document.querySelector('#conv-cost svg') !== null")
        assert page.locator("#conv-cost-figure").is_visible()
        cost = page.locator("#conv-cost svg")
        assert cost.get_attribute("data-points") == "3" and cost.get_attribute("data-lower") == "1"
        assert page.locator("#conv-cost svg circle.obs.lower").count() == 1
        # the best-so-far line ends at the best *target* result, 0.3, not at the cheap 0.01
        lower = page.locator("#conv-trials svg circle.obs.lower")
        assert lower.get_attribute("data-trial-id") == "1"  # the cheap value: a light dot ...
        best_row = page.locator("#trials-table tr.best").get_attribute("data-trial-id")
        assert best_row == "3"  # ... but the best is the target's 0.3
        assert not errors, errors
    plain = make_study(api, study_name + "-plain")
    with _dashboard(browser, f"{server.url}/?interval=300#{plain['name']}") as (page, errors):
        _wait(page, "document.querySelector('#conv-trials svg') !== null")
        assert not page.locator("#conv-cost-figure").is_visible()


@pytest.mark.slow
def test_the_timeline_has_a_lane_per_worker_thread_and_the_running_trials(
    browser: Any, server: Server, api: httpx.Client, study_name: str
) -> None:
    import time

    from abo.executors import ThreadExecutor
    from abo.service import Client

    with Client(server.url) as client:
        study = client.create_study(SPACE_FOR_TIMELINE, name=study_name, strategy="random", seed=4)

        def sleepy(p: dict) -> float:
            time.sleep(0.05)
            if p["x"] < 0.2:
                raise ValueError("a region that fails")
            return p["x"]

        with ThreadExecutor(3) as executor:
            study.optimize(sleepy, n_trials=12, executor=executor, guard=None, verbosity=0)
        running = study.ask()
        trials = study.trials
    finished = [t for t in trials if t.state.value != "running"]
    workers = {t.info["worker"] for t in finished}
    assert len(workers) == 3 and all("/abo-worker" in w for w in workers)  # threads apart
    with _dashboard(browser, f"{server.url}/?interval=300#{study_name}") as (page, errors):
        _wait(page, "document.querySelector('#timeline svg') !== null")
        svg = page.locator("#timeline svg")
        assert svg.get_attribute("data-lanes") == "3" and svg.get_attribute("data-running") == "1"
        assert svg.get_attribute("data-bars") == str(len(trials))
        bar = page.locator(f"#timeline rect[data-trial-id='{running.id}']")
        assert bar.get_attribute("data-state") == "running"
        for t in finished:
            drawn = page.locator(f"#timeline rect[data-trial-id='{t.id}']")
            assert drawn.get_attribute("data-state") == t.state.value
            assert drawn.get_attribute("data-worker") == t.info["worker"]
        assert {t.state.value for t in finished} == {"done", "failed"}
        if os.environ.get("ABO_SCREENSHOT"):  # keep a copy to look at
            page.screenshot(path=os.environ["ABO_SCREENSHOT"], full_page=True)
        assert not errors, errors


ANALYSIS_WAIT = 180.0  # three GP fits on a busy 2-core machine
PANELS = ("#importance", "#slices", "#contour", "#cv")


def _analysis_requests(page: Any) -> list[str]:
    """The analysis requests the page makes from now on."""
    seen: list[str] = []
    page.on("request", lambda req: seen.append(req.url) if "/analysis?" in req.url else None)
    return seen


@pytest.mark.slow
def test_the_analysis_panels_draw_the_study_and_refit_only_when_a_trial_is_done(
    browser: Any, server: Server, api: httpx.Client, study_name: str
) -> None:
    make_study(api, study_name)
    _tell(api, study_name, 8)
    with _dashboard(browser, f"{server.url}/?interval=300") as (page, errors):
        requests = _analysis_requests(page)  # before the study is opened: none is missed
        page.goto(f"{server.url}/?interval=300#{study_name}")
        _wait(page, "document.querySelector('#cv svg') !== null", ANALYSIS_WAIT)
        ranked = api.get(f"/studies/{study_name}/analysis", params={"kind": "importance"}).json()
        names = [r["name"] for r in ranked["importance"]]  # cached: what the page drew
        bars = page.locator("#importance svg rect.imp-total")
        assert [b.get_attribute("data-name") for b in bars.all()] == names
        assert page.locator("#importance svg").get_attribute("data-bars") == "4"
        assert page.locator("#importance svg rect.imp-sobol").count() == 4
        assert page.locator("#importance svg line.imp-eta2").count() == 4
        assert page.locator("#importance svg text.imp-ls").count() == 4
        top = ranked["importance"][0]
        assert float(bars.first.get_attribute("data-value")) == pytest.approx(top["total"])
        slices = page.locator("#slices svg")
        assert [s.get_attribute("data-name") for s in slices.all()] == ["x", "lr", "n", "opt"]
        assert all(s.get_attribute("data-points") == "8" for s in slices.all())
        assert page.locator("#slices svg circle.slice-obs").count() == 32
        numeric = [n for n in names if n != "opt"]
        contour = page.locator("#contour svg")
        assert (contour.get_attribute("data-x"), contour.get_attribute("data-y")) == tuple(
            numeric[:2]
        )  # the two most important numeric parameters
        assert contour.get_attribute("data-points") == "8"
        assert page.locator("#contour svg circle.contour-obs").count() == 8
        assert int(contour.get_attribute("data-cells")) == 40 * 40
        assert page.locator("#cv svg").get_attribute("data-points") == "8"
        assert page.locator("#cv svg circle.cv-point").count() == 8
        assert page.locator("#cv svg line.cv-bar").count() == 8
        assert page.locator("#cv svg line.diagonal").count() == 1
        assert "8 trials analysed" in page.locator("#analysis-status").inner_text()
        assert sorted(u.split("kind=")[1].split("&")[0] for u in requests) == sorted(
            ["importance", "slice", "contour", "cv"]
        )

        page.wait_for_timeout(2000)  # several polls, no new result: nothing fetched again
        assert len(requests) == 4, requests
        _tell(api, study_name, 1)
        _wait(page, "document.querySelector('#cv svg').dataset.points === '9'", ANALYSIS_WAIT)
        assert len(requests) == 8, requests
        assert page.locator("#slices svg circle.slice-obs").count() == 36

        # another pair from the selects: the contour alone is fetched and drawn again
        x, y = page.locator("#contour svg").get_attribute("data-x"), "lr"
        if x == "lr":
            x = "x"
            page.select_option("#contour-x", x)
            _wait(page, "document.querySelector('#contour svg').dataset.x === 'x'", ANALYSIS_WAIT)
        page.select_option("#contour-y", y)
        _wait(page, "document.querySelector('#contour svg').dataset.y === 'lr'", ANALYSIS_WAIT)
        assert page.locator("#contour svg").get_attribute("data-x") == x
        assert requests[-1].endswith(f"kind=contour&x={x}&y=lr")
        # the x select given the y parameter: the two swap
        page.select_option("#contour-x", "lr")
        _wait(page, "document.querySelector('#contour svg').dataset.x === 'lr'", ANALYSIS_WAIT)
        assert page.locator("#contour svg").get_attribute("data-y") == x
        assert page.locator("#contour-y").input_value() == x
        assert page.locator("#contour svg circle.contour-obs").count() == 9
        assert not errors, errors


@pytest.mark.slow
def test_the_analysis_panels_say_why_they_cannot_draw_and_follow_the_objective(
    browser: Any, server: Server, api: httpx.Client, study_name: str
) -> None:
    space = abo.Space({"x": abo.Float(-2.0, 2.0), "opt": abo.Categorical(["sgd", "adam"])})
    r = api.post("/studies", json={"name": study_name, "space": space.to_json(), "seed": 0})
    assert r.status_code == 201, r.text
    points = [(-1.0, "sgd"), (0.5, "adam"), (1.5, "adam")]
    for x, opt in points[:2]:
        api.post(f"/studies/{study_name}/add", json={"params": {"x": x, "opt": opt}, "value": x})
    with _dashboard(browser, f"{server.url}/?interval=300#{study_name}") as (page, errors):
        said = "(document.querySelector('#cv p.note') || {}).textContent || ''"
        _wait(page, f"({said}).includes('at least 3')", ANALYSIS_WAIT)  # the last one drawn
        for panel in ("#importance", "#slices", "#cv"):  # too few trials: a message, no plot
            assert "at least 3 needed" in page.locator(f"{panel} p.note").inner_text()
            assert page.locator(f"{panel} svg").count() == 0
        assert page.locator("#contour svg").count() == 0
        body = {"params": {"x": 1.5, "opt": "adam"}, "value": 1.5}
        api.post(f"/studies/{study_name}/add", json=body)
        _wait(page, "document.querySelector('#cv svg') !== null", ANALYSIS_WAIT)
        assert page.locator("#importance svg").get_attribute("data-bars") == "2"
        assert page.locator("#slices svg").count() == 2
        assert page.locator("#cv svg").get_attribute("data-points") == "3"
        # one numeric parameter: no contour, and no selects to pick one
        note = page.locator("#contour p.note").inner_text()
        assert "two numeric parameters" in note
        assert page.locator("#contour-x").is_hidden() and page.locator("#contour-y").is_hidden()
        assert page.locator("#analysis-objective-row").is_hidden()
        assert not errors, errors

        # two objectives: the analysed one is chosen, the first by default
        two = f"{study_name}-2"
        make_study(api, two, outcomes={"error": "minimize", "cost": "minimize"})
        for t in api.post(f"/studies/{two}/ask", json={"count": 5}).json()["trials"]:
            values = _trade_off(t["params"])
            api.post(f"/studies/{two}/trials/{t['id']}/tell", json={"value": values})
        requests = _analysis_requests(page)
        page.goto(f"{server.url}/?interval=300#{two}")  # the same page: only the hash changes
        _wait(
            page,
            "document.querySelector('#analysis-status').innerText.includes('error)')",
            ANALYSIS_WAIT,
        )
        assert page.locator("#analysis-objective-row").is_visible()
        assert page.locator("#cv svg").get_attribute("data-points") == "5"
        assert requests and all("objective=error" in u for u in requests)
        page.select_option("#analysis-objective", "cost")
        _wait(
            page,
            "document.querySelector('#analysis-status').innerText.includes('cost)')",
            ANALYSIS_WAIT,
        )
        assert any("objective=cost" in u for u in requests)
        assert page.locator("#cv svg").get_attribute("data-points") == "5"
        assert not errors, errors


def test_a_conditional_study_draws_inactive_parameters_below_their_axes(
    browser: Any, server: Server, api: httpx.Client, study_name: str
) -> None:
    space = {
        "opt": {"type": "categorical", "choices": ["sgd", "adam"]},
        "momentum": {"type": "float", "low": 0, "high": 1, "when": {"opt": "sgd"}},
        "beta2": {"type": "float", "low": 0.9, "high": 1, "when": {"opt": "adam"}},
    }
    r = api.post("/studies", json={"name": study_name, "space": space, "seed": 1,
                                   "strategy": "random"})  # fmt: skip
    assert r.status_code == 201, r.text
    trials = api.post(f"/studies/{study_name}/ask", json={"count": 8}).json()["trials"]
    for t in trials:
        p = t["params"]
        value = p["momentum"] if p["opt"] == "sgd" else 1 - p["beta2"]
        api.post(f"/studies/{study_name}/trials/{t['id']}/tell", json={"value": value})
    sgd = {t["id"] for t in trials if t["params"]["opt"] == "sgd"}
    assert 0 < len(sgd) < len(trials)  # the seed gives both branches
    with _dashboard(browser, f"{server.url}/?interval=300#{study_name}") as (page, errors):
        _wait(page, "document.querySelectorAll('#parallel svg polyline.pc').length === 8")
        # the beta2 axis (third) is crossed below its bottom by the sgd trials' lines
        lines = page.locator("#parallel svg polyline.pc").all()
        below = set()
        for line in lines:
            (_, y_low) = map(float, line.get_attribute("points").split()[2].split(","))
            bottom = float(page.locator("#parallel svg line.axis").nth(2).get_attribute("y1"))
            if y_low > bottom:
                below.add(int(line.get_attribute("data-trial-id")))
        assert below == sgd
        texts = page.evaluate(
            "Array.from(document.querySelectorAll('#parallel svg text'), t => t.textContent)"
        )
        assert texts.count("inactive") == 2  # momentum's and beta2's slots
        _wait(page, "document.querySelectorAll('#analysis svg[data-name=momentum]').length === 1")
        assert page.locator("#analysis svg[data-name=momentum]").get_attribute(
            "data-points"
        ) == str(len(sgd))
        assert errors == []


MARKUP = '<img src=x onerror="window.__xss=1">'


@pytest.mark.slow
def test_parameter_names_and_values_with_markup_are_shown_as_text(
    browser: Any, server: Server, api: httpx.Client, study_name: str
) -> None:
    """Names and choices are the user's text: the page shows them, never runs or renders them
    as HTML (a name holding an ``<img onerror>`` would run script in an operator's browser)."""
    space = abo.Space(
        {MARKUP: abo.Float(0.0, 1.0), "<b>kind</b>": abo.Categorical(["<i>a</i>", "b"])}
    )
    body = {"name": study_name, "space": space.to_json(), "strategy": "random", "seed": 0}
    assert api.post("/studies", json=body).status_code == 201
    for t in api.post(f"/studies/{study_name}/ask", json={"count": 4}).json()["trials"]:
        value = t["params"][MARKUP]
        told = api.post(f"/studies/{study_name}/trials/{t['id']}/tell", json={"value": value})
        assert told.status_code == 200
    with _dashboard(browser, f"{server.url}/?interval=300#{study_name}") as (page, errors):
        _wait(page, "document.querySelectorAll('#trials-table tbody tr').length === 4")
        _wait(page, "document.querySelectorAll('#parallel svg polyline.pc').length === 4")
        assert page.evaluate("window.__xss") is None  # the onerror never ran
        assert page.locator("img").count() == 0
        assert page.locator("b, i").count() == page.locator("main b, main i").count() == 0
        text = page.locator("body").inner_text()
        assert MARKUP in text and "<b>kind</b>" in text
        header = page.locator("#trials-table thead").inner_text()
        assert MARKUP in header and "<b>kind</b>" in header
        assert not errors, errors
