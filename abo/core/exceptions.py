"""The abo exception tree, split by what the caller must do.

::

    AboError
    ├── SearchSpaceError        an invalid space, or parameters that do not fit it (fix the input)
    ├── InvalidValueError       a value that is NaN, infinite or not a number (fix the input)
    ├── StudyNotFoundError      no study of that name in the storage
    ├── DuplicatedStudyError    a study of that name exists already
    ├── OptionsConflictError    it exists with other options than those given (load_if_exists)
    ├── TrialNotFoundError      no trial of that id in the study
    ├── TrialStateError         a transition the state forbids (e.g. a second, different tell)
    ├── UnknownStrategyError    a strategy name that is not registered (lists the valid ones)
    ├── StorageError            the storage cannot be opened or written (retry or fix the URL)
    ├── SurrogateFitError       the GP could not be fitted (abo falls back and warns instead)
    ├── StrategyError           the strategy raised while proposing (a bug: its cause is kept)
    ├── TrialFailure            raised by an objective to fail its trial on purpose
    ├── FailureRateExceeded     optimize stopped: most evaluations keep failing
    └── ConfigError             a study file for ``abo run`` is incomplete or wrong

    AboWarning (UserWarning)    something was degraded but the study goes on

Every error names the field it is about and why, so a message can be shown to a user as is.
"""

from __future__ import annotations

import re

_FIELD = re.compile(r"^([A-Za-z_][A-Za-z0-9_.\[\]-]{0,127}): ")


class AboError(Exception):
    """Root of every error abo raises on purpose.

    ``field`` names what the error is about (``"value"``, ``"outcomes.error"``,
    ``"space.lr"``): given where the error is raised, else read from the ``field: reason``
    form every abo message starts with.
    """

    def __init__(self, *args: object, field: str | None = None) -> None:
        super().__init__(*args)
        self._field = field

    @property
    def field(self) -> str | None:
        explicit = getattr(self, "_field", None)  # absent on an error unpickled elsewhere
        if explicit is not None:
            return explicit
        match = _FIELD.match(str(self))
        return match.group(1) if match else None


class SearchSpaceError(AboError, ValueError):
    """The search space is invalid, or parameters do not fit it."""


class InvalidValueError(AboError, ValueError):
    """An objective value is NaN, infinite or not a real number."""


class StudyNotFoundError(AboError, LookupError):
    """No study of the given name exists in the storage."""


class DuplicatedStudyError(AboError):
    """A study of the given name exists already (use ``load_if_exists=True`` to resume it)."""


class OptionsConflictError(AboError):
    """The study exists with other options than those given to create it again: each one
    that differs is in ``differences`` as ``(stored, given)`` (``abo.spec.options_check``)."""

    def __init__(
        self,
        *args: object,
        field: str | None = None,
        differences: dict[str, tuple[object, object]] | None = None,
    ) -> None:
        super().__init__(*args, field=field)
        self.differences = dict(differences or {})


class TrialNotFoundError(AboError, LookupError):
    """No trial of the given id exists in the study."""


class TrialStateError(AboError):
    """The trial's state forbids the requested transition."""


class UnknownStrategyError(AboError, ValueError):
    """The strategy name is not registered."""


class StorageError(AboError):
    """The storage cannot be opened, read or written."""


class ProposerMoved(AboError):
    """Another service replica proposes for this study now; ask again (503, Retry-After)."""


class SurrogateFitError(AboError):
    """The Gaussian process could not be fitted to the data."""


class StrategyError(AboError):
    """The strategy raised while proposing; ``__cause__`` is its exception."""


class TrialFailure(AboError):
    """Raised by an objective to mark its trial failed with a reason.

    Args:
        reason: why the evaluation failed, stored on the trial.
        retryable: ``True`` when the failure says nothing about the parameters (infrastructure),
            so the trial is marked ``lost`` and its parameters retried instead of ``failed``.
    """

    def __init__(self, reason: str, retryable: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable


class AboWarning(UserWarning):
    """Something was degraded (a fallback was taken) but the study goes on."""


class FailureRateExceeded(AboError):
    """Too many evaluations failed: the study stopped instead of burning its budget (exit 3)."""


class ConfigError(AboError, ValueError):
    """A study file (``abo run``) is missing something or holds a wrong value."""
