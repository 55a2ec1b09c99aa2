"""Study files for ``abo run``: a TOML description of space, objective, budget and executor.

A complete example lives in ``examples/quadratic/study.toml``. Sections:

``[study]``
    ``name``, ``storage`` (relative SQLite paths are relative to the file), ``n_trials`` (the
    trials each run adds) and/or ``max_trials`` (the study's total of finished trials, so a
    resumed run completes it; ``abo.run.budget``), ``trial_timeout``
    (seconds), ``lookahead`` (trials proposed ahead: ``"auto"``, the default, sizes it from
    measured proposal and evaluation times; ``0`` for exactly reproducible runs; see
    ``abo.run.loop``), and every option of ``abo.create_study``
    (``abo.spec.study_spec.CREATE_OPTIONS``):
    ``direction``, ``strategy``, ``seed``,
    ``outcomes`` (a table of name to ``"minimize"``/``"maximize"`` or to a constraint, e.g.
    ``[study.outcomes]`` ``error = "minimize"`` ``memory_gb = "<= 40"``), ``max_retries``,
    ``lease_seconds``, ``noise``, ``n_initial``,
    ``strategy_options`` (a table), ``refit``, ``max_staleness``, ``max_exact``.
``[space]``
    one inline table per parameter: ``{type = "float", low = 0, high = 1, log = false}``
    (add ``step = 0.1`` for the grid ``low + k * step``), ``{type = "int", ...}`` (``step``
    too) or ``{type = "categorical", choices = [...]}``; an error names the parameter
    (``space.NAME: ...``).
``[objective]``
    either ``function = "module:function"`` (imported with the file's folder on the path) or
    ``command = "{python} train.py --lr {lr}"`` (``{here}`` is the file's folder, ``{python}``
    the interpreter running abo, so a virtualenv needs no activation) with optional
    ``workdir``, ``result_file``, ``timeout``, ``env`` and ``stop_grace``.
``[executor]``
    ``kind = "local"`` (a Dask LocalCluster; ``n_workers``, ``threads_per_worker``),
    ``"address"`` (``address = "tcp://host:8786"``), ``"threads"`` (``n_workers``), or a batch
    system ``"slurm" | "pbs" | "lsf" | "sge" | "htcondor"`` with its options in
    ``[executor.options]`` (``cores``, ``memory``, ``walltime``, ``queue``, ``account``,
    ``jobs``, ...). ``proposals = "tcp://host:8786"``, for any kind: the Dask scheduler whose
    workers make the proposals (``abo.propose.remote``).

A key abo does not read is an error in every table (and at the top of the file), naming it,
and so is a number that is not finite (TOML's ``inf``, ``nan``); docs/study-file.md lists every
key.
"""

from __future__ import annotations

import difflib
import importlib
import os
import shlex
import sys
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from abo.core.exceptions import AboError, ConfigError
from abo.core.outcomes import finite_float, shown
from abo.run import budget

if TYPE_CHECKING:
    from abo.core.space import Space

BATCH_SYSTEMS = ("slurm", "pbs", "lsf", "sge", "htcondor")
EXECUTOR_KINDS = ("local", "address", "threads", *BATCH_SYSTEMS)
# what a run needs beside the study's own options (which are abo.spec.study_spec's CREATE_OPTIONS)
RUN_KEYS = ("name", "storage", "n_trials", "max_trials", "trial_timeout", "lookahead")
TABLES = ("study", "space", "objective", "executor")
OBJECTIVE_KEYS = ("function", "command", "workdir", "result_file", "timeout", "env", "stop_grace")
# the keys each kind of executor reads: another kind's key is an error, not silently dropped
EXECUTOR_KEYS: dict[str, tuple[str, ...]] = {
    "local": ("kind", "n_workers", "threads_per_worker", "proposals"),
    "threads": ("kind", "n_workers", "proposals"),
    "address": ("kind", "address", "proposals"),
    **{system: ("kind", "options", "proposals") for system in BATCH_SYSTEMS},
}


def _study_keys() -> set[str]:
    from abo.spec.study_spec import CREATE_OPTIONS

    return {*RUN_KEYS, "strategy", *CREATE_OPTIONS}


@dataclass(frozen=True)
class RunSpec:
    """A parsed study file."""

    path: Path
    study: dict[str, Any]
    space: Space
    objective: dict[str, Any]
    executor: dict[str, Any] = field(default_factory=dict)

    @property
    def n_trials(self) -> int | None:
        """The trials each run adds (``None``: up to ``max_trials``)."""
        return self.study.get("n_trials")

    @property
    def max_trials(self) -> int | None:
        """The study's total of finished trials (``None``: no total)."""
        return self.study.get("max_trials")

    @property
    def n_workers(self) -> int:
        return int(self.executor.get("n_workers", self.executor.get("options", {}).get("jobs", 4)))


def _require(table: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in table:
        raise ConfigError(f"{where}.{key}: missing")
    return table[key]


def _table(data: Mapping[str, Any], key: str, default: Any = None) -> dict[str, Any]:
    """The file's ``[key]`` table (``default`` when absent, else required); ``ConfigError``
    when it is not a table (``objective = "x"``)."""
    value = _require(data, key, "file") if default is None else data.get(key, default)
    if not isinstance(value, dict):
        raise ConfigError(f"file.{key}: expected a [{key}] table, got {type(value).__name__}")
    return dict(value)


def _no_unknown(where: str, given: Iterable[str], known: Iterable[str], what: str = "key") -> None:
    """``ConfigError`` naming the first key of ``given`` not in ``known``, with the closest
    known one when a typo is likely (``timout`` -> ``timeout``) and the known ones."""
    known = sorted(known)
    unknown = sorted(set(given) - set(known))
    if not unknown:
        return
    key = unknown[0]
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"{where}.{key}: unknown {what}{hint} (known: {', '.join(known)})")


def _seconds(value: Any, where: str, zero: bool = False) -> float:
    """A finite number of seconds above 0 (at least 0 with ``zero``), or ``ConfigError``:
    TOML's ``inf`` and ``nan`` are numbers too."""
    seconds = finite_float(value)
    if seconds is None or not (seconds >= 0 if zero else seconds > 0):
        what = "a finite number of seconds" + (" (>= 0)" if zero else " above 0")
        raise ConfigError(f"{where}: expected {what}, got {shown(value)}")
    return seconds


def _positive_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}: expected a positive integer, got {shown(value)}")
    return value


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: expected a non-empty string, got {shown(value)}")
    return value


def _read(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The parsed file and its checked ``[study]`` table (relative SQLite storage resolved)."""
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"study file: {path} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"study file: {path} is a folder, not a TOML file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"study file: {path} is not valid TOML: {exc}") from None
    study = _require(data, "study", "file")
    if not isinstance(study, dict):
        raise ConfigError(f"file.study: expected a [study] table in {path}")
    study = dict(study)
    known = _study_keys()
    for key in sorted(set(data) - set(TABLES)):
        if key in known:  # a [study] key above [study], or a [stopping] table of its own
            raise ConfigError(f"file.{key}: {key} is a key of [study]; move it into that table")
        _no_unknown("file", [key], TABLES, "table")
    _no_unknown("study", study, known)
    storage = study.get("storage")
    if (
        isinstance(storage, str)
        and storage.startswith("sqlite:///")
        and not storage.startswith("sqlite:////")
    ):
        study["storage"] = f"sqlite:///{path.parent / storage[len('sqlite:///') :]}"
    return data, study


def locate_study(path: str | Path) -> tuple[str, str]:
    """The study name and storage URL a study file gives, for commands that read the study.

    Only ``[study] name`` and ``storage`` are read (a relative SQLite path is relative to the
    file, as for ``abo run``); ``ConfigError`` when either is missing.
    """
    path = Path(path).absolute()
    _, study = _read(path)
    name, storage = study.get("name"), study.get("storage")
    for key, value in (("name", name), ("storage", storage)):
        if value is not None and (not isinstance(value, str) or not value):
            raise ConfigError(f"study.{key}: expected a non-empty string, got {value!r}")
    if name is None:
        raise ConfigError(
            f"study.name: missing in {path}, so the study's name is not known "
            "(give the name and --storage instead of the file)"
        )
    if storage is None:
        raise ConfigError(
            f"study.storage: missing in {path}: such a study is kept in memory while it "
            "runs, and nothing is left to read"
        )
    return name, storage


def load_spec(path: str | Path, overrides: Mapping[str, Any] | None = None) -> RunSpec:
    """Read and check a study file; ``ConfigError`` names the first bad field. ``overrides``
    replace ``[study]`` keys (``abo run --n-trials``/``--max-trials``; ``None`` ones are
    left out)."""
    from abo.core.space import Space

    path = Path(path).absolute()
    data, study = _read(path)
    study.update({k: v for k, v in (overrides or {}).items() if v is not None})
    try:
        budget.check(study.get("n_trials"), study.get("max_trials"))
    except AboError as exc:
        raise ConfigError(f"study.{exc}") from None
    lookahead = study.get("lookahead", "auto")
    if lookahead != "auto" and (
        isinstance(lookahead, bool) or not isinstance(lookahead, int) or lookahead < 0
    ):
        raise ConfigError(
            f'study.lookahead: expected "auto" or a non-negative integer, got {lookahead!r}'
        )
    if study.get("trial_timeout") is not None:
        study["trial_timeout"] = _seconds(study["trial_timeout"], "study.trial_timeout")
    try:
        space = Space.from_json(_require(data, "space", "file"))
    except AboError as exc:
        raise ConfigError(f"space.{exc}") from None
    _check_options(space, study)
    return RunSpec(
        path=path,
        study=study,
        space=space,
        objective=_objective(_table(data, "objective")),
        executor=_executor(_table(data, "executor", {"kind": "local"})),
    )


def _check_options(space: Space, study: Mapping[str, Any]) -> None:
    """The ``[study]`` options checked as ``abo.create_study`` checks them, so a bad one is
    ``ConfigError`` naming ``study.KEY`` before anything is opened or run."""
    from abo.spec.study_spec import StudySpec

    options = {k: v for k, v in study.items() if k not in RUN_KEYS}
    try:
        StudySpec.create(space, **options)
    except AboError as exc:
        raise ConfigError(f"study.{exc}") from None


def _objective(objective: dict[str, Any]) -> dict[str, Any]:
    """The ``[objective]`` table checked: its keys, one of function or command, the types."""
    _no_unknown("objective", objective, OBJECTIVE_KEYS)
    if ("function" in objective) == ("command" in objective):
        raise ConfigError("objective: give exactly one of 'function' or 'command'")
    for key in ("function", "command", "workdir", "result_file"):
        if key in objective:
            _string(objective[key], f"objective.{key}")
    if "timeout" in objective:
        objective["timeout"] = _seconds(objective["timeout"], "objective.timeout")
    if "stop_grace" in objective:
        objective["stop_grace"] = _seconds(objective["stop_grace"], "objective.stop_grace", True)
    env = objective.get("env", {})
    if not isinstance(env, dict):
        raise ConfigError(f"objective.env: expected a table of strings, got {shown(env)}")
    for name, value in env.items():
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ConfigError(f"objective.env.{name}: expected a string, got {shown(value)}")
    return objective


def _executor(executor: dict[str, Any]) -> dict[str, Any]:
    """The ``[executor]`` table checked: its kind, the keys that kind reads, their types."""
    kind = executor.setdefault("kind", "local")
    if kind not in EXECUTOR_KINDS:
        raise ConfigError(f"executor.kind: {kind!r} is not one of {', '.join(EXECUTOR_KINDS)}")
    valid = EXECUTOR_KEYS[kind]
    for key in sorted(set(executor) - set(valid)):
        if any(key in keys for keys in EXECUTOR_KEYS.values()):
            raise ConfigError(
                f"executor.{key}: not read for kind = {kind!r} (its keys: {', '.join(valid)})"
            )
        _no_unknown("executor", [key], {k for keys in EXECUTOR_KEYS.values() for k in keys})
    for key in ("n_workers", "threads_per_worker"):
        if key in executor:
            _positive_int(executor[key], f"executor.{key}")
    if kind == "address":
        _string(_require(executor, "address", "executor"), "executor.address")
    if "proposals" in executor:
        _string(executor["proposals"], "executor.proposals")
    if not isinstance(executor.get("options", {}), dict):
        raise ConfigError(f"executor.options: expected a table, got {shown(executor['options'])}")
    return executor


def build_objective(spec: RunSpec) -> Callable[..., Any]:
    """The objective the file describes: an imported function or an ``abo.Command``."""
    from abo.run.command import Command

    obj = spec.objective
    here = spec.path.parent
    if "command" in obj:
        template = (
            str(obj["command"])
            .replace("{here}", shlex.quote(str(here)))
            .replace("{python}", shlex.quote(sys.executable))
        )
        workdir = Path(obj.get("workdir", "abo-runs"))
        grace = {"stop_grace": obj["stop_grace"]} if "stop_grace" in obj else {}
        return Command(
            template,
            workdir=workdir if workdir.is_absolute() else here / workdir,
            result_file=obj.get("result_file"),
            timeout=obj.get("timeout"),
            env={str(k): str(v) for k, v in obj.get("env", {}).items()},
            **grace,
        )
    target = str(obj["function"])
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"objective.function: expected 'module:function', got {target!r}")
    if str(here) not in sys.path:
        sys.path.insert(0, str(here))
    # Workers import the function by reference: local worker processes inherit sys.path,
    # batch jobs inherit the environment.
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if str(here) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(here), *filter(None, paths)])
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"objective.function: cannot import {module_name!r}: {exc}") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ConfigError(f"objective.function: {module_name} has no function {attr!r}")
    return fn


def build_executor(spec: RunSpec) -> Any:
    """The executor the file describes (started; the caller closes it)."""
    from abo.executors import DaskExecutor, ThreadExecutor

    ex = spec.executor
    kind = ex["kind"]
    if kind == "local":
        return DaskExecutor(
            n_workers=int(ex.get("n_workers", 4)),
            threads_per_worker=int(ex.get("threads_per_worker", 1)),
        )
    if kind == "address":
        return DaskExecutor(address=str(ex["address"]))
    if kind == "threads":
        return ThreadExecutor(int(ex.get("n_workers", 4)))
    from abo.executors.jobqueue import JobQueueExecutor

    options = dict(ex.get("options", {}))
    options.setdefault("tag", spec.study.get("name"))
    return JobQueueExecutor(system=kind, **options)


def study_options(spec: RunSpec) -> dict[str, Any]:
    """The ``[study]`` keys that are options of ``abo.create_study`` (not a run's keys)."""
    return {k: v for k, v in spec.study.items() if k not in RUN_KEYS}


def open_study(spec: RunSpec, resume: str | None = None, keep: bool = False) -> Any:
    """The study a file describes: created (``DuplicatedStudyError`` if it exists), or with
    ``resume`` the existing study of that name, whose stored options must equal those the file
    gives (``OptionsConflictError`` naming each that differs, unless ``keep``: then the stored
    ones are kept; ``abo.spec.options_check``). The file's options are validated either way."""
    from abo.spec.options_check import KEEP, check_existing
    from abo.spec.study_spec import StudySpec
    from abo.study.study import create_study, load_study

    options = study_options(spec)
    storage = spec.study.get("storage")
    if resume is None:
        return create_study(spec.space, name=spec.study.get("name"), storage=storage, **options)
    wanted = StudySpec.create(spec.space, **options)
    study = load_study(resume, storage=storage)
    hint = "--keep-stored-options resumes it with them"
    check_existing(study.name, study.spec, wanted, list(options), KEEP if keep else True, hint)
    return study
