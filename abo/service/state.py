"""What the endpoints share: the storage, one cached ``Study`` per name, the ask lines.

A cached ``Study`` can go stale: another process may delete the study, or delete it and create
it again under the same name (with another space). The storage refuses a stale record
(``StudyNotFoundError``); the cache then drops it, so the next request loads the current one.
A client that says which study it loaded (its ``created_at``, sent as ``X-Abo-Study-Created``)
gets 404 when that is no longer the study of that name, so a stale client never asks or tells
into a new study.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from starlette.concurrency import run_in_threadpool

from abo.core.exceptions import StudyNotFoundError
from abo.core.trial import Trial
from abo.service.asks import AskLines, AskWant
from abo.service.forward import Forwarder
from abo.service.health import WriteHealth
from abo.service.metrics import Gauge, Metrics
from abo.service.proposers import DEFAULT_LEASE_SECONDS, ProposerLeases
from abo.storage import ProposerLease, Storage, StudyRecord
from abo.study.study import Study

if TYPE_CHECKING:
    from abo.propose.remote import ClusterProposals

T = TypeVar("T")
CREATED_HEADER = "X-Abo-Study-Created"


class ServiceState:
    """The storage, the studies it serves (cached) and their ask lines.

    Studies are opened with ``refit="background"``: an ask never waits for a GP fit; it
    proposes from the newest hyperparameters conditioned on the current data while one thread
    refits, its fit running in a child process (see ``abo.model.refit`` and ``abo.model.fitproc``).
    """

    def __init__(
        self,
        storage: Storage,
        max_waiting_asks: int = 256,
        max_ask_batch: int = 64,
        ask_threads: int = 4,
        device: str | None = None,
        address: str | None = None,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        proposals: ClusterProposals | None = None,
    ) -> None:
        self.storage = storage
        self.proposals = proposals  # proposal rounds on a Dask cluster (abo.propose.remote)
        self.device = device  # overrides each study's device in this process
        self.leases = ProposerLeases(storage, address, lease_seconds)
        self.forwarder = Forwarder(self.leases)
        self.metrics = Metrics()
        self.asks = AskLines(
            max_waiting_asks, max_ask_batch, ask_threads,
            lambda st: self.leases.round(st.record), self.metrics.round_done,
        )  # fmt: skip
        self.health = WriteHealth()
        self._studies: dict[str, Study] = {}
        self._lock = threading.Lock()

    def gauges(self) -> list[Gauge]:
        """The values ``/metrics`` reads from this state when scraped."""
        from abo import __version__

        with self._lock:
            cached = len(self._studies)
        info = {"version": __version__, "replica": self.leases.holder}
        return [
            Gauge("abo_info", "This service process: abo's version and the replica's id.", 1,
                  info),
            Gauge("abo_asks_waiting", "Asks waiting for a proposal round.", self.asks.waiting),
            Gauge("abo_proposer_leases_held", "Studies this replica proposes for now.",
                  len(self.leases.proposing())),
            Gauge("abo_studies_cached", "Studies this process holds open.", cached),
            Gauge("abo_proposal_rounds_running", "Proposal rounds running now.",
                  self.asks.running),
        ]  # fmt: skip

    def _open(self, record: Any) -> Study:
        return Study(
            self.storage, record, refit="background", device=self.device,
            fence=self.leases.fence, proposals=self.proposals,
        )  # fmt: skip

    def load(self, name: str) -> StudyRecord:
        """The storage's record of the study called ``name``; ``StudyNotFoundError`` naming
        only that name (the storage's own message lists other studies: a service tells a
        client nothing about studies it did not ask for)."""
        try:
            return self.storage.load_study(name)
        except StudyNotFoundError:
            raise StudyNotFoundError(f"name: no study called {name!r}", field="name") from None

    def study(self, name: str, created: float | None = None) -> Study:
        """The study called ``name``; with ``created``, only if it is the one created then
        (``StudyNotFoundError`` saying it was replaced otherwise)."""
        with self._lock:
            study = self._studies.get(name)
        if study is None or (created is not None and study.record.created_at != created):
            current = self.load(name)  # StudyNotFoundError: none of that name
            if study is None or current.created_at != study.record.created_at:
                fresh = self._open(current)  # none cached, or the cached one is stale
                with self._lock:
                    if self._studies.get(name) is study:
                        self._studies[name] = fresh
                    study = self._studies.setdefault(name, fresh)
        if created is not None and study.record.created_at != created:
            raise StudyNotFoundError(
                f"name: study {name!r} was deleted and created again since this client "
                "loaded it; load it again to use the new one"
            )
        return study

    def _cached(self, name: str, created: float | None) -> Study | None:
        """The cached study when it needs no storage read to hand out, else ``None``."""
        with self._lock:
            study = self._studies.get(name)
        if study is None or (created is not None and study.record.created_at != created):
            return None
        return study

    def forget(self, name: str, study: Study | None = None) -> None:
        """Drop the cached study of that name (deleted, or found stale); with ``study``, only
        if that is the one cached (a fresher one loaded meanwhile stays)."""
        with self._lock:
            if study is None or self._studies.get(name) is study:
                self._studies.pop(name, None)

    def remember(self, study: Study) -> Study:
        """Cache a study this process just created (as the service opens studies)."""
        opened = self._open(study.record)
        with self._lock:
            return self._studies.setdefault(study.name, opened)

    def call(self, name: str, created: float | None, fn: Callable[[Study], T], retry: bool) -> T:
        """``fn(study)``; a study found stale meanwhile is dropped from the cache and, with
        ``retry``, ``fn`` runs once more on the current one (for calls that do not name a trial
        of the old study: reads, asks)."""
        study = self.study(name, created)
        try:
            return fn(study)
        except StudyNotFoundError:
            self.forget(name, study)
            if not retry:
                raise
        return fn(self.study(name, created))

    async def proposer(
        self, name: str, created: float | None, forwarded: bool
    ) -> tuple[StudyRecord, ProposerLease | None]:
        """The study's record, and the lease of the replica its asks go to (``None``: this
        one; see ``Forwarder.route``)."""
        for attempt in range(2):
            study = self._cached(name, created)
            if study is None:
                study = await run_in_threadpool(self.study, name, created)
            try:
                return study.record, await self.forwarder.route(study.record, forwarded)
            except StudyNotFoundError:  # the cached study is stale: load the current one
                self.forget(name, study)
                if attempt:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def ask(
        self,
        name: str,
        created: float | None,
        count: int,
        n_workers: int | None,
        client_id: str | None,
        info: Mapping[str, Any],
        pace: float | None = None,
    ) -> list[Trial]:
        """``count`` trials from the study's next shared proposal round (see ``AskLines``)."""
        for attempt in range(2):
            study = self._cached(name, created)
            if study is None:  # a storage read: not on the event loop
                study = await run_in_threadpool(self.study, name, created)
            want = AskWant(count, n_workers, client_id, dict(info), pace)
            try:
                return await asyncio.wrap_future(self.asks.submit(study, want))
            except StudyNotFoundError:
                self.forget(name, study)
                if attempt:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover
