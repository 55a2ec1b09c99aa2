"""Proposal rounds on a Dask cluster: the proposer is a pure function of the study's snapshot.

A service hosting many studies, or an ``optimize`` driver whose model is expensive, can run its
proposals on Dask workers instead of in its own process (``abo serve --dask-scheduler``,
``study.optimize(..., proposals="tcp://host:8786")``, ``[executor] proposals = "tcp://..."`` in
a study file). Give them a cluster of their own (GPU workers, say): on the cluster that runs
the evaluations a proposal would wait behind them, as Dask does not preempt tasks. The caller
reads the snapshot (trials, reports), a worker proposes from it, and the caller stores the
trials in its own transaction as before, so storage, leases and fencing are unchanged. Each
study's rounds go to one worker (chosen by a hash of the study among the workers, any other
when it is gone), where its ``Proposer`` stays cached between rounds so the GP's
hyperparameters stay warm; on a worker the refit policy is ``"sync"`` (a worker process may not
start the background fit's child process). Each record says where it was proposed
(``details["proposed_on"]``, the worker's address).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from abo.core.exceptions import AboError
from abo.core.space import ParamValue
from abo.core.trial import ProposalRecord, Report, Trial
from abo.storage import StudyRecord

CACHED = 32  # proposers a worker keeps (least recently used dropped first)
_proposers: OrderedDict[tuple[str, int, float], Any] = OrderedDict()
_lock = threading.Lock()

Proposals = list[tuple[dict[str, ParamValue], ProposalRecord]]


def propose_on_worker(
    key: tuple[str, int, float],
    spec: Any,
    device: str | None,
    trials: Sequence[Trial],
    n: int,
    n_workers: int | None,
    pace: float | None,
    reports: Mapping[int, Sequence[Report]] | None,
) -> Proposals:
    """Run on a Dask worker: ``n`` proposals for the snapshot, from this worker's cached
    proposer of the study (made on first use)."""
    from distributed import get_worker

    from abo.model.threads import torch_threads
    from abo.propose.proposer import Proposer

    with _lock:
        proposer = _proposers.pop(key, None) or Proposer(spec, "sync", device)
        _proposers[key] = proposer
        while len(_proposers) > CACHED:
            _proposers.popitem(last=False)
    with torch_threads():
        out = proposer.propose(trials, n, n_workers, pace, reports)
    where = get_worker().address
    return [(p, replace(r, details={**r.details, "proposed_on": where})) for p, r in out]


class ClusterProposals:
    """Sends proposal rounds to the workers of a Dask cluster.

    Args:
        target: a scheduler's address (``tcp://host:8786``) or a ``distributed.Client``.
        timeout: seconds to connect to the scheduler.
        field: the option named by errors (``dask_scheduler`` for the service,
            ``proposals`` for ``optimize``).
    """

    def __init__(self, target: Any, timeout: float = 30.0, field: str = "dask_scheduler") -> None:
        from distributed import Client

        if isinstance(target, Client):
            self.client, self._own = target, False
        elif isinstance(target, str) and target:
            try:
                self.client = Client(target, timeout=timeout, set_as_default=False)
            except (OSError, TimeoutError) as exc:
                raise AboError(
                    f"{field}: cannot reach the Dask scheduler at {target!r}: {exc}", field=field
                ) from None
            self._own = True
        else:
            raise AboError(
                f"{field}: expected a Dask scheduler's address (tcp://host:8786) or a Client, "
                f"got {target!r}",
                field=field,
            )

    def _worker_for(self, record: StudyRecord) -> list[str] | None:
        """The worker a study's rounds go to (stable while the workers stay the same)."""
        workers = sorted(self.client.scheduler_info(n_workers=-1).get("workers", {}))
        if not workers:
            return None
        digest = hashlib.sha256(f"{record.name}:{record.created_at!r}".encode()).digest()
        return [workers[int.from_bytes(digest[:8], "big") % len(workers)]]

    def propose(
        self,
        record: StudyRecord,
        device: str | None,
        trials: Sequence[Trial],
        n: int,
        n_workers: int | None,
        pace: float | None,
        reports: Mapping[int, Sequence[Report]] | None,
    ) -> Proposals:
        """``n`` proposals for the study's snapshot, made on a worker of the cluster."""
        key = (record.name, record.id, record.created_at)
        args = (key, record.spec, device, list(trials), n, n_workers, pace, reports)
        future = self.client.submit(
            propose_on_worker, *args, workers=self._worker_for(record),
            allow_other_workers=True, pure=False,
        )  # fmt: skip
        return list(future.result())

    def close(self) -> None:
        """Disconnect (only a client this object opened)."""
        if self._own:
            self.client.close()
