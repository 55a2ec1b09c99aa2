"""abo studies to and from Optuna's storage (``abo.interop``, ``abo export``/``abo import``),
with Optuna installed (a test dependency): parameters of every type round-trip exactly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import optuna
import pytest

import abo
from abo.interop import from_optuna, to_optuna

SPACE = abo.Space(
    {
        "f": abo.Float(-1.0, 1.0),
        "lf": abo.Float(1e-5, 1.0, log=True),
        "sf": abo.Float(0.0, 1.0, step=0.25),
        "i": abo.Int(1, 8),
        "li": abo.Int(1, 1024, log=True),
        "si": abo.Int(0, 100, step=5),
        "c": abo.Categorical(["sgd", "adam", 3, True]),
    }
)


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_an_abo_study_opens_in_optuna_with_every_state_report_and_constraint(
    tmp_path: Path,
) -> None:
    outcomes = {"loss": "minimize", "memory": "<= 4"}
    study = abo.create_study(SPACE, name="ex", storage=f"sqlite:///{tmp_path / 'a.db'}",
                             strategy="random", seed=1, outcomes=outcomes,
                             stopping={"rule": "asha", "reduction_factor": 2})  # fmt: skip
    a, b, c, d, e = study.ask_batch(5)
    study.report(a.id, 1, 0.5)
    study.tell(a.id, {"loss": 0.4, "memory": 3.0}, metadata={"epochs": 3})
    study.tell(b.id, {"loss": 0.2, "memory": 6.0})  # infeasible
    study.fail(c.id, "diverged")
    assert study.report(d.id, 1, 0.9) is True  # stopped: worse than a at rung 1
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    done = to_optuna(study, url)
    assert (done.complete, done.failed, done.pruned, done.skipped) == (2, 1, 1, 1)
    loaded = optuna.load_study(study_name="ex", storage=url)
    assert loaded.metric_names == ["loss"] and loaded.directions[0].name == "MINIMIZE"
    by_id = {t.user_attrs["abo_id"]: t for t in loaded.trials}
    assert {i: t.state.name for i, t in by_id.items()} == {
        a.id: "COMPLETE", b.id: "COMPLETE", c.id: "FAIL", d.id: "PRUNED"
    }  # fmt: skip
    for t in (a, b, c, d):
        assert by_id[t.id].params == t.params  # every type, exactly
    assert by_id[a.id].values == [0.4] and by_id[a.id].user_attrs["epochs"] == 3
    assert by_id[a.id].intermediate_values == {1: 0.5}
    assert by_id[d.id].intermediate_values == {1: 0.9}
    assert by_id[b.id].system_attrs["constraints"] == [2.0]  # memory 6 breaks <= 4 by 2
    assert by_id[c.id].user_attrs["abo_reason"] == "diverged"
    assert loaded.best_trial.user_attrs["abo_id"] == a.id  # Optuna reads the constraint too
    from optuna.visualization.matplotlib import plot_optimization_history

    assert plot_optimization_history(loaded) is not None  # Optuna's plots open it
    with pytest.raises(abo.AboError, match="overwrite") as err:
        to_optuna(study, url)
    assert err.value.field == "name"
    assert to_optuna(study, url, overwrite=True).complete == 2
    assert len(optuna.load_study(study_name="ex", storage=url).trials) == 4  # not doubled


def test_an_optuna_study_becomes_an_abo_study_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    source = optuna.create_study(study_name="tpe", storage=url,
                                 sampler=optuna.samplers.TPESampler(seed=0))  # fmt: skip

    def objective(trial: optuna.Trial) -> float:
        x = {
            "f": trial.suggest_float("f", -1.0, 1.0),
            "lf": trial.suggest_float("lf", 1e-5, 1.0, log=True),
            "sf": trial.suggest_float("sf", 0.0, 1.0, step=0.25),
            "i": trial.suggest_int("i", 1, 8),
            "li": trial.suggest_int("li", 1, 1024, log=True),
            "si": trial.suggest_int("si", 0, 100, step=5),
            "c": trial.suggest_categorical("c", ["sgd", "adam", 3, True]),
        }
        if x["f"] > 0.9:
            raise optuna.TrialPruned()
        return x["f"] ** 2 + x["i"] / 8

    source.optimize(objective, n_trials=12)
    abo_url = f"sqlite:///{tmp_path / 'abo.db'}"
    done = from_optuna("tpe", url, storage=abo_url, strategy="random", seed=0)
    complete = [t for t in source.trials if t.state.name == "COMPLETE"]
    assert done.added == len(complete) and done.not_complete == 12 - len(complete)
    study = abo.load_study("tpe", storage=abo_url)
    assert study.space == SPACE  # every distribution back to the same parameter
    assert [(t.params, t.value) for t in study.trials] == [(t.params, t.value) for t in complete]
    again = from_optuna("tpe", url, storage=abo_url)
    assert (again.added, again.already) == (0, len(complete)) and len(study) == len(complete)
    assert study.ask().params.keys() == set(SPACE)  # the study goes on from its results


def test_the_commands_export_and_import_and_say_what_they_did(tmp_path: Path) -> None:
    study = abo.create_study(SPACE, name="cli", storage=f"sqlite:///{tmp_path / 'abo.db'}",
                             strategy="random", seed=2)  # fmt: skip
    for t in study.ask_batch(3):
        study.tell(t.id, t.params["f"] ** 2)
    optuna_url = f"sqlite:///{tmp_path / 'optuna.db'}"

    def abo_cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "abo.cli.main", *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)  # fmt: skip

    out = abo_cli("export", "cli", "--optuna-storage", optuna_url)
    assert out.returncode == 0 and "3 complete" in out.stdout, out.stderr
    again = abo_cli("export", "cli", "--optuna-storage", optuna_url)
    assert again.returncode == 1 and "--overwrite" in again.stderr
    back = abo_cli("import", "cli", "--optuna-storage", optuna_url, "--name", "back")
    assert back.returncode == 0 and "imported 3 complete trials" in back.stdout, back.stderr
    returned = abo.load_study("back", storage=f"sqlite:///{tmp_path / 'abo.db'}")
    assert sorted(t.value for t in returned.trials) == sorted(t.value for t in study.trials)
