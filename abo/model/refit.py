"""Which GP proposes, and when its hyperparameters are refitted.

The policies, chosen per study (``create_study(..., refit=...)``) or per process
(``Study(..., refit=...)``, which the HTTP service uses):

* ``"auto"`` (default): ``"sync"`` for an ask made without a pace, ``"background"`` for one
  made with a pace (``Study.ask_batch(..., pace=...)``: the asks of ``optimize``'s automatic
  lookahead, which says how many seconds a point may take before a worker waits). An
  ask/tell loop keeps ``sync``'s exact reproducibility; the asynchronous loop, whose
  proposals depend on timing anyway, never makes its workers wait for a refit (only an ask
  before any hyperparameters exist waits for the first fit, within
  ``abo.propose.proposer.first_fit_patience``).

* ``"sync"``: before a proposal the hyperparameters are refitted on all the data,
  warm-started from the hyperparameters recorded on the study's latest model-proposed trial,
  once the data have grown by ``refit_step`` since they were fitted (every observation up to
  40, then 5 % of the data); in between, those recorded hyperparameters are conditioned on
  the current data (one Cholesky factorisation), so at 1,000 observations 49 asks in 50 skip
  a fit of seconds. Because the starting point and the schedule come from storage (the record
  says on how many observations its hyperparameters were fitted), not from this process's
  memory, a resumed study proposes exactly what an uninterrupted one would: same seed, same
  tells, same points.
* ``"background"``: an ask never waits for a fit. It conditions the newest fitted
  hyperparameters on the current data (one Cholesky factorisation, no optimisation) and
  proposes at once, while one background thread refits the hyperparameters on a snapshot of
  the data (the fit itself runs in a child process, ``abo.model.fitproc``, so it does not hold this
  interpreter's lock while asks run). At most one refit runs at a time, and no proposal uses
  hyperparameters that lag the data by more than ``max_staleness`` observations (the ask then
  waits for a fresh fit).
  By default that is 20, and past 50 observations a tenth of the data (early fits are cheap
  and early data move the hyperparameters most), or, when more, the results that arrive
  during two refits at the measured pace (``staleness_bound``): a study whose results come
  faster than a refit takes lets refits run back to back in the background instead of making
  asks wait for them, while a slow study keeps the tight bound and fresh hyperparameters. An
  explicit ``max_staleness`` replaces the rule.
  A refit starts once the data have grown by ``refit_step`` (one observation while fits are
  cheap, 5 % of the data beyond 40), or by half the staleness bound if that comes first, so
  that a refit normally ends before an ask would have to wait for one. Proposals depend on
  timing, so this mode trades reproducibility for latency.
* ``"full"``: like ``"sync"``, but the hyperparameters are refitted before every proposal,
  each time a full multi-start fit (the slowest and most thorough; the reference the
  benchmarks hold the cheaper policies to).

Both policies make a full multi-start refit when the data have grown by 20 % since the last
fit (``full_refit_due``), and both fit at most ``max_exact`` observations (``abo.model.surrogate``).
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from abo.core.exceptions import SurrogateFitError
from abo.core.quiet import silenced
from abo.model.fitproc import FitProcess, FitProcessDied
from abo.model.options import REFIT_MODES
from abo.model.refit_schedule import data_key, full_refit_due, refit_step
from abo.model.surrogate import MAX_EXACT, FittedModel, condition, export_hypers, fit_gp, subset
from abo.model.threads import torch_threads


@dataclass
class _Fit:
    fitted: FittedModel
    key: tuple[int, ...]


class ModelManager:
    """Hands out a model for the current data according to the refit policy (thread-safe)."""

    def __init__(
        self,
        noise: str,
        mode: str = "sync",
        max_staleness: int | None = None,
        max_exact: int = MAX_EXACT,
        fidelity: tuple[int, ...] = (),
        prior: Any = None,
        device: torch.device | None = None,
    ) -> None:
        if mode not in REFIT_MODES:
            raise SurrogateFitError(f"refit: expected one of {REFIT_MODES}, got {mode!r}")
        self.noise = noise
        self.fidelity = tuple(fidelity)  # a study's fidelity columns (their own prior)
        self.prior = prior  # a warm start's sources (abo.spec.warm_start.WarmPrior): the prior mean
        self.mode = mode
        self.max_staleness = max_staleness
        self.max_exact = max_exact
        self.device = device or torch.device("cpu")  # where the GPs live (abo.model.device)
        self.full_refits = 0  # of which full multi-start (for tests and benchmarks)
        self._latest: _Fit | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.refits = 0  # completed hyperparameter fits (for tests and benchmarks)
        self.waits = 0  # asks that had to wait for a fit (the lag passed the bound)
        self.fit_seconds: float | None = None  # the latest background fit's duration
        self._arrivals: deque[tuple[float, int]] = deque(maxlen=64)  # (time, observations)
        self._fit_process: FitProcess | None = None
        self._child_started = False

    @property
    def fit_process(self) -> FitProcess | None:
        """The child process background fits run in (started by the first that needs it)."""
        on_cpu = self.device.type == "cpu"  # a CUDA fit is quick, and CUDA shuns fork()s
        if self._fit_process is None and self.mode in ("background", "auto") and on_cpu:
            self._fit_process = FitProcess.shared()
        return self._fit_process

    def place(self, device: torch.device, max_exact: int) -> None:
        """Fit and propose on ``device`` from now on, on at most ``max_exact`` observations;
        the models made elsewhere are dropped (the next ask conditions the recorded
        hyperparameters there, or fits)."""
        with self._lock:
            if device != self.device:
                self.device, self.max_exact, self._latest = device, max_exact, None

    def staleness_bound(self, n: int) -> int:
        """The most observations the proposing hyperparameters may lag ``n`` observations:
        ``max_staleness`` when set, else 20 and (past 50) a tenth of the data, or the results
        that arrive during two refits at the measured pace when those are more."""
        if self.max_staleness is not None:
            return self.max_staleness
        static = min(20, max(5, n // 10))
        rate = self.arrival_rate()
        if rate is None or self.fit_seconds is None:
            return static
        return max(static, math.ceil(2.0 * rate * self.fit_seconds))

    def observe(self, n: int, now: float | None = None) -> None:
        """Note that the data hold ``n`` observations at ``now`` (the pace of results)."""
        self._arrivals.append((time.monotonic() if now is None else now, n))

    def arrival_rate(self) -> float | None:
        """New observations per second over the recent asks (``None`` before two)."""
        if len(self._arrivals) < 2:
            return None
        (t0, n0), (t1, n1) = self._arrivals[0], self._arrivals[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 and n1 > n0 else None

    def model(
        self,
        key: tuple[int, ...],
        X: Tensor,
        Y: Tensor,
        stored: Mapping[str, Any] | None = None,
        hurried: bool = False,
    ) -> tuple[FittedModel, int]:
        """A model of ``X, Y`` and the number of observations its hyperparameters saw.

        Args:
            key: identifies the data (ids of the observed trials, in order).
            X, Y: ``n x d`` inputs and ``n x 1`` utilities.
            stored: ``{"hypers": ..., "key": ..., "n": ...}`` recorded on the study's latest
                model-proposed trial (``record``): the ``sync`` policy starts from it.
            hurried: the ask has a pace (a worker waits for it): ``"auto"`` then takes the
                background path.

        Raises:
            SurrogateFitError: when no model can be had at all.
        """
        X, Y = X.to(self.device), Y.to(self.device)  # no copy when they are there
        if self.mode == "background" or (self.mode == "auto" and hurried):
            return self._background(key, X, Y, stored, hurried)
        return self._sync(key, X, Y, stored)

    def record(self, fitted: FittedModel, key: tuple[int, ...], n_fit: int) -> dict[str, Any]:
        """What a proposal records on its trial so any process can continue from this model."""
        return {"hypers": export_hypers(fitted.model), "key": data_key(key), "n": n_fit}

    def _sync(
        self, key: tuple[int, ...], X: Tensor, Y: Tensor, stored: Mapping[str, Any] | None
    ) -> tuple[FittedModel, int]:
        if stored and stored.get("key") == data_key(key):  # fitted on exactly this data
            return self._condition(X, Y, stored["hypers"]), int(stored.get("n", len(key)))
        n_fit = int(stored.get("n", 0)) if stored else 0
        stepped = self.mode in ("sync", "auto")
        if stored and stepped and 0 < n_fit and X.shape[0] - n_fit < refit_step(n_fit):
            return self._condition(X, Y, stored["hypers"]), n_fit  # too little new data to refit
        previous = self._condition(X, Y, stored["hypers"]) if stored else None
        fitted = self._fit(X, Y, previous, n_fit if stored else None)
        with self._lock:
            self._latest = _Fit(fitted, key)
        return fitted, fitted.n

    def _condition(self, X: Tensor, Y: Tensor, hypers: Mapping[str, list[float]]) -> FittedModel:
        """``condition`` on the observations the GP keeps (all, or the subset above the cap)."""
        idx = subset(X, Y, self.max_exact)
        fitted = condition(X[idx], Y[idx], self.noise, hypers, self.fidelity, self.prior)
        return FittedModel(model=fitted.model, n=X.shape[0], warm=True)

    def _fit(
        self,
        X: Tensor,
        Y: Tensor,
        previous: FittedModel | None,
        n_prev: int | None,
        elsewhere: bool = False,
        quick: bool = False,
    ) -> FittedModel:
        """Refit the hyperparameters (a full multi-start refit when due) on the kept subset.

        ``elsewhere``: fit in the child process and condition a model here on its result
        (the same fit: ``fit_gp`` from the same start, seed and data); if the child fails,
        the fit runs here. ``quick``: one start, never a full refit (a hurried first fit;
        the next refit is a full one).
        """
        n = X.shape[0]
        full = not quick and (self.mode == "full" or full_refit_due(n_prev, n))
        idx = subset(X, Y, self.max_exact)
        fitted = None
        if elsewhere and self.device.type == "cpu" and self.fit_process is not None:
            start = export_hypers(previous.model) if previous is not None else None
            try:
                hypers, warm = self.fit_process.fit(
                    X[idx], Y[idx], self.noise, start, full, seed=n,
                    threads=torch.get_num_threads(), fidelity=self.fidelity, prior=self.prior,
                )  # fmt: skip
                conditioned = condition(
                    X[idx], Y[idx], self.noise, hypers, self.fidelity, self.prior
                )
                fitted = FittedModel(conditioned.model, n, warm)
            except FitProcessDied:
                pass  # fit here instead (a failed fit itself is raised: it would fail here too)
        if fitted is None:
            fitted = fit_gp(
                X[idx], Y[idx], noise=self.noise, previous=previous, full=full, seed=n,
                fidelity=self.fidelity, prior=self.prior,
            )  # fmt: skip
        with self._lock:
            self.refits += 1
            self.full_refits += int(full)
        return FittedModel(model=fitted.model, n=n, warm=fitted.warm)

    def _background(
        self,
        key: tuple[int, ...],
        X: Tensor,
        Y: Tensor,
        stored: Mapping[str, Any] | None,
        hurried: bool = False,
    ) -> tuple[FittedModel, int]:
        with self._lock:
            latest = self._latest
            if not self._child_started and self.fit_process is not None:
                self._child_started = True
                self.fit_process.start()  # it loads torch while this ask fits here
        if latest is not None and latest.key == key:
            return latest.fitted, latest.fitted.n
        self.observe(X.shape[0])
        if hurried and latest is None and stored:  # a resumed study: its recorded hypers
            n_stored = int(stored.get("n", 0))
            latest = _Fit(
                FittedModel(self._condition(X, Y, stored["hypers"]).model, n_stored, True), ()
            )
            with self._lock:
                if self._latest is None:
                    self._latest = latest
        # a hurried ask never waits for a refit once it has hyperparameters: its workers
        # would wait too, while refits run back to back in the background
        bound = math.inf if hurried and latest is not None else self.staleness_bound(X.shape[0])
        if latest is None or X.shape[0] - latest.fitted.n > bound:
            if latest is not None:
                with self._lock:
                    self.waits += 1
            self.wait()  # never two refits at once: let a running one finish first
            with self._lock:
                latest = self._latest
            if latest is None or X.shape[0] - latest.fitted.n > bound:
                if latest is None and stored:
                    previous: FittedModel | None = self._condition(X, Y, stored["hypers"])
                    n_prev: int | None = int(stored.get("n", 0))
                else:
                    previous = latest.fitted if latest else None
                    n_prev = latest.fitted.n if latest else None
                # in the child too: this thread waits on a pipe, not holding the interpreter
                fitted = self._fit(X, Y, previous, n_prev, elsewhere=latest is not None)
                with self._lock:
                    self._latest = _Fit(fitted, key)
                return fitted, fitted.n
        assert latest is not None
        lag = X.shape[0] - latest.fitted.n
        if lag >= min(refit_step(latest.fitted.n), max(1, int(min(bound, 2**31)) // 2)):
            self._start_refit(key, X, Y)
        hypers = export_hypers(latest.fitted.model)
        conditioned = self._condition(X, Y, hypers)
        # same hyperparameters: per-model caches (PLAyBOOK's Lipschitz constants) may be shared
        setattr(conditioned.model, "abo_hypers_of", weakref.ref(latest.fitted.model))  # noqa: B010
        return conditioned, latest.fitted.n

    _warmed = False  # whether this process's GP code has been warmed up (``warm_up``)
    _warm_lock = threading.Lock()

    def warm_up(self, dim: int) -> None:
        """Fit a throw-away GP on made-up data in a thread, once per process (``"auto"`` and
        ``"background"`` only): a hurried study's design runs meanwhile, and the first fit in a
        process costs several times a later one (torch and GPyTorch warming up)."""
        if self.mode not in ("auto", "background"):
            return
        with ModelManager._warm_lock:
            if ModelManager._warmed:
                return
            ModelManager._warmed = True

        def run() -> None:
            X = torch.linspace(0.1, 0.9, 6, dtype=torch.double).unsqueeze(-1).expand(6, dim)
            X = (X + torch.arange(dim, dtype=torch.double) / (7 * dim)) % 1.0
            Y = torch.sin(6.0 * X).sum(-1, keepdim=True)
            try:
                with silenced(), torch_threads():
                    fit_gp(X, Y, noise=self.noise)
            except SurrogateFitError:  # pragma: no cover - made-up data fit
                pass

        threading.Thread(target=run, name="abo-warm-up", daemon=False).start()

    def first_fit_running(self, key: tuple[int, ...], X: Tensor, Y: Tensor) -> bool:
        """For a hurried ask with no hyperparameters at all (none fitted in this process, none
        recorded): whether the first fit is still running, starting it (``prefit``) if it was
        not; the caller waits for it a while (``wait``), then proposes quasi-random points,
        recorded as fallbacks, instead of keeping workers waiting longer.
        """
        if self.mode not in ("auto", "background"):
            return False
        with self._lock:
            if self._latest is not None:
                return False
            thread = self._thread
        if thread is None or not thread.is_alive():
            self.prefit(key, X, Y)
            with self._lock:
                thread = self._thread
        with self._lock:
            return self._latest is None and thread is not None and thread.is_alive()

    def prefit(self, key: tuple[int, ...], X: Tensor, Y: Tensor) -> None:
        """Start a first background fit on ``X, Y`` if no model exists yet (``"auto"`` and
        ``"background"`` only): a hurried study's initial design runs meanwhile, so its first
        model proposal conditions those hyperparameters instead of fitting while workers wait.
        """
        if self.mode not in ("auto", "background"):
            return
        with self._lock:
            if self._latest is not None:
                return
            if not self._child_started and self.fit_process is not None:
                self._child_started = True
                self.fit_process.start()  # loads torch meanwhile, for the refits to come
        # this one fits here, in a thread, from one start: the child is still starting, and
        # the fit warms up this process's GP code, which the first proposal would pay for
        self._start_refit(key, X, Y, first=True)

    def _start_refit(self, key: tuple[int, ...], X: Tensor, Y: Tensor, first: bool = False) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            previous = self._latest.fitted if self._latest else None
            self._thread = threading.Thread(
                target=self._refit, args=(key, X.clone(), Y.clone(), previous, first),
                name="abo-refit", daemon=False,  # exit waits: torch aborts on a killed fit
            )  # fmt: skip
            self._thread.start()

    def _refit(
        self,
        key: tuple[int, ...],
        X: Tensor,
        Y: Tensor,
        previous: FittedModel | None,
        first: bool = False,
    ) -> None:
        device = self.device
        X, Y = X.to(device), Y.to(device)
        try:
            started = time.monotonic()
            with silenced(), torch_threads():  # a failed refit keeps the old hypers quietly
                n_prev = previous.n if previous else None
                fitted = self._fit(X, Y, previous, n_prev, elsewhere=not first, quick=first)
            self.fit_seconds = time.monotonic() - started
        except SurrogateFitError:
            return  # keep the previous hyperparameters; the next ask tries again
        with self._lock:
            if device != self.device:  # moved meanwhile (``place``): this fit lives elsewhere
                return
            if self._latest is None or fitted.n >= self._latest.fitted.n:
                self._latest = _Fit(fitted, key)

    def wait(self, timeout: float | None = None) -> None:
        """Block until a running background refit has finished."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
