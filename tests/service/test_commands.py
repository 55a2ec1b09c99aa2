"""``abo studies / trials / best / plot`` against a storage and against a running service."""

from __future__ import annotations

import csv
import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import abo
from abo.cli.main import app

from .conftest import SPACE, Server, free_port, objective

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
    assert mine["states"] == {"running": 1, "done": 6, "failed": 1, "lost": 0, "stopped": 0}
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
    assert "diverged" in _ok(["trials", "cli", *opts])  # the table's reason column
    bad = runner.invoke(app, ["trials", "cli", *opts, "--state", "finished"])
    assert bad.exit_code == 2


def test_best_and_missing_study(where) -> None:
    opts, done = where
    best = json.loads(_ok(["best", "cli", *opts, "--format", "json"]))
    assert best["value"] == min(t.value for t in done)
    missing = runner.invoke(app, ["best", "nope", *opts])
    assert missing.exit_code == 1 and "nope" in missing.output


def test_names_and_reasons_that_look_like_markup_are_printed_as_written(tmp_path: Path) -> None:
    """A parameter named ``[/x]`` or a failure reason ``[/oops] broke`` was read as rich
    markup: ``abo trials`` and ``abo best`` ended in a MarkupError traceback."""
    url = f"sqlite:///{tmp_path / 'markup.db'}"
    space = abo.Space({"[/x]": abo.Float(0, 1), "[red]y": abo.Categorical(["[/b]", "[bold]b"])})
    study = abo.create_study(space, name="markup", storage=url, strategy="random", seed=0)
    for _ in range(3):
        t = study.ask()
        study.tell(t.id, t.params["[/x]"])
    study.fail(study.ask().id, "[/oops] broke")
    opts = ["--storage", url]
    trials = _ok(["trials", "markup", *opts])
    assert "[/x]" in trials and "[red]y" in trials and "[/oops] broke" in trials
    best = _ok(["best", "markup", *opts])
    assert "[/x]" in best and str(study.best.params["[red]y"]) in best
    assert "markup" in _ok(["studies", *opts])


@pytest.mark.parametrize("source", ["storage", "service"])
def test_best_of_two_objectives_is_the_pareto_front(
    source: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    outcomes = {"loss": "minimize", "cost": "maximize"}
    name = f"front-{source}"
    if source == "storage":
        url = f"sqlite:///{tmp_path / 'front.db'}"
        opts = ["--storage", url]
        study = abo.create_study(SPACE, name=name, storage=url, outcomes=outcomes, seed=0)
    else:
        server: Server = request.getfixturevalue("server")
        from abo.service import Client

        opts = ["--url", server.url]
        study = Client(server.url).create_study(SPACE, name, outcomes=outcomes, seed=0)
    empty = runner.invoke(app, ["best", name, *opts])
    assert empty.exit_code == 1 and "no done trial" in empty.output
    # loss grows with x and cost with x too: a trade-off, except for the dominated (x, x + 1)
    told = {}
    for t in study.ask_batch(6, n_workers=6):
        x = t.params["x"]
        told[t.id] = {"loss": x, "cost": x} if t.id != 6 else {"loss": x + 1, "cost": x}
        study.tell(t.id, told[t.id])
    shown = json.loads(_ok(["best", name, *opts, "--format", "json"]))
    front = shown["front"]
    assert sorted(t["id"] for t in front) == [1, 2, 3, 4, 5]  # the sixth is dominated
    assert all(t["values"] == told[t["id"]] for t in front)
    # the front's hypervolume and the reference point it is measured from, as the API's
    ref = study.reference_point()
    assert shown["reference_point"] == pytest.approx(ref) and not shown["reference_point_given"]
    assert shown["hypervolume"] == pytest.approx(study.hypervolume()) and shown["hypervolume"] > 0
    rows = list(csv.DictReader(io.StringIO(_ok(["best", name, *opts, "--format", "csv"]))))
    assert [int(r["id"]) for r in rows] == [1, 2, 3, 4, 5]
    assert {"values.loss", "values.cost"} <= set(rows[0])
    assert "value" not in rows[0]  # no single value: no column that is always empty
    assert [float(r["hypervolume"]) for r in rows] == pytest.approx([shown["hypervolume"]] * 5)
    assert float(rows[0]["reference_point.cost"]) == pytest.approx(ref["cost"])
    table = _ok(["best", name, *opts])
    assert f"hypervolume {shown['hypervolume']:.6g}" in " ".join(table.split())
    assert f"loss={ref['loss']:.6g}" in table and "(the default)" in table
    listed = list(csv.DictReader(io.StringIO(_ok(["trials", name, *opts, "--format", "csv"]))))
    assert len(listed) == 6 and "value" not in listed[0] and listed[5]["values.loss"] != ""
    studies = list(csv.DictReader(io.StringIO(_ok(["studies", *opts, "--format", "csv"]))))
    assert {r["name"]: r["best"] for r in studies}[name] == "front of 5"
    assert "Pareto front" in _ok(["best", name, *opts])
    png = tmp_path / "front.png"
    assert _ok(["plot", name, *opts, "--kind", "pareto", "--out", str(png)]).strip() == str(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    wrong = runner.invoke(app, ["plot", name, *opts, "--kind", "convergence"])
    assert wrong.exit_code == 1 and "pareto" in wrong.output


@pytest.mark.parametrize("source", ["storage", "service"])
def test_trials_and_best_of_a_constrained_study_show_feasibility(
    source: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    outcomes = {"loss": "minimize", "memory_gb": "<= 40"}
    name = f"constrained-{source}"
    if source == "storage":
        url = f"sqlite:///{tmp_path / 'constrained.db'}"
        opts = ["--storage", url]
        study = abo.create_study(
            SPACE, name=name, storage=url, outcomes=outcomes, strategy="random", seed=0
        )
    else:
        server: Server = request.getfixturevalue("server")
        from abo.service import Client

        opts = ["--url", server.url]
        study = Client(server.url).create_study(
            SPACE, name, outcomes=outcomes, strategy="random", seed=0
        )
    assert [c.name for c in study.spec.constraints] == ["memory_gb"]  # kept over HTTP too
    first, second, third = study.ask_batch(3)
    study.tell(first.id, {"loss": 0.1, "memory_gb": 64.0})  # the lowest loss, but too big
    none = runner.invoke(app, ["best", name, *opts])
    assert none.exit_code == 1 and "none of the 1 done trials" in none.output
    assert "memory_gb <= 40.0" in none.output
    study.tell(second.id, {"loss": 0.5, "memory_gb": 12.0})
    study.tell(third.id, {"loss": 0.3, "memory_gb": 40.0})  # on the bound: it holds
    best = json.loads(_ok(["best", name, *opts, "--format", "json"]))
    assert best["id"] == third.id
    rows = list(csv.DictReader(io.StringIO(_ok(["trials", name, *opts, "--format", "csv"]))))
    assert [r["feasible"] for r in rows] == ["no", "yes", "yes"]
    assert rows[0]["values.memory_gb"] == "64.0" and rows[0]["value"] == "0.1"
    studies = {r["name"]: r for r in json.loads(_ok(["studies", *opts, "--format", "json"]))}
    assert studies[name]["best"]["id"] == third.id and studies[name]["n_feasible"] == 2


@pytest.mark.parametrize("kind", ["convergence", "timeline", "parallel"])
def test_plot_writes_a_png(where, kind: str, tmp_path: Path) -> None:
    opts, _ = where
    if kind == "convergence":  # one objective: no front to plot
        single = runner.invoke(app, ["plot", "cli", *opts, "--kind", "pareto"])
        assert single.exit_code == 1 and "several objectives" in single.output
    out = tmp_path / f"{kind}.png"
    assert _ok(["plot", "cli", *opts, "--kind", kind, "--out", str(out)]).strip() == str(out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5000


def test_a_plot_that_does_not_apply_is_refused_with_exit_1_and_no_file(tmp_path: Path) -> None:
    """Before, some kinds wrote an empty PNG and exited 0, others exited 2, others 1."""
    url = f"sqlite:///{tmp_path / 'p.db'}"
    abo.create_study(SPACE, name="none", storage=url, seed=0).ask()  # running, none finished
    _study(url, "two", n=2)  # done trials, but no reports and one objective
    cases = [
        ("none", "convergence", "has none yet"),
        ("none", "timeline", "finished trials"),
        ("none", "parallel", "has none yet"),
        ("none", "cost", "evaluation time"),
        ("two", "curves", "has reported"),
        ("two", "pareto", "several objectives"),
        ("two", "importance", "at least 3 needed"),
        ("two", "contour", "--params X,Y"),
    ]
    for name, kind, why in cases:
        out = tmp_path / f"{name}-{kind}.png"
        result = runner.invoke(app, ["plot", name, "--storage", url, "--kind", kind,
                                     "--out", str(out)])  # fmt: skip
        assert result.exit_code == 1, (kind, result.output)
        assert why in result.stderr and result.stderr.startswith("error: "), (kind, result.stderr)
        assert not out.exists(), kind


def test_storage_and_url_together_is_a_usage_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["studies", "--storage", "sqlite://", "--url", "http://x"])
    assert result.exit_code == 2


def _study(url: str, name: str, n: int = 2) -> abo.Study:
    study = abo.create_study(SPACE, name=name, storage=url, strategy="random", seed=0)
    for t in study.ask_batch(n):
        study.tell(t.id, objective(t.params))
    return study


def _names(url: str) -> list[str]:
    return [r.name for r in abo.storage.open_storage(url).list_studies()]


def test_a_study_file_names_the_study_and_its_storage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`abo trials FILE` reads [study] name and storage (relative to the file) from it."""
    folder = tmp_path / "project"
    folder.mkdir()
    url = f"sqlite:///{folder / 'results.db'}"
    done = [t for t in _study(url, "filed", n=3).trials if t.state is abo.TrialState.DONE]
    (folder / "study.toml").write_text(
        '[study]\nname = "filed"\nstorage = "sqlite:///results.db"\nn_trials = 3\n'
        '[space]\nx = {type = "float", low = -2, high = 2}\n[objective]\ncommand = "true"\n'
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # not where the file or the database is
    toml = str(Path("..") / "project" / "study.toml")
    data = json.loads(_ok(["trials", toml, "--format", "json"]))
    assert {t["id"]: t["value"] for t in data} == {t.id: t.value for t in done}
    best = json.loads(_ok(["best", toml, "--format", "json"]))
    assert best["value"] == min(t.value for t in done)
    listed = json.loads(_ok(["studies", toml, "--format", "json"]))
    assert [s["name"] for s in listed] == ["filed"]
    assert _ok(["plot", toml, "--out", "c.png"]).strip() == "c.png"
    assert (elsewhere / "c.png").read_bytes()[:4] == b"\x89PNG"
    # a file and a storage together is a usage error; a file's own problems name the field
    both = runner.invoke(app, ["trials", toml, "--storage", url])
    assert both.exit_code == 2 and "storage" in both.output
    assert runner.invoke(app, ["studies", "filed"]).exit_code == 2  # studies takes a .toml
    (folder / "anon.toml").write_text('[study]\nn_trials = 3\nstorage = "sqlite:///r.db"\n')
    anon = runner.invoke(app, ["trials", str(folder / "anon.toml")])
    assert anon.exit_code == 1 and "study.name: missing" in anon.output
    gone = runner.invoke(app, ["best", str(folder / "nope.toml")])
    assert gone.exit_code == 1 and "study file:" in gone.output and "does not exist" in gone.output
    assert sorted(p.name for p in elsewhere.iterdir()) == ["c.png"]  # no abo.db was created


def test_a_missing_study_says_where_abo_looked_and_what_to_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    nothing = runner.invoke(app, ["trials", "quadratic"])  # no ./abo.db at all
    assert nothing.exit_code == 1
    assert "no abo.db" in nothing.output and "--storage" in nothing.output
    assert "TOML file" in nothing.output
    assert not (tmp_path / "abo.db").exists()  # reading never creates the default database
    _study(f"sqlite:///{tmp_path / 'abo.db'}", "other")
    missing = runner.invoke(app, ["best", "quadratic"])
    assert missing.exit_code == 1
    line = next(ln for ln in missing.stderr.splitlines() if ln.startswith("error:"))
    assert "'quadratic'" in line and "studies here: other" in line
    assert f"sqlite:///{tmp_path / 'abo.db'}" in line  # whole: no wrapping outside a terminal
    assert "--storage URL" in line and "TOML file" in line


def test_error_messages_are_text_not_rich_markup(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    _study(url, "m")
    result = runner.invoke(app, ["trials", "x[/y] [bold]", "--storage", url])
    assert result.exit_code == 1 and "'x[/y] [bold]'" in result.stderr


@pytest.fixture(params=["storage", "service"])
def doomed(request: pytest.FixtureRequest, tmp_path: Path, study_name: str) -> list[str]:
    """Options naming a study (``study_name``, 2 done trials) to delete."""
    if request.param == "storage":
        url = f"sqlite:///{tmp_path / 'd.db'}"
        _study(url, study_name)
        _study(url, "keep")
        return ["--storage", url]
    server: Server = request.getfixturevalue("server")
    from abo.service import Client

    with Client(server.url) as client:
        study = client.create_study(SPACE, study_name, strategy="random", seed=0)
        for t in study.ask_batch(2):
            study.tell(t.id, objective(t.params))
    return ["--url", server.url]


def _exists(opts: list[str], name: str) -> bool:
    data = json.loads(_ok(["studies", *opts, "--format", "json"]))
    return name in [s["name"] for s in data]


def test_delete_refuses_without_a_terminal_and_deletes_with_yes(
    doomed: list[str], study_name: str
) -> None:
    refused = runner.invoke(app, ["delete", study_name, *doomed])  # stdin is not a terminal
    assert refused.exit_code == 1 and "--yes" in refused.stderr
    assert f"'{study_name}' with its 2 trials was not deleted" in refused.stderr
    assert _exists(doomed, study_name)
    done = runner.invoke(app, ["delete", study_name, *doomed, "--yes"])
    assert done.exit_code == 0, done.output
    assert f"deleted study '{study_name}' with its 2 trials" in done.stdout
    assert not _exists(doomed, study_name)
    again = runner.invoke(app, ["delete", study_name, *doomed, "--yes"])
    assert again.exit_code == 1 and study_name in again.stderr


def _delete_at_a_terminal(answer: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``abo delete ARGS`` with a real terminal (a pty) on stdin, answering ``answer``."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "abo.cli.main", "delete", *args],
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.write(master, answer.encode() + b"\n")
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        os.close(master)
        os.close(slave)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def test_delete_asks_at_a_terminal(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ask.db'}"
    _study(url, "a", n=3)
    toml = tmp_path / "study.toml"
    toml.write_text('[study]\nname = "a"\nstorage = "sqlite:///ask.db"\nn_trials = 3\n')
    kept = _delete_at_a_terminal("n", "a", "--storage", url)
    assert kept.returncode == 1 and "Delete study 'a' with its 3 trials? [y/N]" in kept.stdout
    assert "nothing deleted" in kept.stderr and _names(url) == ["a"]
    gone = _delete_at_a_terminal("y", str(toml))  # by its study file
    assert gone.returncode == 0, gone.stderr
    assert "Delete study 'a' with its 3 trials? [y/N]" in gone.stdout
    assert _names(url) == []


def test_delete_removes_the_folders_its_command_trials_ran_in(tmp_path: Path) -> None:
    """Before, ``runs/<study>/`` stayed, and a new study of the same name mixed its trial
    folders with the old one's."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    runs = tmp_path / "runs"
    command = abo.Command(f"{sys.executable} -c 'print({{x}})'", workdir=runs)
    for name in ("cmd", "other"):
        study = abo.create_study(SPACE, name=name, storage=url, strategy="random", seed=0)
        study.optimize(command, n_trials=2, n_workers=1, verbosity=0)
    assert sorted(p.name for p in (runs / "cmd").iterdir()) == ["trial-1-0", "trial-2-0"]
    (runs / "cmd" / "trial-3-0").mkdir()  # a trial still running: no path recorded yet
    toml = tmp_path / "study.toml"
    toml.write_text(
        '[study]\nname = "cmd"\nstorage = "sqlite:///c.db"\nn_trials = 2\n'
        '[space]\nx = { type = "float", low = 0.0, high = 1.0 }\n'
        '[objective]\ncommand = "{python} -c \'print({x})\'"\nworkdir = "runs"\n'
    )
    done = runner.invoke(app, ["delete", str(toml), "--yes"])
    assert done.exit_code == 0, done.output
    assert f"and its run folder {runs / 'cmd'}" in done.stdout
    assert not (runs / "cmd").exists() and (runs / "other" / "trial-1-0").is_dir()
    # by name: the folders its trials recorded; a file of the user's in it is kept, and said
    (runs / "other" / "notes.txt").write_text("mine")
    gone = runner.invoke(app, ["delete", "other", "--storage", url, "--yes"])
    assert gone.exit_code == 0, gone.output
    assert sorted(p.name for p in (runs / "other").iterdir()) == ["notes.txt"]
    assert "warning:" in gone.stderr and "notes.txt" in gone.stderr
    assert _names(url) == []


def test_serve_on_storage_it_cannot_open_says_why_and_exits(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'missing' / 'abo.db'}"
    cmd = [
        sys.executable,
        "-m",
        "abo.cli.main",
        "serve",
        "--storage",
        url,
        "--port",
        str(free_port()),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert "error: storage:" in out.stderr and "does not exist" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "missing").exists()


def test_serve_binds_a_bracketed_ipv6_loopback(tmp_path: Path) -> None:
    """``--host [::1]`` (the form a URL has) binds ``::1`` and counts as loopback."""
    server = Server(
        f"sqlite:///{tmp_path / 'v6.db'}", tmp_path / "v6.log", args=("--host", "[::1]")
    )
    server.url = f"http://[::1]:{server.port}"
    try:
        server.start(timeout=60)
        data = json.loads(_ok(["studies", "--url", server.url, "--format", "json"]))
        assert data == []
    finally:
        server.stop()
    assert f"http://[::1]:{server.port}" in server.log.read_text()
