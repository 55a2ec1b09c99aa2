"""Where evaluations run: Dask clusters (local, remote) and threads, behind one protocol."""

from abo.executors.base import Executor, LostEvaluation
from abo.executors.dask import DaskExecutor
from abo.executors.jobqueue import JobQueueExecutor
from abo.executors.local import ThreadExecutor

__all__ = ["DaskExecutor", "Executor", "JobQueueExecutor", "LostEvaluation", "ThreadExecutor"]
