"""The API's error codes: which abo exception each is, and its HTTP status (one table for the
server, which answers with them, and the client, which raises them again). No FastAPI here."""

from __future__ import annotations

from abo.core.exceptions import (
    AboError,
    DuplicatedStudyError,
    InvalidValueError,
    OptionsConflictError,
    ProposerMoved,
    SearchSpaceError,
    StorageError,
    StudyNotFoundError,
    TrialNotFoundError,
    TrialStateError,
    UnknownStrategyError,
)

# (exception, HTTP status, machine-readable code): the server uses the first that matches
# an exception; the client raises the exception of a code.
ERRORS: list[tuple[type[AboError], int, str]] = [
    (InvalidValueError, 422, "invalid_value"),
    (SearchSpaceError, 422, "invalid_params"),
    (UnknownStrategyError, 422, "unknown_strategy"),
    (StudyNotFoundError, 404, "study_not_found"),
    (TrialNotFoundError, 404, "trial_not_found"),
    (TrialStateError, 409, "trial_state"),
    (DuplicatedStudyError, 409, "study_exists"),
    (OptionsConflictError, 409, "options_conflict"),
    (StorageError, 503, "storage_unavailable"),
    (ProposerMoved, 503, "proposer_moved"),
    (AboError, 422, "invalid_argument"),
]
# codes the server sends for particular conflicts (creating a study that exists otherwise)
CONFLICTS: dict[str, type[AboError]] = {
    "space_conflict": SearchSpaceError,
    "outcomes_conflict": AboError,
    "direction_conflict": AboError,
}
CODES: dict[str, type[AboError]] = {code: kind for kind, _, code in ERRORS} | CONFLICTS


def status_and_code(exc: AboError) -> tuple[int, str]:
    """The HTTP status and code the server answers ``exc`` with."""
    for kind, status, code in ERRORS:
        if isinstance(exc, kind):
            return status, code
    raise AssertionError("unreachable: AboError is last")  # pragma: no cover
