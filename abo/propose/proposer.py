"""How a point is proposed: the initial design, the model, the strategy, rounding, duplicates.

The ``Proposer`` has no I/O. It is handed the study's trials (a snapshot) and returns new
parameters with the ``ProposalRecord`` of each; ``Study`` stores them. What it owns:

* the **initial design**: the first ``n_initial`` points are scrambled Sobol, counted from the
  trials whose record says ``sobol`` (so a resumed study continues the same sequence); points
  past it that the model cannot propose yet (fewer than 2 results, or for a hurried ask the
  first fit still running after ``first_fit_patience``) continue the sequence with
  ``fallback`` set and the reason in ``details["fallback_reason"]``, so the design stays
  ``n_initial`` points and a run says how many proposals were not the model's
  (``abo.analysis.summary.proposal_source``);
* the **model state**: the GP is fitted (``abo.model.refit``) warm-started from the ``ModelRecord``
  on the study's newest model-proposed trial, so a resumed study proposes what an
  uninterrupted one would;
* **rounding** onto valid parameters and **duplicate removal** with one tolerance
  (``DUPLICATE_TOL``, shared with the strategies): a point that repeats a busy or evaluated one
  is replaced by a random valid point, and its record says so;
* the **seeded RNG**: every proposal runs under one seed derived from the study's seed and
  the number of trials so far (the same seed and the same order of tells give the same points).

A model that cannot be fitted falls back to quasi-random points with a warning (the study goes
on); a strategy that raises is a ``StrategyError`` with its cause, never silent random points.

Example:
    >>> import abo
    >>> spec = abo.spec.study_spec.StudySpec.create(abo.Space({"x": abo.Float(0, 1)}), seed=1)
    >>> [record.strategy for _, record in Proposer(spec).propose([], 2)]
    ['sobol', 'sobol']
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from abo.acquisitions.base import Proposal, ProposalContext
from abo.acquisitions.feasibility import Feasibility
from abo.acquisitions.registry import make_strategy
from abo.core.exceptions import StrategyError
from abo.core.params import Categorical
from abo.core.space import ParamValue, Space
from abo.core.trial import ProposalRecord, Report, Trial, TrialState
from abo.model.device import resolve_device
from abo.model.options import MAX_EXACT, max_exact_for
from abo.model.refit import ModelManager
from abo.model.surrogate import FittedModel
from abo.propose.data import OBSERVED, ProposalData
from abo.propose.design import ProposalDesign, _with
from abo.propose.fits import (
    FIRST_FIT_WAIT,
    FIRST_FIT_WAIT_MAX,
    MIN_OBSERVATIONS,
    ProposalFits,
    _gp_points,
    first_fit_patience,
    stored_model,
)
from abo.propose.warm_prior import WarmPrior
from abo.spec.study_spec import StudySpec

__all__ = [
    "FIRST_FIT_WAIT",
    "FIRST_FIT_WAIT_MAX",
    "MIN_OBSERVATIONS",
    "OBSERVED",
    "ProposalData",
    "ProposalDesign",
    "ProposalFits",
    "Proposer",
    "derive_seed",
    "first_fit_patience",
    "stored_model",
]


def derive_seed(seed: int, counter: int) -> int:
    """The proposal seed after ``counter`` trials (a fixed mix of the study's seed)."""
    return (seed * 1_000_003 + counter * 7919 + 17) % (2**62)


class Proposer(ProposalFits, ProposalDesign):
    """Proposes new points for a study (see the module docstring); thread-compatible.

    Args:
        spec: the study's definition.
        refit: overrides the spec's refit policy in this process (the service: background).
        device: overrides the spec's device in this process (``abo serve --device``).
    """

    def __init__(
        self, spec: StudySpec, refit: str | None = None, device: str | None = None
    ) -> None:
        self.spec = spec
        self.strategy = make_strategy(spec.strategy, **dict(spec.strategy_options))
        fidelity = spec.fidelity_of
        columns = spec.space._slices[fidelity.parameter] if fidelity is not None else slice(0)
        self.fidelity_columns = tuple(range(columns.start or 0, columns.stop or 0))
        self.warm = WarmPrior(spec) if spec.warm_start_from else None  # abo.propose.warm_prior
        # where the GPs and the search run (``place``); a warm start's prior GP lives on the
        # CPU, so a warm-started study proposes there
        self.device_setting = "cpu" if self.warm else device or spec.device
        self.large_device = resolve_device(self.device_setting)  # AboError: an absent CUDA
        auto = self.device_setting == "auto"
        self.device = torch.device("cpu") if auto else self.large_device
        max_exact = spec.max_exact or max_exact_for(self.device.type)
        self._ranked: list[dict[str, ParamValue]] | None = None  # its sources' best points
        self.models, *others = [
            ModelManager(
                noise=spec.noise,
                mode=refit or spec.refit,
                max_staleness=spec.max_staleness,
                max_exact=max_exact,
                device=self.device,
                fidelity=self.fidelity_columns,
                prior=self.warm,
            )
            for _ in spec.objectives
        ]
        self.multi = len(spec.objectives) > 1
        self.linear = spec.linear_constraints  # parameter constraints (abo.core.linear)
        self._unit_linear = [
            (torch.tensor(i), torch.tensor(c, dtype=torch.double), float(r))
            for i, c, r in (c.unit_form(spec.space) for c in self.linear)
        ]
        self.objective_models = [self.models, *others]  # one GP per objective
        self.failure_models = ModelManager(  # the classifier's GP of the log-odds of success
            noise="classifier",
            mode=refit or spec.refit,
            max_staleness=spec.max_staleness,
            max_exact=max_exact,
            device=self.device,
        )
        self.constraint_models = [  # one GP per outcome constraint, of its slack
            ModelManager(
                noise="auto",
                mode=refit or spec.refit,
                max_staleness=spec.max_staleness,
                max_exact=max_exact,
                device=self.device,
                fidelity=self.fidelity_columns,
            )
            for _ in spec.constraints
        ]
        self.free_columns = free_columns(spec.space)  # a local search leaves them whole
        self._unit_rows: dict[int, int] = {}
        self._unit_table = torch.zeros(0, spec.space.dim, dtype=torch.double)
        self._unit_lock = threading.Lock()

    # -- proposing ----------------------------------------------------------------------------
    def propose(
        self,
        trials: Sequence[Trial],
        m: int,
        n_workers: int | None = None,
        pace: float | None = None,
        reports: Mapping[int, Sequence[Report]] | None = None,
    ) -> list[tuple[dict[str, ParamValue], ProposalRecord]]:
        """``m`` new parameter sets and their records, with every running trial busy.

        ``pace``: seconds a point may take before a worker waits for it (an asynchronous
        loop's hurry; ``None`` for an ask that may take its time and is exactly reproducible).
        ``reports``: the trials' reports by id, which a study with a numeric fidelity models
        as observations at lower fidelities (``observations``).
        """
        space = self.spec.space
        seed = derive_seed(self.spec.seed, len(trials))
        n_design, n_sobol, late = self._plan(trials, m, n_workers, pace, reports)
        X_new: list[Tensor] = []
        records: list[ProposalRecord] = []
        if n_sobol and pace is not None and self.strategy.needs_model:
            self._fit_ahead(trials, reports)  # a hurried caller will want the model soon
        if n_sobol:
            designed = sum(
                1 for t in trials if t.proposal is not None and t.proposal.strategy == "sobol"
            )
            X_init, init_records = self._initial(trials, designed, n_sobol)
            X_new.append(X_init)
            records += init_records[:n_design]
            records += [  # past the design: quasi-random points instead of the model's
                _with(r, fallback=True, details={**r.details, "fallback_reason": late})
                for r in init_records[n_design:]
            ]
        if m - n_sobol:
            running = [t for t in trials if t.state is TrialState.RUNNING]
            pending = torch.cat([self.unit(running), *X_new])
            X, new_records = self._run_strategy(
                m - n_sobol, trials, pending, seed, n_workers, pace, reports
            )
            X_new.append(space.round(X))
            records += new_records
        X_all, records = self._deduplicate(torch.cat(X_new), trials, seed, records)
        if self.linear:
            X_all, records = self._inside(X_all, seed, records)
        return [(space.from_unit(x), r) for x, r in zip(X_all, records, strict=True)]

    def _plan(
        self,
        trials: Sequence[Trial],
        m: int,
        n_workers: int | None,
        pace: float | None,
        reports: Mapping[int, Sequence[Report]] | None,
    ) -> tuple[int, int, str | None]:
        """How many of ``m`` points are the design's, how many quasi-random in all (the design's
        and those past it that the model cannot propose yet), and why those past it are not
        the model's (``None`` when all past it are)."""
        needs_model = self.strategy.needs_model
        done = sum(1 for t in trials if t.state in OBSERVED)
        seen = sum(1 for t in trials if t.state is not TrialState.LOST and t.attempt == 0)
        n_design = min(m, max(0, self.spec.resolved_n_initial - seen))
        n_sobol, late = n_design, None  # late: why points past the design are not the model's
        if needs_model and done < MIN_OBSERVATIONS and n_design < m:
            n_sobol, late = m, f"fewer than {MIN_OBSERVATIONS} results to fit a model on"
        hurried = pace is not None  # the GPs to fit early, in the background
        if needs_model and hurried and done >= MIN_OBSERVATIONS and n_sobol < m:
            if stored_model(trials) is None and self._first_fit_late(
                trials, reports, first_fit_patience(pace, n_workers)
            ):
                n_sobol, late = m, "the first model fit was still running"
        return n_design, n_sobol, late

    def _fit_ahead(
        self, trials: Sequence[Trial], reports: Mapping[int, Sequence[Report]] | None
    ) -> None:
        """For a hurried ask answered from the design: start the GPs' fits in the background
        (or, before two results, warm up the fitting machinery) so the model is ready soon."""
        if sum(1 for t in trials if t.state in OBSERVED) >= MIN_OBSERVATIONS:
            observed, X, Y, _ = self.model_data(trials, reports)
            for fitter, k, X_f, y in self._fitters(trials, observed, X, Y):
                fitter.prefit(k, X_f, y)
        else:
            self.models.warm_up(self.spec.space.dim)

    def _run_strategy(
        self,
        m: int,
        trials: Sequence[Trial],
        X_pending: Tensor,
        seed: int,
        n_workers: int | None,
        pace: float | None = None,
        reports: Mapping[int, Sequence[Report]] | None = None,
    ) -> tuple[Tensor, list[ProposalRecord]]:
        """``m`` points from the study's strategy on the fitted GPs (quasi-random ones, recorded
        as fallbacks, when they cannot be fitted), under the proposal's seed, and their records."""
        t0 = time.perf_counter()
        needs_model = self.strategy.needs_model
        with torch.random.fork_rng():  # anything drawing from torch's global RNG is seeded
            torch.manual_seed(seed)
            if needs_model:
                observed, X, Y, lam = self.model_data(trials, reports)
                self.place(X.shape[0])
                stored = stored_model(trials)
                fitted, model = self._model(observed, X, Y, stored, hurried=pace is not None)
                feasibility, model = self._feasibility(
                    trials, observed, model, stored, hurried=pace is not None
                )
            else:
                observed, fitted, model, lam, feasibility = [], None, None, None, None
                X = torch.zeros(0, self.spec.space.dim, dtype=torch.double)
                Y = torch.zeros(0, 1, dtype=torch.double)
            t_fit = time.perf_counter() - t0
            ctx = self._context(
                trials, fitted, X, Y, X_pending, seed, n_workers, pace, feasibility, reports
            )
            proposal = self._strategy_points(ctx, m, fallback=needs_model and fitted is None)
        proposal = Proposal(proposal.X.cpu(), proposal.info)  # no copy on the CPU
        seconds = time.perf_counter() - t0
        common: dict[str, Any] = {
            "seconds": round(seconds / m, 6),
            "fit_seconds": round(t_fit, 6),
            "n_observations": fitted.n if fitted else len(observed),
            "gp_points": _gp_points(fitted.model) if fitted else None,
            "fit_observations": model.n if model else None,
            "model": model,
            "fallback": needs_model and fitted is None,
        }
        return proposal.X, self._records(proposal, common, lam)

    def place(self, n: int) -> None:
        """With ``device="auto"`` on a machine with CUDA: the CPU while it fits all ``n``
        observations (``MAX_EXACT``; small GPs are faster there, and propose exactly what a
        machine without CUDA would), the CUDA device beyond, where the GP stays exact."""
        if self.device_setting != "auto" or self.large_device.type == "cpu":
            return
        device = self.large_device if n > MAX_EXACT else torch.device("cpu")
        if device != self.device:
            self.device = device
            max_exact = self.spec.max_exact or max_exact_for(device.type)
            for manager in [*self.objective_models, *self.constraint_models, self.failure_models]:
                manager.place(device, max_exact)

    def _context(
        self,
        trials: Sequence[Trial],
        fitted: FittedModel | None,
        X: Tensor,
        Y: Tensor,
        X_pending: Tensor,
        seed: int,
        n_workers: int | None,
        pace: float | None,
        feasibility: Feasibility | None,
        reports: Mapping[int, Sequence[Report]] | None,
    ) -> ProposalContext:
        """What the strategy is handed: the model and its data, the busy points, the space,
        the seeded generator and the study's state (``abo.acquisitions.base``)."""
        device = self.device  # the model's data, busy points and bounds go where the GP is
        fidelity = self.fidelity_levels(trials, reports)
        if fidelity is not None and device.type != "cpu":
            levels, costs = fidelity.levels.to(device), fidelity.costs.to(device)
            fidelity = replace(fidelity, levels=levels, costs=costs)
        linear = [(i.to(device), c.to(device), r) for i, c, r in self._unit_linear]
        space = self.spec.space
        near = None if space.is_continuous else space.neighbours_of  # both on the CPU
        return ProposalContext(
            model=fitted.model if fitted else None,
            X=X.to(device),
            Y=Y.to(device),
            X_pending=X_pending.to(device),
            bounds=self.spec.space.bounds.to(device),
            generator=torch.Generator().manual_seed(seed),
            round=space.round,
            n_trials=len(trials),
            n_workers=n_workers,
            n_initial=self.spec.resolved_n_initial,
            history=self._history(trials),
            pace=pace,
            ref_point=self.ref_point(trials),
            feasibility=feasibility,
            inequality_constraints=linear or None,
            fidelity=fidelity,
            free_columns=self.free_columns,
            neighbours=near,
        )

    def _strategy_points(self, ctx: ProposalContext, m: int, fallback: bool) -> Proposal:
        """The strategy's ``m`` points, or uniform ones when its model could not be fitted
        (``fallback``); a strategy that raises is a ``StrategyError`` with its cause."""
        if fallback:
            why = {"strategy": "random", "fallback_reason": "the model could not be fitted"}
            return Proposal(ctx.uniform(m), [why] * m)
        try:
            return self.strategy.propose(ctx, m)
        except Exception as exc:
            raise StrategyError(
                f"strategy: {self.spec.strategy} failed to propose ({type(exc).__name__}: {exc})",
                field="strategy",
            ) from exc

    def _records(
        self, proposal: Proposal, common: dict[str, Any], lam: float | None
    ) -> list[ProposalRecord]:
        """One record per proposed point: the strategy (or arm) that made it, its details
        (with the output transform's exponent ``lam``) and what all of them share."""
        records = []
        for info in proposal.info:
            details = {k: v for k, v in info.items() if k not in ("strategy", "arm")}
            if lam is not None:
                details["output_lambda"] = round(lam, 6)  # the power transform's exponent
            if self.device.type != "cpu" and common.get("model") is not None:
                details["device"] = str(self.device)  # where the GP and the search ran
            arm = info.get("arm")
            records.append(
                ProposalRecord(
                    strategy=str(info.get("strategy", self.spec.strategy)),
                    arm=str(arm) if arm is not None else None,
                    details=details,
                    **common,
                )
            )
        return records


def free_columns(space: Space) -> tuple[int, ...]:
    """The columns of ``space``'s unit cube that are one-hot categorical encodings or belong to
    conditional parameters (``ProposalContext.free_columns``)."""
    columns: list[int] = []
    for name, param in space.items():
        if isinstance(param, Categorical) or param.when:
            cols = space._slices[name]
            columns += range(cols.start, cols.stop)
    return tuple(columns)
