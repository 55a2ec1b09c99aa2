"""The dashboard in a real headless Chromium: plots and table show the trials, and update live."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import httpx
import pytest

from .conftest import Server, make_study, objective

CHROMIUM = "/usr/bin/chromium"
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


def _wait(page, expression: str, timeout: float = 20.0) -> None:
    page.wait_for_function(expression, timeout=timeout * 1000)


@pytest.mark.slow
def test_dashboard_shows_and_follows_a_running_study(
    server: Server, api: httpx.Client, study_name: str, tmp_path: Path
) -> None:
    if not shutil.which(CHROMIUM):
        why = f"{CHROMIUM} is not installed (apt-get install chromium)"
        if os.environ.get("ABO_REQUIRE_BROWSER"):
            pytest.fail(f"{why}; ABO_REQUIRE_BROWSER is set: this test must run")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    make_study(api, study_name)
    first = _tell(api, study_name, 5)
    running = api.post(f"/studies/{study_name}/ask", json={"count": 1}).json()["trials"][0]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{server.url}/?interval=300#{study_name}")
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
        finally:
            browser.close()
    assert (tmp_path / "dashboard.png").stat().st_size > 10_000


def _chromium() -> None:
    if not shutil.which(CHROMIUM):
        why = f"{CHROMIUM} is not installed (apt-get install chromium)"
        if os.environ.get("ABO_REQUIRE_BROWSER"):
            pytest.fail(f"{why}; ABO_REQUIRE_BROWSER is set: this test must run")
        pytest.skip(why)


@pytest.mark.slow
def test_api_docs_render_offline_from_the_package(server: Server, tmp_path: Path) -> None:
    """``/docs`` shows the operations, and the page asks no host but the server for anything
    (it used to load Swagger UI from a public CDN: blank on an offline cluster)."""
    _chromium()
    from playwright.sync_api import sync_playwright

    origin = server.url
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
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
        finally:
            browser.close()
    outside = [u for u in requests if not u.startswith(origin + "/") and not u.startswith("data:")]
    assert not outside, outside
    assert f"{origin}/static/swagger/swagger-ui-bundle.js" in requests
    assert f"{origin}/openapi.json" in requests
    assert not failed, failed
    assert httpx.get(f"{origin}/redoc").status_code == 404  # not vendored: dropped
