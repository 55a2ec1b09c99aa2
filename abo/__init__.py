"""abo: asynchronous Bayesian optimization — no idle workers while the model thinks.

Example:
    >>> import abo
    >>> space = abo.Space({"x": abo.Float(-5.0, 5.0), "kind": abo.Categorical(["a", "b"])})
    >>> study = abo.create_study(space, strategy="random", seed=0)
    >>> trial = study.ask()
    >>> sorted(trial.params)
    ['kind', 'x']

The public names are imported on first use (PEP 562), so ``import abo`` (and the ``abo``
commands that only read a storage) do not pay for torch, BoTorch and Dask up front.
"""

import importlib as _importlib
import importlib.util as _importlib_util
import typing as _typing

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "AboError": "abo.core.exceptions",
    "AboWarning": "abo.core.exceptions",
    "Categorical": "abo.core.space",
    "Command": "abo.run.command",
    "Constraint": "abo.core.outcomes",
    "ConfigError": "abo.core.exceptions",
    "DuplicatedStudyError": "abo.core.exceptions",
    "FailureRateExceeded": "abo.core.exceptions",
    "Float": "abo.core.space",
    "Int": "abo.core.space",
    "InvalidValueError": "abo.core.exceptions",
    "Objective": "abo.core.outcomes",
    "OptionsConflictError": "abo.core.exceptions",
    "OptimizeResult": "abo.run.loop",
    "ProposerMoved": "abo.core.exceptions",
    "Report": "abo.core.trial",
    "SearchSpaceError": "abo.core.exceptions",
    "Space": "abo.core.space",
    "StorageError": "abo.core.exceptions",
    "Study": "abo.study.study",
    "StudyNotFoundError": "abo.core.exceptions",
    "SurrogateFitError": "abo.core.exceptions",
    "StrategyError": "abo.core.exceptions",
    "Trial": "abo.core.trial",
    "TrialFailure": "abo.core.exceptions",
    "TrialHandle": "abo.run.reporting",
    "TrialNotFoundError": "abo.core.exceptions",
    "TrialState": "abo.core.trial",
    "TrialStateError": "abo.core.exceptions",
    "UnknownStrategyError": "abo.core.exceptions",
    "create_study": "abo.study.study",
    "delete_study": "abo.study.study",
    "load_study": "abo.study.study",
    "strategies": "abo.acquisitions.registry",
}

__all__ = [
    "AboError",
    "AboWarning",
    "Categorical",
    "Command",
    "ConfigError",
    "Constraint",
    "DuplicatedStudyError",
    "FailureRateExceeded",
    "Float",
    "Int",
    "InvalidValueError",
    "Objective",
    "OptimizeResult",
    "OptionsConflictError",
    "ProposerMoved",
    "Report",
    "SearchSpaceError",
    "Space",
    "StorageError",
    "Study",
    "StudyNotFoundError",
    "StrategyError",
    "SurrogateFitError",
    "Trial",
    "TrialFailure",
    "TrialHandle",
    "TrialNotFoundError",
    "TrialState",
    "TrialStateError",
    "UnknownStrategyError",
    "__version__",
    "create_study",
    "delete_study",
    "load_study",
    "strategies",
]

if _typing.TYPE_CHECKING:  # what type checkers and IDEs see; __getattr__ imports at run time
    from abo.acquisitions.registry import strategies
    from abo.core.exceptions import (
        AboError,
        AboWarning,
        ConfigError,
        DuplicatedStudyError,
        FailureRateExceeded,
        InvalidValueError,
        OptionsConflictError,
        ProposerMoved,
        SearchSpaceError,
        StorageError,
        StrategyError,
        StudyNotFoundError,
        SurrogateFitError,
        TrialFailure,
        TrialNotFoundError,
        TrialStateError,
        UnknownStrategyError,
    )
    from abo.core.outcomes import Constraint, Objective
    from abo.core.space import Categorical, Float, Int, Space
    from abo.core.trial import Report, Trial, TrialState
    from abo.run.command import Command
    from abo.run.loop import OptimizeResult
    from abo.run.reporting import TrialHandle
    from abo.study.study import Study, create_study, delete_study, load_study


def __getattr__(name: str) -> object:
    """Import a public name from its module on first use and keep it (PEP 562); a submodule
    (``abo.storage``) imports on first use too, as it did when ``import abo`` loaded them all."""
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(_importlib.import_module(module), name)
        globals()[name] = value
        return value
    if not name.startswith("_") and _importlib_util.find_spec(f"{__name__}.{name}") is not None:
        return _importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'abo' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's own names and every public name, imported or not."""
    return sorted({*(n for n in globals() if not n.startswith("_")), *__all__})
