"""The abo HTTP service: ``create_app`` (server), ``Client`` / ``RemoteStudy`` (Python client).

Start it with ``abo serve --storage sqlite:///abo.db``; the dashboard is at ``/`` and the
OpenAPI schema at ``/openapi.json``.
"""

from abo.service.client import Client, RemoteStudy

__all__ = ["Client", "RemoteStudy", "create_app"]


def __getattr__(name: str):  # noqa: ANN202 - lazy: the client should not import FastAPI
    if name == "create_app":
        from abo.service.app import create_app

        return create_app
    raise AttributeError(name)
