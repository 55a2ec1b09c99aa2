"""``abo studies / trials / best / plot`` against a storage and against a running service."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import abo
from abo.cli import app

from .conftest import SPACE, Server, objective

runner = CliRunner()


def _fill(study, n: int = 6) -> list[abo.Trial]:
    out = []
    for t in study.ask_batch(n):
        out.append(study.tell(t.id, objective(t.params), info={"worker": f"w{t.id % 2}"}))
    study.fail(study.ask().id, "diverged")
    study.ask()  # one left running
    return out


@pytest.fixture(params=["storage", "service"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[list[str], list[abo.Trial]]:
    """CLI options naming a study ``cli`` with 6 done, 1 failed and 1 running trials."""
    if request.param == "storage":
        url = f"sqlite:///{tmp_path / 'cli.db'}"
        study = abo.create_study(SPACE, name="cli", storage=url, strategy="random", seed=0)
        return ["--storage", url], _fill(study)
    server: Server = request.getfixturevalue("server")
    from abo.service import Client

    with Client(server.url) as client:
        study = client.create_study(SPACE, "cli", strategy="random", seed=0, load_if_exists=True)
        if len(study):  # the session's server already has it (the other parametrisation)
            done = [t for t in study.trials if t.state is abo.TrialState.DONE]
            return ["--url", server.url], done
        return ["--url", server.url], _fill(study)


def _ok(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_studies(where) -> None:
    opts, done = where
    rows = json.loads(_ok(["studies", *opts, "--format", "json"]))
    mine = next(s for s in rows if s["name"] == "cli")
    assert mine["states"] == {"running": 1, "done": 6, "failed": 1, "lost": 0}
    assert mine["best"]["value"] == min(t.value for t in done)
    table = _ok(["studies", *opts])
    assert "cli" in table and "random" in table


def test_trials_in_every_format(where) -> None:
    opts, done = where
    data = json.loads(_ok(["trials", "cli", *opts, "--format", "json"]))
    assert [t["state"] for t in data].count("done") == 6 and len(data) == 8
    assert {t["id"]: t["value"] for t in data if t["state"] == "done"} == {
        t.id: t.value for t in done
    }
    rows = list(csv.DictReader(io.StringIO(_ok(["trials", "cli", *opts, "--format", "csv"]))))
    assert len(rows) == 8 and set(SPACE) <= {k.split(".", 1)[-1] for k in rows[0]}
    assert rows[0]["strategy"] == "sobol"
    only = json.loads(_ok(["trials", "cli", *opts, "--state", "failed", "--format", "json"]))
    assert [t["reason"] for t in only] == ["diverged"]
    assert "diverged" not in _ok(["trials", "cli", *opts])  # the table has no reason column
    bad = runner.invoke(app, ["trials", "cli", *opts, "--state", "finished"])
    assert bad.exit_code == 2


def test_best_and_missing_study(where) -> None:
    opts, done = where
    best = json.loads(_ok(["best", "cli", *opts, "--format", "json"]))
    assert best["value"] == min(t.value for t in done)
    missing = runner.invoke(app, ["best", "nope", *opts])
    assert missing.exit_code == 1 and "nope" in missing.output


@pytest.mark.parametrize("kind", ["convergence", "timeline", "parallel"])
def test_plot_writes_a_png(where, kind: str, tmp_path: Path) -> None:
    opts, _ = where
    out = tmp_path / f"{kind}.png"
    assert _ok(["plot", "cli", *opts, "--kind", kind, "--out", str(out)]).strip() == str(out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5000


def test_storage_and_url_together_is_a_usage_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["studies", "--storage", "sqlite://", "--url", "http://x"])
    assert result.exit_code == 2
