"""abo: asynchronous Bayesian optimization — no idle workers while the model thinks.

Example:
    >>> import abo
    >>> space = abo.Space({"x": abo.Float(-5.0, 5.0), "kind": abo.Categorical(["a", "b"])})
    >>> study = abo.create_study(space, strategy="random", seed=0)
    >>> trial = study.ask()
    >>> sorted(trial.params)
    ['kind', 'x']
"""

from abo.command import Command
from abo.exceptions import (
    AboError,
    AboWarning,
    ConfigError,
    DuplicatedStudyError,
    FailureRateExceeded,
    InvalidValueError,
    SearchSpaceError,
    StorageError,
    StudyNotFoundError,
    SurrogateFitError,
    TrialFailure,
    TrialNotFoundError,
    TrialStateError,
    UnknownStrategyError,
)
from abo.loop import OptimizeResult
from abo.registry import strategies
from abo.space import Categorical, Float, Int, Space
from abo.study import Study, create_study, load_study
from abo.trial import Trial, TrialState

__version__ = "0.1.0"

__all__ = [
    "AboError",
    "AboWarning",
    "Categorical",
    "Command",
    "ConfigError",
    "DuplicatedStudyError",
    "FailureRateExceeded",
    "Float",
    "Int",
    "InvalidValueError",
    "OptimizeResult",
    "SearchSpaceError",
    "Space",
    "StorageError",
    "Study",
    "StudyNotFoundError",
    "SurrogateFitError",
    "Trial",
    "TrialFailure",
    "TrialNotFoundError",
    "TrialState",
    "TrialStateError",
    "UnknownStrategyError",
    "__version__",
    "create_study",
    "load_study",
    "strategies",
]
