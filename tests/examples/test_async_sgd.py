"""The asynchronous SGD example: the trainer learns with real staleness, its variants apply the
published corrections, divergence fails the trial, and both documented routes (``abo run`` with
the study file, ``tune.py`` on Dask) finish a study."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import abo
from abo.core.exceptions import TrialFailure
from abo.core.trial import TrialState
from abo.executors import ThreadExecutor
from abo.run.command import Command

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "async_sgd"
sys.path.insert(0, str(EXAMPLE))
import trainer  # noqa: E402
import tune  # noqa: E402

N_TRAIN = 1437  # digits: 1797 images, 20 % held out
CHANCE = 0.1


def test_trainer_learns_with_measured_staleness() -> None:
    out = trainer.train(
        {"lr": 0.05, "momentum": 0.5, "batch_size": 16, "workers": 8, "epochs": 3, "seed": 1}
    )
    assert out["accuracy"] > 0.5 > CHANCE
    assert out["value"] < math.log(10)  # below the loss of a uniform guess
    assert out["gradients"] == 3 * math.ceil(N_TRAIN / 16)  # the epoch budget, all of it
    # eight threads pushing to one version counter: some pushes were computed on old weights
    assert out["mean_staleness"] > 0 and out["max_staleness"] >= 1


def test_one_worker_is_never_stale_and_accumulation_batches_updates() -> None:
    out = trainer.train({"lr": 0.1, "batch_size": 64, "workers": 1, "accumulate": 3, "epochs": 2})
    assert out["mean_staleness"] == 0 and out["max_staleness"] == 0
    assert out["gradients"] == 2 * math.ceil(N_TRAIN / 64)
    assert out["updates"] == math.ceil(out["gradients"] / 3)


@pytest.mark.parametrize(
    "variant, extra", [("dc-asgd", {"dc_lambda": 2.0}), ("staleness-lr", {"lr": 0.3})]
)
def test_variants_learn(variant: str, extra: dict) -> None:
    params = {"lr": 0.05, "momentum": 0.5, "batch_size": 16, "workers": 6, "epochs": 3}
    out = trainer.train({**params, **extra, "variant": variant})
    assert out["accuracy"] > 0.5
    assert out["mean_staleness"] > 0


def _server(variant: str, **kw: float) -> trainer.ParameterServer:
    cfg = trainer.Config(**{"variant": variant, "lr": 0.1, "momentum": 0.0, **kw})
    return trainer.ParameterServer(torch.zeros(3), cfg)


def test_delay_compensation_uses_the_weights_moved_since_the_snapshot() -> None:
    server = _server("dc-asgd", dc_lambda=2.0)
    w0, v0 = server.snapshot()
    assert server.push(torch.tensor([1.0, 2.0, 3.0]), w0, v0) == 0  # fresh: applied as is
    w1 = server.w.clone()  # = -0.1 * g1
    g = torch.tensor([0.5, -1.0, 2.0])
    assert server.push(g, w0, v0) == 1  # computed at w0, one update behind
    corrected = g + 2.0 * g * g * (w1 - w0)
    assert torch.allclose(server.w, w1 - 0.1 * corrected)
    assert server.version == 2 and server.staleness == [0, 1]


def test_staleness_lr_divides_by_one_plus_tau_and_momentum_acts_on_the_update() -> None:
    server = _server("staleness-lr", momentum=0.5)
    w0, v0 = server.snapshot()
    g = torch.tensor([1.0, 1.0, 1.0])
    server.push(g, w0, v0)
    server.push(g, w0, v0)
    server.push(g, w0, v0)  # taus 0, 1, 2
    v1 = g
    v2 = 0.5 * v1 + g / 2
    v3 = 0.5 * v2 + g / 3
    assert torch.allclose(server.w, -0.1 * (v1 + v2 + v3))


def test_accumulation_applies_the_mean_of_m_pushes() -> None:
    server = _server("asgd", accumulate=2)
    w0, v0 = server.snapshot()
    server.push(torch.tensor([1.0, 0.0, 0.0]), w0, v0)
    assert server.version == 0 and torch.equal(server.w, torch.zeros(3))  # buffered
    server.push(torch.tensor([0.0, 2.0, 0.0]), w0, v0)
    assert server.version == 1
    assert torch.allclose(server.w, torch.tensor([-0.05, -0.1, 0.0]))


def test_every_epoch_is_reported_and_a_stop_ends_the_run_early() -> None:
    params = {"lr": 0.05, "momentum": 0.5, "batch_size": 32, "workers": 4, "epochs": 4}
    seen: list[tuple[int, float]] = []
    out = trainer.train(params, lambda epoch, loss: seen.append((epoch, loss)) or False)
    assert [e for e, _ in seen] == [1, 2, 3, 4] and seen[-1][1] == out["value"]
    assert out["epochs_run"] == 4 and "stopped_at" not in out
    assert seen[0][1] > seen[-1][1]  # it learns: the first epoch's loss is the worst
    per_epoch = math.ceil(N_TRAIN / 32)
    # a budget of 12 epochs, stopped at 2: the workers stop soon after the second epoch's
    # snapshot, far from the full budget (with 4 epochs, loaded cores once let the threads
    # finish the last two before they saw the stop)
    stopped = trainer.train({**params, "epochs": 12}, lambda epoch, loss: epoch >= 2)
    assert stopped["stopped_at"] == 2 and stopped["epochs_run"] == 2
    assert 2 * per_epoch <= stopped["gradients"] < 12 * per_epoch


def test_bad_parameters_name_the_field() -> None:
    with pytest.raises(ValueError, match="variant: expected one of asgd, dc-asgd"):
        trainer.train({"variant": "sync"})
    with pytest.raises(ValueError, match=r"momentum: expected in \[0, 1\), got 1.0"):
        trainer.train({"momentum": 1.0})
    with pytest.raises(ValueError, match="lerning_rate: unknown"):
        trainer.train({"lerning_rate": 0.1})


def test_a_diverging_run_fails_its_trial_in_the_python_route() -> None:
    study = abo.create_study(tune.SPACE, strategy="random", seed=0)
    huge = {"lr": 1.0, "momentum": 0.95, "batch_size": 8, "workers": 4, "dc_lambda": 1.0}
    study.enqueue({**huge, "accumulate": 1, "variant": "asgd"})
    result = study.optimize(tune.Objective(epochs=1), n_trials=1, executor=ThreadExecutor(1))
    assert result.n_failed == 1 and result.n_done == 0
    (trial,) = study.trials
    assert trial.state is TrialState.FAILED and trial.reason.startswith("Diverged:")
    # the opt-in alternative: tell the diverged run as a bad value the model can learn from
    told = tune.Objective(epochs=1, diverged_value=10.0)(trial.params)
    assert told["value"] == 10.0 and told["diverged"].startswith("diverged after")


@pytest.mark.slow
def test_command_line_reports_json_and_diverged_runs_exit_non_zero(tmp_path: Path) -> None:
    base = f"{sys.executable} {EXAMPLE / 'trainer.py'} --epochs 2 --workers 4 --momentum 0.9"
    cmd = Command(base + " --lr {lr} --variant {variant}", workdir=tmp_path)
    out = cmd({"lr": 0.02, "variant": "dc-asgd"})  # lr 0.1 diverges on unlucky schedules
    assert out["accuracy"] > 0.5 and out["value"] < math.log(10)
    assert json.loads(Path(out["stdout"]).read_text().splitlines()[-1])["value"] == out["value"]
    with pytest.raises(TrialFailure, match="exit code 2: diverged"):
        cmd({"lr": 1000.0, "variant": "asgd"})


def _study_file(tmp_path: Path, n_trials: int, epochs: int) -> Path:
    folder = tmp_path / "async_sgd"
    folder.mkdir()
    (folder / "trainer.py").write_text((EXAMPLE / "trainer.py").read_text())
    text = (EXAMPLE / "study.toml").read_text()
    assert 'command = "{python} ' in text  # the interpreter running abo, venv or not
    for old, new in [
        ("max_trials = 30", f"max_trials = {n_trials}"),
        ("--epochs 20", f"--epochs {epochs}"),
        ("max_step = 20", f"max_step = {epochs}"),
    ]:
        assert old in text, old
        text = text.replace(old, new)
    (folder / "study.toml").write_text(text)
    return folder / "study.toml"


@pytest.mark.slow
def test_the_study_file_runs_through_abo_run(tmp_path: Path) -> None:
    toml = _study_file(tmp_path, n_trials=6, epochs=3)
    out = subprocess.run(
        [sys.executable, "-m", "abo.cli.main", "run", str(toml), "--quiet"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert out.returncode == 0, out.stderr
    study = abo.load_study("async-sgd", storage=f"sqlite:///{toml.parent / 'async_sgd.db'}")
    states = (TrialState.DONE, TrialState.FAILED, TrialState.STOPPED)
    finished = [t for t in study.trials if t.state in states]
    assert len(finished) == 6
    assert all(t.reason.startswith("exit code 2") for t in finished if t.state.value == "failed")
    done = [t for t in finished if t.state is TrialState.DONE]
    assert done and len(done) + sum(t.state is TrialState.STOPPED for t in finished) >= 4
    reports = study.reports()  # --report: one line per epoch, read from each run's stdout
    assert all([r.step for r in reports[t.id]] == [1.0, 2.0, 3.0] for t in done)
    assert all(t.user["gradients"] > 0 and Path(t.user["stdout"]).exists() for t in done)
    assert study.best.user["accuracy"] > 0.5


@pytest.mark.slow
def test_tune_script_runs_on_a_dask_cluster(tmp_path: Path) -> None:
    db = tmp_path / "tune.db"
    args = [
        "--trials",
        "4",
        "--epochs",
        "2",
        "--strategy",
        "random",
        "--storage",
        f"sqlite:///{db}",
    ]
    out = subprocess.run(
        [sys.executable, str(EXAMPLE / "tune.py"), *args],
        cwd=tmp_path,  # not the example folder: the Dask workers must not need it on their path
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr
    assert "best configuration" in out.stdout
    (name,) = [s.name for s in abo.storage.SQLStorage(f"sqlite:///{db}").list_studies()]
    study = abo.load_study(name, storage=f"sqlite:///{db}")
    assert len(study.trials) == 4
    # a worker that could not unpickle the trainer would fail every trial (ModuleNotFoundError)
    states = [t.state for t in study.trials]
    assert TrialState.DONE in states
    assert sum(s in (TrialState.DONE, TrialState.STOPPED) for s in states) >= 3
    assert all(study.reports(t.id) for t in study.trials if t.state is TrialState.DONE)
    assert study.best.user["accuracy"] > 0.5
