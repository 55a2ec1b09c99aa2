"""abo.Command: real subprocesses, values from stdout or a JSON file, safe parameters."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from abo.core.exceptions import AboError, TrialFailure
from abo.run.command import Command

PY = sys.executable


def test_value_from_last_stdout_line(tmp_path: Path) -> None:
    cmd = Command(f"{PY} -c 'print(\"log line\"); print({{x}} * 2)'", workdir=tmp_path)
    out = cmd({"x": 1.5}, trial={"study": "s", "id": 7, "attempt": 0})
    assert out["value"] == 3.0
    folder = Path(out["workdir"])
    assert folder == tmp_path / "s" / "trial-7-0"
    assert "log line" in Path(out["stdout"]).read_text()
    assert json.loads((folder / "params.json").read_text()) == {"x": 1.5}


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "script.py"
    path.write_text(body)
    return f"{PY} {path}"


def test_json_line_carries_metadata(tmp_path: Path) -> None:
    cmd = _script(tmp_path, 'import json; print(json.dumps({"value": 0.25, "epochs": 3}))')
    out = Command(cmd, workdir=tmp_path)({})
    assert out["value"] == 0.25 and out["epochs"] == 3


def test_value_from_result_file(tmp_path: Path) -> None:
    body = (
        "import json, os\n"
        "json.dump({'value': float(os.environ['ABO_TRIAL_ID'])}, open('r.json', 'w'))"
    )
    cmd = Command(_script(tmp_path, body), workdir=tmp_path, result_file="r.json")
    assert cmd({}, trial={"id": 5})["value"] == 5.0


def test_nonzero_exit_fails_with_stderr_tail(tmp_path: Path) -> None:
    script = "import sys; sys.stderr.write('boom: matrix singular\\n'); sys.exit(3)"
    with pytest.raises(TrialFailure) as info:
        Command(f'{PY} -c "{script}"', workdir=tmp_path)({})
    assert "exit code 3" in info.value.reason and "matrix singular" in info.value.reason
    assert Path(info.value.metadata["stderr"]).exists()  # type: ignore[attr-defined]


def test_no_shell_injection_from_a_categorical(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = f"adam; touch {marker}; echo $(touch {marker})"
    script = "import sys; print(len(sys.argv[1:])); print(1.0)"
    cmd = Command(f'{PY} -c "{script}" {{opt}}', workdir=tmp_path)
    out = cmd({"opt": evil})
    assert out["value"] == 1.0
    assert "1" in Path(out["stdout"]).read_text().splitlines()[0]  # one argument, verbatim
    assert not marker.exists()


def test_timeout_kills_the_command(tmp_path: Path) -> None:
    start = time.time()
    with pytest.raises(TrialFailure, match="timeout"):
        Command(f"{PY} -c 'import time; time.sleep(30)'", workdir=tmp_path, timeout=0.5)({})
    assert time.time() - start < 10


@pytest.mark.parametrize(
    "printed, reason",
    [
        ("", "printed nothing"),
        ("not-a-number", "expected a number"),
        ("NaN", "finite"),
    ],
)
def test_bad_output_fails_clearly(tmp_path: Path, printed: str, reason: str) -> None:
    cmd = Command(_script(tmp_path, f"print({printed!r})"), workdir=tmp_path)
    with pytest.raises(TrialFailure, match=reason):
        cmd({})


def test_template_errors_name_the_placeholder(tmp_path: Path) -> None:
    with pytest.raises(AboError, match=r"\{missing\}"):
        Command("echo {missing}", workdir=tmp_path).render({"x": 1})
    with pytest.raises(AboError, match="command"):
        Command("   ")
    with pytest.raises(AboError, match="timeout"):
        Command("echo 1", timeout=-1)


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), 10**400, -(2**1024), "5"])
@pytest.mark.parametrize("option", ["timeout", "stop_grace"])
def test_a_time_that_is_not_a_finite_number_is_refused_naming_it(option: str, bad: object) -> None:
    """10**400 used to be a raw OverflowError, inf a timeout that never came."""
    with pytest.raises(AboError, match=rf"^{option}: expected a finite"):
        Command("echo 1", **{option: bad})


def test_named_outcomes_from_a_command_and_a_missing_one_fails_its_trial(tmp_path: Path) -> None:
    import abo
    from abo.executors import ThreadExecutor

    space = abo.Space({"x": abo.Float(0.0, 1.0)})
    study = abo.create_study(
        space, outcomes={"error": "minimize", "cost": "minimize"}, strategy="random", seed=0
    )
    printed = 'import json; print(json.dumps({"error": 0.5, "cost": 3, "note": "fine"}))'
    cmd = Command(_script(tmp_path, printed), workdir=tmp_path / "runs")
    with ThreadExecutor(1) as executor:
        study.optimize(cmd, n_trials=1, executor=executor)
        (t,) = study.trials
        assert t.state is abo.TrialState.DONE and t.values == {"error": 0.5, "cost": 3.0}
        assert t.user["note"] == "fine" and "stdout" in t.user  # the rest is metadata
        half = 'import json; print(json.dumps({"error": 0.5, "note": "no cost"}))'
        cmd = Command(_script(tmp_path, half), workdir=tmp_path / "runs2")
        study.optimize(cmd, n_trials=1, executor=executor, guard=None)
    failed = study.trials[-1]
    assert failed.state is abo.TrialState.FAILED and "value.cost: missing" in failed.reason


def test_a_simulation_with_a_constraint_and_a_crash_region_through_the_default_strategy(
    tmp_path: Path,
) -> None:
    """A command that prints a loss and a stress, and crashes (exit 1) for x > 0.7: the
    constraint decides feasibility, the crashes are failed trials that teach the classifier."""
    import abo
    from abo.executors import ThreadExecutor

    body = (
        "import json, sys\n"
        "x = json.load(open('params.json'))['x']\n"
        "if x > 0.7:\n"
        "    sys.exit('diverged: time step too large')\n"
        "print(json.dumps({'loss': (x - 0.65) ** 2, 'stress': 10 * x}))\n"
    )
    space = abo.Space({"x": abo.Float(0.0, 1.0)})
    study = abo.create_study(
        space,
        outcomes={"loss": "minimize", "stress": "<= 5"},
        seed=0,
        n_initial=5,
    )
    cmd = Command(_script(tmp_path, body), workdir=tmp_path / "runs")
    with ThreadExecutor(2) as executor:
        # lookahead=0: every proposal waits for its model (exactly reproducible)
        study.optimize(cmd, n_trials=12, executor=executor, guard=None, lookahead=0)
    trials = study.trials
    failed = [t for t in trials if t.state is abo.TrialState.FAILED]
    done = [t for t in trials if t.state is abo.TrialState.DONE]
    assert failed and all(t.params["x"] > 0.7 for t in failed)
    assert all("diverged" in t.reason for t in failed)  # the command's stderr says why
    assert all(set(t.values) == {"loss", "stress"} for t in done)
    assert any(t.values["stress"] > 5 for t in done)  # infeasible ones were told too
    best = study.best
    assert best.values["stress"] <= 5  # feasible only: x <= 0.5, not the loss's 0.65
    assert best.params["x"] == pytest.approx(0.5, abs=0.05)
    modelled = [t.proposal.model for t in trials if t.proposal and t.proposal.model]
    assert modelled, [t.proposal for t in trials]
    assert any(k.startswith("failure:") for k in modelled[-1].hypers)
    assert any(k.startswith("constraint.stress:") for k in modelled[-1].hypers)


# -- report lines --------------------------------------------------------------------------
CURVE = (
    "import json, os, signal, sys, time\n"
    "x = json.load(open('params.json'))['x']\n"
    "def bye(*_):\n"
    "    print('SIGTERM: saving a checkpoint', flush=True)\n"
    "    time.sleep(1.0)\n"
    "    open('ended', 'w').write(repr(time.time()))\n"
    "    sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, bye)\n"
    "for step in range(1, 21):\n"
    "    time.sleep(0.02)\n"
    "    print(f'epoch {step} done')\n"
    "    print(f'abo:report {step} {x + 1 / step}', flush=True)\n"
    "print(x + 0.05)\n"
)


def test_report_lines_are_not_the_result_and_a_malformed_one_fails(tmp_path: Path) -> None:
    cmd = Command(_script(tmp_path, CURVE), workdir=tmp_path)
    out = cmd({"x": 0.5})  # no study: report lines are checked, and never the result
    assert out["value"] == pytest.approx(0.55)
    assert Path(out["stdout"]).read_text().count("abo:report") == 20
    bad = _script(tmp_path, "print('abo:report 1 nan', flush=True)\nprint(0.5)")
    with pytest.raises(TrialFailure, match="stdout line 1: report 'abo:report 1 nan'"):
        Command(bad, workdir=tmp_path)({})
    worse = _script(tmp_path, "print('abo:report one 0.5', flush=True)\nprint(0.5)")
    with pytest.raises(TrialFailure, match="malformed report .* step and value must be numbers"):
        Command(worse, workdir=tmp_path)({})
    extra = _script(tmp_path, "print('abo:report 1 0.5 epochs', flush=True)\nprint(0.5)")
    with pytest.raises(TrialFailure, match="expected 'abo:report <step> <value>'"):
        Command(extra, workdir=tmp_path)({})


def test_a_stopped_command_frees_its_worker_before_its_process_is_gone(tmp_path: Path) -> None:
    """One Dask worker process: the second trial is stopped at its first report; the third
    starts on that worker while the second's process still saves its checkpoint after
    SIGTERM, and that process's output is kept."""
    import abo
    from abo.executors import DaskExecutor

    study = abo.create_study(
        abo.Space({"x": abo.Float(0.0, 1.0)}),
        strategy="random",
        seed=0,
        stopping={"rule": "asha", "min_step": 1, "reduction_factor": 2},
    )
    for x in (0.1, 0.9, 0.5):
        study.enqueue({"x": x})
    cmd = Command(_script(tmp_path, CURVE), workdir=tmp_path / "runs", stop_grace=5.0)
    with DaskExecutor(n_workers=1) as executor:
        result = study.optimize(cmd, n_trials=3, executor=executor, lookahead=0)
    first, second, third = study.trials
    assert (result.n_done, result.n_stopped) == (1, 2)
    assert first.state is abo.TrialState.DONE and first.value == pytest.approx(0.15)
    assert second.state is abo.TrialState.STOPPED and second.value == pytest.approx(1.9)
    assert "rung 1, ranked 2 of 2" in str(second.reason)
    assert [r.step for r in study.reports(second.id)[second.id]] == [1.0]
    assert len(study.reports(first.id)[first.id]) == 20
    folder = Path(second.user["workdir"])
    deadline = time.time() + 10
    while not (folder / "ended").exists() and time.time() < deadline:
        time.sleep(0.05)
    ended = float((folder / "ended").read_text())
    assert third.info["worker"] == second.info["worker"]  # the one worker, freed at once
    assert third.info["started"] < ended  # before the stopped process was gone
    printed = (folder / "stdout.txt").read_text()
    assert "abo:report 1 1.9" in printed and "SIGTERM: saving a checkpoint" in printed


@pytest.mark.parametrize("name", ["stdout.txt", "stderr.txt", "params.json"])
def test_a_link_planted_at_a_trial_file_is_refused(tmp_path: Path, name: str) -> None:
    """A trial's files are at predictable paths: a symbolic link planted at one must not make
    abo write (and truncate) the file it points to."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    folder = tmp_path / "runs" / "s" / "trial-3-0"
    folder.mkdir(parents=True)
    (folder / name).symlink_to(victim)
    cmd = Command(f"{PY} -c 'print(1.0)'", workdir=tmp_path / "runs")
    with pytest.raises(TrialFailure, match=f"{name}: .* is a symbolic link; refusing") as info:
        cmd({"x": 1.0}, trial={"study": "s", "id": 3, "attempt": 0})
    assert victim.read_text() == "precious\n"
    assert info.value.metadata["workdir"] == str(folder)  # type: ignore[attr-defined]


def test_a_hard_link_planted_at_a_trial_file_is_refused(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    folder = tmp_path / "runs" / "s" / "trial-3-0"
    folder.mkdir(parents=True)
    (folder / "stdout.txt").hardlink_to(victim)
    with pytest.raises(TrialFailure, match="stdout.txt: .* is not a plain file of its own"):
        Command(f"{PY} -c 'print(1.0)'", workdir=tmp_path / "runs")(
            {}, trial={"study": "s", "id": 3, "attempt": 0}
        )
    assert victim.read_text() == "precious\n"


def test_a_trial_folder_that_is_a_link_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "runs" / "s").mkdir(parents=True)
    (tmp_path / "runs" / "s" / "trial-3-0").symlink_to(elsewhere, target_is_directory=True)
    cmd = Command(f"{PY} -c 'print(1.0)'", workdir=tmp_path / "runs")
    with pytest.raises(TrialFailure, match="workdir: .*trial-3-0 is a symbolic link; refusing"):
        cmd({}, trial={"study": "s", "id": 3, "attempt": 0})
    assert list(elsewhere.iterdir()) == []  # nothing written there


def test_a_result_file_that_is_a_link_is_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text('{"value": 42.0, "token": "s3cr3t"}')
    body = f"import os; os.symlink({str(secret)!r}, 'r.json')"
    cmd = Command(_script(tmp_path, body), workdir=tmp_path / "runs", result_file="r.json")
    with pytest.raises(TrialFailure, match=r"result_file: cannot read r.json .*not followed"):
        cmd({}, trial={"study": "s", "id": 1, "attempt": 0})


def test_an_earlier_runs_files_in_the_trial_folder_are_replaced(tmp_path: Path) -> None:
    cmd = Command(f"{PY} -c 'print({{x}})'", workdir=tmp_path)
    first = cmd({"x": 1.0}, trial={"study": "s", "id": 2, "attempt": 0})
    again = cmd({"x": 2.0}, trial={"study": "s", "id": 2, "attempt": 0})
    assert (first["value"], again["value"]) == (1.0, 2.0)
    assert Path(again["stdout"]).read_text() == "2.0\n"
    assert json.loads((Path(again["workdir"]) / "params.json").read_text()) == {"x": 2.0}


def test_a_planted_link_fails_only_its_trial_in_optimize(tmp_path: Path) -> None:
    import abo
    from abo.core.trial import TrialState
    from abo.executors import ThreadExecutor

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    study = abo.create_study(
        abo.Space({"x": abo.Float(0.0, 1.0)}), name="planted", strategy="random", seed=0
    )
    folder = tmp_path / "runs" / "planted" / "trial-1-0"
    folder.mkdir(parents=True)
    (folder / "stderr.txt").symlink_to(victim)
    cmd = Command(f"{PY} -c 'print({{x}})'", workdir=tmp_path / "runs")
    study.optimize(cmd, n_trials=3, executor=ThreadExecutor(1), guard=None, verbosity=0)
    states = {t.id: t.state for t in study.trials}
    assert states == {1: TrialState.FAILED, 2: TrialState.DONE, 3: TrialState.DONE}
    assert "stderr.txt" in str(study.trial(1).reason) and "symbolic link" in str(
        study.trial(1).reason
    )
    assert victim.read_text() == "precious\n"
