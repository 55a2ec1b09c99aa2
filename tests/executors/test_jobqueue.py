"""JobQueueExecutor against a real single-node SLURM (``.ci/slurm.sh`` starts one).

The job-script and validation tests run everywhere. The SLURM tests skip with the reason when
no SLURM answers, and fail instead when ``ABO_REQUIRE_SLURM`` is set (CI).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import abo
from abo.core.exceptions import AboError
from abo.core.trial import TrialState
from abo.executors import JobQueueExecutor
from abo.executors.jobqueue import cancel_orphans, job_name, list_jobs

# One SLURM node with two CPUs: under pytest-xdist these tests run one after another on one
# worker (--dist loadgroup), so their jobs never wait in the queue behind each other's.
pytestmark = pytest.mark.xdist_group("slurm")

STATE = Path(os.environ.get("ABO_SLURM_STATE", "/var/tmp/abo-slurm"))
SPACE = abo.Space({"x": abo.Float(-1.0, 1.0)})


def _slurm_unavailable() -> str | None:
    """``None`` when a SLURM controller answers with a usable node, else why not."""
    if shutil.which("sbatch") is None or shutil.which("squeue") is None:
        return "SLURM is not installed (run `bash .ci/slurm.sh` as root)"
    if not os.environ.get("SLURM_CONF") and not (STATE / "slurm.conf").exists():
        return f"no SLURM_CONF and no {STATE / 'slurm.conf'} (run `bash .ci/slurm.sh`)"
    env = dict(os.environ)
    env.setdefault("SLURM_CONF", str(STATE / "slurm.conf"))
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=15, env=env
        )
    except subprocess.TimeoutExpired:
        return "sinfo timed out: slurmctld does not answer (run `bash .ci/slurm.sh`)"
    states = {state.rstrip("*~#!%$@^-+") for state in out.stdout.split()}
    if out.returncode != 0 or not {"idle", "mixed", "allocated", "completing"} & states:
        return f"no usable SLURM node (sinfo: {out.stdout.strip() or out.stderr.strip()})"
    return None


@pytest.fixture()
def slurm(monkeypatch: pytest.MonkeyPatch) -> str:
    """The SLURM_CONF of a running SLURM (skip, or fail when ABO_REQUIRE_SLURM is set)."""
    reason = _slurm_unavailable()
    if reason is not None:
        if os.environ.get("ABO_REQUIRE_SLURM"):
            pytest.fail(f"{reason} (ABO_REQUIRE_SLURM is set: these tests must run)")
        pytest.skip(reason)
    conf = os.environ.get("SLURM_CONF") or str(STATE / "slurm.conf")
    monkeypatch.setenv("SLURM_CONF", conf)
    # jobs inherit the environment (sbatch --export=ALL): let workers import this module, as
    # they would import a user's objective module
    tests = str(Path(__file__).resolve().parents[1])
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")]))
    )
    return conf


def _executor(tmp_path: Path, tag: str, **kw) -> JobQueueExecutor:
    opts = dict(cores=1, memory="500MB", walltime="00:05:00", jobs=2, queue="debug")
    opts.update(kw)
    return JobQueueExecutor(system="slurm", tag=tag, log_directory=str(tmp_path / "logs"), **opts)


def _queue(name: str) -> list[str]:
    """Job ids named ``name`` that squeue still shows (any state)."""
    out = subprocess.run(
        ["squeue", "-h", "-n", name, "-o", "%i"], capture_output=True, text=True, check=True
    )
    return out.stdout.split()


def _wait_gone(name: str, timeout: float = 20.0) -> list[str]:
    deadline = time.time() + timeout
    while (left := _queue(name)) and time.time() < deadline:
        time.sleep(0.5)
    return left


class Sleeper:
    """Sleeps, records which job ran it (a file per start), returns x²; ``long`` marks slow ones.

    ``long`` is ``(trial id, seconds)``: that trial's first attempt sleeps that long.
    """

    accepts_trial = True

    def __init__(self, seconds: float, marks: Path, long: tuple[int, float] | None = None):
        self.seconds, self.marks, self.long = seconds, marks, long

    def __call__(self, params: dict, trial: dict) -> dict:
        job = os.environ.get("SLURM_JOB_ID", "none")
        (self.marks / f"{trial['id']}-{trial['attempt']}-{job}").touch()
        seconds = self.seconds
        if self.long and trial["id"] == self.long[0] and trial["attempt"] == 0:
            seconds = self.long[1]
        time.sleep(seconds)
        return {"value": params["x"] ** 2, "job": job, "job_name": os.environ["SLURM_JOB_NAME"]}


def _fake_tools(monkeypatch: pytest.MonkeyPatch, folder: Path, tools: dict[str, str]) -> None:
    """PATH holds only ``folder``, with a shell script per tool (its body given): stand-ins for
    a batch system's commands, or none at all (no real ``sbatch`` can be found)."""
    folder.mkdir(exist_ok=True)
    for name, body in tools.items():
        path = folder / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))


SUBMIT = {
    "slurm": "sbatch",
    "pbs": "qsub",
    "sge": "qsub",
    "lsf": "bsub",
    "htcondor": "condor_submit",
}
UNUSED = "echo 'stand-in: never called' >&2; exit 1"


# -- everywhere -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "system, header",
    [
        ("slurm", ["#SBATCH -J abo-hdr-", "#SBATCH -t 00:07:00", "#SBATCH -p debug"]),
        ("pbs", ["#PBS -N abo-hdr-", "#PBS -l walltime=00:07:00", "#PBS -q debug"]),
    ],
)
def test_job_script_has_tagged_header_walltime_and_worker(
    system: str, header: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fake_tools(monkeypatch, tmp_path / "bin", {SUBMIT[system]: UNUSED})  # nothing is submitted
    with JobQueueExecutor(
        system=system,
        cores=1,
        memory="500MB",
        walltime="00:07:00",
        queue="debug",
        jobs=3,
        tag="hdr",
    ) as ex:
        script = ex.job_script()
        assert ex.n_workers == 3
        assert ex.job_name == job_name("hdr")
    for line in header:
        assert line in script, script
    assert f"-{os.getpid()}-" in script  # the owner's pid: orphans can be told apart
    assert f"{sys.executable} -m distributed.cli.dask_worker tcp://127.0.0.1:" in script


def test_bad_options_raise_clear_errors() -> None:
    with pytest.raises(AboError, match=r"system: expected one of slurm, pbs, lsf, sge, htcondor"):
        JobQueueExecutor(system="torque")
    for bad in ("10 minutes", "00:61:00", "", None, "00:00:00"):
        with pytest.raises(AboError, match="walltime"):
            JobQueueExecutor(system="slurm", walltime=bad)
    with pytest.raises(AboError, match="tag"):
        JobQueueExecutor(system="slurm", tag="has-dash")
    with pytest.raises(AboError, match="min_jobs"):
        JobQueueExecutor(system="slurm", jobs=1, min_jobs=2)
    with pytest.raises(AboError, match="memory"):
        JobQueueExecutor(system="slurm", memory="lots")


@pytest.mark.parametrize("system", sorted(SUBMIT))
def test_without_the_submit_command_the_executor_fails_at_once_naming_it(
    system: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No ``sbatch`` on PATH: trials used to stay ``running`` for ten minutes and then be lost
    (a ``FileNotFoundError`` logged by Dask); now the executor refuses to start."""
    _fake_tools(monkeypatch, tmp_path / "bin", {})
    tool = SUBMIT[system]
    with pytest.raises(AboError, match=f"system: '{system}' submits jobs with '{tool}', which is "
                       "not on PATH, so no job can start"):  # fmt: skip
        JobQueueExecutor(system=system, memory="500MB", tag="absent")


def test_abo_run_without_sbatch_exits_with_status_1_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "study.toml").write_text(
        textwrap.dedent(
            """
            [study]
            name = "nosbatch"
            storage = "sqlite:///abo.db"
            strategy = "random"
            n_trials = 2
            [space]
            x = { type = "float", low = 0.0, high = 1.0 }
            [objective]
            command = "{python} -c 'print({x})'"
            [executor]
            kind = "slurm"
            [executor.options]
            memory = "500MB"
            """
        )
    )
    _fake_tools(monkeypatch, tmp_path / "bin", {})
    out = subprocess.run(
        [sys.executable, "-m", "abo.cli.main", "run", "study.toml"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 1, out.stderr
    assert "'sbatch', which is not on PATH" in " ".join(out.stderr.split())
    assert "Traceback" not in out.stderr


def _value(params: dict) -> float:
    return params["x"]


@pytest.mark.parametrize("system", sorted(SUBMIT))
def test_a_refused_submission_fails_the_run_at_once_with_its_message(
    system: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The batch system refuses the job (a real process exiting 1): the run ends at the
    executor's next wait, quoting the refusal, with its trials lost (a resume runs them)."""
    refusal = "Batch job submission failed: Invalid account"
    _fake_tools(monkeypatch, tmp_path / "bin", {SUBMIT[system]: f"echo '{refusal}' >&2; exit 1"})
    study = abo.create_study(SPACE, strategy="random", seed=1)
    with JobQueueExecutor(system=system, memory="500MB", jobs=2, tag="refused") as ex:
        with pytest.raises(AboError, match=f"{system}: no job could be submitted: "
                           f"'{SUBMIT[system]}' refused the job \\(exit status 1\\)"):  # fmt: skip
            study.optimize(_value, n_trials=2, executor=ex, verbosity=0)
    if system != "lsf":  # bsub reads the script on stdin, its stderr discarded by dask-jobqueue
        assert refusal in str(ex._watch.failures[-1])
    assert [t.state for t in study.trials] == [TrialState.LOST] * 2


def test_a_job_that_never_starts_fails_the_run_after_start_timeout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``sbatch`` accepts the job, which then never starts (no worker ever connects)."""
    _fake_tools(
        monkeypatch,
        tmp_path / "bin",
        {"sbatch": "echo 'Submitted batch job 4242'", "scancel": "exit 0"},
    )
    study = abo.create_study(SPACE, strategy="random", seed=1)
    with JobQueueExecutor(system="slurm", memory="500MB", tag="never", start_timeout=2) as ex:
        with pytest.raises(AboError, match="start_timeout: no slurm job started within 2 s"):
            study.optimize(_value, n_trials=1, executor=ex, verbosity=0)
    assert [t.state for t in study.trials] == [TrialState.LOST]


def test_a_bad_start_timeout_is_refused() -> None:
    for bad in (0, -1, "5", True, float("inf")):
        with pytest.raises(AboError, match="start_timeout: expected a positive number"):
            JobQueueExecutor(system="slurm", start_timeout=bad)


@pytest.mark.slow
def test_a_request_slurm_cannot_satisfy_fails_at_once(slurm: str, tmp_path: Path) -> None:
    with pytest.raises(AboError, match="memory.*SLURM rejects.*not available"):
        _executor(tmp_path, "toobig", memory="500TB")
    with pytest.raises(AboError, match="SLURM rejects.*partition"):
        _executor(tmp_path, "nopart", queue="nosuchqueue")
    assert list_jobs("toobig") == [] and list_jobs("nopart") == []


# -- on SLURM ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_twenty_trials_run_in_tagged_slurm_jobs(slurm: str, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    study = abo.create_study(
        SPACE, storage=f"sqlite:///{tmp_path}/abo.db", strategy="random", seed=1
    )
    ex = _executor(tmp_path, "twenty")
    with ex:
        result = study.optimize(Sleeper(0.2, marks), n_trials=20, executor=ex)
        name = ex.job_name
    assert result.n_done == 20 and len(study.trials) == 20
    assert all(t.state is TrialState.DONE for t in study.trials)
    assert {t.user["job_name"] for t in study.trials} == {name}  # ran inside our jobs
    assert all(t.user["job"] != "none" for t in study.trials)
    assert _wait_gone(name) == []  # close cancelled every job


class Trainer:
    """Reports a loss per epoch from inside a SLURM job, and stops when the study says so."""

    def __call__(self, params: dict, trial: abo.TrialHandle) -> dict:
        loss = 0.0
        for epoch in range(1, 6):
            loss = params["x"] ** 2 + 1.0 / epoch
            if trial.report(epoch, loss):
                break
        return {"value": loss, "job": os.environ.get("SLURM_JOB_ID", "none")}


def test_reports_from_slurm_jobs_reach_the_study_and_stop_trials(
    slurm: str, tmp_path: Path
) -> None:
    study = abo.create_study(
        SPACE, storage=f"sqlite:///{tmp_path}/abo.db", strategy="random", seed=2,
        stopping={"rule": "asha", "reduction_factor": 2},
    )  # fmt: skip
    with _executor(tmp_path, "reports") as ex:
        result = study.optimize(Trainer(), n_trials=8, executor=ex)
    assert result.n_done + result.n_stopped == 8 and result.n_stopped > 0
    reports = study.reports()
    for t in study.trials:
        assert t.user["job"] != "none"  # ran inside a job, reported from there
        assert reports[t.id][-1].value == pytest.approx(t.value)
        assert (len(reports[t.id]) == 5) == (t.state is TrialState.DONE)


@pytest.mark.slow
def test_scancel_of_a_worker_job_mid_trial_loses_no_trial(slurm: str, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    study = abo.create_study(
        SPACE, storage=f"sqlite:///{tmp_path}/abo.db", strategy="random", seed=2
    )
    cancelled: list[str] = []

    def cancel_first_job() -> None:  # scancel the job of the first evaluation that starts
        deadline = time.time() + 60
        while time.time() < deadline and not cancelled:
            for mark in marks.iterdir():
                trial, attempt, job = mark.name.split("-")
                cancelled.append(job)
                subprocess.run(["scancel", job], check=True)
                return
            time.sleep(0.1)

    ex = _executor(tmp_path, "scancel")
    killer = threading.Thread(target=cancel_first_job)
    with ex:
        killer.start()
        result = study.optimize(Sleeper(2.0, marks), n_trials=6, executor=ex)
        killer.join()
    assert cancelled, "no evaluation started"
    trials = study.trials
    lost = [t for t in trials if t.state is TrialState.LOST]
    # the evaluation on the cancelled job was lost and retried on another job, and done there
    assert [t.user.get("job") for t in trials if t.state is TrialState.DONE].count(
        cancelled[0]
    ) == 0
    assert len(lost) >= 1 and "worker died" in lost[0].reason
    for t in lost:
        retry = [r for r in trials if r.retry_of == t.id]
        assert len(retry) == 1 and retry[0].state is TrialState.DONE
        assert retry[0].params == t.params
    assert result.n_done == 6
    assert all(t.state in (TrialState.DONE, TrialState.LOST) for t in trials)


@pytest.mark.slow
def test_walltime_kill_loses_the_trial_and_new_jobs_finish_the_budget(
    slurm: str, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    study = abo.create_study(
        SPACE, storage=f"sqlite:///{tmp_path}/abo.db", strategy="random", seed=3
    )
    # SLURM counts walltime in minutes and checks it every 30 s: killed 60-90 s after start
    ex = _executor(tmp_path, "walltime", walltime="00:01:00")
    with ex:
        result = study.optimize(Sleeper(0.3, marks, long=(1, 240.0)), n_trials=6, executor=ex)
    first = study.trial(1)
    assert first.state is TrialState.LOST and "worker died" in first.reason
    retry = [t for t in study.trials if t.retry_of == 1]
    assert len(retry) == 1 and retry[0].state is TrialState.DONE and retry[0].attempt == 1
    killed_job = next(m.name.split("-")[2] for m in marks.iterdir() if m.name.startswith("1-0-"))
    assert retry[0].user["job"] != killed_job  # a new job ran the retry
    log = next((tmp_path / "logs").glob(f"*-{killed_job}.err")).read_text()
    assert "DUE TO TIME LIMIT" in log
    assert result.n_done == 6


@pytest.mark.slow
def test_cancel_orphans_cancels_only_jobs_of_dead_drivers(slurm: str, tmp_path: Path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead_name, live_name = job_name("orph", pid=int(dead.stdout)), job_name("orph")

    def submit(name: str) -> str:
        out = subprocess.run(
            [
                "sbatch",
                "--parsable",
                "-J",
                name,
                "-t",
                "00:02:00",
                "-o",
                str(tmp_path / "o-%j"),
                "--wrap",
                "sleep 120",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip().split(";")[0]

    dead_job, live_job = submit(dead_name), submit(live_name)
    try:
        assert {j.job_id for j in list_jobs("orph")} >= {dead_job, live_job}
        cancelled = cancel_orphans("orph")
        assert [j.job_id for j in cancelled] == [dead_job]
        assert _wait_gone(dead_name) == []
        assert _queue(live_name) == [live_job]  # its driver (this process) is alive
    finally:
        subprocess.run(["scancel", dead_job, live_job], check=False)


CLEAN_DRIVER = """
import sys, time
import abo
from abo.executors import JobQueueExecutor

def objective(params):
    time.sleep(0.3)
    return params["x"]

study = abo.create_study(abo.Space({"x": abo.Float(0.0, 1.0)}), strategy="random", seed=5)
# 3 jobs on 2 CPUs: one stays pending (without a cancel it would start after the exit and
# idle until its death timeout)
ex = JobQueueExecutor(system="slurm", memory="500MB", queue="debug", jobs=3, min_jobs=3,
                      tag="clean", log_directory=sys.argv[1])
print(study.optimize(objective, n_trials=4, executor=ex).n_done, flush=True)
# no close(): exiting the interpreter must still leave no job behind
"""


@pytest.mark.slow
def test_driver_that_exits_without_close_leaves_no_jobs(slurm: str, tmp_path: Path) -> None:
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(CLEAN_DRIVER))
    driver = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "logs")], stdout=subprocess.PIPE, text=True
    )
    name = job_name("clean", pid=driver.pid)
    out, _ = driver.communicate(timeout=120)
    assert driver.returncode == 0 and out.split()[-1] == "4"
    assert list((tmp_path / "logs").glob(f"{name}-*.err"))  # its jobs did run
    assert _wait_gone(name, timeout=10) == []


DRIVER = """
import sys, time
import abo
from abo.executors import JobQueueExecutor

def objective(params):
    time.sleep(1.5)
    return params["x"] ** 2

study = abo.create_study(abo.Space({"x": abo.Float(-1.0, 1.0)}), name="resume",
                         storage=sys.argv[1], strategy="random", seed=4)
ex = JobQueueExecutor(system="slurm", cores=1, memory="500MB", walltime="00:05:00", jobs=3,
                      queue="debug", tag="resume", log_directory=sys.argv[2])
study.optimize(objective, n_trials=12, executor=ex)
"""


def _resumed_objective(params: dict) -> float:
    time.sleep(0.5)
    return params["x"] ** 2


@pytest.mark.slow
def test_killed_driver_orphans_are_cancelled_and_resume_completes_budget(
    slurm: str, tmp_path: Path
) -> None:
    storage = f"sqlite:///{tmp_path}/abo.db"
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(DRIVER))
    driver = subprocess.Popen(
        [sys.executable, str(script), storage, str(tmp_path / "logs")], cwd=tmp_path
    )
    name = job_name("resume", pid=driver.pid)
    try:
        deadline = time.time() + 90
        done_before: dict[int, float] = {}
        while time.time() < deadline and driver.poll() is None:
            try:
                study = abo.load_study("resume", storage=storage)
                done_before = {t.id: t.value for t in study.trials if t.state is TrialState.DONE}
            except AboError:
                pass
            if len(done_before) >= 2 and len(_queue(name)) == 3:  # 2 running, 1 pending
                break
            time.sleep(0.3)
        assert driver.poll() is None and len(done_before) >= 2, "driver did not get going"
        orphaned = set(_queue(name))
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    finally:
        if driver.poll() is None:
            driver.kill()
    # resume: the executor cancels the dead driver's jobs first, the loop retries its trials
    study = abo.create_study(
        SPACE, name="resume", storage=storage, strategy="random", seed=4, load_if_exists=True
    )
    before = {t.id: t for t in study.trials}
    running = [t.id for t in before.values() if t.state is TrialState.RUNNING]
    assert running, "the driver was killed with nothing in flight"
    ex = _executor(tmp_path, "resume", jobs=2)
    with ex:
        assert ex.orphans and {j.name for j in ex.orphans} == {name}
        assert {j.job_id for j in ex.orphans} <= orphaned
        assert _wait_gone(name) == []
        done_now = sum(t.state is TrialState.DONE for t in before.values())
        result = study.optimize(_resumed_objective, n_trials=12 - done_now, executor=ex)
    after = {t.id: t for t in study.trials}
    assert sum(t.state is TrialState.DONE for t in after.values()) == 12
    for tid, value in done_before.items():  # no told result lost
        assert after[tid].state is TrialState.DONE and after[tid].value == value
    assert not set(result.trial_ids) & set(before)  # new trials get new ids
    for tid in running:  # the dead driver's evaluations: lost, then retried
        assert after[tid].state is TrialState.LOST
        assert [t.state for t in after.values() if t.retry_of == tid] == [TrialState.DONE]
