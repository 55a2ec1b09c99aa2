"""Study: the ask/tell facade every other part (the loop, the CLI, the service) goes through.

A study validates at its boundary and delegates: what a study is lives in ``abo.spec.study_spec``,
what
an outcome is in ``abo.core.outcomes``, how a trial moves between states in
``abo.storage.lifecycle``, how
a point is proposed in ``abo.propose.proposer``, and where it all is kept in ``abo.storage``. Every
ask
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

import threading
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from abo.analysis.summary import (
    best_trial,
    in_completion_order,
    pareto_trials,
    results,
    study_reference,
    utilities,
)
from abo.core import pareto
from abo.core.exceptions import AboError, AboWarning, DuplicatedStudyError, StudyNotFoundError
from abo.core.outcomes import check_number
from abo.core.space import Space
from abo.core.stopping import make_rule
from abo.core.trial import ProposalRecord, Report, Trial, TrialState
from abo.model.device import resolve_device
from abo.model.threads import torch_threads
from abo.propose.proposer import Proposer
from abo.spec.options_check import check_existing, check_load_if_exists
from abo.spec.study_spec import StudySpec
from abo.storage import QueuedPoint, Storage, StudyRecord, lifecycle, open_storage
from abo.storage.reaper import Reaper
from abo.study.api import StudyAPI
from abo.study.checks import check_name

if TYPE_CHECKING:
    from abo.propose.remote import ClusterProposals

ADDED = ProposalRecord("added")
ENQUEUED = ProposalRecord("enqueued")

check_value = check_number  # a finite float from a value, or InvalidValueError naming the field


class Study(StudyAPI):
    """An optimisation study: ask for trials, tell their outcomes, let the GP propose the next.

    Build one with ``abo.create_study`` or ``abo.load_study``. Methods are safe to call from
    several threads and several processes sharing the storage. The public methods and their
    checks are ``abo.study.api.StudyAPI``'s; this class runs them against the storage.
    """

    def __init__(
        self,
        storage: Storage,
        record: StudyRecord,
        refit: str | None = None,
        device: str | None = None,
        fence: lifecycle.Fence | None = None,
        proposals: ClusterProposals | None = None,
    ) -> None:
        """Wrap a stored study; ``refit`` and ``device`` override its refit policy and its
        device in this process only; ``fence`` may refuse a round's new trials where they
        are stored (a service replica that lost its proposer lease); ``proposals`` runs the
        proposal rounds on a Dask cluster (``abo.propose.remote``)."""
        self._storage = storage
        self._fence, self.proposals = fence, proposals
        self._reap = Reaper(storage, record)
        self._record = record
        self._name, self._spec = record.name, record.spec
        self._proposer = Proposer(record.spec, refit, device)
        self._models = self._proposer.models  # the refit machinery, for tests and benchmarks
        self._lock = threading.RLock()
        self._rule = make_rule(record.spec.stopping)

    # -- identity ---------------------------------------------------------------------------
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
    def _trials(self, state: TrialState | None) -> list[Trial]:
        return self._storage.trials(self._record, None if state is None else [state])

    def _done(self) -> list[Trial]:
        return self._trials(TrialState.DONE)

    def _get_trial(self, trial_id: int) -> Trial:
        return self._storage.trial(self._record, trial_id)

    def _count(self) -> int:
        return self._storage.count(self._record)

    def _best(self) -> Trial | None:
        done = self._done()
        best = best_trial(done, self.spec)
        if best is None and done and self.spec.constraints:
            warnings.warn(
                f"best: none of the {len(done)} done trials is feasible yet ("
                + "; ".join(str(c) for c in self.spec.constraints)
                + ")",
                AboWarning,
                stacklevel=3,  # the caller of ``best``
            )
        return best

    def _best_trials(self) -> list[Trial]:
        done = results(self._done(), self.spec)  # with a fidelity: at its target
        return pareto_trials(done, self.spec.objectives, self.spec.constraints)

    def _reference_point(self) -> dict[str, float]:
        objectives = self.spec.objectives
        ref = self._reference(self._done())
        return {o.name: o.sign * float(r) for o, r in zip(objectives, ref, strict=True)}

    def _hypervolume(self, reference_point: dict[str, float] | None) -> float:
        objectives = self.spec.objectives
        done = self._done()
        if reference_point is None:
            ref = self._reference(done)
        else:
            import torch

            values = [o.sign * reference_point[o.name] for o in objectives]
            ref = torch.tensor(values, dtype=torch.double)
        told = in_completion_order(done, objectives, self.spec.constraints)  # feasible ones
        return pareto.hypervolume(utilities(told, objectives), ref)

    def _reference(self, done: list[Trial]) -> Any:
        """The default reference point in utilities; ``AboError`` before any result."""
        ref = study_reference(self.spec, done)
        if ref is None:
            raise AboError("reference_point: no trial is done yet", field="reference_point")
        return ref

    def _reports(self, trial_id: int | None) -> dict[int, list[Report]]:
        if trial_id is None:
            return self._storage.reports(self._record)
        trial = self._get_trial(trial_id)  # TrialNotFoundError for an unknown id
        return self._storage.reports(self._record, [trial.id])

    # -- writing ----------------------------------------------------------------------------
    def _delete(self) -> None:
        self._storage.delete_study(self.name, self._record)

    def reap(self) -> list[Trial]:
        """Mark running trials whose lease expired ``lost`` (re-queueing them); return those."""
        return lifecycle.reap(self._storage, self._record)

    def _heartbeat(self, trial_id: int) -> Trial:
        self._reap()
        return lifecycle.heartbeat(self._storage, self._record, trial_id)

    def _tell(
        self, trial_id: int, values: dict[str, float], user: dict[str, Any], info: dict[str, Any]
    ) -> Trial:
        self._reap()
        return lifecycle.finish(
            self._storage, self._record, trial_id, TrialState.DONE,
            values=values, user=user, info=info,
        )  # fmt: skip

    def _report(self, trial_id: int, step: float, value: float) -> bool:
        self._reap()
        _, stop = lifecycle.report(self._storage, self._record, trial_id, step, value, self._rule)
        return stop

    def _fail(
        self, trial_id: int, reason: str, user: dict[str, Any], info: dict[str, Any]
    ) -> Trial:
        self._reap()
        return lifecycle.finish(
            self._storage, self._record, trial_id, TrialState.FAILED,
            reason=reason, user=user, info=info,
        )  # fmt: skip

    def _lose(self, trial_id: int, reason: str) -> Trial:
        return lifecycle.lose(self._storage, self._record, trial_id, reason)

    def _enqueue(self, params: dict[str, Any], unique: bool) -> bool:
        point = QueuedPoint(params, proposal=ENQUEUED)
        return lifecycle.enqueue(self._storage, self._record, point, unique=unique)

    def _add(
        self, params: dict[str, Any], values: dict[str, float], user: dict[str, Any], unique: bool
    ) -> Trial:
        return lifecycle.add_done(
            self._storage, self._record, params, values, ADDED, user, unique=unique
        )

    # -- asking -----------------------------------------------------------------------------
    def _start(
        self,
        n: int,
        n_workers: int | None,
        infos: dict[str, Any] | list[dict[str, Any]],
        pace: float | None,
    ) -> list[Trial]:
        """Queued points first (after reaping expired leases), then proposals for the rest."""
        with self._lock:
            self._reap()
            fence = self._fence
            started = lifecycle.start_queued(self._storage, self._record, n, infos, fence)
            remaining = n - len(started)
            if remaining > 0:
                rest = infos if isinstance(infos, dict) else infos[len(started) :]
                proposed = self._propose(remaining, n_workers, pace)
                params = [p for p, _ in proposed]
                records = [r for _, r in proposed]
                store = (self._storage, self._record)
                started += lifecycle.start(*store, params, records, rest, fence)
            return started

    def _propose(
        self, n: int, n_workers: int | None, pace: float | None
    ) -> list[tuple[dict[str, Any], ProposalRecord]]:
        """``n`` proposals, with the reports the strategy needs (stopped trials' projections,
        a numeric fidelity's lower observations)."""
        fidelity = self.spec.fidelity_of
        modelled = self._proposer.strategy.needs_model
        numeric = fidelity is not None and fidelity.numeric
        reports = (
            self._storage.reports(self._record)
            if modelled and (numeric or self.spec.stopping is not None)
            else None
        )
        snapshot = (self._storage.trials(self._record), n, n_workers, pace, reports)
        if self.proposals is not None and modelled:
            device = self._proposer.device_setting
            return self.proposals.propose(self._record, device, *snapshot)
        with torch_threads():
            return self._proposer.propose(*snapshot)


# --------------------------------------------------------------------------------------------
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
            whatever is given (they are still validated). See ``abo.spec.options_check``.
        outcomes: the outcomes, e.g. ``{"error": "minimize", "latency_ms": "minimize"}``
            (default: one objective called ``value``).
        **options: the other study options of ``abo.spec.study_spec.StudySpec`` (``n_initial``,
            ``lease_seconds``, ``max_retries``, ``noise``, ``strategy_options``, ``refit``,
            ``max_staleness``, ``max_exact``, ``warm_start_from``, …); an unknown one is an
            error naming it. ``warm_start_from`` takes study names in ``storage`` or
            ``Study`` objects of any storage (``abo.spec.warm_start``).

    Example:
        >>> import abo
        >>> s = abo.create_study(abo.Space({"x": abo.Float(0, 1)}), name="doc", seed=1)
        >>> s.name, s.direction
        ('doc', 'minimize')
    """
    name = check_name(name)
    load_if_exists = check_load_if_exists(load_if_exists)
    # what is compared when the study exists: the options given explicitly
    given = [k for k, v in (("strategy", strategy), ("seed", seed)) if v is not None]
    given += list(options)
    if strategy is not None:
        options["strategy"] = strategy
    warm = options.pop("warm_start_from", None)
    spec = StudySpec.create(space, outcomes=outcomes, direction=direction, seed=seed, **options)
    resolve_device(spec.device)  # a CUDA device asked for and absent: nothing is stored
    store = open_storage(storage)
    if warm:  # the sources' results as a snapshot, so the study never depends on them again
        spec = _warm_started(spec, store, warm, outcomes, direction, options)
    return _create_or_resume(store, StudyRecord(name=name, spec=spec), given, load_if_exists)


def _warm_started(
    spec: StudySpec,
    store: Storage,
    warm: Any,
    outcomes: Any,
    direction: str | None,
    options: dict[str, Any],
) -> StudySpec:
    """``spec`` again with the results of the ``warm_start_from`` sources as a snapshot."""
    from abo.spec.warm_start import resolve

    sources = resolve(
        warm, lambda n: Study(store, store.load_study(n)), spec.space, spec.objectives[0].name
    )
    return StudySpec.create(
        spec.space, outcomes=outcomes, direction=direction, seed=spec.seed,
        warm_start_from=sources, **options,
    )  # fmt: skip


def _create_or_resume(
    store: Storage, record: StudyRecord, given: list[str], load_if_exists: bool | str
) -> Study:
    """Create the study of ``record``, or (with ``load_if_exists``) load a matching one."""
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
    naming what differs, ``abo.spec.options_check``), ``None`` if there is none."""
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
