"""``/healthz`` (the process is alive) and ``/readyz`` (the storage takes writes now): no auth
needed, outside ``/api/v1``; ``/metrics`` (Prometheus) and ``/api/v1/replica`` (auth)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, Field

import abo.service.schemas as s
from abo.core.exceptions import StorageError
from abo.service.errors import abo_error_response, error_response
from abo.service.metrics import CONTENT_TYPE
from abo.service.routes.common import Service

router = APIRouter(tags=["health"])


class Replica(BaseModel):
    """``/api/v1/replica``: this ``abo serve`` process among the replicas on its database."""

    replica: str = Field(description="this replica's id (host:pid:random)")
    address: str | None = Field(description="where the other replicas forward asks to it")
    lease_seconds: float = Field(description="how long its proposer leases last unrenewed")
    proposing: list[str] = Field(description="the studies whose proposer lease it holds now")
    rounds: int = Field(description="proposal rounds it ran since it started")


@router.get("/healthz", response_model=s.Health)
async def healthz() -> s.Health:
    """The process is alive (no auth needed; answered on the event loop, never queued)."""
    return s.Health(status="ok")


@router.get(
    "/readyz",
    response_model=s.Ready,
    responses={
        503: {
            "model": s.ErrorBody,
            "description": "Storage cannot be written, or most recent writes failed",
        }
    },
)
def readyz(state: Service) -> s.Ready | JSONResponse:
    """The storage can be written now (a real, empty write; no auth needed) and most of
    the service's recent writes succeeded (``abo.service.health``: a probe may fit where
    a trial does not), and how many asks wait for a proposal round."""
    try:
        state.storage.check_writable()
    except StorageError as exc:
        state.health.failed(str(exc))
        state.metrics.storage_errors.inc()
        return abo_error_response(exc)
    state.health.succeeded()
    problem = state.health.problem()
    if problem is not None:
        return error_response(503, "storage_unavailable", problem, None)
    return s.Ready(status="ready", asks_waiting=state.asks.waiting)


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    responses={200: {"content": {CONTENT_TYPE: {}}, "description": "Prometheus text format"}},
    tags=["health"],
)
def metrics(state: Service) -> PlainTextResponse:
    """This process's metrics in Prometheus' text format (auth like the API): requests by
    route and status with their durations, asks waiting, proposal rounds' seconds, trials
    proposed and finished, proposer leases held, storage errors."""
    body = state.metrics.render(state.gauges())
    return PlainTextResponse(body, media_type=CONTENT_TYPE)


@router.get("/api/v1/replica", response_model=Replica, tags=["replicas"])
def replica(state: Service) -> Replica:
    """This replica: its id and address, and the studies it proposes for now (the other
    replicas on the same database forward their asks to it)."""
    leases = state.leases
    return Replica(
        replica=leases.holder,
        address=leases.address,
        lease_seconds=leases.seconds,
        proposing=leases.proposing(),
        rounds=state.asks.rounds,
    )


__all__ = ["router"]
