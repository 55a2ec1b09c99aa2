"""Which replica proposes for a study: one lease row per study in the shared database.

Several ``abo serve`` processes on one database are one service: any of them serves reads,
tells, reports and heartbeats, but only the holder of a study's *proposer lease* runs its
proposal rounds, so a study never has two GP fits or two rounds at once, and no round is
made without the trials of another. The lease is a row of ``abo_proposers`` (holder, its
address, an epoch, an expiry), taken and renewed in the study's own serialised transaction:

* An ask that reaches a replica not holding the lease takes it if it is free or expired;
  otherwise it is forwarded to the holder's address (``abo.service.forward``).
* The holder renews its leases every quarter of the lease's length, and trusts one for three
  quarters of it after the renewal began (margin for clock skew between hosts: the expiry is
  written in the storage clock of the replica that took it, so hosts need clocks within a
  quarter of the lease, as NTP keeps them). A replica that dies stops renewing; another takes
  the lease over once it expired, so within one lease length of the death.
* Each holder change increments the epoch, and the transaction that stores a round's trials
  checks that its replica still holds the lease at the epoch the round began under (a
  fencing token): a paused holder that lost its lease cannot store a stale round.
* A lease unused for ``idle`` seconds (counted from the end of its last round; never while a
  round runs, however long) is released, so studies spread over the replicas that ask for
  them; every lease is released when the replica stops.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from abo.core.exceptions import ProposerMoved, StudyNotFoundError
from abo.storage import ProposerLease, Storage, StudyRecord, Transaction

log = logging.getLogger("abo")

DEFAULT_LEASE_SECONDS = 10.0
TRUSTED = 0.75  # share of the lease a holder trusts it for after starting to renew it
RENEW = 0.25  # share of the lease between renewals

_Key = tuple[int, float]  # a study's (id, created_at): a study created again is another


def _key(record: StudyRecord) -> _Key:
    return (record.id, record.created_at)


@dataclass
class _Held:
    record: StudyRecord
    epoch: int
    trusted_until: float  # monotonic
    used: float  # monotonic: the last round or claim


class ProposerLeases:
    """This replica's proposer leases: take, renew, check (fence) and release them.

    Args:
        storage: the shared storage (its ``abo_proposers`` table).
        address: the URL the other replicas forward asks to (``None``: not reachable; the
            others then wait for its lease to end instead).
        seconds: the lease's length; a dead holder's studies move within it.
        idle: seconds without a round after which a lease is released (default 3 leases).
        monotonic: the clock a holder trusts its lease by (tests inject one).
    """

    def __init__(
        self,
        storage: Storage,
        address: str | None = None,
        seconds: float = DEFAULT_LEASE_SECONDS,
        idle: float | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.storage, self.address, self.seconds = storage, address, float(seconds)
        self.monotonic = monotonic
        self.idle = 3 * self.seconds if idle is None else float(idle)
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._held: dict[_Key, _Held] = {}
        self._running: dict[_Key, int] = {}  # rounds in flight per study: never idle
        self._lock = threading.Lock()
        self._round = threading.local()  # the epoch the round running in this thread began under
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- taking ---------------------------------------------------------------------------
    def holds(self, record: StudyRecord) -> bool:
        """Whether this replica holds the study's lease, known without a storage read."""
        with self._lock:
            held = self._held.get(_key(record))
            return held is not None and self.monotonic() < held.trusted_until

    def claim(self, record: StudyRecord) -> ProposerLease:
        """Take the lease (or renew it) unless another replica holds it unexpired; the lease
        as stored afterwards, whoever holds it."""
        began = self.monotonic()
        with self.storage.transaction(record) as tx:
            lease = self._claim(tx)
        with self._lock:
            key = _key(record)
            if lease.holder == self.holder:
                old = self._held.get(key)
                used = old.used if old is not None else began
                trusted = began + TRUSTED * self.seconds
                self._held[key] = _Held(record, lease.epoch, trusted, used)
            else:
                self._held.pop(key, None)
        return lease

    def _claim(self, tx: Transaction) -> ProposerLease:
        current = tx.proposer()
        if current is not None and current.holder != self.holder and current.expires_at > tx.now:
            return current
        if current is None:
            epoch = 1
        elif current.holder == self.holder:
            epoch = current.epoch
        else:
            epoch = current.epoch + 1
        fields = {"study": tx.study.name, "epoch": epoch, "replica": self.holder}
        if current is not None and current.holder != self.holder and current.expires_at > 0:
            log.warning("abo: took over proposing for study %r from %s (its lease expired)",
                        tx.study.name, current.holder, extra=fields)  # fmt: skip
        elif current is None or current.holder != self.holder:
            log.info("abo: proposing for study %r", tx.study.name, extra=fields)
        lease = ProposerLease(self.holder, self.address, epoch, tx.now + self.seconds)
        tx.set_proposer(lease)
        return lease

    def proposing(self) -> list[str]:
        """Names of the studies whose lease this replica holds now (sorted)."""
        now = self.monotonic()
        with self._lock:
            return sorted(h.record.name for h in self._held.values() if now < h.trusted_until)

    # -- a round ----------------------------------------------------------------------------
    @contextmanager
    def round(self, record: StudyRecord) -> Iterator[None]:
        """Run a proposal round of the study under this replica's lease (taken if free):
        ``ProposerMoved`` when another replica holds it; the round's new trials are stored
        only if the lease is still this replica's at the same epoch (``fence``)."""
        if not self.holds(record):
            lease = self.claim(record)
            if lease.holder != self.holder:
                raise ProposerMoved(
                    f"ask: another replica ({lease.holder}) proposes for study "
                    f"{record.name!r} now; ask again"
                )
        key = _key(record)
        with self._lock:
            held = self._held[key]
            held.used = self.monotonic()
            epoch = held.epoch
            self._running[key] = self._running.get(key, 0) + 1
        self._round.epoch = epoch
        try:
            yield
        finally:
            self._round.epoch = None
            with self._lock:
                self._running[key] -= 1
                if not self._running[key]:
                    del self._running[key]
                if key in self._held:  # idle from the round's end, not its start
                    self._held[key].used = self.monotonic()

    def fence(self, tx: Transaction) -> None:
        """Refuse to store a round's trials unless this replica still holds the lease at the
        epoch the round began under (called inside the storing transaction). Outside a
        round (queued points handed out by another path) the lease must be this replica's."""
        current = tx.proposer()
        epoch = getattr(self._round, "epoch", None)
        if current is None or current.holder != self.holder:
            if epoch is None and current is None:
                return  # no replica proposes for it: nothing to fence against
            raise ProposerMoved(
                f"ask: this replica lost the proposer lease of study {tx.study.name!r} "
                "during the round; ask again"
            )
        if epoch is not None and current.epoch != epoch:
            raise ProposerMoved(
                f"ask: the proposer lease of study {tx.study.name!r} changed hands during "
                "the round; ask again"
            )

    # -- keeping ----------------------------------------------------------------------------
    def start(self) -> None:
        """Renew held leases (and release idle ones) in a background thread."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._keep, name="abo-leases", daemon=True)
            self._thread.start()

    def _keep(self) -> None:
        while not self._stop.wait(RENEW * self.seconds):
            self.renew()

    def renew(self) -> None:
        """One pass: renew every lease used recently, release the others."""
        with self._lock:
            held = [(h, _key(h.record) in self._running) for h in self._held.values()]
        now = self.monotonic()
        for h, running in held:
            try:
                if not running and now - h.used > self.idle:
                    self.release(h.record)
                else:
                    self.claim(h.record)
            except StudyNotFoundError:
                with self._lock:
                    self._held.pop(_key(h.record), None)
            except Exception as exc:  # noqa: BLE001 - the storage is down: retried next pass
                log.warning("abo: could not renew the proposer lease of %r: %s",
                            h.record.name, exc)  # fmt: skip

    def release(self, record: StudyRecord) -> None:
        """Give up the study's lease (only if this replica holds it): it is marked expired,
        not removed, so the epoch keeps growing for whoever takes it next."""
        with self._lock:
            self._held.pop(_key(record), None)
        with self.storage.transaction(record) as tx:
            current = tx.proposer()
            if current is not None and current.holder == self.holder:
                tx.set_proposer(replace(current, expires_at=0.0))
                log.info("abo: released the proposer lease of study %r", record.name,
                         extra={"study": record.name, "epoch": current.epoch,
                                "replica": self.holder})  # fmt: skip

    def close(self) -> None:
        """Stop renewing and release every lease (a stopping replica hands its studies on
        at once instead of after the lease's length)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            held = list(self._held.values())
        for h in held:
            try:
                self.release(h.record)
            except Exception:  # noqa: BLE001 - best effort: the lease expires by itself
                pass
