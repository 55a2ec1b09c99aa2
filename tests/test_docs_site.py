"""The documentation site builds as CI would publish it: ``mkdocs build --strict`` (mkdocs.yml)
passes, with no broken link or anchor and no page left out of the navigation, every page of the
navigation is built, and the API reference, generated from the docstrings by mkdocstrings,
shows the methods ``Study`` inherits from ``StudyAPI``. The ``docs`` extra (in ``dev``)
installs MkDocs, so this test never skips."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
API_PAGE = "reference/api/abo.md"
# what abo.Study's section must hold: its own members and those inherited from StudyAPI
STUDY_MEMBERS = ("ask", "ask_batch", "tell", "optimize", "report", "best", "n_initial")


def _nav_pages(node: object) -> Iterator[str]:
    """The Markdown paths of mkdocs.yml's ``nav``, at any depth."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, list):
        for item in node:
            yield from _nav_pages(item)
    elif isinstance(node, dict):
        for value in node.values():
            yield from _nav_pages(value)


def _built(site: Path, page: str) -> Path:
    """Where MkDocs writes a page (directory URLs: ``a/b.md`` -> ``a/b/index.html``)."""
    path = Path(page)
    if path.stem == "index":
        return site / path.parent / "index.html"
    return site / path.with_suffix("") / "index.html"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("docs") / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # a banner about MkDocs 2, not our pages
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    return out


NAV = list(_nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]))


def test_every_page_of_docs_is_in_the_nav_once() -> None:
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert len(NAV) == len(set(NAV)), sorted(p for p in NAV if NAV.count(p) > 1)
    assert set(NAV) == pages, {"not in the nav": pages - set(NAV), "missing": set(NAV) - pages}


@pytest.mark.slow
def test_the_site_builds_strictly_with_every_page_of_the_nav(site: Path) -> None:
    missing = [page for page in NAV if not _built(site, page).is_file()]
    assert not missing, missing
    assert API_PAGE in NAV


def _anchor(obj: Any) -> str:
    """The anchor mkdocstrings gives an object documented where it is defined."""
    return f"{obj.__module__}.{obj.__qualname__}"


@pytest.mark.slow
def test_the_api_page_shows_what_study_inherits(site: Path) -> None:
    html = _built(site, API_PAGE).read_text(encoding="utf-8")
    absent = [m for m in STUDY_MEMBERS if f'id="abo.study.study.Study.{m}"' not in html]
    assert not absent, f"Study's section lacks {absent}: is inherited_members still set?"
    html = _built(site, "reference/api/service.md").read_text(encoding="utf-8")
    assert 'id="abo.service.client.RemoteStudy.ask"' in html  # the same, from StudyAPI


@pytest.mark.slow
def test_the_api_reference_documents_every_public_name(site: Path) -> None:
    import abo
    import abo.interop
    from abo.executors import DaskExecutor, JobQueueExecutor, ThreadExecutor
    from abo.service import Client, RemoteStudy

    pages = {  # the anchors each page must have
        "reference/api/abo.md": [_anchor(getattr(abo, n)) for n in abo.__all__ if n[0] != "_"],
        "reference/api/executors.md": [
            _anchor(e) for e in (DaskExecutor, JobQueueExecutor, ThreadExecutor)
        ],
        "reference/api/service.md": [_anchor(Client), _anchor(RemoteStudy)],
        # the module's page, with its docstring: its names where it exports them
        "reference/api/interop.md": [f"abo.interop.{n}" for n in abo.interop.__all__],
    }
    for page, anchors in pages.items():
        html = _built(site, page).read_text(encoding="utf-8")
        absent = [a for a in anchors if f'id="{a}"' not in html]
        assert not absent, f"{page} lacks {absent}"
