"""The abo HTTP service: ``create_app`` (server), ``Client`` / ``RemoteStudy`` (Python client).

Start it with ``abo serve --storage sqlite:///abo.db``; the dashboard is at ``/`` and the
OpenAPI schema at ``/openapi.json``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from abo.service.app import create_app
    from abo.service.client import Client, RemoteStudy

__all__ = ["Client", "RemoteStudy", "create_app"]


def __getattr__(name: str) -> Any:
    """Lazy: the client needs no FastAPI, and ``abo --help`` needs neither (nor httpx)."""
    if name == "create_app":
        from abo.service.app import create_app

        return create_app
    if name in ("Client", "RemoteStudy"):
        from abo.service import client

        return getattr(client, name)
    raise AttributeError(f"module 'abo.service' has no attribute {name!r}")
