"""The command line end to end, in subprocesses: abo demo, abo run (example, resume, signals);
the quick commands after a run (listing, plotting, refusals) in this process."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helpers import abo_here

import abo
from abo.cli.config import load_spec
from abo.core.trial import TrialState

ROOT = Path(__file__).resolve().parents[2]
ABO = [sys.executable, "-m", "abo.cli.main"]
pytestmark = pytest.mark.slow


def _abo(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``abo ARGS`` with stdout and stderr to pipes and no COLUMNS, as in a batch job's log."""
    return subprocess.run(
        [*ABO, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={k: v for k, v in os.environ.items() if k != "COLUMNS"},
    )


def _line(text: str, start: str) -> str:
    """The one line of ``text`` that starts with ``start``."""
    found = [line for line in text.splitlines() if line.startswith(start)]
    assert len(found) == 1, text
    return found[0]


def test_demo_end_to_end_and_resume(tmp_path: Path) -> None:
    args = [
        "demo",
        "--trials",
        "8",
        "--workers",
        "2",
        "--min-seconds",
        "0.05",
        "--max-seconds",
        "0.2",
    ]
    out = _abo(*args, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "best value" in out.stdout and "utilization" in out.stdout
    db = tmp_path / "abo.db"
    assert db.exists()
    names = [s.name for s in abo.storage.SQLStorage(f"sqlite:///{db}").list_studies()]
    assert len(names) == 1
    # piped output is not wrapped: the storage and the resume command are whole lines
    assert _line(out.stdout, "results in:") == f"results in: sqlite:///{db}"
    resume = f"resume with: abo demo --resume {names[0]} --storage sqlite:///{db}"
    assert _line(out.stdout, "resume with:") == resume
    study = abo.load_study(names[0], storage=f"sqlite:///{db}")
    assert sum(t.state is TrialState.DONE for t in study.trials) == 8
    assert (tmp_path / f"{names[0]}-convergence.png").stat().st_size > 1000
    # a second run is a new study (one trial on one worker says so as well as eight on two);
    # --resume continues the first one, past its initial design (12 points in 6-D), with the
    # first run's short evaluations on two workers
    assert _abo("demo", "--trials", "1", "--workers", "1", *args[5:], cwd=tmp_path).returncode == 0
    assert len(abo.storage.SQLStorage(f"sqlite:///{db}").list_studies()) == 2
    out = _abo(*args, "--resume", names[0], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    resumed = abo.load_study(names[0], storage=f"sqlite:///{db}")
    assert len(resumed) == 16
    assert {t.proposal.strategy for t in resumed.trials[12:] if t.proposal} - {"sobol"}


def _example(tmp_path: Path, n_trials: int, kind: str = "local", sleep: float = 0.2) -> Path:
    folder = tmp_path / "quadratic"
    folder.mkdir()
    (folder / "objective.py").write_text((ROOT / "examples/quadratic/objective.py").read_text())
    text = (ROOT / "examples/quadratic/study.toml").read_text()
    text = text.replace("max_trials = 16", f"max_trials = {n_trials}")
    text = text.replace('kind = "local"', f'kind = "{kind}"')
    text = text.replace("--solver {solver}", f"--solver {{solver}} --sleep {sleep}")
    (folder / "study.toml").write_text(text)
    return folder / "study.toml"


def test_the_example_study_file_runs(tmp_path: Path) -> None:
    toml = _example(tmp_path, n_trials=6)
    out = _abo("run", str(toml), "--quiet", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    db = f"sqlite:///{toml.parent / 'quadratic.db'}"
    study = abo.load_study("quadratic", storage=db)
    done = [t for t in study.trials if t.state is TrialState.DONE]
    assert len(done) == 6
    assert all(t.user["iterations"] == 10 * t.params["layers"] for t in done)
    assert all(Path(t.user["stdout"]).exists() for t in done)
    # the summary says where the results are, on whole lines, and how to read them back
    assert _line(out.stdout, "results in:") == f"results in: {db}"
    assert _line(out.stdout, "see them with:") == f"see them with: abo trials {toml}"
    assert all(f"'{p}'" in _line(out.stdout, "best value") for p in study.space)
    listed = abo_here("trials", str(toml), "--format", "json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert {t["id"] for t in json.loads(listed.stdout) if t["state"] == "done"} == {
        t.id for t in done
    }
    # a second run of the same file says how to continue the study, and changes nothing
    twice = abo_here("run", str(toml), "--quiet", cwd=tmp_path)
    assert twice.returncode == 1
    error = _line(twice.stderr, "error:")
    assert "'quadratic' exists already" in error and db in error
    assert f"continue it with: abo run {toml} --resume quadratic" in error
    assert "load_if_exists" not in error
    assert len(abo.load_study("quadratic", storage=db)) == len(study)
    # the budget is the study's: running it again has nothing left to do
    again = _abo("run", str(toml), "--resume", "quadratic", cwd=tmp_path)
    assert again.returncode == 0 and "already done" in again.stdout


def test_driver_killed_then_resumed(tmp_path: Path) -> None:
    toml = _example(tmp_path, n_trials=10, kind="threads", sleep=1.0)
    db = f"sqlite:///{toml.parent / 'quadratic.db'}"
    proc = subprocess.Popen(
        [*ABO, "run", str(toml), "--quiet"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    while time.time() < deadline:  # wait until some results are told and some are running
        time.sleep(0.5)
        try:
            with sqlite3.connect(toml.parent / "quadratic.db") as conn:
                done = conn.execute("select count(*) from abo_trials where state='done'").fetchone()
        except sqlite3.Error:
            continue
        if done[0] >= 3:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = abo.load_study("quadratic", storage=db)
    told = {t.id: t.value for t in before.trials if t.state is TrialState.DONE}
    orphans = [t.id for t in before.trials if t.state is TrialState.RUNNING]
    assert told and orphans
    out = _abo("run", str(toml), "--resume", "quadratic", "--quiet", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    after = abo.load_study("quadratic", storage=db)
    assert {t.id: t.value for t in after.trials if t.id in told} == told  # nothing told is lost
    assert all(after.trial(i).state is TrialState.LOST for i in orphans)
    assert {t.retry_of for t in after.trials if t.retry_of} == set(orphans)
    ids = [t.id for t in after.trials]
    assert ids == list(range(1, len(ids) + 1))  # no id repeats, no gaps
    assert sum(t.state in (TrialState.DONE, TrialState.FAILED) for t in after.trials) == 10
    assert not after.pending


def test_sigterm_drains_and_exits_cleanly(tmp_path: Path) -> None:
    toml = _example(tmp_path, n_trials=40, kind="threads", sleep=0.5)
    proc = subprocess.Popen(
        [*ABO, "run", str(toml), "--quiet", "--grace", "20"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    db = toml.parent / "quadratic.db"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:  # until trials are running
        if db.exists() and sum(t.state is TrialState.DONE for t in _trials(db)) >= 2:
            break
        time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert "stopped: SIGTERM" in stdout
    study = abo.load_study("quadratic", storage=f"sqlite:///{db}")
    assert not study.pending  # running ones finished within the grace period and were told
    assert 2 <= sum(t.state is TrialState.DONE for t in study.trials) < 40


def _trials(db: Path) -> list[abo.Trial]:
    try:
        return abo.load_study("quadratic", storage=f"sqlite:///{db}").trials
    except abo.AboError:  # not created yet
        return []


def test_sigterm_while_starting_up_is_a_clean_stop(tmp_path: Path) -> None:
    """A batch system's SIGTERM before the loop listens is remembered, not fatal (exit 0)."""
    toml = _example(tmp_path, n_trials=40, kind="threads", sleep=0.5)
    proc = subprocess.Popen(
        [*ABO, "run", str(toml), "--quiet"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()  # printed once the study exists, before the executor starts
    assert first.startswith("study quadratic"), first
    proc.send_signal(signal.SIGTERM)
    rest, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    assert "stopped: SIGTERM" in rest
    assert "SIGTERM during start-up" in stderr
    study = abo.load_study("quadratic", storage=f"sqlite:///{toml.parent / 'quadratic.db'}")
    assert not study.trials  # it stopped before asking for any


def test_failure_rate_exit_code_and_config_errors(tmp_path: Path) -> None:
    toml = _example(tmp_path, n_trials=30, kind="threads", sleep=0.0)
    text = toml.read_text().replace(
        "{python} {here}/objective.py", "{python} -c 'import sys; sys.exit(1)'"
    )
    toml.write_text(text)
    out = _abo("run", str(toml), "--quiet", cwd=tmp_path)
    assert out.returncode == 3, out.stderr
    assert "stopped" in out.stderr and "failed" in out.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text(
        '[study]\nn_trials = 0\n[space]\nx = {type = "float", low = 0, high = 1}\n'
        '[objective]\ncommand = "true"\n'
    )
    out = abo_here("run", str(bad), cwd=tmp_path)
    assert out.returncode == 1 and "study.n_trials" in out.stderr
    bad.write_text(bad.read_text().replace("n_trials = 0", "n_trials = 3\nlookahead = -1"))
    with pytest.raises(abo.AboError, match="study.lookahead"):
        load_spec(bad)
    bad.write_text(bad.read_text().replace("lookahead = -1", 'lookahead = "soon"'))
    with pytest.raises(abo.AboError, match='study.lookahead: expected "auto"'):
        load_spec(bad)


def test_function_objective_runs_on_local_dask_workers(tmp_path: Path) -> None:
    """`function = "module:function"` from the study file's folder imports on the workers."""
    (tmp_path / "myobjective.py").write_text(
        "def objective(params):\n    return (params['x'] - 0.3) ** 2\n"
    )
    toml = tmp_path / "study.toml"
    toml.write_text(
        '[study]\nname = "fn"\nstorage = "sqlite:///fn.db"\nstrategy = "random"\nn_trials = 4\n'
        'lookahead = 2\nrefit = "background"\nmax_exact = 500\n'
        '[space]\nx = {type = "float", low = 0, high = 1}\n'
        '[objective]\nfunction = "myobjective:objective"\n'
        '[executor]\nkind = "local"\nn_workers = 1\n'
    )
    out = _abo("run", str(toml), "--quiet", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    study = abo.load_study("fn", storage=f"sqlite:///{tmp_path / 'fn.db'}")
    assert sorted(t.state.value for t in study.trials) == ["done"] * 4  # none asked in excess
    assert all(t.value == (t.params["x"] - 0.3) ** 2 for t in study.trials)
    assert study.config.refit == "background" and study.config.max_exact == 500


def test_bench_is_not_an_abo_command_and_benchmarks_run_from_a_checkout(tmp_path: Path) -> None:
    """``abo bench`` is gone (it only existed with the source tree on the path); the
    benchmarks' own command line works on its own from the repository root."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    bench = subprocess.run([*ABO, "bench", "--help"], capture_output=True, text=True, env=env)
    assert bench.returncode == 2 and "No such command 'bench'" in bench.stderr
    help_ = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--help"], cwd=ROOT, capture_output=True, text=True
    )
    assert help_.returncode == 0 and "latency" in help_.stdout, help_.stderr


def test_the_live_panel_of_several_objectives_counts_the_front_so_far() -> None:
    """``abo run``'s panel shows, for a study of several objectives, how many done trials are
    on the front so far: the same count as ``best_trials`` after every result, ties kept."""
    from rich.console import Console

    from abo.cli.main import Progress

    study = abo.create_study(
        abo.Space({"x": abo.Float(0, 1)}), outcomes={"loss": "minimize", "gain": "maximize"},
        strategy="random", seed=0,
    )  # fmt: skip
    progress = Progress(8, study.direction, workers=2, objectives=study.spec.objectives)
    told = [(0.5, 0.5), (0.4, 0.4), (0.6, 0.9), (0.4, 0.4), (0.1, 0.1), (0.2, 0.95), (0.9, 0.1)]
    for loss, gain in told:  # (0.2, 0.95) dominates (0.5, 0.5), (0.6, 0.9) and (0.4, 0.4) twice
        trial = study.ask()
        study.tell(trial.id, {"loss": loss, "gain": gain})
        progress.update(study, study.trial(trial.id))
        assert len(progress.front) == len(study.best_trials)
    assert len(progress.front) == 2  # (0.1, 0.1) and (0.2, 0.95)
    console = Console(width=100, record=True)
    console.print(progress)
    assert "Pareto front 2 trials" in console.export_text()


def test_a_study_file_with_a_stopping_rule_stops_commands_that_report(tmp_path: Path) -> None:
    """`stopping` under [study], report lines from a Command, then `abo trials` and the plot."""
    (tmp_path / "train.py").write_text(
        "import json, sys\n"
        "x = json.load(open('params.json'))['x']\n"
        "for step in range(1, 10):\n"
        "    print(f'abo:report {step} {x + 1 / step}', flush=True)\n"
        "print(x + 0.1)\n"
    )
    toml = tmp_path / "study.toml"
    toml.write_text(
        '[study]\nname = "es"\nstorage = "sqlite:///es.db"\nstrategy = "random"\nseed = 1\n'
        "n_trials = 8\n"
        '[study.stopping]\nrule = "asha"\nreduction_factor = 2\n'
        '[space]\nx = {type = "float", low = 0, high = 1}\n'
        '[objective]\ncommand = "{python} {here}/train.py"\nworkdir = "runs"\n'
        '[executor]\nkind = "local"\nn_workers = 2\n'
    )
    out = _abo("run", str(toml), "--quiet", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    study = abo.load_study("es", storage=f"sqlite:///{tmp_path / 'es.db'}")
    assert study.spec.stopping == {
        "rule": "asha", "min_step": 1.0, "reduction_factor": 2, "max_step": None,
    }  # fmt: skip
    states = [t.state.value for t in study.trials]
    assert len(states) == 8 and "stopped" in states and "done" in states, states
    listed = abo_here("trials", str(toml), "--format", "json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    for row in rows:
        steps = [r["step"] for r in row["reports"]]
        assert steps == list(range(1, len(steps) + 1)) and steps
        assert (row["state"] == "done") == (len(steps) == 9)
    table = abo_here("trials", str(toml), "--format", "csv", cwd=tmp_path)
    assert table.stdout.splitlines()[0].startswith("id,state,value,step,duration")
    png = tmp_path / "curves.png"
    plotted = abo_here("plot", str(toml), "--kind", "curves", "--out", str(png), cwd=tmp_path)
    assert plotted.returncode == 0, plotted.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
