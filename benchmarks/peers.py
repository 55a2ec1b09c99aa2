"""Peer optimisers, Ax and SMAC3, driven through ask/tell on mixed and conditional spaces.

Both adapters take the same search-space description (a sequence of :class:`Param`) and have the
benchmark methods' interface: ``ask()`` returns ``(handle, configuration)`` and may be called
again before earlier trials are told (those trials are *pending*), ``tell(handle, value)``
reports a value to minimise, in any order. Each peer learns about its pending trials from its
own bookkeeping, as it does when a user drives it by hand:

* Ax (``ax-platform``, :class:`AxMethod`): every trial ``get_next_trials`` makes is RUNNING in
  the experiment until ``complete_trial``; Ax's generation strategy passes the RUNNING trials
  to its model as pending points (the BoTorch acquisition function fantasises over them), and
  Sobol continues its sequence.
* SMAC3 (``smac``, :class:`SmacMethod`): ``ask`` records each trial as RUNNING in the
  runhistory; the intensifier and the configuration selector never hand out a running (or
  already-run) configuration again, while the random forest is trained on finished trials only
  (SMAC does not impute running ones) and retrained after every few configurations it yields.

Neither peer is a dependency of abo: ``pip install ax-platform smac``; the imports happen when an
adapter is made. Their logging and warnings are silenced while they work.
"""

from __future__ import annotations

import logging
import math
import shutil
import tempfile
import warnings
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Param:
    """One parameter of a task: a float or int range (log-scaled or not), or a categorical;
    ``when`` makes it exist only when each named parent takes one of the listed values."""

    name: str
    kind: str  # "float" | "int" | "cat"
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple[Any, ...] = ()  # for "cat": strings, numbers or booleans
    when: tuple[tuple[str, tuple[Any, ...]], ...] = ()  # ((parent, (allowed values...)), ...)


@contextmanager
def _quiet() -> Iterator[None]:
    """Silence logging and warnings for the duration of a peer's call.

    Both peers log at INFO and warn freely (Ax on every trial, BoTorch while fitting).
    ``logging.disable`` is process-wide but lasts only for the call; it also catches the
    messages of modules the peers import lazily, whose loggers and handlers do not exist yet
    when the call starts."""
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)


def _check(params: Sequence[Param]) -> None:
    """Reject what neither adapter can express: unknown kinds, missing bounds, late parents,
    conditions on values a parent cannot take."""
    seen: dict[str, Param] = {}
    for p in params:
        if p.name in seen:
            raise ValueError(f"parameter {p.name!r} is given twice")
        if p.kind in ("float", "int"):
            if p.low is None or p.high is None or not p.low < p.high:
                raise ValueError(f"parameter {p.name!r} needs low < high")
            if p.log and p.low <= 0:
                raise ValueError(f"log-scaled parameter {p.name!r} needs low > 0")
        elif p.kind == "cat":
            if len(p.choices) < 2:
                raise ValueError(f"categorical {p.name!r} needs at least two choices")
        else:
            raise ValueError(f"parameter {p.name!r} has unknown kind {p.kind!r}")
        for parent, allowed in p.when:
            if parent not in seen or seen[parent].kind not in ("cat", "int"):
                raise ValueError(
                    f"{p.name!r}: parent {parent!r} must be a categorical or int listed earlier"
                )
            if not allowed:
                raise ValueError(f"{p.name!r}: parent {parent!r} has no allowed values")
            for a in allowed:  # a value the parent cannot take is a typo, not a condition
                if seen[parent].kind == "cat":
                    _label_of(seen[parent], a)
                elif not _bounds(seen[parent])[0] <= a <= _bounds(seen[parent])[1]:
                    raise ValueError(f"{p.name!r}: {a!r} is outside parent {parent!r}'s range")
        seen[p.name] = p


def _labels(p: Param) -> dict[str, Any]:
    """String labels for a categorical's choices (label -> choice).

    Both peers get strings: Ax wants one value type per choice parameter, and strings keep
    ``True``, ``1`` and ``1.0`` apart (they are equal in Python). All-string choices are their
    own labels; otherwise each label is the choice's ``repr``."""
    if all(isinstance(c, str) for c in p.choices):
        return {c: c for c in p.choices}
    return {repr(c): c for c in p.choices}


def _label_of(p: Param, value: Any) -> str:
    """The label of one of ``p``'s choices (matched on type as well as value)."""
    for label, choice in _labels(p).items():
        if type(choice) is type(value) and choice == value:
            return label
    raise ValueError(f"{value!r} is not a choice of {p.name!r}")


def _bounds(p: Param) -> tuple[float, float]:
    """A range parameter's bounds (``_check`` made sure both are there)."""
    assert p.low is not None and p.high is not None
    return float(p.low), float(p.high)


def _decode(params: Sequence[Param], raw: Mapping[str, Any]) -> dict[str, Any]:
    """A peer's parameterisation as a configuration: the active parameters only (walking
    ``when`` in order, so a parent is decoded before its children), ints as ``int``, floats as
    ``float`` inside their bounds, categoricals as the choice itself."""
    config: dict[str, Any] = {}
    for p in params:
        if not is_active(p, config):
            continue
        value = raw[p.name]
        if p.kind == "cat":
            config[p.name] = _labels(p)[str(value)]
        else:
            low, high = _bounds(p)
            if p.kind == "int":
                config[p.name] = min(max(int(round(float(value))), int(low)), int(high))
            else:
                config[p.name] = min(max(float(value), low), high)
    return config


def encode(params: Sequence[Param], config: Mapping[str, Any], flat: bool) -> dict[str, Any]:
    """A configuration as the peers take it back (``add``): categoricals as their labels.
    ``flat``: every parameter, the inactive ones at their lower bound or first choice (Ax's,
    Syne Tune's and HEBO's flat spaces); else the active ones only (SMAC's conditions)."""
    raw: dict[str, Any] = {}
    for p in params:
        if p.name not in config:
            if not flat:
                continue
            value = p.choices[0] if p.kind == "cat" else _bounds(p)[0]
        else:
            value = config[p.name]
        if p.kind == "cat":
            raw[p.name] = _label_of(p, value)
        else:
            raw[p.name] = int(value) if p.kind == "int" else float(value)
    return raw


def is_active(p: Param, config: Mapping[str, Any]) -> bool:
    """Whether ``p`` exists given the (already decoded) values of its parents: every parent
    must be active and take one of its allowed values."""
    return all(
        parent in config and any(_same(config[parent], a) for a in allowed)
        for parent, allowed in p.when
    )


def _same(value: Any, allowed: Any) -> bool:
    """Equality that keeps booleans apart from numbers (``True != 1`` here)."""
    if isinstance(value, bool) or isinstance(allowed, bool):
        return type(value) is type(allowed) and value == allowed
    return bool(value == allowed)


def _finite(value: float) -> float:
    """``value`` as a float, refused unless finite. Neither peer takes a non-finite value as
    data: a SMAC trial reported as crashed (at its crash cost, infinite by default) turns its
    random forest's targets into NaN, so a failure is for the driver to handle."""
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"peers take finite values only, not {value}")
    return value


class AxMethod:
    """Ax through its ``ax.api.Client``: the default generation strategy (the centre of the
    space, Sobol, then BoTorch's modular model), minimising ``loss``.

    Conditional parameters use the *flat* space: every parameter is in every trial Ax makes,
    and the inactive ones are dropped from the returned configuration by walking ``when``.
    Ax's hierarchical spaces (``ChoiceParameterConfig.dependent_parameters``) need a tree
    whose parents are choice parameters, so they cannot express an int parent or a parameter
    with several parents; and Ax models them on the flattened space anyway, filling the
    inactive values with those it generated, which is what the flat space does here.

    Pending trials: the trials Ax made and not yet told are RUNNING in its experiment, and its
    generation strategy hands them to the model as pending points. One departure from the
    default: ``allow_exceeding_initialization_budget=True``. By default the initialisation
    (the centre and 4 Sobol points) stops after its 5 trials until 2 of them are complete, and
    ``get_next_trials`` raises ``DataRequiredError``, which happens whenever more than 5 are
    pending at once; with the flag, Sobol goes on instead, and nothing changes when fewer are
    pending. ``seed`` seeds Ax's client (it seeds every generation) and its Sobol sequence.
    ``k`` is not used: Ax counts its running trials itself.
    """

    def __init__(self, params: Sequence[Param], seed: int, k: int) -> None:
        _check(params)
        self.params = tuple(params)
        self.k = k
        with _quiet():
            from ax.api.client import Client
            from ax.api.configs import ChoiceParameterConfig, RangeParameterConfig

            configs: list[Any] = []
            for p in self.params:
                if p.kind == "cat":
                    configs.append(
                        ChoiceParameterConfig(
                            name=p.name,
                            values=list(_labels(p)),
                            parameter_type="str",
                            is_ordered=False,
                        )
                    )
                else:
                    is_int = p.kind == "int"
                    cast = int if is_int else float
                    configs.append(
                        RangeParameterConfig(
                            name=p.name,
                            bounds=(cast(_bounds(p)[0]), cast(_bounds(p)[1])),
                            parameter_type="int" if is_int else "float",
                            scaling="log" if p.log else "linear",
                        )
                    )
            self.client = Client(random_seed=seed)
            self.client.configure_experiment(parameters=configs, name="peer")
            self.client.configure_optimization(objective="-loss")
            self.client.configure_generation_strategy(
                method="fast",
                initialization_random_seed=seed,
                allow_exceeding_initialization_budget=True,
            )

    def ask(self) -> tuple[Any, dict[str, Any]]:
        """One new trial (RUNNING in Ax until told): its index and active configuration."""
        with _quiet():
            trials = self.client.get_next_trials(max_trials=1)
        if not trials:
            raise RuntimeError("Ax made no trial (its generation strategy is waiting for data)")
        ((index, raw),) = trials.items()
        return index, _decode(self.params, raw)

    def tell(self, handle: Any, value: float) -> None:
        """Complete trial ``handle`` with ``loss = value`` (finite: see :func:`_finite`)."""
        loss = _finite(value)
        with _quiet():
            self.client.complete_trial(trial_index=handle, raw_data={"loss": loss})

    def add(self, config: Mapping[str, Any], value: float) -> None:
        """A result Ax did not propose (a shared initial design): attached as a trial and
        completed. Ax's own initialisation still runs afterwards (its default rule)."""
        loss = _finite(value)
        with _quiet():
            index = self.client.attach_trial(parameters=encode(self.params, config, flat=True))
            self.client.complete_trial(trial_index=index, raw_data={"loss": loss})


class SmacMethod:
    """SMAC3's ``HyperparameterOptimizationFacade`` (random forest, log-EI, its Sobol initial
    design of 10 configurations per parameter, its intensifier) through ``ask``/``tell``.

    The space is a ConfigSpace ``ConfigurationSpace`` with native conditions: an
    ``EqualsCondition`` or ``InCondition`` per parent, joined by ``AndConjunction`` when a
    parameter has several; log-scaled floats and ints use ConfigSpace's log scaling.
    Categorical choices are string labels (see :func:`_labels`), decoded on the way out.

    Pending trials: ``ask`` marks each trial RUNNING in SMAC's runhistory, so no running or
    finished configuration is handed out again; the forest learns from finished trials only.
    The scenario is deterministic (one evaluation per configuration) with ``n_trials`` the
    run's ``budget`` when given, as a SMAC user sets it (it caps the initial design at a
    quarter of it: 12 of 50), else a large number, and ``seed``. The facade writes its
    files into a temporary directory removed with the adapter, and ``logging_level=False``
    (an int level would replace the *root* logger's configuration). ``k`` is not used.
    """

    N_TRIALS = 10_000

    def __init__(
        self, params: Sequence[Param], seed: int, k: int, budget: int | None = None
    ) -> None:
        _check(params)
        self.params = tuple(params)
        self.k = k
        self.budget = budget
        with _quiet():
            from ConfigSpace import (
                AndConjunction,
                Categorical,
                ConfigurationSpace,
                EqualsCondition,
                Float,
                InCondition,
                Integer,
            )
            from smac import HyperparameterOptimizationFacade, Scenario

            space = ConfigurationSpace(seed=seed)
            made: dict[str, Any] = {}
            for p in self.params:
                if p.kind == "cat":
                    made[p.name] = Categorical(p.name, list(_labels(p)))
                elif p.kind == "int":
                    low, high = _bounds(p)
                    made[p.name] = Integer(p.name, (int(low), int(high)), log=p.log)
                else:
                    made[p.name] = Float(p.name, _bounds(p), log=p.log)
            space.add(list(made.values()))
            by_name = {p.name: p for p in self.params}
            for p in self.params:
                conditions = []
                for parent, allowed in p.when:
                    parent_p = by_name[parent]
                    if parent_p.kind == "cat":
                        values: list[Any] = [_label_of(parent_p, a) for a in allowed]
                    else:
                        values = [int(a) for a in allowed]
                    if len(values) == 1:
                        conditions.append(EqualsCondition(made[p.name], made[parent], values[0]))
                    else:
                        conditions.append(InCondition(made[p.name], made[parent], values))
                if len(conditions) == 1:
                    space.add(conditions[0])
                elif conditions:
                    space.add(AndConjunction(*conditions))

            self._dir = tempfile.mkdtemp(prefix="smac-peer-")
            self._cleanup = weakref.finalize(self, shutil.rmtree, self._dir, True)
            scenario = Scenario(
                space,
                deterministic=True,
                n_trials=self.budget or self.N_TRIALS,
                seed=seed,
                output_directory=Path(self._dir),
            )
            self.smac = HyperparameterOptimizationFacade(
                scenario,
                target_function=_never_called,
                overwrite=True,
                logging_level=False,
            )

    def ask(self) -> tuple[Any, dict[str, Any]]:
        """One new trial (RUNNING in SMAC's runhistory until told): its ``TrialInfo`` and
        active configuration."""
        with _quiet():
            info = self.smac.ask()
        return info, _decode(self.params, dict(info.config))

    def tell(self, handle: Any, value: float) -> None:
        """Report ``value`` (finite: see :func:`_finite`) as the trial's cost. The runhistory
        is not saved to disk: nothing reads it back."""
        from smac.runhistory.dataclasses import TrialValue

        cost = _finite(value)
        with _quiet():
            self.smac.tell(handle, TrialValue(cost=cost), save=False)

    def add(self, config: Mapping[str, Any], value: float) -> None:
        """A result SMAC did not propose (a shared initial design), told as a trial of the
        scenario's seed; SMAC's own initial design is still asked for afterwards."""
        from ConfigSpace import Configuration
        from smac.runhistory.dataclasses import TrialInfo, TrialValue

        cost = _finite(value)
        with _quiet():
            space = self.smac.scenario.configspace
            made = Configuration(space, values=encode(self.params, config, flat=False))
            info = TrialInfo(config=made, seed=self.smac.scenario.seed)
            self.smac.tell(info, TrialValue(cost=cost), save=False)


def _never_called(config: Any, seed: int = 0) -> float:
    """SMAC's facade wants a target function; ask/tell never calls it."""
    raise RuntimeError("SMAC is driven through ask/tell; its target function is not used")
