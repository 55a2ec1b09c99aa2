"""The commands that do not model start without torch, BoTorch, Dask, FastAPI or matplotlib.

Structural, not timed: each command runs in a fresh interpreter through ``abo.cli.main.main``, and
the modules it loaded are read back from ``sys.modules`` when it exits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import abo

HEAVY = ("torch", "botorch", "gpytorch", "distributed", "fastapi", "matplotlib")
WRAPPER = """
import atexit, json, sys
heavy = {heavy!r}
atexit.register(lambda: print("LOADED " + json.dumps(sorted(m for m in heavy if m in sys.modules)),
                              file=sys.stderr))
sys.argv = ["abo", *{args!r}]
from abo.cli.main import main
main()
"""


def _abo(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run ``abo ARGS`` in a fresh interpreter; the heavy modules it imported."""
    code = WRAPPER.format(heavy=HEAVY, args=list(args))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "ABO_TOKEN")}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, env=env, timeout=120
    )
    marker = [line for line in out.stderr.splitlines() if line.startswith("LOADED ")]
    assert marker, out.stderr
    return out, json.loads(marker[-1][len("LOADED ") :])


@pytest.fixture(scope="module")
def space_loads_torch() -> bool:
    """Whether ``abo.core.space`` itself still imports torch (it is being made lazy)."""
    code = "import sys, abo.core.space; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip() == "True"


def _assert_loaded(loaded: list[str], expected: list[str], space_loads_torch: bool) -> None:
    """``loaded == expected``; torch alone is tolerated (as an xfail) while ``abo.core.space``
    imports it, so this test tightens by itself when that lands."""
    if space_loads_torch and "torch" in loaded:
        assert [m for m in loaded if m != "torch"] == expected
        pytest.xfail("abo.core.space imports torch at module level; nothing else heavy was loaded")
    assert loaded == expected


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with ``q.db`` (study ``q``: 4 done trials, one running) and ``study.toml``."""
    folder = tmp_path_factory.mktemp("startup")
    space = abo.Space({"x": abo.Float(0.0, 1.0), "kind": abo.Categorical(["a", "b"])})
    study = abo.create_study(
        space, name="q", storage=f"sqlite:///{folder / 'q.db'}", strategy="random", seed=0
    )
    for trial in study.ask_batch(4):
        study.tell(trial.id, trial.params["x"])
    study.ask()
    study.storage.dispose()
    (folder / "study.toml").write_text(
        '[study]\nname = "q"\nstorage = "sqlite:///q.db"\nn_trials = 4\n'
        '[space]\nx = {type = "float", low = 0, high = 1}\nkind = {type = "categorical", '
        'choices = ["a", "b"]}\n[objective]\ncommand = "true"\n'
    )
    return folder


def test_help_and_version_load_nothing_heavy(tmp_path: Path, space_loads_torch: bool) -> None:
    out, loaded_help = _abo("--help", cwd=tmp_path)
    assert out.returncode == 0 and "trials" in out.stdout and "delete" in out.stdout
    out, loaded_version = _abo("--version", cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == f"abo {abo.__version__}"
    assert loaded_help == loaded_version
    _assert_loaded(loaded_help, [], space_loads_torch)


@pytest.mark.parametrize(
    "args",
    [
        ["studies", "--storage", "sqlite:///q.db", "--format", "json"],
        ["studies", "study.toml", "--format", "json"],
        ["trials", "study.toml", "--format", "json"],
        ["best", "q", "--storage", "sqlite:///q.db", "--format", "json"],
    ],
    ids=["studies", "studies-file", "trials-file", "best"],
)
def test_read_commands_load_nothing_heavy(
    stored: Path, args: list[str], space_loads_torch: bool
) -> None:
    out, loaded = _abo(*args, cwd=stored)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    if args[0] == "studies":
        assert [s["name"] for s in data] == ["q"] and data[0]["states"]["done"] == 4
    elif args[0] == "trials":
        assert [t["state"] for t in data] == ["done"] * 4 + ["running"]
    else:
        study = abo.load_study("q", storage=f"sqlite:///{stored / 'q.db'}")
        assert study.best is not None and data["id"] == study.best.id
    _assert_loaded(loaded, [], space_loads_torch)


def test_plot_loads_matplotlib_but_no_model(
    stored: Path, tmp_path: Path, space_loads_torch: bool
) -> None:
    png = tmp_path / "c.png"
    out, loaded = _abo("plot", "study.toml", "--out", str(png), cwd=stored)
    assert out.returncode == 0, out.stderr
    assert png.read_bytes()[:4] == b"\x89PNG"
    _assert_loaded(loaded, ["matplotlib"], space_loads_torch)
