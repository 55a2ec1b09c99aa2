"""Study: the ask/tell engine every other part (the loop, the CLI, the service) goes through.

A study decides *which* points to evaluate next; it does no I/O of its own beyond its storage.
Every ask first reaps expired leases, then hands out queued points (enqueued by the user, or
retries of lost trials), then asks the strategy for the rest — with every running trial as a
busy point. Every tell is validated at this boundary and committed before it returns.

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

import math
import numbers
import os
import re
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor
from torch.quasirandom import SobolEngine

from abo.acquisitions.base import Proposal, ProposalContext
from abo.exceptions import (
    AboError,
    AboWarning,
    DuplicatedStudyError,
    InvalidValueError,
    SearchSpaceError,
    StudyNotFoundError,
    SurrogateFitError,
)
from abo.refit import REFIT_MODES, ModelManager
from abo.registry import check_strategy, make_strategy
from abo.space import Space
from abo.storage import QueuedPoint, Storage, StudyConfig, StudyRecord, open_storage
from abo.surrogate import MAX_EXACT, NOISE_MODES, FittedModel
from abo.threads import torch_threads
from abo.trial import Trial, TrialState

if TYPE_CHECKING:
    from abo.executors.base import Executor
    from abo.loop import OptimizeResult

DIRECTIONS = ("minimize", "maximize")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
DUPLICATE_TOL = 1e-6
MIN_OBSERVATIONS = 2
MAX_SEED = 2**63  # stored as a signed 64-bit integer
# keys of trial.info that abo's proposer writes and reads back (the design count, the GP's
# warm start): a caller's info may add keys beside them, never set these
RESERVED_INFO = ("strategy", "model")


def check_value(value: Any, field: str = "value") -> float:
    """A finite float from ``value``, or ``InvalidValueError`` naming ``field``."""
    if isinstance(value, bool) or isinstance(value, str | bytes):
        raise InvalidValueError(f"{field}: expected a real number, got {value!r}")
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise InvalidValueError(f"{field}: expected one number, got a tensor of {value.shape}")
        value = value.item()
    if not isinstance(value, numbers.Real):
        try:
            value = float(value)  # numpy scalars and other real-likes
        except (TypeError, ValueError):
            raise InvalidValueError(f"{field}: expected a real number, got {value!r}") from None
    try:
        out = float(value)
    except OverflowError:  # an int beyond the float range
        raise InvalidValueError(
            f"{field}: must be finite, got an integer of {value.bit_length()} bits"
        ) from None
    if not math.isfinite(out):
        raise InvalidValueError(f"{field}: must be finite, got {out!r}")
    return out


def _check_info(info: Mapping[str, Any] | None, field: str = "info") -> dict[str, Any]:
    """A caller's ``info`` as a dict, refusing abo's own record keys (``RESERVED_INFO``)."""
    if info is None:
        return {}
    if not isinstance(info, Mapping):
        raise AboError(f"{field}: expected a dict, got {type(info).__name__}")
    for key in info:
        if key in RESERVED_INFO:
            raise AboError(
                f"{field}.{key}: reserved for abo's own proposal record; put your data in "
                "metadata or under another key"
            )
    return dict(info)


def _stored_model(trials: Sequence[Trial]) -> dict[str, Any] | None:
    """The newest well-formed GP record on a trial (``ModelManager.record``), else ``None``.

    Anything else under ``info["model"]`` (written by an older release from a caller's info)
    is skipped, so a stray value can never break the study's proposals.
    """
    for t in reversed(trials):
        record = t.info.get("model")
        if not isinstance(record, Mapping):
            continue
        hypers, key, n = record.get("hypers"), record.get("key"), record.get("n")
        if (
            isinstance(hypers, Mapping)
            and isinstance(key, str)
            and isinstance(n, int)
            and not isinstance(n, bool)
            and all(
                isinstance(v, list) and all(_is_finite_number(x) for x in v)
                for v in hypers.values()
            )
        ):
            return dict(record)
    return None


def _is_finite_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _check_trial_id(trial_id: Any) -> int:
    if isinstance(trial_id, bool) or not isinstance(trial_id, numbers.Integral):
        raise AboError(f"trial_id: expected an integer, got {trial_id!r}")
    return int(trial_id)


def _derive_seed(seed: int, counter: int) -> int:
    return (seed * 1_000_003 + counter * 7919 + 17) % (2**62)


class Study:
    """An optimisation study: ask for trials, tell their values, let the GP propose the next.

    Build one with ``abo.create_study`` or ``abo.load_study``. Methods are safe to call from
    several threads and several processes sharing the storage.
    """

    def __init__(self, storage: Storage, record: StudyRecord, refit: str | None = None) -> None:
        """Wrap a stored study; ``refit`` overrides its refit policy in this process only."""
        self._storage = storage
        self._record = record
        self._strategy = make_strategy(record.strategy, **record.config.strategy_options)
        self._models = ModelManager(
            noise=record.config.noise,
            mode=refit or record.config.refit,
            max_staleness=record.config.max_staleness,
            max_exact=record.config.max_exact,
        )
        self._lock = threading.RLock()
        self._units: dict[int, list[float]] = {}

    # -- identity ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._record.name

    @property
    def space(self) -> Space:
        return self._record.space

    @property
    def direction(self) -> str:
        return self._record.direction

    @property
    def strategy(self) -> str:
        return self._record.strategy

    @property
    def seed(self) -> int:
        return self._record.seed

    @property
    def config(self) -> StudyConfig:
        return self._record.config

    @property
    def n_initial(self) -> int:
        """Size of the quasi-random initial design (default ``2 *`` parameters, at least 2)."""
        configured = self.config.n_initial
        return configured if configured is not None else max(2, 2 * len(self.space))

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
        """The running trials: the busy points every strategy sees."""
        return self._storage.trials(self._record, [TrialState.RUNNING])

    @property
    def best(self) -> Trial | None:
        """The done trial with the best value (``None`` before the first result)."""
        done = self._storage.trials(self._record, [TrialState.DONE])
        if not done:
            return None
        pick = min if self.direction == "minimize" else max
        return pick(done, key=lambda t: (t.value, -t.id) if pick is max else (t.value, t.id))

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
        return self._storage.reap(self._record)

    def heartbeat(self, trial_id: int) -> Trial:
        """Extend a running trial's lease by the study's ``lease_seconds``.

        A lease that already expired is not revived: the trial is marked ``lost`` (as the next
        ask or tell anywhere would) and ``TrialStateError`` says so, whoever reaps first.
        """
        trial_id = _check_trial_id(trial_id)
        self._storage.reap(self._record)
        return self._storage.heartbeat(self._record, trial_id)

    def tell(
        self,
        trial_id: int,
        value: Any,
        metadata: Mapping[str, Any] | None = None,
        *,
        info: Mapping[str, Any] | None = None,
    ) -> Trial:
        """Record the objective value of a running trial; committed before it returns.

        Telling the same value again is a no-op; a different value is a ``TrialStateError``.
        A value for a trial that was already ``lost`` is kept on it but never modelled.
        ``metadata`` is the user's (stored on the trial); ``info`` is abo's own bookkeeping
        (worker, timings), merged into ``trial.info`` by the optimisation loop.

        Raises:
            InvalidValueError: ``value`` is NaN, infinite or not a number (nothing changes).
            TrialNotFoundError: no such trial.
            TrialStateError: the trial is finished with a different outcome.
        """
        trial_id = _check_trial_id(trial_id)
        value = check_value(value)
        if metadata is not None and not isinstance(metadata, Mapping):
            raise AboError(f"metadata: expected a dict, got {type(metadata).__name__}")
        extra = _check_info(info)
        self._storage.reap(self._record)
        return self._storage.finish(
            self._record,
            trial_id,
            TrialState.DONE,
            value=value,
            user=dict(metadata or {}),
            info=extra,
        )

    def fail(
        self,
        trial_id: int,
        reason: str = "",
        metadata: Mapping[str, Any] | None = None,
        info: Mapping[str, Any] | None = None,
    ) -> Trial:
        """Mark a running trial ``failed``: its parameters caused the failure.

        Failing it again is a no-op; failing a trial that is done or already ``lost`` is a
        ``TrialStateError`` (a lost trial's parameters live on in its retry).
        """
        trial_id = _check_trial_id(trial_id)
        if metadata is not None and not isinstance(metadata, Mapping):
            raise AboError(f"metadata: expected a dict, got {type(metadata).__name__}")
        extra = _check_info(info)
        self._storage.reap(self._record)
        return self._storage.finish(
            self._record,
            trial_id,
            TrialState.FAILED,
            reason=str(reason)[:10_000],
            user=dict(metadata or {}),
            info=extra,
        )

    def lose(self, trial_id: int, reason: str) -> Trial:
        """Mark a running trial ``lost`` (the infrastructure failed) and re-queue its params.

        Losing it again is a no-op; a done or failed trial is a ``TrialStateError``.
        """
        return self._storage.mark_lost(self._record, _check_trial_id(trial_id), reason)

    def enqueue(self, params: Mapping[str, Any], *, allow_duplicate: bool = False) -> bool:
        """Queue parameters to be evaluated next (the next ask hands them out first).

        Parameters the study already has (queued, or a trial that is not lost) are skipped,
        so a script that enqueues its starting points can run again; ``allow_duplicate=True``
        queues them anyway. Returns whether they were queued.
        """
        checked = self.space.validate(params)
        point = QueuedPoint(checked, info={"strategy": "enqueued"})
        return self._storage.enqueue(self._record, point, unique=not allow_duplicate)

    def add(
        self,
        params: Mapping[str, Any],
        value: Any,
        metadata: Mapping[str, Any] | None = None,
        *,
        allow_duplicate: bool = False,
    ) -> Trial:
        """Record a known result (a warm start) as a done trial.

        A done trial with the same parameters and value is returned instead of adding a second
        one, so a script that adds known results can run again (the same parameters with
        another value are a new observation and are added); ``allow_duplicate=True`` always
        adds.
        """
        checked = self.space.validate(params)
        value = check_value(value)
        if metadata is not None and not isinstance(metadata, Mapping):
            raise AboError(f"metadata: expected a dict, got {type(metadata).__name__}")
        return self._storage.add_done(
            self._record,
            checked,
            value,
            {"strategy": "added"},
            dict(metadata or {}),
            unique=not allow_duplicate,
        )

    # -- asking -----------------------------------------------------------------------------
    def ask(self, n_workers: int | None = None, info: Mapping[str, Any] | None = None) -> Trial:
        """One new running trial (queued points first, then the strategy's proposal)."""
        return self.ask_batch(1, n_workers=n_workers, info=info)[0]

    def ask_batch(
        self, n: int, n_workers: int | None = None, info: Mapping[str, Any] | None = None
    ) -> list[Trial]:
        """``n`` new, distinct running trials; each later one sees the earlier ones as busy.

        Args:
            n: how many trials to start (``>= 1``).
            n_workers: how many evaluations the caller runs at once, if known.
            info: added to each new trial's ``info`` (e.g. the loop's driver); it cannot set
                abo's own keys (``RESERVED_INFO``) or override what the proposer recorded.
        """
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise AboError(f"n: expected a positive integer, got {n!r}")
        extra = _check_info(info)
        with self._lock:
            self._storage.reap(self._record)
            started = self._storage.start_queued(self._record, int(n), info=extra)
            remaining = int(n) - len(started)
            if remaining > 0:
                with torch_threads():
                    started += self._propose_and_start(remaining, n_workers, extra)
            return started

    def _unit(self, trials: Sequence[Trial]) -> Tensor:
        """``n x D`` unit-cube encodings of the trials' parameters, cached per trial id (a
        trial's parameters never change), so a study of thousands of trials encodes each once."""
        rows = []
        for t in trials:
            row = self._units.get(t.id)
            if row is None:
                row = self._units[t.id] = self.space.to_unit(t.params).tolist()
            rows.append(row)
        if not rows:
            return torch.zeros(0, self.space.dim, dtype=torch.double)
        return torch.tensor(rows, dtype=torch.double)

    def _observations(
        self, done: Sequence[Trial], failed: Sequence[Trial]
    ) -> tuple[list[Trial], Tensor, Tensor]:
        """Model data: done trials as utilities (larger is better), failed ones at the worst.

        A failed trial says its parameters are bad (the objective raised, diverged or timed
        out); modelling it at the worst observed utility steers proposals away from the region
        instead of proposing it again and again.
        """
        sign = -1.0 if self.direction == "minimize" else 1.0
        utilities = [sign * float(t.value) for t in done]  # type: ignore[arg-type]
        worst = min(utilities) if utilities else 0.0
        trials = [*done, *failed] if utilities else list(done)
        Y = utilities + ([worst] * len(failed) if utilities else [])
        X = self._unit(trials)
        return trials, X, torch.tensor(Y, dtype=torch.double).reshape(-1, 1)

    def _model(
        self, observed: Sequence[Trial], X: Tensor, Y: Tensor, stored: dict[str, Any] | None
    ) -> tuple[FittedModel | None, dict[str, Any]]:
        """The GP for this data (see ``abo.refit``) and what to record about it on the trial."""
        key = tuple(t.id for t in observed)
        try:
            fitted, n_fit = self._models.model(key, X, Y, stored)
        except SurrogateFitError as exc:
            warnings.warn(f"{exc}; proposing quasi-random points", AboWarning, stacklevel=3)
            return None, {}
        return fitted, self._models.record(fitted, key, n_fit)

    def _propose_and_start(
        self, m: int, n_workers: int | None, extra: dict[str, Any]
    ) -> list[Trial]:
        trials = self._storage.trials(self._record)
        done = [t for t in trials if t.state is TrialState.DONE]
        running = [t for t in trials if t.state is TrialState.RUNNING]
        space = self.space
        seed = _derive_seed(self.seed, len(trials))
        n_initial = self.n_initial
        seen = sum(1 for t in trials if t.state is not TrialState.LOST and t.attempt == 0)
        designed = sum(1 for t in trials if t.info.get("strategy") == "sobol")
        model_ready = len(done) >= MIN_OBSERVATIONS and self._strategy.needs_model
        n_sobol = m if not model_ready and self._strategy.needs_model else 0
        n_sobol = max(n_sobol, min(m, max(0, n_initial - seen)))

        X_new: list[Tensor] = []
        infos: list[dict[str, Any]] = []
        if n_sobol:
            engine = SobolEngine(space.dim, scramble=True, seed=self.seed % (2**31))
            points = engine.draw(designed + n_sobol, dtype=torch.double)[designed:]
            X_new.append(space.round(points))
            infos += [{"strategy": "sobol"} for _ in range(n_sobol)]
        if m - n_sobol:
            failed = [t for t in trials if t.state is TrialState.FAILED]
            observed, X_obs, Y_obs = self._observations(done, failed)
            pending = [self._unit(running)] + X_new
            stored = _stored_model(trials)
            proposal, timing = self._run_strategy(
                m - n_sobol,
                observed,
                X_obs,
                Y_obs,
                torch.cat(pending),
                seed,
                len(trials),
                n_workers,
                stored,
            )
            X_new.append(space.round(proposal.X))
            infos += [{**info, **timing} for info in proposal.info]
        X_all = torch.cat(X_new)
        X_all = self._deduplicate(X_all, trials, seed, infos)
        params = [space.from_unit(x) for x in X_all]
        return self._storage.start_trials(self._record, params, [{**extra, **i} for i in infos])

    def _run_strategy(
        self,
        m: int,
        observed: Sequence[Trial],
        X: Tensor,
        Y: Tensor,
        X_pending: Tensor,
        seed: int,
        n_trials: int,
        n_workers: int | None,
        stored: dict[str, Any] | None,
    ) -> tuple[Proposal, dict[str, Any]]:
        t0 = time.perf_counter()
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            fitted, record = (
                self._model(observed, X, Y, stored) if self._strategy.needs_model else (None, {})
            )
            t_fit = time.perf_counter() - t0
            ctx = ProposalContext(
                model=fitted.model if fitted else None,
                X=X,
                Y=Y,
                X_pending=X_pending,
                bounds=self.space.bounds,
                generator=torch.Generator().manual_seed(seed),
                round=self.space.round,
                n_trials=n_trials,
                n_workers=n_workers,
                n_initial=self.n_initial,
            )
            if self._strategy.needs_model and fitted is None:
                proposal = Proposal(ctx.uniform(m), [{"strategy": "random", "fallback": True}] * m)
            else:
                try:
                    proposal = self._strategy.propose(ctx, m)
                except Exception as exc:  # noqa: BLE001 - never crash a study on a proposal
                    warnings.warn(
                        f"strategy {self.strategy} failed ({type(exc).__name__}: {exc}); "
                        "proposing random points",
                        AboWarning,
                        stacklevel=3,
                    )
                    proposal = Proposal(
                        ctx.uniform(m), [{"strategy": "random", "fallback": True}] * m
                    )
        seconds = time.perf_counter() - t0
        extra = {
            "proposal_seconds": round(seconds / m, 6),
            "fit_seconds": round(t_fit, 6),
            "n_observations": fitted.n if fitted else len(observed),
        }
        if fitted is not None:
            extra["gp_points"] = int(fitted.model.train_inputs[0].shape[-2])
        if record:
            extra["fit_observations"] = record["n"]
            extra["model"] = record
        return proposal, extra

    def _deduplicate(
        self, X: Tensor, trials: Sequence[Trial], seed: int, infos: list[dict[str, Any]]
    ) -> Tensor:
        """Replace proposals that repeat a busy or evaluated point by random valid points."""
        existing = self._unit([t for t in trials if t.state is not TrialState.LOST])
        gen = torch.Generator().manual_seed(seed + 1)
        out = []
        for i, x in enumerate(X):
            ref = torch.cat([existing, *[o.unsqueeze(0) for o in out]])
            candidate = x
            for _ in range(100):
                if ref.shape[0] == 0 or torch.cdist(candidate[None], ref).min() > DUPLICATE_TOL:
                    break
                candidate = self.space.round(
                    torch.rand(1, self.space.dim, generator=gen, dtype=torch.double)
                )[0]
                infos[i] = {**infos[i], "deduplicated": True}
            out.append(candidate)
        return torch.stack(out)

    # -- running ----------------------------------------------------------------------------
    def optimize(
        self,
        objective: Callable[..., Any],
        n_trials: int,
        n_workers: int | None = 4,
        executor: Executor | None = None,
        callback: Callable[[Study, Trial], None] | None = None,
        timeout: float | None = None,
        **options: Any,
    ) -> OptimizeResult:
        """Run ``n_trials`` evaluations asynchronously, keeping ``n_workers`` busy.

        Without ``executor`` a local Dask cluster of ``n_workers`` worker processes is started
        and closed. A new trial is submitted the moment one finishes, with every running trial
        as a busy point. See ``abo.loop.run`` for the fault handling.

        Args:
            objective: ``params -> float`` or ``-> {"value": float, ...metadata}``, or an
                ``abo.Command``.
            n_trials: how many trials to finish (done or failed) in this call.
            n_workers: evaluations in flight at once (default: the executor's workers).
            executor: where evaluations run (see ``abo.executors``).
            callback: called with ``(study, trial)`` after each finished trial.
            timeout: stop submitting after this many seconds.
            **options: ``trial_timeout``, ``guard`` (``abo.loop.FailureGuard`` or ``None``),
                ``grace`` (seconds to wait for running trials when stopped), ``lookahead``
                (evaluations proposed ahead in a background thread and queued at the
                executor beyond the workers, so a freed worker starts the next at once; about
                twice the workers for fast evaluations; pair it with ``refit="background"``
                and a large ``max_staleness`` for large or fast studies).
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
            **options,
        )


# --------------------------------------------------------------------------------------------
def _check_name(name: str | None) -> str:
    if name is None:
        return f"study-{uuid.uuid4().hex[:8]}"
    if not isinstance(name, str) or not _NAME.match(name):
        raise AboError(
            f"name: {name!r} is not a valid study name (1-128 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit)"
        )
    return name


def create_study(
    space: Space | Mapping[str, Any],
    name: str | None = None,
    storage: str | Storage | None = None,
    direction: str = "minimize",
    strategy: str = "qlognei",
    seed: int | None = None,
    *,
    load_if_exists: bool = False,
    n_initial: int | None = None,
    lease_seconds: float = 24 * 3600.0,
    max_retries: int = 1,
    noise: str = "auto",
    strategy_options: Mapping[str, Any] | None = None,
    refit: str = "sync",
    max_staleness: int | None = None,
    max_exact: int = MAX_EXACT,
) -> Study:
    """Create a study (or resume it with ``load_if_exists=True``).

    Args:
        space: an ``abo.Space`` (or a dict of parameters).
        name: unique within the storage; a random one when ``None``.
        storage: ``sqlite:///file.db``, a PostgreSQL URL, a ``Storage``, or ``None`` (memory).
        direction: ``"minimize"`` or ``"maximize"``.
        strategy: a name from ``abo.strategies()``.
        seed: fixes every random choice; drawn at random (and stored) when ``None``.
        load_if_exists: resume an existing study of this name instead of failing.
        n_initial: quasi-random points before the model (default ``2 * len(space)``).
        lease_seconds: a running trial without a heartbeat for this long is lost.
        max_retries: how often a lost trial's parameters are retried.
        noise: ``"auto"`` (learned) or ``"deterministic"`` (interpolate the data).
        strategy_options: keyword arguments for the strategy.
        refit: ``"sync"`` (refit before each proposal: reproducible), ``"background"``
            (asks never wait for a fit) or ``"full"`` (a multi-start refit before each
            proposal: slowest); see ``abo.refit``.
        max_staleness: with ``refit="background"``, the most observations the proposing
            hyperparameters may lag behind the data (default: 20, and past 50 observations a
            tenth of the data; set it higher for many fast workers, see ``abo.refit``).
        max_exact: the most observations the GP is fitted on; above it the GP keeps the best
            half and a seeded sample of the rest, so asks stay fast in long studies.

    Example:
        >>> import abo
        >>> s = abo.create_study(abo.Space({"x": abo.Float(0, 1)}), name="doc", seed=1)
        >>> s.name, s.direction
        ('doc', 'minimize')
    """
    if not isinstance(space, Space):
        space = Space(space)
    name = _check_name(name)
    if direction not in DIRECTIONS:
        raise AboError(f"direction: expected 'minimize' or 'maximize', got {direction!r}")
    check_strategy(strategy)
    if noise not in NOISE_MODES:
        raise AboError(f"noise: expected one of {', '.join(NOISE_MODES)}, got {noise!r}")
    if refit not in REFIT_MODES:
        raise AboError(f"refit: expected one of {', '.join(REFIT_MODES)}, got {refit!r}")
    if max_staleness is not None and (
        isinstance(max_staleness, bool) or not isinstance(max_staleness, int) or max_staleness < 0
    ):
        raise AboError(f"max_staleness: expected a non-negative integer, got {max_staleness!r}")
    if isinstance(max_exact, bool) or not isinstance(max_exact, int) or max_exact < 10:
        raise AboError(f"max_exact: expected an integer of at least 10, got {max_exact!r}")
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "little")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < MAX_SEED:
        raise AboError(f"seed: expected an integer in [0, 2**63), got {seed!r}")
    if n_initial is not None and (
        isinstance(n_initial, bool) or not isinstance(n_initial, int) or n_initial < 1
    ):
        raise AboError(f"n_initial: expected a positive integer, got {n_initial!r}")
    if (
        isinstance(lease_seconds, bool)
        or not isinstance(lease_seconds, int | float)
        or not 0 < lease_seconds < math.inf
    ):
        raise AboError(f"lease_seconds: expected a positive, finite number, got {lease_seconds!r}")
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise AboError(f"max_retries: expected a non-negative integer, got {max_retries!r}")
    config = StudyConfig(
        n_initial=n_initial,
        lease_seconds=float(lease_seconds),
        max_retries=max_retries,
        noise=noise,
        strategy_options=dict(strategy_options or {}),
        refit=refit,
        max_staleness=max_staleness,
        max_exact=max_exact,
    )
    make_strategy(strategy, **config.strategy_options)  # options are checked before storing
    store = open_storage(storage)
    record = StudyRecord(
        name=name,
        space=space,
        direction=direction,
        strategy=strategy,
        seed=int(seed),
        config=config,
    )
    if not load_if_exists:
        return Study(store, store.create_study(record))
    resumed = _resume(store, record)
    if resumed is not None:
        return resumed
    try:
        return Study(store, store.create_study(record))
    except DuplicatedStudyError:
        # another process created it between our look and our insert (workers starting at once)
        resumed = _resume(store, record)
        if resumed is None:
            raise
        return resumed


def _resume(store: Storage, wanted: StudyRecord) -> Study | None:
    """The existing study called ``wanted.name`` if it matches, ``None`` if there is none."""
    try:
        existing = store.load_study(wanted.name)
    except StudyNotFoundError:
        return None
    if existing.space != wanted.space:
        raise SearchSpaceError(
            f"space: study {wanted.name!r} exists with a different space "
            f"({existing.space.to_json()})"
        )
    if existing.direction != wanted.direction:
        raise AboError(
            f"direction: study {wanted.name!r} exists with direction {existing.direction!r}"
        )
    return Study(store, existing)


def delete_study(name: str, storage: str | Storage) -> None:
    """Delete a study with all its trials and queued points, from any process.

    Processes that still hold the study get ``StudyNotFoundError`` on their next call (even if
    a new study of the same name is created meanwhile).

    Raises:
        StudyNotFoundError: no study of that name.
    """
    if not isinstance(name, str):
        raise AboError(f"name: expected a study name (a string), got {name!r}")
    open_storage(storage).delete_study(name)


def load_study(name: str, storage: str | Storage | None) -> Study:
    """Load an existing study by name, from any process (``StudyNotFoundError`` if none)."""
    if not isinstance(name, str):
        raise AboError(f"name: expected a study name (a string), got {name!r}")
    store = open_storage(storage)
    return Study(store, store.load_study(name))
