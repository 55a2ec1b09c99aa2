"""Asks forwarded to the replica that proposes for their study (``abo.service.proposers``).

A replica that receives an ask for a study whose proposer lease another replica holds sends
the same request to the holder's address and relays its answer as it came (status, body,
``Retry-After``), so the ask joins the holder's shared round. A forwarded request carries
``X-Abo-Forwarded``; a replica never forwards such a request again (a lease that moved
meanwhile answers 503 ``proposer_moved``, which clients retry). When the holder cannot be
reached (it died, or it has no address), the replica waits for its lease to expire and takes
it over, then proposes itself; the asker's ``client_id`` gets back any trials the dead
holder had started for it.
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
        """Wait for an unreachable holder's lease to expire and take it (``None``), or the
        lease of a third replica that took it first."""
        deadline = time.monotonic() + self.leases.seconds + 5.0
        expires_in = lease.expires_at - self.leases.storage.clock()  # the holder's clock
        await asyncio.sleep(max(0.0, min(expires_in, self.leases.seconds)))
        while time.monotonic() < deadline:
            current = await run_in_threadpool(self.leases.claim, record)
            if current.holder == self.leases.holder:
                return None
            if current.holder != lease.holder:
                return current
            await asyncio.sleep(TAKEOVER_POLL)
        raise ProposerMoved(
            f"ask: the proposer of study {record.name!r} ({lease.holder}) cannot be reached "
            "and its lease does not expire; ask again"
        )
