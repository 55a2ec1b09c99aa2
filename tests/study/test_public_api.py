"""The public API is a contract: exactly these names, one error root, described strategies."""

from __future__ import annotations

import importlib

import pytest

import abo

CURATED = {
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
    "StrategyError",
    "Study",
    "StudyNotFoundError",
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
}
ERRORS = [
    "ConfigError",
    "DuplicatedStudyError",
    "FailureRateExceeded",
    "InvalidValueError",
    "OptionsConflictError",
    "ProposerMoved",
    "SearchSpaceError",
    "StorageError",
    "StrategyError",
    "StudyNotFoundError",
    "SurrogateFitError",
    "TrialFailure",
    "TrialNotFoundError",
    "TrialStateError",
    "UnknownStrategyError",
]


def test_all_lists_exactly_the_curated_names() -> None:
    assert len(abo.__all__) == len(set(abo.__all__))
    assert set(abo.__all__) == CURATED


@pytest.mark.parametrize("name", sorted(CURATED))
def test_every_public_name_is_importable(name: str) -> None:
    module = importlib.import_module("abo")
    assert getattr(module, name) is not None
    namespace: dict = {}
    exec(f"from abo import {name}", namespace)  # noqa: S102 - the import statement itself
    assert namespace[name] is getattr(abo, name)


@pytest.mark.parametrize("name", ERRORS)
def test_every_error_is_an_abo_error(name: str) -> None:
    cls = getattr(abo, name)
    assert issubclass(cls, abo.AboError) and issubclass(cls, Exception)
    assert cls.__doc__


def test_every_exception_class_in_the_package_is_covered() -> None:
    import abo.core.exceptions as exc

    found = {
        n
        for n, v in vars(exc).items()
        if isinstance(v, type) and issubclass(v, Exception) and v.__module__ == exc.__name__
    }
    assert found - {"AboWarning"} == {*ERRORS, "AboError"}


def test_warning_is_a_user_warning_not_an_error() -> None:
    assert issubclass(abo.AboWarning, UserWarning)
    assert not issubclass(abo.AboWarning, abo.AboError)


def test_trial_failure_carries_reason_and_retryable() -> None:
    err = abo.TrialFailure("diverged", retryable=True)
    assert err.reason == "diverged" and err.retryable and str(err) == "diverged"
    assert abo.TrialFailure("x").retryable is False


def test_strategies_maps_names_to_one_line_descriptions() -> None:
    found = abo.strategies()
    assert isinstance(found, dict)
    assert {"qlognei", "random"} <= set(found)
    for name, description in found.items():
        assert isinstance(name, str) and isinstance(description, str)
        assert description.strip() and "\n" not in description
    assert "qLogNoisyExpectedImprovement" in found["qlognei"]
    found["qlognei"] = "changed"  # a copy: the registry is not touched
    assert abo.strategies()["qlognei"] != "changed"


def test_version_is_a_string() -> None:
    assert isinstance(abo.__version__, str) and abo.__version__.count(".") >= 1


def test_import_abo_is_lazy_and_dir_lists_every_public_name() -> None:
    """``import abo`` loads no torch, BoTorch or Dask: the names are imported on first use."""
    import subprocess
    import sys

    code = (
        "import sys, abo\n"
        "heavy = ['torch', 'botorch', 'gpytorch', 'distributed', 'sqlalchemy', 'abo.study.study']\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "print(sorted(set(abo.__all__) - set(dir(abo))))\n"
        "from abo import strategies, Study\n"
        "print(callable(strategies), Study.__module__, 'abo.study.study' in sys.modules)\n"
        "print(abo.storage.open_storage.__module__)\n"  # submodules still load on first use
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[]", "[]", "True abo.study.study True", "abo.storage"]


def test_a_submodule_import_does_not_hide_a_public_name() -> None:
    import abo.acquisitions.registry  # noqa: F401 - the submodule import sets abo.acquisitions.registry, not abo.strategies

    assert callable(abo.strategies) and abo.strategies is abo.acquisitions.registry.strategies
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = abo.no_such_name  # type: ignore[attr-defined]


def test_outcomes_can_be_declared_with_the_public_classes() -> None:
    space = abo.Space({"x": abo.Float(0.0, 1.0)})
    outcomes = [abo.Objective("loss"), abo.Constraint("memory_gb", "<=", 40)]
    study = abo.create_study(space, outcomes=outcomes)
    assert study.spec.constraints == (abo.Constraint("memory_gb", "<=", 40.0),)


def test_type_checkers_see_every_public_name() -> None:
    """``abo/__init__.py`` imports each name of ``abo.__all__`` under ``TYPE_CHECKING`` too
    (what mypy, IDEs and the API reference read; the lazy ``__getattr__`` is invisible to
    them): ``abo.StrategyError`` was missing there once."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(abo.__file__).read_text())
    (block,) = [
        n for n in tree.body if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)
    ]
    seen = {
        alias.asname or alias.name
        for node in ast.walk(block)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert set(abo.__all__) - {"__version__"} - seen == set()
