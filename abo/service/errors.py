"""The API's one error shape, ``{"error": {"code", "message", "field"}}``, and how abo's
exceptions map onto it (status and machine-readable code)."""

from __future__ import annotations

from fastapi.responses import JSONResponse

from abo.core.exceptions import AboError
from abo.service.codes import status_and_code


def error_response(
    status: int,
    code: str,
    message: str,
    field: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """The one error shape of the API."""
    body = {"error": {"code": code, "message": message, "field": field}}
    return JSONResponse(body, status_code=status, headers=headers)


def abo_error_response(exc: AboError) -> JSONResponse:
    """The response for an abo exception, naming its ``field``."""
    message = str(exc)
    if "[SQL:" in message:  # never echo a statement, whatever raised it
        message = message.split("[SQL:", 1)[0].rstrip()
    status, code = status_and_code(exc)
    return error_response(status, code, message, exc.field)


class AsksBackedUp(Exception):
    """More asks wait for a proposal than the service accepts: 503 ``busy`` + Retry-After."""

    def __init__(self, waiting: int, limit: int, retry_after: int) -> None:
        super().__init__(
            f"ask: {waiting} asks are already waiting for a proposal (the limit is "
            f"max_waiting_asks={limit}); retry after {retry_after} s"
        )
        self.retry_after = retry_after

    def response(self) -> JSONResponse:
        return error_response(
            503, "busy", str(self), None, headers={"Retry-After": str(self.retry_after)}
        )
