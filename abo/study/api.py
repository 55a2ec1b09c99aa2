"""``StudyAPI``: the public methods ``Study`` and ``RemoteStudy`` share, written once.

Signatures, docstrings, argument checks (``abo.study.checks``) and result shaping live here,
so a bad argument gets the same error from either kind of study before any transport; each
subclass supplies only the ``_``-named primitives at the end, given checked arguments.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from abo.core.outcomes import Outcome, check_number, check_values
from abo.core.space import Space
from abo.core.trial import Report, Trial, TrialState
from abo.core.userdata import check_mapping
from abo.spec.study_spec import StudySpec, check_reference
from abo.study.checks import (
    MAX_REASON,
    check_count,
    check_infos,
    check_one_objective,
    check_pace,
    check_several,
    check_step,
    check_trial_id,
)

if TYPE_CHECKING:
    from abo.executors.base import Executor
    from abo.run.loop import OptimizeResult

Data = dict[str, Any]  # a checked dict: parameters, metadata, info
Values = dict[str, float]  # checked outcome values by name


class StudyAPI(ABC):
    """The ask/tell surface of a study, wherever it lives (see the module's docstring)."""

    _name: str  # the identity: set by each subclass's ``__init__``
    _spec: StudySpec

    @property
    def name(self) -> str:
        return self._name

    @property
    def spec(self) -> StudySpec:
        """What the study is: space, outcomes, strategy and options (``abo.spec.study_spec``)."""
        return self._spec

    @property
    def config(self) -> StudySpec:
        """The spec (kept under its older name: ``study.config.lease_seconds``)."""
        return self.spec

    @property
    def space(self) -> Space:
        return self.spec.space

    @property
    def outcomes(self) -> tuple[Outcome, ...]:
        return self.spec.outcomes

    @property
    def direction(self) -> str:
        """The objective's direction; ``"multi"`` for a study of several objectives."""
        return self.spec.direction

    @property
    def strategy(self) -> str:
        return self.spec.strategy

    @property
    def seed(self) -> int:
        return self.spec.seed

    # -- reading ----------------------------------------------------------------------------
    @property
    def trials(self) -> list[Trial]:
        """Every trial, in id order (snapshots)."""
        return self._trials(None)

    @property
    def pending(self) -> list[Trial]:
        """The running trials: the busy points every proposal sees."""
        return self._trials(TrialState.RUNNING)

    @property
    def best(self) -> Trial | None:
        """The feasible done trial with the best value (``None`` before the first result;
        with outcome constraints, before the first feasible one; a local study then warns
        with an ``AboWarning`` when trials are done but none is feasible).

        Raises:
            AboError: the study has several objectives (no single trial is best).
        """
        check_one_objective(self.spec, "best")
        return self._best()

    @property
    def best_trials(self) -> list[Trial]:
        """The done trials no other done trial beats in every objective: the Pareto front, in
        id order. For a study of one objective, the best trial (empty before any result)."""
        return self._best_trials()

    def reference_point(self) -> dict[str, float]:
        """The default reference point of ``hypervolume`` and the proposals, in objective units.

        The study's ``reference_point`` when it was created with one. Otherwise from the first
        ``n_initial`` results to arrive (all of them while fewer have): each objective's worst
        value, moved 10 % of its range further (``abo.core.pareto``), so it is fixed once the
        initial design is told and the hypervolume of a running study is comparable over time.

        Raises:
            AboError: the study has one objective, or no result yet (and no reference point).
        """
        check_several(self.spec, "reference_point")
        return self._reference_point()

    def hypervolume(self, reference_point: Mapping[str, float] | None = None) -> float:
        """The volume of objective space the done trials dominate, bounded by
        ``reference_point`` (each objective's value by name; default: ``reference_point()``).
        A trial that does not beat the reference point in every objective adds nothing.

        Raises:
            AboError: one objective, no result yet (without a reference point), or a reference
                point that misses an objective, names an unknown one or is not finite.
        """
        objectives = check_several(self.spec, "hypervolume")
        checked = None if reference_point is None else check_reference(reference_point, objectives)
        return self._hypervolume(checked)

    def trials_dataframe(self) -> Any:
        """Every trial as a ``pandas.DataFrame``: parameters, outcomes, state, times, worker,
        retry lineage and the proposing strategy as columns (``abo.analysis.dataframe``; pandas is
        the
        optional extra ``abo[pandas]``)."""
        from abo.analysis.dataframe import trials_dataframe

        return trials_dataframe(self.trials, self.spec)

    def importance(self, objective: str | None = None) -> dict[str, dict[str, float]]:
        """Which parameters matter, most important first: per parameter the GP's first-order
        and total Sobol indices (``sobol``, ``total``), its ``lengthscale``, and the
        model-free ``eta2`` of the observed values (``abo.analysis.gp``; computed in this
        process from the study's trials). ``objective``: which one, in a study of several."""
        from abo.analysis.gp import importance

        ranked = importance(self.spec, self.trials, objective)
        return {i.name: {k: v for k, v in i.to_json().items() if k != "name"} for i in ranked}

    def trial(self, trial_id: int) -> Trial:
        """One trial by id (``TrialNotFoundError`` if unknown)."""
        return self._get_trial(check_trial_id(trial_id))

    def __len__(self) -> int:
        return self._count()

    def reports(self, trial_id: int | None = None) -> dict[int, list[Report]]:
        """Intermediate values by trial id, each in step order: every trial that reported,
        or only ``trial_id``'s (``TrialNotFoundError`` for an unknown id)."""
        return self._reports(None if trial_id is None else check_trial_id(trial_id))

    # -- writing ----------------------------------------------------------------------------
    def delete(self) -> None:
        """Delete this study with its trials; later calls on it raise ``StudyNotFoundError``
        (never deleting a newer study of the same name)."""
        self._delete()

    def heartbeat(self, trial_id: int) -> Trial:
        """Extend a running trial's lease by the study's ``lease_seconds``.

        A lease that already expired is not revived: the trial is marked ``lost`` (as the next
        ask or tell anywhere would) and ``TrialStateError`` says so, whoever reaps first.
        """
        return self._heartbeat(check_trial_id(trial_id))

    def tell(
        self,
        trial_id: int,
        value: Any,
        metadata: Mapping[str, Any] | None = None,
        *,
        info: Mapping[str, Any] | None = None,
    ) -> Trial:
        """Record a running trial's outcomes; committed before it returns.

        ``value`` is a number for a study of one objective, or a dict of every outcome by name
        (``{"error": 0.12, "latency_ms": 31.0}``). Telling the same again is a no-op; other
        values are a ``TrialStateError``. A result for a trial that was already ``lost`` is
        kept on it but never modelled. ``metadata`` is the user's (stored on the trial);
        ``info`` is bookkeeping (worker, timings) added to ``trial.info``.

        Raises:
            InvalidValueError: a missing, unknown, NaN, infinite or non-numeric outcome, or
                a NaN or infinity in ``metadata`` or ``info`` (``field`` names it, as
                ``metadata.loss``; nothing changes).
            TrialNotFoundError: no such trial.
            TrialStateError: the trial is finished with a different outcome.
        """
        trial_id = check_trial_id(trial_id)
        values = check_values(value, self.outcomes)
        user = check_mapping(metadata, "metadata")
        return self._tell(trial_id, values, user, check_mapping(info, "info"))

    def report(self, trial_id: int, step: Any, value: Any) -> bool:
        """Record a running trial's intermediate value (``value`` after ``step``: an epoch,
        an iteration); committed before it returns. Returns whether the trial should stop:
        the study's stopping rule (``abo.core.stopping``) decided so, and the trial is now
        ``stopped`` with this value; its run should end, and what it tells after that only
        adds bookkeeping. A report also renews the trial's lease. Steps must increase; the
        same step and value again is a no-op.

        Raises:
            InvalidValueError: a NaN, infinite or non-numeric ``value`` or ``step``, or a
                negative step (nothing is stored).
            AboError: a step at or before the trial's last one (``field`` ``step``), or a
                study of several objectives.
            TrialNotFoundError: no such trial.
            TrialStateError: the trial is done, failed or lost, or already reported another
                value at this step.
        """
        trial_id = check_trial_id(trial_id)
        checked_step = check_step(step)
        checked_value = check_number(value, "value")
        check_one_objective(self.spec, "report")
        return self._report(trial_id, checked_step, checked_value)

    def fail(
        self,
        trial_id: int,
        reason: str = "",
        metadata: Mapping[str, Any] | None = None,
        info: Mapping[str, Any] | None = None,
    ) -> Trial:
        """Mark a running trial ``failed``: its parameters caused the failure.

        Failing it again with the same reason is a no-op, with another reason a
        ``TrialStateError`` (the first reason stays); failing a trial that is done or already
        ``lost`` is a ``TrialStateError`` (a lost trial's parameters live on in its retry).
        """
        trial_id = check_trial_id(trial_id)
        user = check_mapping(metadata, "metadata")
        return self._fail(trial_id, str(reason)[:MAX_REASON], user, check_mapping(info, "info"))

    def lose(self, trial_id: int, reason: str) -> Trial:
        """Mark a running trial ``lost`` (the infrastructure failed) and re-queue its params;
        losing it again is a no-op, and a done or failed trial is a ``TrialStateError``."""
        return self._lose(check_trial_id(trial_id), reason)

    def enqueue(self, params: Mapping[str, Any], *, allow_duplicate: bool = False) -> bool:
        """Queue parameters to be evaluated next (the next ask hands them out first).

        Parameters the study already has (queued, or a trial that is not lost) are skipped,
        so a script that enqueues its starting points can run again; ``allow_duplicate=True``
        queues them anyway. Returns whether they were queued.
        """
        return self._enqueue(self.spec.validate_params(params), not allow_duplicate)

    def add(
        self,
        params: Mapping[str, Any],
        value: Any,
        metadata: Mapping[str, Any] | None = None,
        *,
        allow_duplicate: bool = False,
    ) -> Trial:
        """Record a known result (a warm start) as a done trial.

        A done trial with the same parameters and outcomes is returned instead of adding a
        second one, so a script that adds known results can run again (the same parameters
        with other values are a new observation and are added); ``allow_duplicate=True``
        always adds.
        """
        checked = self.spec.validate_params(params)
        values = check_values(value, self.outcomes)
        user = check_mapping(metadata, "metadata")
        return self._add(checked, values, user, not allow_duplicate)

    # -- asking and running -----------------------------------------------------------------
    def ask(self, n_workers: int | None = None, info: Mapping[str, Any] | None = None) -> Trial:
        """One new running trial (queued points first, then a proposal)."""
        return self.ask_batch(1, n_workers=n_workers, info=info)[0]

    def ask_batch(
        self,
        n: int,
        n_workers: int | None = None,
        info: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        *,
        pace: float | None = None,
    ) -> list[Trial]:
        """``n`` new, distinct running trials; each later one sees the earlier ones as busy.

        Args:
            n: how many trials to start (``>= 1``).
            n_workers: how many evaluations the caller runs at once, if known.
            info: added to each new trial's ``info`` (e.g. the loop's driver): one dict for
                all, or a list of one per trial (the service's askers each get their own).
            pace: seconds each point may take before one of the caller's workers waits for
                it (``optimize``'s automatic lookahead passes its evaluation time over its
                workers). With it the default strategy and refit policy trade exact
                reproducibility for speed (no fit waited for; a cheaper strategy when the
                usual one cannot keep up); without it (the default) the same seed and tells
                give the same points.
        """
        n = check_count(n)
        pace = check_pace(pace)
        return self._start(n, n_workers, check_infos(info, n), pace)

    def optimize(
        self,
        objective: Callable[..., Any],
        n_trials: int | None = None,
        n_workers: int | None = 4,
        executor: Executor | None = None,
        callback: Callable[[Any, Trial], None] | None = None,
        timeout: float | None = None,
        max_trials: int | None = None,
        **options: Any,
    ) -> OptimizeResult:
        """Run ``n_trials`` evaluations asynchronously, keeping ``n_workers`` busy.

        Without ``executor`` a local Dask cluster of ``n_workers`` worker processes is started
        and closed. A new trial is submitted the moment one finishes, with every running trial
        as a busy point. See ``abo.run.loop.run`` for the fault handling. A remote study runs the
        same loop here against the service; evaluations run where ``executor`` puts them.

        Args:
            objective: ``params -> float`` (one objective), ``-> {outcome: float, ...}`` (any
                other keys are kept as metadata), or an ``abo.Command``.
            n_trials: how many trials this call finishes (done, failed or stopped; a lost
                trial counts through its retry), whatever the study holds already.
            n_workers: evaluations in flight at once (default: the executor's workers).
            executor: where evaluations run (see ``abo.executors``).
            callback: called with ``(study, trial)`` after each finished trial.
            timeout: stop submitting after this many seconds.
            max_trials: the study's total: stop once it holds this many finished trials
                (all calls together; with ``n_trials`` too, whichever comes first; see
                ``abo.run.budget``). One of the two is needed.
            **options: ``trial_timeout``, ``guard`` (``abo.run.loop.FailureGuard`` or ``None``),
                ``grace`` (seconds to wait for running trials when stopped), ``lookahead``
                (evaluations proposed ahead in a background thread and queued at the
                executor beyond the workers, so a freed worker starts the next at once;
                ``"auto"``, the default, sizes the queue from the measured seconds per
                proposal and per evaluation; ``0`` proposes after each tell, in the driver,
                for exactly reproducible runs; a number fixes the queue), ``verbosity``
                (``"auto"``: ``abo run``'s live progress panel on standard error when it is a
                terminal, nothing otherwise; 0 silent, 1 the panel, 2 the panel and a line per
                finished trial), ``clock``, ``proposals`` (``abo.propose.remote``).
        """
        from abo.run.loop import run

        if executor is not None and n_workers == 4:
            n_workers = None  # the executor knows its size
        return run(
            self, objective, n_trials=n_trials, n_workers=n_workers, executor=executor,
            callback=callback, timeout=timeout, max_trials=max_trials, **options,
        )  # fmt: skip

    # -- transport: each kind of study supplies these, given checked arguments ---------------
    @abstractmethod
    def _trials(self, state: TrialState | None) -> list[Trial]: ...
    @abstractmethod
    def _get_trial(self, trial_id: int) -> Trial: ...
    @abstractmethod
    def _count(self) -> int: ...
    @abstractmethod
    def _best(self) -> Trial | None: ...
    @abstractmethod
    def _best_trials(self) -> list[Trial]: ...
    @abstractmethod
    def _reference_point(self) -> dict[str, float]: ...
    @abstractmethod
    def _hypervolume(self, reference_point: dict[str, float] | None) -> float: ...
    @abstractmethod
    def _reports(self, trial_id: int | None) -> dict[int, list[Report]]: ...
    @abstractmethod
    def _delete(self) -> None: ...
    @abstractmethod
    def _heartbeat(self, trial_id: int) -> Trial: ...
    @abstractmethod
    def _tell(self, trial_id: int, values: Values, user: Data, info: Data) -> Trial: ...
    @abstractmethod
    def _report(self, trial_id: int, step: float, value: float) -> bool: ...
    @abstractmethod
    def _fail(self, trial_id: int, reason: str, user: Data, info: Data) -> Trial: ...
    @abstractmethod
    def _lose(self, trial_id: int, reason: str) -> Trial: ...
    @abstractmethod
    def _enqueue(self, params: Data, unique: bool) -> bool: ...
    @abstractmethod
    def _add(self, params: Data, values: Values, user: Data, unique: bool) -> Trial: ...
    @abstractmethod
    def _start(
        self, n: int, n_workers: int | None, infos: Data | list[Data], pace: float | None
    ) -> list[Trial]:
        """``n`` new running trials; ``infos``: one dict for all, or a list of one each."""
