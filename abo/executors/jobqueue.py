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

import logging
import shutil
import subprocess
import time
from collections.abc import Collection
from typing import Any

import dask
from dask.utils import parse_bytes
from distributed import Client

from abo.core.exceptions import AboError
from abo.executors.base import Future
from abo.executors.batch import (
    _QUEUE_TOOL,
    _TAG,
    SYSTEMS,
    BatchJob,
    _sbatch_test_only,
    _seconds,
    _Unreachable,
    cancel_jobs,
    cancel_orphans,
    check_submit_tool,
    check_system,
    check_walltime,
    job_name,
    list_jobs,
)
from abo.executors.dask import ABO_DASK_CONFIG, DaskExecutor, _Shutdown
from abo.executors.job_watch import _JobWatch

log = logging.getLogger("abo")

__all__ = [  # what other modules import from here, the split-out pieces included
    "SYSTEMS",
    "START_TIMEOUT",
    "BatchJob",
    "JobQueueExecutor",
    "cancel_jobs",
    "cancel_orphans",
    "check_submit_tool",
    "check_system",
    "check_walltime",
    "job_name",
    "list_jobs",
]

START_TIMEOUT = 300.0  # seconds work may wait with no worker connected before the run fails


def _cluster_class(system: str) -> Any:
    import dask_jobqueue

    return {
        "slurm": dask_jobqueue.SLURMCluster,
        "pbs": dask_jobqueue.PBSCluster,
        "lsf": dask_jobqueue.LSFCluster,
        "sge": dask_jobqueue.SGECluster,
        "htcondor": dask_jobqueue.HTCondorCluster,
    }[system]


def _check_options(
    cores: Any, memory: Any, jobs: Any, min_jobs: Any, processes: Any, start_timeout: Any
) -> None:
    """Raise ``AboError`` naming the first option out of range (before any job is submitted)."""
    if start_timeout is not None and (
        isinstance(start_timeout, bool)
        or not isinstance(start_timeout, int | float)
        or not 0 < start_timeout < float("inf")
    ):
        raise AboError(
            f"start_timeout: expected a positive number of seconds or None, got {start_timeout!r}"
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
        raise AboError(f"memory: expected a size such as '4GB', got {memory!r} ({exc})") from None
    if processes > cores:
        raise AboError(f"processes: {processes} exceeds cores ({cores})")


def _check_tag(tag: Any) -> str:
    """The jobs' tag (``abo`` when none is given): 1-40 letters, digits or ``_``."""
    tag = "abo" if tag is None else tag
    if not isinstance(tag, str) or not _TAG.match(tag):
        raise AboError(f"tag: expected 1-40 letters, digits or '_', got {tag!r}")
    return tag


def _prepare_queue(cluster: Any, tag: str, system: str) -> list[BatchJob]:
    """Let SLURM judge the job request, then cancel the orphans of this tag; returns them.

    Skipped, with a warning, when the batch queue cannot be read (its tools are not on PATH,
    or its controller does not answer)."""
    if shutil.which(_QUEUE_TOOL.get(system, "qstat")) is None:
        return []
    try:
        if system == "slurm":
            _sbatch_test_only(cluster.job_script())
        return cancel_orphans(tag, system, exact=True)
    except (OSError, subprocess.SubprocessError, _Unreachable) as exc:
        log.warning("cannot check the batch queue (%s): jobs may not start", exc)
        return []


class JobQueueExecutor(DaskExecutor):
    """Runs evaluations in batch jobs that scale with the work (dask-jobqueue).

    Args:
        system: ``slurm``, ``pbs``, ``lsf``, ``sge`` or ``htcondor``.
        cores: cores per job (one job = ``processes`` Dask workers).
        memory: memory per job (``"8GB"``).
        walltime: ``HH:MM:SS``; a job killed by it loses its evaluation (retried once).
        queue: the partition or queue.
        account: the account to charge (``project`` on LSF/SGE).
        jobs: at most this many jobs at once.
        min_jobs: this many jobs are kept even when idle.
        processes: worker processes per job, each running one evaluation at a time.
        tag: names the jobs ``abo-<tag>-<pid>-<host>`` (letters, digits, ``_``).
        host: the address the scheduler listens on (default ``127.0.0.1``: a single node;
            on a real cluster, an address the compute nodes reach).
        interface: the network interface the scheduler listens on instead, e.g. ``ib0``.
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
        _check_options(cores, memory, jobs, min_jobs, processes, start_timeout)
        self.tag = _check_tag(tag)
        self.job_name = job_name(self.tag)
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
            self.orphans: list[BatchJob] = _prepare_queue(cluster, self.tag, system)
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
