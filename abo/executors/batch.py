"""The batch systems' own commands: job names, walltimes, listing and cancelling abo's jobs."""

from __future__ import annotations

import getpass
import logging
import os
import re
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any, cast

from abo.core.exceptions import AboError

log = logging.getLogger("abo")

SYSTEMS = ("slurm", "pbs", "lsf", "sge", "htcondor")
_SUBMIT_TOOL = {
    "slurm": "sbatch",
    "pbs": "qsub",
    "sge": "qsub",
    "lsf": "bsub",
    "htcondor": "condor_submit",
}
_QUEUE_TOOL = {"slurm": "squeue", "lsf": "bjobs", "htcondor": "condor_q"}  # else qstat
_TAG = re.compile(r"^[A-Za-z0-9_]{1,40}$")
_JOB_NAME = re.compile(r"^abo-(?P<tag>[A-Za-z0-9_]+)-(?P<pid>\d+)-(?P<host>.+)$")
# [D-]HH:MM:SS, or HH:MM (LSF's format)
_WALLTIME = re.compile(r"^(?:(?P<d>\d+)-)?(?P<h>\d{1,3}):(?P<m>[0-5]\d)(?::(?P<s>[0-5]\d))?$")


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
