"""Asks forwarded to the replica that proposes for their study (``abo.service.proposers``).

A replica that receives an ask for a study whose proposer lease another replica holds sends
the same request to the holder's address and relays its answer as it came (status, body,
``Retry-After``), so the ask joins the holder's shared round. A forwarded request carries
``X-Abo-Forwarded``; a replica never forwards such a request again (a lease that moved
meanwhile answers 503 ``proposer_moved``, which clients retry). When the holder cannot be
reached (it stopped, died, or has no address), the replica waits until its lease is released
(a holder stopped with SIGTERM releases its leases once its rounds in flight are answered) or
expires (a holder that died), takes it over, then proposes itself; the asker's ``client_id``
gets back any trials the old holder had started for it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
from fastapi import Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from abo.core.exceptions import ProposerMoved
from abo.service.proposers import ProposerLeases
from abo.storage import ProposerLease, StudyRecord

FORWARDED_HEADER = "X-Abo-Forwarded"
PASSED_HEADERS = ("authorization", "x-abo-study-created", "cookie")
TAKEOVER_POLL = 0.25  # seconds between attempts to take over an unreachable holder's lease


class Forwarder:
    """Sends asks to the proposing replica over one pooled HTTP client.

    Args:
        leases: this replica's leases (to take over a holder that cannot be reached).
        timeout: seconds a forwarded ask may take (a proposal round can take long).
    """

    def __init__(self, leases: ProposerLeases, timeout: float = 600.0) -> None:
        self.leases = leases
        self.timeout = timeout
        self._client: httpx.AsyncClient | None = None
        self._waits: dict[tuple[int, float], asyncio.Future[ProposerLease | None]] = {}

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            limits = httpx.Limits(max_connections=256, max_keepalive_connections=64)
            self._client = httpx.AsyncClient(timeout=self.timeout, limits=limits)
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def route(self, record: StudyRecord, forwarded: bool) -> ProposerLease | None:
        """Where an ask for the study goes: ``None`` to propose here (this replica holds the
        lease, or just took it), else the holder's lease. A forwarded ask that finds another
        holder is ``ProposerMoved`` (never forwarded twice)."""
        if self.leases.holds(record):
            return None
        lease = await run_in_threadpool(self.leases.claim, record)
        if lease.holder == self.leases.holder:
            return None
        if forwarded:
            raise ProposerMoved(
                f"ask: the proposer of study {record.name!r} moved to {lease.holder}; ask again"
            )
        return lease

    async def ask(
        self, record: StudyRecord, lease: ProposerLease, request: Request, body: dict[str, Any]
    ) -> Response | None:
        """The holder's answer to the ask, or ``None`` once this replica took the lease over
        from a holder it could not reach (then it proposes itself)."""
        for _ in range(3):  # the holder, then whoever took over from it
            if lease.address is not None:
                try:
                    return await self._send(lease.address, request, body)
                except httpx.TransportError:
                    pass  # dead or unreachable: take over once its lease expires
            taken = await self._take_over(record, lease)
            if taken is None:
                return None
            lease = taken
        raise ProposerMoved(f"ask: the proposer of study {record.name!r} keeps moving; ask again")

    async def _send(self, address: str, request: Request, body: dict[str, Any]) -> Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() in PASSED_HEADERS}
        headers[FORWARDED_HEADER] = self.leases.holder
        url = address.rstrip("/") + request.url.path
        answer = await self._http().post(url, json=body, headers=headers)
        passed = {k: v for k, v in answer.headers.items() if k.lower() == "retry-after"}
        return Response(
            answer.content,
            status_code=answer.status_code,
            headers=passed,
            media_type=answer.headers.get("content-type", "application/json"),
        )

    async def _take_over(self, record: StudyRecord, lease: ProposerLease) -> ProposerLease | None:
        """Wait until an unreachable holder's lease is released (it stopped gracefully) or
        expires (it died) and take it (``None``), or the lease of a third replica that took
        it first. The asks that find a study's holder gone share one wait."""
        key = (record.id, record.created_at)
        task = self._waits.get(key)
        if task is None or task.done():
            task = asyncio.ensure_future(self._wait_for(record, lease))
            self._waits[key] = task
        try:
            return await asyncio.shield(task)  # a client that leaves does not end the wait
        finally:
            if task.done() and self._waits.get(key) is task:
                del self._waits[key]

    async def _wait_for(self, record: StudyRecord, lease: ProposerLease) -> ProposerLease | None:
        expires_in = lease.expires_at - self.leases.storage.clock()  # the holder's clock
        deadline = time.monotonic() + max(0.0, min(expires_in, self.leases.seconds)) + 5.0
        while True:
            current = await run_in_threadpool(self.leases.claim, record)
            if current.holder == self.leases.holder:
                return None
            if current.holder != lease.holder:
                return current
            if time.monotonic() >= deadline:
                raise ProposerMoved(
                    f"ask: the proposer of study {record.name!r} ({lease.holder}) cannot be "
                    "reached and its lease does not expire; ask again"
                )
            await asyncio.sleep(TAKEOVER_POLL)
