"""Study: the ask/tell facade every other part (the loop, the CLI, the service) goes through.

A study validates at its boundary and delegates: what a study is lives in ``abo.spec``, what
an outcome is in ``abo.outcomes``, how a trial moves between states in ``abo.lifecycle``, how
a point is proposed in ``abo.proposer``, and where it all is kept in ``abo.storage``. Every ask
first reaps expired leases, then hands out queued points (enqueued by the user, or retries of
lost trials), then asks the proposer for the rest, with every running trial as a busy point.
Every tell is validated here and committed before it returns.

Example:
    >>> import abo
    >>> space = abo.Space({"x": abo.Float(-2.0, 2.0)})
    >>> study = abo.create_study(space, strategy="random", seed=0)
    >>> trial = study.ask()
    >>> _ = study.tell(trial.id, (trial.params["x"] - 1.0) ** 2)
    >>> len(study), study.best.state.value
    (1, 'done')
"""

from __future__ import annotations

import numbers
import re
import threading
import uuid
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from abo import lifecycle, pareto
from abo.exceptions import (
    AboError,
    AboWarning,
    DuplicatedStudyError,
    InvalidValueError,
    StudyNotFoundError,
)
from abo.options_check import check_existing, check_load_if_exists
from abo.outcomes import Objective, Outcome, check_number, check_values, finite_float, shown
from abo.proposer import Proposer
from abo.space import Space
from abo.spec import StudySpec, check_reference
from abo.stopping import make_rule
from abo.storage import QueuedPoint, Storage, StudyRecord, open_storage
from abo.summary import (
    best_trial,
    in_completion_order,
    pareto_trials,
    results,
    study_reference,
    utilities,
)
from abo.threads import torch_threads
from abo.trial import ProposalRecord, Report, Trial, TrialState
from abo.userdata import check_mapping as _check_mapping  # a dict without NaN or infinities

if TYPE_CHECKING:
    from abo.executors.base import Executor
    from abo.loop import OptimizeResult

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
ADDED = ProposalRecord("added")
ENQUEUED = ProposalRecord("enqueued")

check_value = check_number  # a finite float from a value, or InvalidValueError naming the field


def _check_trial_id(trial_id: Any) -> int:
    if isinstance(trial_id, bool) or not isinstance(trial_id, numbers.Integral):
        raise AboError(f"trial_id: expected an integer, got {trial_id!r}", field="trial_id")
    return int(trial_id)


def _check_pace(pace: Any) -> float | None:
    """An ask's ``pace``: ``None`` or a positive, finite number of seconds."""
    if pace is None:
        return None
    seconds = finite_float(pace)  # None for 10**400 too (no OverflowError)
    if seconds is None or not seconds > 0:
        raise (InvalidValueError if seconds is None else AboError)(
            f"pace: expected a positive, finite number of seconds, got {shown(pace)}",
            field="pace",
        )
    return seconds


def _check_infos(info: Any, n: int) -> dict[str, Any] | list[dict[str, Any]]:
    """One info dict for every new trial, or a list of one each."""
    if info is None or isinstance(info, Mapping):
        return _check_mapping(info, "info")
    if isinstance(info, Sequence) and not isinstance(info, str | bytes):
        if len(info) != n:
            raise AboError(f"info: expected {n} dicts (one per trial), got {len(info)}")
        return [_check_mapping(i, f"info[{k}]") for k, i in enumerate(info)]
    raise AboError(f"info: expected a dict or a list of dicts, got {type(info).__name__}")


class Study:
    """An optimisation study: ask for trials, tell their outcomes, let the GP propose the next.

    Build one with ``abo.create_study`` or ``abo.load_study``. Methods are safe to call from
    several threads and several processes sharing the storage.
    """

    def __init__(self, storage: Storage, record: StudyRecord, refit: str | None = None) -> None:
        """Wrap a stored study; ``refit`` overrides its refit policy in this process only."""
        self._storage = storage
        self._record = record
        self._proposer = Proposer(record.spec, refit)
        self._models = self._proposer.models  # the refit machinery, for tests and benchmarks
        self._lock = threading.RLock()
        self._rule = make_rule(record.spec.stopping)

    # -- identity ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._record.name

    @property
    def spec(self) -> StudySpec:
        """What the study is: space, outcomes, strategy and options (``abo.spec``)."""
        return self._record.spec

    @property
    def config(self) -> StudySpec:
        """The spec (kept under its older name: ``study.config.lease_seconds``)."""
        return self._record.spec

    @property
    def space(self) -> Space:
        return self._record.spec.space

    @property
    def outcomes(self) -> tuple[Outcome, ...]:
        return self._record.spec.outcomes

    @property
    def direction(self) -> str:
        """The objective's direction; ``"multi"`` for a study of several objectives."""
        return self._record.spec.direction

    @property
    def strategy(self) -> str:
        return self._record.spec.strategy

    @property
    def seed(self) -> int:
        return self._record.spec.seed

    @property
    def n_initial(self) -> int:
        """Size of the quasi-random initial design (default ``2 *`` parameters, at least 2)."""
        return self._record.spec.resolved_n_initial

    @property
    def storage(self) -> Storage:
        return self._storage

    @property
    def record(self) -> StudyRecord:
        return self._record

    def __repr__(self) -> str:
        return (
            f"Study(name={self.name!r}, strategy={self.strategy!r}, direction={self.direction!r})"
        )

    # -- reading ----------------------------------------------------------------------------
    @property
    def trials(self) -> list[Trial]:
        """Every trial, in id order (snapshots)."""
        return self._storage.trials(self._record)

    @property
    def pending(self) -> list[Trial]:
        """The running trials: the busy points every proposal sees."""
        return self._storage.trials(self._record, [TrialState.RUNNING])

    @property
    def best(self) -> Trial | None:
        """The feasible done trial with the best value (``None`` before the first result;
        with outcome constraints, before the first feasible one, with an ``AboWarning`` when
        trials are done but none is feasible).

        Raises:
            AboError: the study has several objectives (no single trial is best).
        """
        objectives = self.spec.objectives
        if len(objectives) != 1:
            names = ", ".join(o.name for o in objectives)
            raise AboError(
                f"best: this study has {len(objectives)} objectives ({names}); no single trial "
                "is best: use best_trials (the Pareto front) or hypervolume()",
                field="best",
            )
        done = self._storage.trials(self._record, [TrialState.DONE])
        best = best_trial(done, self.spec)
        if best is None and done and self.spec.constraints:
            warnings.warn(
                f"best: none of the {len(done)} done trials is feasible yet ("
                + "; ".join(str(c) for c in self.spec.constraints)
                + ")",
                AboWarning,
                stacklevel=2,
            )
        return best

    @property
    def best_trials(self) -> list[Trial]:
        """The done trials no other done trial beats in every objective: the Pareto front, in
        id order. For a study of one objective, the best trial (empty before any result)."""
        done = results(self._done(), self.spec)  # with a fidelity: at its target
        return pareto_trials(done, self.spec.objectives, self.spec.constraints)

    def reference_point(self) -> dict[str, float]:
        """The default reference point of ``hypervolume`` and of the proposals, in each
        objective's units.

        The study's ``reference_point`` when it was created with one. Otherwise from the first
        ``n_initial`` results to arrive (all of them while fewer have): each objective's worst
        value, moved 10 % of its range further (``abo.pareto``), so it is fixed once the
        initial design is told and the hypervolume of a running study is comparable over time.

        Raises:
            AboError: the study has one objective, or no result yet (and no reference point).
        """
        objectives = self._several("reference_point")
        ref = self._reference(self._done(), objectives)
        return {o.name: o.sign * float(r) for o, r in zip(objectives, ref, strict=True)}

    def hypervolume(self, reference_point: Mapping[str, float] | None = None) -> float:
        """The volume of objective space the done trials dominate, bounded by
        ``reference_point`` (each objective's value by name; default: ``reference_point()``).
        A trial that does not beat the reference point in every objective adds nothing.

        Raises:
            AboError: one objective, no result yet (without a reference point), or a reference
                point that misses an objective, names an unknown one or is not finite.
        """
        objectives = self._several("hypervolume")
        done = self._done()
        if reference_point is None:
            ref = self._reference(done, objectives)
        else:
            values = check_reference(reference_point, objectives)
            import torch

            ref = torch.tensor([o.sign * values[o.name] for o in objectives], dtype=torch.double)
        told = in_completion_order(done, objectives, self.spec.constraints)  # feasible ones
        return pareto.hypervolume(utilities(told, objectives), ref)

    def _done(self) -> list[Trial]:
        return self._storage.trials(self._record, [TrialState.DONE])

    def _reference(self, done: list[Trial], objectives: tuple[Objective, ...]) -> Any:
        """The default reference point in utilities; ``AboError`` before any result."""
        ref = study_reference(self.spec, done)
        if ref is None:
            raise AboError("reference_point: no trial is done yet", field="reference_point")
        return ref

    def _several(self, what: str) -> tuple[Objective, ...]:
        """The study's objectives; ``AboError`` naming ``what`` for a study of one."""
        objectives = self.spec.objectives
        if len(objectives) < 2:
            raise AboError(
                f"{what}: this study has one objective ({objectives[0].name}); "
                "use best for its best trial",
                field=what,
            )
        return objectives

    def trials_dataframe(self) -> Any:
        """Every trial as a ``pandas.DataFrame``: parameters, outcomes, state, times, worker,
        retry lineage and the proposing strategy as columns (``abo.dataframe``; pandas is the
        optional extra ``abo[pandas]``)."""
        from abo.dataframe import trials_dataframe

        return trials_dataframe(self.trials, self.spec)

    def importance(self, objective: str | None = None) -> dict[str, dict[str, float]]:
        """Which parameters matter, most important first: per parameter the GP's first-order
        and total Sobol indices (``sobol``, ``total``), its ``lengthscale``, and the
        model-free ``eta2`` of the observed values (``abo.analysis``). ``objective``: which
        one, in a study of several."""
        from abo.analysis import importance

        ranked = importance(self.spec, self.trials, objective)
        return {i.name: {k: v for k, v in i.to_json().items() if k != "name"} for i in ranked}

    def trial(self, trial_id: int) -> Trial:
        """One trial by id (``TrialNotFoundError`` if unknown)."""
        return self._storage.trial(self._record, _check_trial_id(trial_id))

    def __len__(self) -> int:
        return self._storage.count(self._record)

    def delete(self) -> None:
        """Delete this study with its trials; later calls on it raise ``StudyNotFoundError``."""
        self._storage.delete_study(self.name, self._record)

    # -- writing ----------------------------------------------------------------------------
    def reap(self) -> list[Trial]:
        """Mark running trials whose lease expired ``lost`` (re-queueing them); return those."""
        return lifecycle.reap(self._storage, self._record)

    def heartbeat(self, trial_id: int) -> Trial:
        """Extend a running trial's lease by the study's ``lease_seconds``.

        A lease that already expired is not revived: the trial is marked ``lost`` (as the next
        ask or tell anywhere would) and ``TrialStateError`` says so, whoever reaps first.
        """
        trial_id = _check_trial_id(trial_id)
        lifecycle.reap(self._storage, self._record)
        return lifecycle.heartbeat(self._storage, self._record, trial_id)

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
        trial_id = _check_trial_id(trial_id)
        values = check_values(value, self.outcomes)
        user = _check_mapping(metadata, "metadata")
        extra = _check_mapping(info, "info")
        lifecycle.reap(self._storage, self._record)
        return lifecycle.finish(
            self._storage,
            self._record,
            trial_id,
            TrialState.DONE,
            values=values,
            user=user,
            info=extra,
        )

    def report(self, trial_id: int, step: Any, value: Any) -> bool:
        """Record a running trial's intermediate value (``value`` after ``step``: an epoch,
        an iteration); committed before it returns. Returns whether the trial should stop:
        the study's stopping rule (``abo.stopping``) decided so, and the trial is now
        ``stopped`` with this value; its run should end, and what it tells after that only
        adds bookkeeping. A report also renews the trial's lease.

        Steps must increase; the same step and value again is a no-op.

        Raises:
            InvalidValueError: a NaN, infinite or non-numeric ``value`` or ``step``, or a
                negative step (nothing is stored).
            AboError: a step at or before the trial's last one (``field`` ``step``), or a
                study of several objectives.
            TrialNotFoundError: no such trial.
            TrialStateError: the trial is done, failed or lost, or already reported another
                value at this step.
        """
        trial_id = _check_trial_id(trial_id)
        checked_step = check_number(step, "step")
        if checked_step < 0:
            raise InvalidValueError(
                f"step: expected a non-negative number, got {step!r}", field="step"
            )
        checked_value = check_number(value, "value")
        objectives = self.spec.objectives
        if len(objectives) != 1:
            raise AboError(
                f"report: intermediate values are of a study's one objective; this one has "
                f"{len(objectives)} ({', '.join(o.name for o in objectives)})",
                field="report",
            )
        lifecycle.reap(self._storage, self._record)
        _, stop = lifecycle.report(
            self._storage, self._record, trial_id, checked_step, checked_value, self._rule
        )
        return stop

    def reports(self, trial_id: int | None = None) -> dict[int, list[Report]]:
        """Intermediate values by trial id, each in step order: every trial that reported,
        or only ``trial_id``'s (``TrialNotFoundError`` for an unknown id)."""
        if trial_id is None:
            return self._storage.reports(self._record)
        trial = self.trial(trial_id)
        return self._storage.reports(self._record, [trial.id])

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
        trial_id = _check_trial_id(trial_id)
        user = _check_mapping(metadata, "metadata")
        extra = _check_mapping(info, "info")
        lifecycle.reap(self._storage, self._record)
        return lifecycle.finish(
            self._storage,
            self._record,
            trial_id,
            TrialState.FAILED,
            reason=str(reason)[:10_000],
            user=user,
            info=extra,
        )

    def lose(self, trial_id: int, reason: str) -> Trial:
        """Mark a running trial ``lost`` (the infrastructure failed) and re-queue its params.

        Losing it again is a no-op; a done or failed trial is a ``TrialStateError``.
        """
        return lifecycle.lose(self._storage, self._record, _check_trial_id(trial_id), reason)

    def enqueue(self, params: Mapping[str, Any], *, allow_duplicate: bool = False) -> bool:
        """Queue parameters to be evaluated next (the next ask hands them out first).

        Parameters the study already has (queued, or a trial that is not lost) are skipped,
        so a script that enqueues its starting points can run again; ``allow_duplicate=True``
        queues them anyway. Returns whether they were queued.
        """
        checked = self.spec.validate_params(params)
        point = QueuedPoint(checked, proposal=ENQUEUED)
        return lifecycle.enqueue(self._storage, self._record, point, unique=not allow_duplicate)

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
        user = _check_mapping(metadata, "metadata")
        return lifecycle.add_done(
            self._storage, self._record, checked, values, ADDED, user, unique=not allow_duplicate
        )

    # -- asking -----------------------------------------------------------------------------
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
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise AboError(f"n: expected a positive integer, got {n!r}", field="n")
        n = int(n)
        pace = _check_pace(pace)
        infos = _check_infos(info, n)
        with self._lock:
            lifecycle.reap(self._storage, self._record)
            started = lifecycle.start_queued(self._storage, self._record, n, infos)
            remaining = n - len(started)
            if remaining > 0:
                rest = infos if isinstance(infos, dict) else infos[len(started) :]
                fidelity = self.spec.fidelity_of
                modelled = self._proposer.strategy.needs_model
                numeric = fidelity is not None and fidelity.numeric
                reports = (
                    self._storage.reports(self._record)
                    if modelled and (numeric or self.spec.stopping is not None)
                    else None
                )  # stopped trials' projections, a numeric fidelity's lower observations
                with torch_threads():
                    proposed = self._proposer.propose(
                        self._storage.trials(self._record), remaining, n_workers, pace, reports
                    )
                params = [p for p, _ in proposed]
                records = [r for _, r in proposed]
                started += lifecycle.start(self._storage, self._record, params, records, rest)
            return started

    # -- running ----------------------------------------------------------------------------
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
        as a busy point. See ``abo.loop.run`` for the fault handling.

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
                ``abo.budget``). One of the two is needed.
            **options: ``trial_timeout``, ``guard`` (``abo.loop.FailureGuard`` or ``None``),
                ``grace`` (seconds to wait for running trials when stopped), ``lookahead``
                (evaluations proposed ahead in a background thread and queued at the
                executor beyond the workers, so a freed worker starts the next at once;
                ``"auto"``, the default, sizes the queue from the measured seconds per
                proposal and per evaluation; ``0`` proposes after each tell, in the driver,
                for exactly reproducible runs; a number fixes the queue), ``verbosity``
                (``"auto"``: ``abo run``'s live progress panel on standard error when it is a
                terminal, nothing otherwise; 0 silent, 1 the panel, 2 the panel and a line per
                finished trial), ``clock``.
        """
        from abo.loop import run

        if executor is not None and n_workers == 4:
            n_workers = None  # the executor knows its size
        return run(
            self,
            objective,
            n_trials=n_trials,
            n_workers=n_workers,
            executor=executor,
            callback=callback,
            timeout=timeout,
            max_trials=max_trials,
            **options,
        )


# --------------------------------------------------------------------------------------------
def _check_name(name: str | None) -> str:
    if name is None:
        return f"study-{uuid.uuid4().hex[:8]}"
    if not isinstance(name, str) or not _NAME.match(name):
        raise AboError(
            f"name: {name!r} is not a valid study name (1-128 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit)",
            field="name",
        )
    return name


def create_study(
    space: Space | Mapping[str, Any],
    name: str | None = None,
    storage: str | Storage | None = None,
    direction: str | None = None,
    strategy: str | None = None,
    seed: int | None = None,
    *,
    load_if_exists: bool | str = False,
    outcomes: Any = None,
    **options: Any,
) -> Study:
    """Create a study (or load it with ``load_if_exists=True``).

    Args:
        space: an ``abo.Space`` (or a dict of parameters).
        name: unique within the storage; a random one when ``None``.
        storage: ``sqlite:///file.db``, a PostgreSQL URL, a ``Storage``, or ``None`` (memory).
        direction: ``"minimize"`` (default) or ``"maximize"``, for a study of one objective.
        strategy: a name from ``abo.strategies()`` (default ``"auto"``).
        seed: fixes every random choice; drawn at random (and stored) when ``None``.
        load_if_exists: ``True`` loads an existing study of this name instead of failing, if
            it has this space and outcomes and every option given here equals its stored one
            (an option not given is not compared); otherwise an ``OptionsConflictError``
            names each option that differs. ``"keep"`` loads it with its stored options
            whatever is given (they are still validated). See ``abo.options_check``.
        outcomes: the outcomes, e.g. ``{"error": "minimize", "latency_ms": "minimize"}``
            (default: one objective called ``value``).
        **options: the other study options of ``abo.spec.StudySpec`` (``n_initial``,
            ``lease_seconds``, ``max_retries``, ``noise``, ``strategy_options``, ``refit``,
            ``max_staleness``, ``max_exact``, ``warm_start_from``, …); an unknown one is an
            error naming it. ``warm_start_from`` takes study names in ``storage`` or
            ``Study`` objects of any storage (``abo.warm_start``).

    Example:
        >>> import abo
        >>> s = abo.create_study(abo.Space({"x": abo.Float(0, 1)}), name="doc", seed=1)
        >>> s.name, s.direction
        ('doc', 'minimize')
    """
    name = _check_name(name)
    load_if_exists = check_load_if_exists(load_if_exists)
    # what is compared when the study exists: the options given explicitly
    given = [k for k, v in (("strategy", strategy), ("seed", seed)) if v is not None]
    given += list(options)
    if strategy is not None:
        options["strategy"] = strategy
    warm = options.pop("warm_start_from", None)
    spec = StudySpec.create(space, outcomes=outcomes, direction=direction, seed=seed, **options)
    store = open_storage(storage)
    if warm:  # the sources' results as a snapshot, so the study never depends on them again
        from abo.warm_start import resolve

        sources = resolve(
            warm, lambda n: Study(store, store.load_study(n)), spec.space, spec.objectives[0].name
        )
        spec = StudySpec.create(
            spec.space, outcomes=outcomes, direction=direction, seed=spec.seed,
            warm_start_from=sources, **options,
        )  # fmt: skip
    record = StudyRecord(name=name, spec=spec)
    if not load_if_exists:
        return Study(store, store.create_study(record))
    resumed = _resume(store, record, given, load_if_exists)
    if resumed is not None:
        return resumed
    try:
        return Study(store, store.create_study(record))
    except DuplicatedStudyError:
        # another process created it between our look and our insert (workers starting at once)
        resumed = _resume(store, record, given, load_if_exists)
        if resumed is None:
            raise
        return resumed


def _resume(
    store: Storage, wanted: StudyRecord, given: list[str], load_if_exists: bool | str
) -> Study | None:
    """The existing study called ``wanted.name`` if it matches what was given (else an error
    naming what differs, ``abo.options_check``), ``None`` if there is none."""
    try:
        existing = store.load_study(wanted.name)
    except StudyNotFoundError:
        return None
    check_existing(wanted.name, existing.spec, wanted.spec, given, load_if_exists)
    return Study(store, existing)


def delete_study(name: str, storage: str | Storage) -> None:
    """Delete a study with all its trials and queued points, from any process.

    Processes that still hold the study get ``StudyNotFoundError`` on their next call (even if
    a new study of the same name is created meanwhile).

    Raises:
        StudyNotFoundError: no study of that name.
    """
    if not isinstance(name, str):
        raise AboError(f"name: expected a study name (a string), got {name!r}", field="name")
    open_storage(storage).delete_study(name)


def load_study(name: str, storage: str | Storage | None) -> Study:
    """Load an existing study by name, from any process (``StudyNotFoundError`` if none)."""
    if not isinstance(name, str):
        raise AboError(f"name: expected a study name (a string), got {name!r}", field="name")
    store = open_storage(storage)
    return Study(store, store.load_study(name))
