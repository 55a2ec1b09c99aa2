"""Study files: every study option of ``abo.spec.study_spec`` is a ``[study]`` key, outcomes
included."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import abo_here

import abo
from abo.cli.config import build_objective, load_spec, open_study
from abo.core.exceptions import ConfigError
from abo.spec.study_spec import CREATE_OPTIONS

FILE = """
[study]
name = "two"
storage = "sqlite:///two.db"
strategy = "random"
seed = 3
n_trials = 4
{extra}

[study.outcomes]
error = "minimize"
cost = "maximize"

[space]
x = {{type = "float", low = 0, high = 1, step = 0.25}}

[objective]
function = "objective:two"

[executor]
kind = "threads"
n_workers = 2
"""
OBJECTIVE = """
def two(p):
    return {"error": (p["x"] - 0.5) ** 2, "cost": p["x"], "note": "metadata"}
"""


def run_file(path: Path, *args: str) -> None:
    """``abo run FILE --quiet ARGS`` in the file's folder, which must succeed."""
    out = subprocess.run(
        [sys.executable, "-m", "abo.cli.main", "run", str(path), "--quiet", *args],
        cwd=path.parent,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr


def test_every_study_option_is_a_study_file_key(tmp_path: Path) -> None:
    """The keys a file may have come from ``abo.spec.study_spec`` (a new option needs no edit
    here)."""
    path = tmp_path / "options.toml"
    path.write_text(FILE.format(extra='refit = "background"\nmax_staleness = 9\nnoise = "auto"'))
    assert load_spec(path).study["max_staleness"] == 9
    path = tmp_path / "bad.toml"
    path.write_text(FILE.format(extra="no_such_option = 1"))
    with pytest.raises(ConfigError, match="study.no_such_option: unknown key") as info:
        load_spec(path)
    assert all(option in str(info.value) for option in CREATE_OPTIONS)


def test_a_study_file_with_named_outcomes_runs(tmp_path: Path) -> None:
    (tmp_path / "objective.py").write_text(OBJECTIVE)
    path = tmp_path / "two.toml"
    path.write_text(FILE.format(extra='refit = "sync"\nreference_point = {error = 1, cost = -0.5}'))
    run_file(path)
    study = abo.load_study("two", storage=f"sqlite:///{tmp_path / 'two.db'}")
    assert [o.direction for o in study.outcomes] == ["minimize", "maximize"]
    assert study.reference_point() == {"error": 1.0, "cost": -0.5}  # as the file declared
    done = [t for t in study.trials if t.state is abo.TrialState.DONE]
    assert len(done) == 4 and all(set(t.values) == {"error", "cost"} for t in done)
    assert all(
        t.user["note"] == "metadata" and t.params["x"] in (0, 0.25, 0.5, 0.75, 1) for t in done
    )


@pytest.mark.slow
def test_a_study_file_with_an_outcome_constraint_runs_with_the_default_strategy(
    tmp_path: Path,
) -> None:
    (tmp_path / "objective.py").write_text(
        "def two(p):\n    return {'error': (p['x'] - 0.9) ** 2, 'load': p['x']}\n"
    )
    text = FILE.replace('strategy = "random"\n', "").replace("n_trials = 4", "n_trials = 8")
    text = text.replace('cost = "maximize"', 'load = "<= 0.5"')
    path = tmp_path / "constrained.toml"
    path.write_text(text.format(extra=""))
    run_file(path)
    study = abo.load_study("two", storage=f"sqlite:///{tmp_path / 'two.db'}")
    assert [(c.name, c.op, c.bound) for c in study.spec.constraints] == [("load", "<=", 0.5)]
    assert study.spec.strategy == "auto"
    # the error alone is best at x = 0.9; feasible only up to 0.5, so the best is x = 0.5
    assert study.best.params["x"] == 0.5 and study.best.values["load"] == 0.5


@pytest.mark.slow
def test_a_study_file_with_a_fidelity_runs_it_and_counts_target_results_only(
    tmp_path: Path,
) -> None:
    (tmp_path / "objective.py").write_text(
        "import time\n"
        "def sim(p):\n"
        "    time.sleep(0.002 * p['mesh'])  # a finer mesh takes longer\n"
        "    return (p['x'] - 0.3) ** 2 + 0.5 / p['mesh']\n"
    )
    text = FILE.replace('strategy = "random"\n', "").replace("n_trials = 4", "n_trials = 10")
    text = text.replace('error = "minimize"\ncost = "maximize"', 'error = "minimize"')
    text = text.replace('function = "objective:two"', 'function = "objective:sim"')
    text = text.replace(
        'x = {{type = "float", low = 0, high = 1, step = 0.25}}',
        'x = {{type = "float", low = 0, high = 1}}\nmesh = {{type = "int", low = 2, high = 32}}',
    )
    path = tmp_path / "mesh.toml"
    extra = "n_initial = 4\nlookahead = 0  # each ask waits for its fit (the design otherwise)"
    path.write_text(text.format(extra=extra + '\n\n[study.fidelity]\nparameter = "mesh"'))
    run_file(path)
    study = abo.load_study("two", storage=f"sqlite:///{tmp_path / 'two.db'}")
    assert study.spec.fidelity == {"parameter": "mesh", "target": 32, "cost": None}
    trials = study.trials
    assert len(trials) >= 10 and {t.proposal.arm for t in trials[4:]} == {"multifidelity"}
    assert study.best is not None and study.best.params["mesh"] == 32
    assert all(t.info["eval_seconds"] > 0 for t in trials if t.state is abo.TrialState.DONE)
    for args in (["best", str(path), "--format", "json"], ["plot", str(path), "--kind", "cost"]):
        out = subprocess.run([sys.executable, "-m", "abo.cli.main", *args], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)  # fmt: skip
        assert out.returncode == 0, out.stderr
        if args[0] == "best":
            assert '"mesh": 32' in out.stdout.replace("\n", " ")
    assert (tmp_path / "two-cost.png").read_bytes()[:4] == b"\x89PNG"


@pytest.fixture()
def handlers() -> Iterator[None]:
    """``abo run`` in this process defers SIGINT/SIGTERM (``abo.run.signals``): restore them."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)


def _trials(tmp_path: Path) -> list[abo.Trial]:
    return abo.load_study("two", storage=f"sqlite:///{tmp_path / 'two.db'}").trials


def test_n_trials_is_what_a_run_adds_and_max_trials_the_studys_total(
    tmp_path: Path, handlers: None
) -> None:
    (tmp_path / "objective.py").write_text(OBJECTIVE)
    path = tmp_path / "two.toml"
    path.write_text(FILE.replace("n_trials = 4", "n_trials = 2").format(extra=""))
    study = open_study(load_spec(path))  # as a first `abo run` of the file leaves it
    for t in study.ask_batch(2):
        study.tell(t.id, {"error": 0.1, "cost": 0.5})
    run_file(path, "--resume", "two")  # adds n_trials = 2, where it used to be the total
    assert sum(t.state is abo.TrialState.DONE for t in _trials(tmp_path)) == 4
    full = abo_here("run", str(path), "--resume", "two", "--max-trials", "4", cwd=tmp_path)
    assert full.returncode == 0, full.stderr
    assert "4/4 finished, 0 to go" in full.stdout and "already done (max_trials = 4)" in full.stdout
    neither = tmp_path / "neither.toml"
    neither.write_text(FILE.replace("n_trials = 4", "").format(extra=""))
    with pytest.raises(ConfigError, match=r"^study\.n_trials: give n_trials \(the trials"):
        load_spec(neither)
    assert load_spec(neither, {"max_trials": 3}).max_trials == 3
    for bad in ("n_trials = 0", "max_trials = 1.5"):
        wrong = tmp_path / "wrong.toml"
        wrong.write_text(FILE.replace("n_trials = 4", bad).format(extra=""))
        with pytest.raises(ConfigError, match=f"^study\\.{bad.split()[0]}: expected a positive"):
            load_spec(wrong)


def test_resuming_a_study_file_compares_its_options_with_the_stored_ones(
    tmp_path: Path, handlers: None
) -> None:
    path = tmp_path / "two.toml"
    path.write_text(FILE.format(extra=""))
    study = open_study(load_spec(path))  # what `abo run` creates
    study.tell(study.ask().id, {"error": 0.1, "cost": 0.5})
    other = tmp_path / "other.toml"
    text = FILE.replace('strategy = "random"', 'strategy = "auto"')
    other.write_text(text.format(extra="lease_seconds = 60\nmax_retries = 1"))
    run = ["run", str(other), "--resume", "two", "--max-trials", "1"]
    out = abo_here(*run, cwd=tmp_path)
    assert out.returncode == 1
    error = " ".join(out.stderr.split())
    assert "strategy: study 'two' exists with other options (" in error, error
    assert "strategy: stored 'random', given 'auto'" in error
    assert "lease_seconds: stored 86400.0, given 60" in error and "max_retries" not in error
    assert "--keep-stored-options" in error
    kept = abo_here(*run, "--keep-stored-options", cwd=tmp_path)
    assert kept.returncode == 0 and "already done" in kept.stdout, kept.stderr
    assert "(random, threads executor)" in kept.stdout  # the stored strategy
    other.write_text(FILE.format(extra="lease_seconds = -1"))
    invalid = abo_here(*run, "--keep-stored-options", cwd=tmp_path)
    assert invalid.returncode == 1 and "lease_seconds: expected a positive" in invalid.stderr
    assert len(_trials(tmp_path)) == 1


# (what replaces what in FILE, the start of the error): a key abo does not read is an error in
# every table, naming the table and the key, with the closest known key when one is close
UNKNOWN = [
    (
        'function = "objective:two"',
        'function = "objective:two"\ntimout = 5',
        (
            "objective.timout: unknown key; did you mean 'timeout'? (known: command, env, "
            "function, result_file, stop_grace, timeout, workdir)"
        ),
    ),
    (
        "n_workers = 2",
        "n_workerz = 2",
        "executor.n_workerz: unknown key; did you mean 'n_workers'?",
    ),
    (
        "n_workers = 2",
        'n_workers = 2\naddress = "tcp://h:8786"',
        ("executor.address: not read for kind = 'threads' (its keys: kind, n_workers, proposals)"),
    ),
    ('kind = "threads"\nn_workers = 2', 'kind = "address"', "executor.address: missing"),
    ("n_workers = 2", "n_workers = 2\nproposals = 8786", "executor.proposals: expected a non-"),
    (
        "seed = 3",
        'seed = 3\nstoping = "asha"',
        "study.stoping: unknown key; did you mean 'stopping'?",
    ),
    (
        "seed = 3",
        'seed = 3\nstopping = {rule = "asha", min_stp = 1}',
        ("study.stopping.min_stp: not a setting of asha"),
    ),
    (
        "seed = 3",
        'seed = 3\nfidelity = {parameter = "x", targt = 1}',
        ("study.fidelity.targt: not a setting of a fidelity"),
    ),
    (
        "[space]",
        '[stopping]\nrule = "asha"\n\n[space]',
        ("file.stopping: stopping is a key of [study]; move it into that table"),
    ),
    ("[study]", "max_trials = 4\n[study]", "file.max_trials: max_trials is a key of [study]"),
    ("[objective]", "[objetive]", "file.objetive: unknown table; did you mean 'objective'?"),
    (
        "[executor]",
        "[extras]\nnote = 1\n[executor]",
        ("file.extras: unknown table (known: executor, objective, space, study)"),
    ),
    ("step = 0.25", "step = 0.25, lgo = true", "space.x: unknown key 'lgo'"),
    (
        'function = "objective:two"',
        '[objective.function]\nmodule = "objective"',
        "objective.function: expected a non-empty string, got {'module': 'objective'}",
    ),
    (
        'function = "objective:two"',
        'function = "objective:two"\nenv = {A = {b = 1}}',
        ("objective.env.A: expected a string"),
    ),
    (
        'function = "objective:two"',
        'function = "objective:two"\nstop_grace = -1',
        ("objective.stop_grace: expected a finite number of seconds (>= 0), got -1"),
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "error"), UNKNOWN, ids=[u[2].split(":")[0] for u in UNKNOWN]
)
def test_a_key_abo_does_not_read_is_an_error_naming_table_and_key(
    tmp_path: Path, old: str, new: str, error: str
) -> None:
    path = tmp_path / "typo.toml"
    text = FILE.format(extra="")
    assert old in text
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(ConfigError) as info:
        load_spec(path)
    assert str(info.value).startswith(error), str(info.value)


def test_stop_grace_is_an_objective_key_given_to_the_command(tmp_path: Path) -> None:
    """A command's seconds between SIGTERM and SIGKILL when the stopping rule ends it."""
    path = tmp_path / "grace.toml"
    command = "command = \"{python} -c 'print({x})'\"\nstop_grace = 2.5"
    path.write_text(FILE.format(extra="").replace('function = "objective:two"', command))
    assert build_objective(load_spec(path)).stop_grace == 2.5
    path.write_text(path.read_text().replace("stop_grace = 2.5\n", ""))
    assert build_objective(load_spec(path)).stop_grace == 10.0  # Command's default


@pytest.mark.parametrize("table", ["objective", "executor"])
def test_a_table_given_as_a_value_is_an_error_naming_it(tmp_path: Path, table: str) -> None:
    path = tmp_path / "flat.toml"
    text = FILE.format(extra="")
    start = text.index(f"[{table}]")
    end = text.find("\n[", start + 1)
    text = text[:start] + (text[end + 1 :] if end != -1 else "")
    path.write_text(f'{table} = "threads"\n' + text)
    with pytest.raises(
        ConfigError, match=f"^file.{table}: expected a \\[{table}\\] table, got str"
    ):
        load_spec(path)
