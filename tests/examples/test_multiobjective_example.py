"""The two-objective example: ``abo run examples/multiobjective/study.toml`` trains the
asynchronous SGD trainer on a real Dask cluster and returns the loss-time Pareto front."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import abo_here

import abo
from abo.core.trial import TrialState

ROOT = Path(__file__).resolve().parents[2]


def _abo(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "abo.cli.main", *args], cwd=cwd, capture_output=True, text=True,
        timeout=400,
    )  # fmt: skip


@pytest.mark.slow
def test_the_study_file_finds_a_front_of_loss_against_time(tmp_path: Path) -> None:
    for folder in ("multiobjective", "async_sgd"):  # the objective imports the trainer beside
        shutil.copytree(ROOT / "examples" / folder, tmp_path / folder)
    toml = tmp_path / "multiobjective" / "study.toml"
    text = toml.read_text()
    assert "max_trials = 24" in text
    epochs = 'epochs = { type = "int", low = 4, high = 40 }'
    assert epochs in text
    text = text.replace("max_trials = 24", "max_trials = 13")  # the design, then 3 more
    toml.write_text(text.replace(epochs, epochs.replace("40", "10")))  # shorter training runs
    out = _abo("run", str(toml), "--quiet", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Pareto front of" in out.stdout and f"abo best {toml}" in out.stdout
    db = f"sqlite:///{toml.parent / 'multiobjective.db'}"
    study = abo.load_study("loss-vs-time", storage=db)
    finished = [t for t in study.trials if t.state in (TrialState.DONE, TrialState.FAILED)]
    assert len(finished) == 13
    done = [t for t in finished if t.state is TrialState.DONE]
    assert all(set(t.values) == {"val_loss", "seconds"} for t in done)
    assert all(0 < t.values["seconds"] < 300 and 0 <= t.user["accuracy"] <= 1 for t in done)
    # which trials are model proposals depends on how long the background first fits take
    # (the design continues meanwhile): tests/model/test_refit.py holds the fits to test that path
    assert {t.proposal.strategy for t in study.trials} <= {"sobol", "auto"}
    front = study.best_trials
    assert front and all(
        not any(
            o.values["val_loss"] <= t.values["val_loss"]
            and o.values["seconds"] <= t.values["seconds"]
            and o.values != t.values
            for o in done
        )
        for t in front
    )
    # the commands after the run in this process (abo_here); the run went through the entry point
    listed = abo_here("best", str(toml), "--format", "json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert [t["id"] for t in json.loads(listed.stdout)["front"]] == [t.id for t in front]
    png = tmp_path / "front.png"
    plotted = abo_here("plot", str(toml), "--kind", "pareto", "--out", str(png), cwd=tmp_path)
    assert plotted.returncode == 0 and png.read_bytes()[:4] == b"\x89PNG"
    # run again: refused with how to continue, nothing added
    twice = abo_here("run", str(toml), "--quiet", cwd=tmp_path)
    assert twice.returncode == 1 and "--resume loss-vs-time" in twice.stderr
    assert len(abo.load_study("loss-vs-time", storage=db)) == len(study)
