"""``JobQueueExecutor``: evaluations in SLURM, PBS, LSF, SGE or HTCondor jobs, via dask-jobqueue.

Each batch job runs one Dask worker process per ``processes``; jobs come and go with the work
(adaptive scaling between ``min_jobs`` and ``jobs``), so a job killed by ``scancel`` or by its
walltime is replaced by a new one. The scheduler lives in this (the driver's) process and blames
a task on the first worker death, exactly like ``DaskExecutor``: the evaluation on a killed job
is ``lost`` and the loop retries its parameters once.

Every job carries its owner in its name, ``abo-<tag>-<pid>-<host>``, so that ``close()`` can
check that none is left and ``cancel_orphans`` can find the jobs of a driver that was killed
(its running workers exit within seconds, but pending jobs would start later and idle until
their ``--death-timeout``). A new executor cancels the orphans of its tag before it starts.

A batch system that cannot run the work fails the run with an ``AboError`` instead of leaving
its trials ``running``: no submit command on PATH (at construction), every submission refused
(at the next wait), or no worker connected for ``start_timeout`` seconds while work waits.

Example:
    >>> ex = JobQueueExecutor("slurm", cores=1, memory="1GB", walltime="01:00:00", jobs=8,
    ...                       queue="debug", tag="tune")  # doctest: +SKIP
    >>> study.optimize(objective, n_trials=200, executor=ex)  # doctest: +SKIP
"""

from __future__ import annotations

import getpass
import logging
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, cast

import dask
from dask.utils import parse_bytes
from distributed import Client
from distributed.core import Status

from abo.exceptions import AboError
from abo.executors.base import Future
from abo.executors.dask import ABO_DASK_CONFIG, DaskExecutor, _Shutdown

log = logging.getLogger("abo")

SYSTEMS = ("slurm", "pbs", "lsf", "sge", "htcondor")
_SUBMIT_TOOL = {
    "slurm": "sbatch",
    "pbs": "qsub",
    "sge": "qsub",
    "lsf": "bsub",
    "htcondor": "condor_submit",
}
START_TIMEOUT = 300.0  # seconds work may wait with no worker connected before the run fails
_QUEUE_TOOL = {"slurm": "squeue", "lsf": "bjobs", "htcondor": "condor_q"}  # else qstat
_TAG = re.compile(r"^[A-Za-z0-9_]{1,40}$")
_JOB_NAME = re.compile(r"^abo-(?P<tag>[A-Za-z0-9_]+)-(?P<pid>\d+)-(?P<host>.+)$")
# [D-]HH:MM:SS, or HH:MM (LSF's format)
_WALLTIME = re.compile(r"^(?:(?P<d>\d+)-)?(?P<h>\d{1,3}):(?P<m>[0-5]\d)(?::(?P<s>[0-5]\d))?$")


def _cluster_class(system: str) -> Any:
    import dask_jobqueue

    return {
        "slurm": dask_jobqueue.SLURMCluster,
        "pbs": dask_jobqueue.PBSCluster,
        "lsf": dask_jobqueue.LSFCluster,
        "sge": dask_jobqueue.SGECluster,
        "htcondor": dask_jobqueue.HTCondorCluster,
    }[system]


def check_system(system: Any) -> str:
    if system not in SYSTEMS:
        raise AboError(f"system: expected one of {', '.join(SYSTEMS)}, got {system!r}")
    return system


def check_walltime(walltime: Any, system: str) -> str:
    """Validate ``[D-]HH:MM:SS`` (or ``HH:MM``); return it in the system's own format."""
    m = _WALLTIME.match(walltime) if isinstance(walltime, str) else None
    if m is None:
        raise AboError(
            f"walltime: expected 'HH:MM:SS' (or 'D-HH:MM:SS' or 'HH:MM'), got {walltime!r}"
        )
    seconds = int(m["d"] or 0) * 86400 + int(m["h"]) * 3600 + int(m["m"]) * 60 + int(m["s"] or 0)
    if seconds <= 0:
        raise AboError(f"walltime: must be positive, got {walltime!r}")
    if system == "lsf":  # bsub -W takes [HH:]MM; round seconds up to the next minute
        minutes = -(-seconds // 60)
        return f"{minutes // 60:02d}:{minutes % 60:02d}"
    if system == "slurm" or m["d"] is None:
        return walltime if m["s"] is not None else f"{walltime}:00"
    hours = seconds // 3600  # PBS/SGE: HH:MM:SS only
    return f"{hours:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _short_host() -> str:
    return socket.gethostname().split(".")[0]


def job_name(tag: str, pid: int | None = None, host: str | None = None) -> str:
    """The batch job name of a driver's jobs: ``abo-<tag>-<pid>-<host>``."""
    return f"abo-{tag}-{os.getpid() if pid is None else pid}-{host or _short_host()}"


@dataclass(frozen=True)
class BatchJob:
    """A job in the batch queue that abo started (parsed from its name)."""

    job_id: str
    name: str
    tag: str
    pid: int
    host: str
    state: str = ""

    def owner_alive(self) -> bool | None:
        """Whether the driver that submitted it runs; ``None`` when it is on another host."""
        if self.host != _short_host():
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


class _Unreachable(AboError):
    """A batch-system command failed (no controller, not configured, not on PATH)."""


def _run(cmd: list[str], timeout: float = 30.0) -> str:
    if shutil.which(cmd[0]) is None:
        raise _Unreachable(f"system: {cmd[0]!r} is not on PATH, so the batch queue cannot be read")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise _Unreachable(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def _split3(out: str, sep: str) -> list[tuple[str, str, str]]:
    """Each line split in three at its first two ``sep`` (lines with fewer are skipped)."""
    lines = (line for line in out.splitlines() if line.count(sep) >= 2)
    return [cast(tuple[str, str, str], tuple(line.split(sep, 2))) for line in lines]


def _listing(system: str) -> list[tuple[str, str, str]]:
    """``(job_id, name, state)`` of this user's jobs in the batch queue."""
    user = getpass.getuser()
    if system == "slurm":
        out = _run(["squeue", "-h", "-u", user, "-o", "%i|%j|%T"])
        return _split3(out, "|")
    if system == "lsf":
        out = _run(["bjobs", "-noheader", "-o", "jobid job_name stat delimiter='|'"])
        return _split3(out, "|")
    if system == "htcondor":
        out = _run(["condor_q", user, "-af:t", "ClusterId", "AboJobName", "JobStatus"])
        return _split3(out, "\t")
    if system == "sge":
        jobs, current = [], None
        for line in _run(["qstat", "-r", "-u", user]).splitlines():
            head = line.split()
            if head and head[0].isdigit():
                current = (head[0], head[4] if len(head) > 4 else "")
            elif current and "Full jobname:" in line:
                jobs.append((current[0], line.split(":", 1)[1].strip(), current[1]))
        return jobs
    fields: dict[str, str] = {}
    jobs, job_id = [], None  # pbs: qstat -f blocks
    for line in _run(["qstat", "-f"]).splitlines() + ["Job Id: end"]:
        if line.startswith("Job Id:"):
            if job_id and fields.get("Job_Owner", user).split("@")[0] == user:
                jobs.append((job_id, fields.get("Job_Name", ""), fields.get("job_state", "")))
            job_id, fields = line.split(":", 1)[1].strip(), {}
        elif " = " in line:
            key, value = line.strip().split(" = ", 1)
            fields[key] = value
    return jobs


def list_jobs(tag_prefix: str = "", system: str = "slurm") -> list[BatchJob]:
    """This user's queued or running abo jobs whose tag starts with ``tag_prefix``."""
    check_system(system)
    found = []
    for job_id, name, state in _listing(system):
        m = _JOB_NAME.match(name.strip())
        if m and m["tag"].startswith(tag_prefix):
            found.append(
                BatchJob(
                    job_id.strip(), name.strip(), m["tag"], int(m["pid"]), m["host"], state.strip()
                )
            )
    return found


def cancel_jobs(jobs: list[BatchJob], system: str = "slurm") -> None:
    """Cancel these jobs (gone ones are ignored)."""
    if not jobs:
        return
    cmd = {
        "slurm": "scancel",
        "pbs": "qdel",
        "sge": "qdel",
        "lsf": "bkill",
        "htcondor": "condor_rm",
    }
    try:
        _run([cmd[check_system(system)]] + [j.job_id for j in jobs])
    except AboError as exc:  # some finished meanwhile: qdel/bkill fail on unknown ids
        log.debug("cancelling %s: %s", [j.job_id for j in jobs], exc)


def cancel_orphans(
    tag_prefix: str = "",
    system: str = "slurm",
    *,
    exact: bool = False,
    other_hosts: bool = False,
) -> list[BatchJob]:
    """Cancel the jobs left by dead drivers whose tag starts with (or, ``exact``, is) the prefix.

    A job's owner is dead when its host is this one and its process is gone. Jobs of drivers on
    other hosts cannot be checked and are only cancelled with ``other_hosts=True``. Returns the
    jobs cancelled.
    """
    if not isinstance(tag_prefix, str) or not re.fullmatch(r"[A-Za-z0-9_]{0,40}", tag_prefix):
        raise AboError(f"tag_prefix: expected letters, digits or '_', got {tag_prefix!r}")
    orphans = []
    for job in list_jobs(tag_prefix, system):
        if exact and job.tag != tag_prefix:
            continue
        alive = job.owner_alive()
        if alive is False or (alive is None and other_hosts):
            orphans.append(job)
    if orphans:
        cancel_jobs(orphans, system)
        log.warning(
            "cancelled %d orphaned %s jobs of dead drivers: %s",
            len(orphans),
            system,
            ", ".join(f"{j.job_id} ({j.name})" for j in orphans),
        )
    return orphans


def check_submit_tool(system: str) -> str:
    """The system's submit command, which must be on PATH: without it no job can ever start,
    and the run would wait for workers that never come."""
    tool = _SUBMIT_TOOL[system]
    if shutil.which(tool) is None:
        raise AboError(
            f"system: {system!r} submits jobs with {tool!r}, which is not on PATH, so no job "
            f"can start (is {system} installed on this machine, or its module loaded?)"
        )
    return tool


def _submit_error(tool: str, exc: BaseException) -> str:
    """One line on why a submission failed (the submit command's exit status and stderr)."""
    if isinstance(exc, FileNotFoundError):
        return f"{tool!r} is not on PATH (any more)"
    text = str(exc)
    code = re.search(r"Exit code: (-?\d+)", text)
    if code is None:  # not the command's failure: an unparsable answer, a broken script
        return f"submitting with {tool!r} failed: {type(exc).__name__}: {text[:500]}"
    err = " ".join(text.split("stderr:", 1)[-1].split())
    return f"{tool!r} refused the job (exit status {code[1]}): {err[:500] or 'no message'}"


class _JobWatch:
    """What became of the jobs: failed submissions, and how long work waited with no worker.

    dask-jobqueue submits in the background, logs a refused or impossible submission and
    never retries it, so without this a run waited, with its trials ``running``, until their
    lease ran out. ``check`` turns that into an ``AboError`` at the executor's next wait.
    """

    def __init__(self, system: str, start_timeout: float | None) -> None:
        self.system, self.tool = system, _SUBMIT_TOOL[system]
        self.start_timeout = start_timeout
        self.failures: list[str] = []
        self.submitted = 0
        self.idle_since: float | None = None
        self.warned = 0

    def job_class(self, base: type) -> type:
        """``base`` (the system's dask-jobqueue job) recording how each submission went."""
        watch = self

        class Watched(base):
            async def start(self) -> None:
                try:
                    await super().start()
                except Exception as exc:  # noqa: BLE001 - recorded; the run fails on it
                    watch.failures.append(_submit_error(watch.tool, exc))
                    # a placeholder that Dask closes like any job (there is none to cancel)
                    # instead of a traceback logged from inside its event loop
                    self.status = Status.running
                    return
                watch.submitted += 1

        Watched.__name__ = Watched.__qualname__ = base.__name__
        return Watched

    def check(self, workers: int, jobs: Callable[[], str]) -> None:
        """Raise when nothing can run the waiting work: every submission so far failed, or no
        worker connected for ``start_timeout`` seconds. ``workers`` connected now; ``jobs``
        describes the queue, for the message."""
        if self.failures and not self.submitted and not workers:
            raise AboError(f"{self.system}: no job could be submitted: {self.failures[-1]}")
        if len(self.failures) > self.warned:  # some failed, others were submitted
            for failure in self.failures[self.warned :]:
                log.warning("%s: a job submission failed: %s", self.system, failure)
            self.warned = len(self.failures)
        if workers:
            self.idle_since = None
            return
        now = time.monotonic()
        if self.idle_since is None:
            self.idle_since = now
        elif self.start_timeout is not None and now - self.idle_since > self.start_timeout:
            raise AboError(
                f"start_timeout: no {self.system} job started within {self.start_timeout:g} s "
                f"of work waiting ({jobs()}); on a busy cluster give a longer start_timeout "
                "(None waits as long as it takes), else look at the jobs' logs"
            )


class JobQueueExecutor(DaskExecutor):
    """Runs evaluations in batch jobs that scale with the work (dask-jobqueue).

    Args:
        system: ``slurm``, ``pbs``, ``lsf``, ``sge`` or ``htcondor``.
        cores, memory: per job (one job = ``processes`` Dask workers).
        walltime: ``HH:MM:SS``; a job killed by it loses its evaluation (retried once).
        queue, account: the partition/queue and account (``project`` on LSF/SGE).
        jobs: at most this many jobs at once; ``min_jobs`` are kept even when idle.
        processes: worker processes per job, each running one evaluation at a time.
        tag: names the jobs ``abo-<tag>-<pid>-<host>`` (letters, digits, ``_``).
        host, interface: where the scheduler listens (default ``127.0.0.1``: a single node;
            give the interface compute nodes reach, e.g. ``ib0``, on a real cluster).
        log_directory: where job output goes (default: the batch system's).
        start_timeout: seconds work may wait with no worker connected (jobs pending in the
            queue, or failing as they start) before the run fails with ``AboError``; ``None``
            waits as long as it takes. A submission the batch system refuses fails at once.
        **extra: passed to the dask-jobqueue cluster (``job_extra_directives``,
            ``death_timeout``, ``job_script_prologue``, ``disk`` for HTCondor, ...).
    """

    def __init__(
        self,
        system: str = "slurm",
        cores: int = 1,
        memory: str = "1GB",
        walltime: str = "00:10:00",
        queue: str | None = None,
        account: str | None = None,
        jobs: int = 1,
        min_jobs: int = 0,
        processes: int = 1,
        tag: str | None = None,
        host: str | None = None,
        interface: str | None = None,
        log_directory: str | None = None,
        start_timeout: float | None = START_TIMEOUT,
        **extra: Any,
    ) -> None:
        self.system = check_system(system)
        if start_timeout is not None and (
            isinstance(start_timeout, bool)
            or not isinstance(start_timeout, int | float)
            or not 0 < start_timeout < float("inf")
        ):
            raise AboError(
                f"start_timeout: expected a positive number of seconds or None, "
                f"got {start_timeout!r}"
            )
        for field, value, low in (
            ("cores", cores, 1),
            ("jobs", jobs, 1),
            ("processes", processes, 1),
            ("min_jobs", min_jobs, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise AboError(f"{field}: expected an integer >= {low}, got {value!r}")
        if min_jobs > jobs:
            raise AboError(f"min_jobs: {min_jobs} exceeds jobs ({jobs})")
        try:
            if parse_bytes(memory) <= 0:
                raise ValueError("not positive")
        except (TypeError, ValueError) as exc:
            raise AboError(
                f"memory: expected a size such as '4GB', got {memory!r} ({exc})"
            ) from None
        if processes > cores:
            raise AboError(f"processes: {processes} exceeds cores ({cores})")
        tag = "abo" if tag is None else tag
        if not isinstance(tag, str) or not _TAG.match(tag):
            raise AboError(f"tag: expected 1-40 letters, digits or '_', got {tag!r}")
        self.tag = tag
        self.job_name = job_name(tag)
        kwargs = self._cluster_kwargs(
            cores,
            memory,
            check_walltime(walltime, system),
            queue,
            account,
            processes,
            host,
            interface,
            log_directory,
            extra,
        )
        check_submit_tool(system)
        self._watch = _JobWatch(system, start_timeout)
        kwargs["job_cls"] = self._watch.job_class(_cluster_class(system).job_cls)
        with dask.config.set(ABO_DASK_CONFIG):
            try:
                cluster = _cluster_class(system)(**kwargs)
            except (TypeError, ValueError) as exc:
                raise AboError(f"{system}: dask-jobqueue rejected the options: {exc}") from exc
        try:
            # every option is checked before anything in the queue changes
            self.orphans: list[BatchJob] = []
            if shutil.which(_QUEUE_TOOL.get(system, "qstat")) is not None:
                try:
                    if system == "slurm":
                        _sbatch_test_only(cluster.job_script())
                    self.orphans = cancel_orphans(tag, system, exact=True)
                except (OSError, subprocess.SubprocessError, _Unreachable) as exc:
                    log.warning("cannot check the batch queue (%s): jobs may not start", exc)
            # tiny target duration: one job per queued evaluation (up to ``jobs``), not one
            # job per 5 s of estimated work
            cluster.adapt(minimum_jobs=min_jobs, maximum_jobs=jobs, target_duration="1ms")
            super().__init__(client=Client(cluster))
        except BaseException:
            cluster.close()
            raise
        self._cluster = cluster
        self._own_client = True
        # closed with the client first, at close() or at exit; cancelling many jobs one
        # ``scancel`` at a time takes longer than a LocalCluster's close
        self._shutdown = _Shutdown(self.client, cluster, timeout=60.0)
        self.n_workers = jobs * processes

    def _cluster_kwargs(
        self,
        cores: int,
        memory: str,
        walltime: str,
        queue: str | None,
        account: str | None,
        processes: int,
        host: str | None,
        interface: str | None,
        log_directory: str | None,
        extra: dict[str, Any],
    ) -> dict[str, Any]:
        scheduler_options = {
            "dashboard": False,
            "dashboard_address": ":0",
            **extra.pop("scheduler_options", {}),
        }
        if interface is None:
            scheduler_options.setdefault("host", host or "127.0.0.1")
        else:
            scheduler_options.setdefault("interface", interface)
        threads = cores // processes
        worker_args = list(extra.pop("worker_extra_args", []) or [])
        if threads > 1:  # one evaluation per process: the objective may use the other cores
            worker_args += ["--nthreads", "1"]
        kwargs: dict[str, Any] = dict(
            cores=cores,
            memory=memory,
            processes=processes,
            interface=interface,
            scheduler_options=scheduler_options,
            worker_extra_args=worker_args,
            log_directory=log_directory,
            job_name=self.job_name,
        )
        if self.system == "htcondor":
            kwargs["disk"] = extra.pop("disk", memory)
            directives = dict(extra.pop("job_extra_directives", {}) or {})
            directives["MY.AboJobName"] = f'"{self.job_name}"'
            directives.setdefault("MY.MaxRuntime", _seconds(walltime))
            kwargs["job_extra_directives"] = directives
        else:
            kwargs.update(walltime=walltime, queue=queue)
            if account is not None:
                kwargs["project" if self.system in ("lsf", "sge") else "account"] = account
        kwargs.update(extra)
        return kwargs

    @property
    def cluster(self) -> Any:
        """The dask-jobqueue cluster (for its dashboard link, logs, ``scale``...)."""
        return self._cluster

    def job_script(self) -> str:
        """The batch script each job runs, exactly as it is submitted."""
        return self._cluster.job_script()

    def jobs(self) -> list[BatchJob]:
        """This executor's jobs in the batch queue now."""
        return [j for j in list_jobs(self.tag, self.system) if j.name == self.job_name]

    def wait(self, futures: Collection[Future], timeout: float | None) -> set[Future]:
        """As ``DaskExecutor.wait``; raises ``AboError`` when no job can run the work: the
        batch system refused every submission, or none started within ``start_timeout``."""
        done = super().wait(futures, timeout)
        if not done and futures and self._cluster is not None:
            workers = len(self._cluster.scheduler_info.get("workers", {}))
            self._watch.check(workers, self._describe_queue)
        return done

    def _describe_queue(self) -> str:
        """This executor's jobs and their states, for an error message."""
        try:
            jobs = self.jobs()
        except (AboError, OSError, subprocess.SubprocessError) as exc:
            return f"the queue cannot be read: {exc}"
        if not jobs:
            return f"no job named {self.job_name} is in the queue"
        return "in the queue: " + ", ".join(f"{j.job_id} {j.state}" for j in jobs[:10])

    def close(self, timeout: float = 15.0) -> None:
        """Cancel every job of this executor and check the batch queue until they are gone."""
        if self._cluster is None:
            return
        try:
            super().close()
        finally:
            self._cluster = None
            deadline = time.monotonic() + timeout
            left = self._left()
            while left and time.monotonic() < deadline:
                cancel_jobs(left, self.system)  # submitted in a race with close, or stuck
                time.sleep(0.5)
                left = self._left()
            if left:
                log.warning("jobs still in the queue after close: %s", [j.job_id for j in left])

    def _left(self) -> list[BatchJob]:
        if shutil.which(_QUEUE_TOOL.get(self.system, "qstat")) is None:
            return []  # nothing was ever submitted without the batch system's tools
        try:
            return [j for j in self.jobs() if not j.state.upper().startswith(("COMPLETED", "CD"))]
        except (AboError, OSError, subprocess.SubprocessError) as exc:
            log.warning("cannot check the batch queue after close: %s", exc)
            return []


def _sbatch_test_only(script: str) -> None:
    """Let SLURM judge the job request now (``sbatch --test-only``), not after a silent hang."""
    with tempfile.NamedTemporaryFile("w", suffix=".sh", prefix="abo-job-") as fh:
        fh.write(script)
        fh.flush()
        proc = subprocess.run(
            ["sbatch", "--test-only", fh.name], capture_output=True, text=True, timeout=30
        )
    err = proc.stderr.strip()
    unreachable = ("Unable to contact", "Could not establish a configuration source")
    if proc.returncode != 0 and any(text in err for text in unreachable):
        raise _Unreachable(f"sbatch --test-only: {err}")
    if proc.returncode != 0:
        raise AboError(f"cores/memory/walltime/queue/account: SLURM rejects the job request: {err}")


def _seconds(walltime: str) -> int:
    m = _WALLTIME.match(walltime)
    assert m is not None
    return int(m["d"] or 0) * 86400 + int(m["h"]) * 3600 + int(m["m"]) * 60 + int(m["s"] or 0)
