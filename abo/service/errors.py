"""The API's one error shape, ``{"error": {"code", "message", "field"}}``, and how abo's
exceptions map onto it (status and machine-readable code)."""

from __future__ import annotations

import re

from fastapi.responses import JSONResponse

from abo.exceptions import (
    AboError,
    DuplicatedStudyError,
    InvalidValueError,
    SearchSpaceError,
    StorageError,
    StudyNotFoundError,
    TrialNotFoundError,
    TrialStateError,
    UnknownStrategyError,
)

# exception type -> (HTTP status, machine-readable code); the first match wins.
ERRORS: list[tuple[type[AboError], int, str]] = [
    (InvalidValueError, 422, "invalid_value"),
    (SearchSpaceError, 422, "invalid_params"),
    (UnknownStrategyError, 422, "unknown_strategy"),
    (StudyNotFoundError, 404, "study_not_found"),
    (TrialNotFoundError, 404, "trial_not_found"),
    (TrialStateError, 409, "trial_state"),
    (DuplicatedStudyError, 409, "study_exists"),
    (StorageError, 503, "storage_unavailable"),
    (AboError, 422, "invalid_argument"),
]
_FIELD = re.compile(r"^([A-Za-z_][A-Za-z0-9_.\[\]-]{0,127}): ")


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
    """The response for an abo exception; its message's leading ``field:`` names the field."""
    message = str(exc)
    if "[SQL:" in message:  # never echo a statement, whatever raised it
        message = message.split("[SQL:", 1)[0].rstrip()
    match = _FIELD.match(message)
    for kind, status, code in ERRORS:
        if isinstance(exc, kind):
            return error_response(status, code, message, match.group(1) if match else None)
    raise AssertionError("unreachable: AboError is last")  # pragma: no cover


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
