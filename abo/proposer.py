"""How a point is proposed: the initial design, the model, the strategy, rounding, duplicates.

The ``Proposer`` has no I/O. It is handed the study's trials (a snapshot) and returns new
parameters with the ``ProposalRecord`` of each; ``Study`` stores them. What it owns:

* the **initial design**: the first ``n_initial`` points are scrambled Sobol, counted from the
  trials whose record says ``sobol`` (so a resumed study continues the same sequence); points
  past it that the model cannot propose yet (fewer than 2 results, or for a hurried ask the
  first fit still running after ``first_fit_patience``) continue the sequence with
  ``fallback`` set and the reason in ``details["fallback_reason"]``, so the design stays
  ``n_initial`` points and a run says how many proposals were not the model's
  (``abo.summary.proposal_source``);
* the **model state**: the GP is fitted (``abo.refit``) warm-started from the ``ModelRecord``
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
    >>> spec = abo.spec.StudySpec.create(abo.Space({"x": abo.Float(0, 1)}), seed=1)
    >>> [record.strategy for _, record in Proposer(spec).propose([], 2)]
    ['sobol', 'sobol']
"""

from __future__ import annotations

import bisect
import statistics
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import torch
from botorch.models import ModelListGP
from torch import Tensor
from torch.quasirandom import SobolEngine

from abo.acquisitions.base import DUPLICATE_TOL, FidelityLevels, Proposal, ProposalContext
from abo.acquisitions.feasibility import Feasibility
from abo.exceptions import AboWarning, StrategyError, SurrogateFitError
from abo.failures import success_targets
from abo.fidelity import RUNGS, report_rows
from abo.linear import feasible_mask
from abo.refit import ModelManager, data_key
from abo.registry import make_strategy
from abo.space import ParamValue
from abo.spec import StudySpec
from abo.summary import study_reference
from abo.surrogate import FittedModel
from abo.trial import ModelRecord, ProposalRecord, Report, Trial, TrialState
from abo.warm_prior import WarmPrior
from abo.warm_start import WARM, ranked
from abo.warping import warp, warp_slack

OBSERVED = (TrialState.DONE, TrialState.STOPPED)  # trials the GP models at their value

MIN_OBSERVATIONS = 2  # the GP needs at least this many results
FIRST_FIT_WAIT = 1.0  # seconds a hurried ask waits for the first fit, at least
FIRST_FIT_WAIT_MAX = 60.0  # and at most


def first_fit_patience(pace: float | None, n_workers: int | None) -> float:
    """Seconds a hurried ask waits for the study's first fit: one mean evaluation
    (``pace`` × workers), while the design's points on deck keep the workers busy, but at
    least ``FIRST_FIT_WAIT`` (once per run: a short run of fast evaluations would otherwise be
    random search) and at most ``FIRST_FIT_WAIT_MAX``."""
    mean = (pace or 0.0) * max(1, n_workers or 1)
    return min(FIRST_FIT_WAIT_MAX, max(FIRST_FIT_WAIT, mean))


def derive_seed(seed: int, counter: int) -> int:
    """The proposal seed after ``counter`` trials (a fixed mix of the study's seed)."""
    return (seed * 1_000_003 + counter * 7919 + 17) % (2**62)


def stored_model(trials: Sequence[Trial]) -> ModelRecord | None:
    """The newest GP record on a trial (malformed records were dropped when read)."""
    for t in reversed(trials):
        if t.proposal is not None and t.proposal.model is not None:
            return t.proposal.model
    return None


class Proposer:
    """Proposes new points for a study (see the module docstring); thread-compatible.

    Args:
        spec: the study's definition.
        refit: overrides the spec's refit policy in this process (the service: background).
    """

    def __init__(self, spec: StudySpec, refit: str | None = None) -> None:
        self.spec = spec
        self.strategy = make_strategy(spec.strategy, **dict(spec.strategy_options))
        fidelity = spec.fidelity_of
        columns = spec.space._slices[fidelity.parameter] if fidelity is not None else slice(0)
        self.fidelity_columns = tuple(range(columns.start or 0, columns.stop or 0))
        self.warm = WarmPrior(spec) if spec.warm_start_from else None  # abo.warm_prior
        self._ranked: list[dict[str, ParamValue]] | None = None  # its sources' best points
        self.models, *others = [
            ModelManager(
                noise=spec.noise,
                mode=refit or spec.refit,
                max_staleness=spec.max_staleness,
                max_exact=spec.max_exact,
                fidelity=self.fidelity_columns,
                prior=self.warm,
            )
            for _ in spec.objectives
        ]
        self.multi = len(spec.objectives) > 1
        self.linear = spec.linear_constraints  # parameter constraints (abo.linear)
        self._unit_linear = [
            (torch.tensor(i), torch.tensor(c, dtype=torch.double), float(r))
            for i, c, r in (c.unit_form(spec.space) for c in self.linear)
        ]
        self.objective_models = [self.models, *others]  # one GP per objective
        self.failure_models = ModelManager(  # the classifier's GP of the log-odds of success
            noise="classifier",
            mode=refit or spec.refit,
            max_staleness=spec.max_staleness,
            max_exact=spec.max_exact,
        )
        self.constraint_models = [  # one GP per outcome constraint, of its slack
            ModelManager(
                noise="auto",
                mode=refit or spec.refit,
                max_staleness=spec.max_staleness,
                max_exact=spec.max_exact,
                fidelity=self.fidelity_columns,
            )
            for _ in spec.constraints
        ]
        self._units: dict[int, list[float]] = {}

    # -- encoding -----------------------------------------------------------------------------
    def unit(self, trials: Sequence[Trial]) -> Tensor:
        """``n x D`` unit-cube encodings of the trials' parameters, cached per trial id (a
        trial's parameters never change), so a study of thousands of trials encodes each once."""
        rows = []
        for t in trials:
            row = self._units.get(t.id)
            if row is None:
                row = self._units[t.id] = self.spec.space.to_unit(t.params).tolist()
            rows.append(row)
        if not rows:
            return torch.zeros(0, self.spec.space.dim, dtype=torch.double)
        return torch.tensor(rows, dtype=torch.double)

    def observations(
        self, trials: Sequence[Trial], reports: Mapping[int, Sequence[Report]] | None = None
    ) -> tuple[list[Trial], Tensor, Tensor]:
        """Model data: done trials as utilities (larger is better), and failed ones at the
        worst unless the failure classifier models them (``classifies``).

        A stopped trial counts at its last reported value: the rule stopped it for being
        behind at that step, and its last value (worse, for a curve that improves, than where
        it would have ended) steers proposals away from its region instead of proposing it
        again. With outcome constraints it is never feasible (it told none), so never the
        incumbent (``constraint_data``).

        A failed trial says its parameters are bad (the objective raised, diverged or timed
        out); modelling it at the worst observed utility steers proposals away from the region
        instead of proposing it again and again. The classifier does that with a model of its
        own, so the objective's GP is not bent by made-up values.

        In a study with a numeric fidelity (``abo.fidelity``), ``reports`` are observations too:
        each trial's reports at the rungs of the fidelity's range, at the step they reached
        (``abo.fidelity.report_rows``), as rows of their own (negative ids, ``stopped`` state:
        never feasible, never labelled for the failure classifier); a stopped trial is the row
        of its last report, at its step.
        """
        objs = self.spec.objectives
        done = [t for t in trials if t.state in OBSERVED and all(o.name in t.values for o in objs)]
        fidelity = self.spec.fidelity_of
        if fidelity is not None and fidelity.numeric and reports:
            done = [t for t in done if not (t.state is TrialState.STOPPED and reports.get(t.id))]
            done += self._report_rows(trials, reports)
        elif reports:
            done = self._projected(done, reports)
        failed = [t for t in trials if t.state is TrialState.FAILED]
        if self.classifies(trials):
            failed = []
        utilities = [[o.sign * t.values[o.name] for o in objs] for t in done]
        worst = [min(column) for column in zip(*utilities, strict=True)] if utilities else []
        observed = [*done, *failed] if utilities else list(done)
        Y = utilities + ([worst] * len(failed) if utilities else [])
        Y_t = torch.tensor(Y, dtype=torch.double).reshape(-1, len(objs))
        return observed, self.unit(observed), Y_t

    def _projected(
        self, observed: list[Trial], reports: Mapping[int, Sequence[Report]]
    ) -> list[Trial]:
        """Stopped trials at their projected final value: the last reported value plus the
        median of what the done trials gained from that step to their end (``observations``)."""
        name = self.spec.objective.name
        finished = [
            (reports[t.id], t.values[name])
            for t in observed
            if t.state is TrialState.DONE and reports.get(t.id) and name in t.values
        ]
        if not finished:
            return observed
        out = []
        for t in observed:
            curve = reports.get(t.id)
            if t.state is not TrialState.STOPPED or not curve:
                out.append(t)
                continue
            step = curve[-1].step
            gains = []
            for theirs, final in finished:
                k = bisect.bisect_left([r.step for r in theirs], step)
                if k < len(theirs):
                    gains.append(final - theirs[k].value)  # from reaching ``step`` to the end
            if not gains:
                out.append(t)
                continue
            value = curve[-1].value + statistics.median(gains)
            out.append(replace(t, value=value, values={**t.values, name: value}))
        return out

    def _report_rows(
        self, trials: Sequence[Trial], reports: Mapping[int, Sequence[Report]]
    ) -> list[Trial]:
        """Reports as observations at their steps (see ``observations``)."""
        fidelity = self.spec.fidelity_of
        name = self.spec.objective.name
        rows = []
        for t in trials:
            if t.state is TrialState.LOST or t.id not in reports:
                continue
            for slot, r in report_rows(fidelity, t, reports[t.id]):
                rows.append(
                    replace(
                        t,
                        id=-(t.id * (RUNGS + 2) + slot + 1),
                        params={**t.params, fidelity.parameter: r.step},
                        state=TrialState.STOPPED,
                        value=r.value,
                        values={name: r.value},
                    )
                )
        return rows

    def classifies(self, trials: Sequence[Trial]) -> bool:
        """Whether failed trials are modelled by the classifier: the study's failure model is
        (or resolves to) ``"classifier"`` and some trial failed and some succeeded."""
        if self.spec.resolved_failure_model != "classifier":
            return False
        states = {t.state for t in trials}
        return TrialState.FAILED in states and TrialState.DONE in states

    def failure_data(self, trials: Sequence[Trial]) -> tuple[tuple[int, ...], Tensor, Tensor]:
        """The classifier's data: the ids of the done and failed trials (lost ones say nothing
        about their parameters), their encodings and targets (``abo.failures``)."""
        labelled = [t for t in trials if t.state in (TrialState.DONE, TrialState.FAILED)]
        success = torch.tensor([t.state is TrialState.DONE for t in labelled])
        return tuple(t.id for t in labelled), self.unit(labelled), success_targets(success)

    def constraint_data(
        self, trials: Sequence[Trial], observed: Sequence[Trial]
    ) -> tuple[Tensor, Tensor, Tensor]:
        """The constraints' model data: the done trials that told every constraint, their
        ``n x c`` slacks (``>= 0`` where a constraint holds) as the GPs see them (each column
        through ``abo.warping.warp_slack``, which keeps the bound at 0), and per row of
        ``observed`` (the objective's data) whether that trial was feasible (failed ones are
        not)."""
        cons = self.spec.constraints
        told = [
            t
            for t in trials
            if t.state is TrialState.DONE and all(c.name in t.values for c in cons)
        ]
        S = torch.tensor(
            [[c.slack(t.values[c.name]) for c in cons] for t in told], dtype=torch.double
        ).reshape(len(told), len(cons))
        if S.shape[0] and cons:
            S = torch.stack([warp_slack(S[:, i])[0] for i in range(len(cons))], dim=-1)
        feasible = torch.tensor(
            [
                t.state is TrialState.DONE
                and all(c.name in t.values and c.holds(t.values[c.name]) for c in cons)
                for t in observed
            ],
            dtype=torch.bool,
        )
        return self.unit(told), S, feasible

    def model_data(
        self, trials: Sequence[Trial], reports: Mapping[int, Sequence[Report]] | None = None
    ) -> tuple[list[Trial], Tensor, Tensor, float | None]:
        """``observations`` with the study's output transform applied to the utilities (the
        exponent, or ``None`` when nothing was transformed)."""
        observed, X, Y = self.observations(trials, reports)
        kind = self.spec.resolved_output_transform
        if not self.multi:
            W, lam = warp(Y, kind)
            return observed, X, W, lam
        warped = [warp(Y[:, i : i + 1], kind)[0] for i in range(Y.shape[1])]  # each objective
        return observed, X, torch.cat(warped, dim=-1) if warped else Y, None

    def ref_point(self, trials: Sequence[Trial]) -> Tensor | None:
        """The hypervolume's reference point in utilities (the study's, or ``abo.pareto``'s
        rule over the done trials in completion order), ``None`` for one objective or before
        any result."""
        if not self.multi:
            return None
        return study_reference(self.spec, trials)

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
        needs_model = self.strategy.needs_model
        done = sum(1 for t in trials if t.state in OBSERVED)
        seen = sum(1 for t in trials if t.state is not TrialState.LOST and t.attempt == 0)
        designed = sum(
            1 for t in trials if t.proposal is not None and t.proposal.strategy == "sobol"
        )
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

        X_new: list[Tensor] = []
        records: list[ProposalRecord] = []
        if n_sobol and hurried and needs_model:
            # a hurried caller will want the model soon: fit it in the background meanwhile
            if done >= MIN_OBSERVATIONS:
                observed, X, Y, _ = self.model_data(trials, reports)
                for fitter, k, X_f, y in self._fitters(trials, observed, X, Y):
                    fitter.prefit(k, X_f, y)
            else:
                self.models.warm_up(space.dim)
        if n_sobol:
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

    def _first_fit_late(
        self,
        trials: Sequence[Trial],
        reports: Mapping[int, Sequence[Report]] | None,
        patience: float,
    ) -> bool:
        """For a hurried ask before any hyperparameters exist: whether a GP's first fit is
        still running after waiting up to ``patience`` seconds for it (starting it if it was
        not); the caller then proposes quasi-random points, recorded as fallbacks."""
        observed, X, Y, _ = self.model_data(trials, reports)
        fitters = self._fitters(trials, observed, X, Y)
        if not any([f.first_fit_running(k, X_f, y) for f, k, X_f, y in fitters]):
            return False
        deadline = time.monotonic() + patience
        for fitter, *_ in fitters:
            fitter.wait(max(0.0, deadline - time.monotonic()))
        return any([f.first_fit_running(k, X_f, y) for f, k, X_f, y in fitters])

    def _initial(
        self, trials: Sequence[Trial], designed: int, n: int
    ) -> tuple[Tensor, list[ProposalRecord]]:
        """``n`` initial points: the study's Sobol design, or with a warm start the sources'
        best configurations not proposed yet (``abo.warm_start``; the parameters they lack
        from the design), then the design once they run out."""
        X = self._design(designed, n)
        records = [ProposalRecord("sobol") for _ in range(n)]
        if self.warm is None:
            return X, records
        if self._ranked is None:
            self._ranked = ranked(self.spec)
        used = sum(1 for t in trials if t.proposal is not None and t.proposal.strategy == WARM)
        space = self.spec.space
        k = max(0, min(n, len(self._ranked) - used))
        best = self._ranked[used : used + k]
        warm = [space.to_unit({**space.from_unit(X[i]), **p}) for i, p in enumerate(best)]
        records = [ProposalRecord(WARM) for _ in range(k)] + records[: n - k]
        return torch.cat([*[w.unsqueeze(0) for w in warm], X[: n - k]]), records

    def _design(self, start: int, n: int) -> Tensor:
        """Points ``start`` to ``start + n`` of the study's scrambled Sobol design (rounded);
        with parameter constraints, of the design's points that satisfy them (rejection)."""
        space = self.spec.space
        engine = SobolEngine(space.dim, scramble=True, seed=self.spec.seed % (2**31))
        if not self.linear:
            return space.round(engine.draw(start + n, dtype=torch.double)[start:])
        kept: list[Tensor] = []
        count = 0
        while count < start + n:  # the spec checked that the region can be sampled
            X = space.round(engine.draw(max(64, 4 * (start + n)), dtype=torch.double))
            X = X[feasible_mask(space, X, self.linear)]
            kept.append(X)
            count += X.shape[0]
        return torch.cat(kept)[start : start + n]

    def _inside(
        self, X: Tensor, seed: int, records: list[ProposalRecord]
    ) -> tuple[Tensor, list[ProposalRecord]]:
        """Replace rows that break a parameter constraint (a strategy that searched without
        them, or rounding) by random points that satisfy them; their records say so."""
        space = self.spec.space
        ok = feasible_mask(space, X, self.linear)
        if bool(ok.all()):
            return X, records
        gen = torch.Generator().manual_seed(seed + 2)
        records = list(records)
        X = X.clone()
        for i in (~ok).nonzero().reshape(-1).tolist():
            for _ in range(1000):
                candidate = space.round(
                    torch.rand(64, space.dim, generator=gen, dtype=torch.double)
                )
                inside = candidate[feasible_mask(space, candidate, self.linear)]
                if inside.shape[0]:
                    X[i] = inside[0]
                    records[i] = _with(records[i], details={**records[i].details, "outside": True})
                    break
        return X, records

    def _fitters(
        self, trials: Sequence[Trial], observed: Sequence[Trial], X: Tensor, Y: Tensor
    ) -> list[tuple[ModelManager, tuple[int, ...], Tensor, Tensor]]:
        """Each GP's refit machinery, data key and data: one per objective (``X`` and a column
        of ``Y``), one per outcome constraint (the done trials and their slacks), and the
        failure classifier's (the done and failed trials)."""
        key = tuple(t.id for t in observed)
        if self.multi:
            out = [(f, key, X, Y[:, i : i + 1]) for i, f in enumerate(self.objective_models)]
        else:
            out = [(self.models, key, X, Y)]
        if self.constraint_models:
            X_c, S, _ = self.constraint_data(trials, observed)
            if X_c.shape[0] >= MIN_OBSERVATIONS:
                out += [
                    (f, key, X_c, S[:, i : i + 1]) for i, f in enumerate(self.constraint_models)
                ]
        if self.classifies(trials):
            ids, X_f, targets = self.failure_data(trials)
            out.append((self.failure_models, ids, X_f, targets))
        return out

    def _model(
        self,
        observed: Sequence[Trial],
        X: Tensor,
        Y: Tensor,
        stored: ModelRecord | None,
        hurried: bool = False,
    ) -> tuple[FittedModel | None, ModelRecord | None]:
        """The GP for this data (see ``abo.refit``) and its record (``None, None``: no model)."""
        key = tuple(t.id for t in observed)
        record = stored.to_json() if stored else None
        try:
            if self.multi:
                return self._model_list(key, X, Y, record, hurried)
            fitted, n_fit = self.models.model(key, X, Y, record, hurried=hurried)
        except SurrogateFitError as exc:
            warnings.warn(f"{exc}; proposing quasi-random points", AboWarning, stacklevel=4)
            return None, None
        return fitted, ModelRecord(**self.models.record(fitted, key, n_fit))

    def _feasibility(
        self,
        trials: Sequence[Trial],
        observed: Sequence[Trial],
        record: ModelRecord | None,
        stored: ModelRecord | None,
        hurried: bool,
    ) -> tuple[Feasibility | None, ModelRecord | None]:
        """The constraints' GPs and the failure classifier (``None`` with neither, before two
        constraint results, or when one cannot be fitted: the proposal then ignores them, with
        a warning) and ``record`` with their hyperparameters under ``"constraint.<name>:"`` and
        ``"failure:"``.

        Each constraint's GP is keyed by the objective's data (the same trials), so its refit
        schedule and stored hyperparameters follow the objective's; the classifier's by the
        done and failed trials it learns from.
        """
        cons = self.spec.constraints
        classifies = self.classifies(trials)
        if not (cons or classifies) or record is None:
            return None, record
        X_c, S, feasible = self.constraint_data(trials, observed)
        if cons and X_c.shape[0] < MIN_OBSERVATIONS:
            return None, record
        key = tuple(t.id for t in observed)
        previous = stored.to_json() if stored else None
        models, hypers = [], dict(record.hypers)

        def fit(manager: ModelManager, prefix: str, key: tuple[int, ...], X: Tensor, y: Tensor):
            part = None
            if previous is not None:
                stored_hypers = previous["hypers"].items()
                own = {k[len(prefix) :]: v for k, v in stored_hypers if k.startswith(prefix)}
                part = {**previous, "hypers": own} if own else None
            fitted, n_i = manager.model(key, X, y, part, hurried=hurried)
            rec = manager.record(fitted, key, n_i)
            hypers.update({prefix + k: v for k, v in rec["hypers"].items()})
            return fitted.model

        success = None
        try:
            for i, (c, manager) in enumerate(zip(cons, self.constraint_models, strict=True)):
                models.append(fit(manager, f"constraint.{c.name}:", key, X_c, S[:, i : i + 1]))
            if classifies:
                ids, X_f, targets = self.failure_data(trials)
                success = fit(self.failure_models, "failure:", ids, X_f, targets)
        except SurrogateFitError as exc:
            warnings.warn(
                f"{exc} (a constraint's or the failure classifier's model); proposing without "
                "constraints and classifier",
                AboWarning,
                stacklevel=4,
            )
            return None, record
        names = tuple(c.name for c in cons)
        return (
            Feasibility(names=names, models=tuple(models), observed=feasible, success=success),
            ModelRecord(hypers=hypers, key=record.key, n=record.n),
        )

    def _model_list(
        self,
        key: tuple[int, ...],
        X: Tensor,
        Y: Tensor,
        record: dict[str, Any] | None,
        hurried: bool,
    ) -> tuple[FittedModel, ModelRecord]:
        """One GP per objective, each through its own refit machinery, as a ``ModelListGP``;
        the record holds every objective's hyperparameters under ``"<objective>:"`` names."""
        fits, hypers, n_fit = [], {}, None
        for i, (objective, models) in enumerate(
            zip(self.spec.objectives, self.objective_models, strict=True)
        ):
            prefix = f"{objective.name}:"
            part = None
            if record is not None:
                stored = record["hypers"].items()
                own = {k[len(prefix) :]: v for k, v in stored if k.startswith(prefix)}
                part = {**record, "hypers": own} if own else None
            fitted, n_i = models.model(key, X, Y[:, i : i + 1], part, hurried=hurried)
            fits.append(fitted)
            rec = models.record(fitted, key, n_i)
            hypers.update({prefix + k: v for k, v in rec["hypers"].items()})
            n_fit = n_i if n_fit is None else min(n_fit, n_i)
        model: Any = ModelListGP(*[f.model for f in fits])  # the strategies take any Model
        combined = FittedModel(
            model=model,
            n=min(f.n for f in fits),
            warm=all(f.warm for f in fits),
        )
        return combined, ModelRecord(hypers=hypers, key=data_key(key), n=int(n_fit or 0))

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
        t0 = time.perf_counter()
        needs_model = self.strategy.needs_model
        with torch.random.fork_rng():  # anything drawing from torch's global RNG is seeded
            torch.manual_seed(seed)
            if needs_model:
                observed, X, Y, lam = self.model_data(trials, reports)
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
            ctx = ProposalContext(
                model=fitted.model if fitted else None,
                X=X,
                Y=Y,
                X_pending=X_pending,
                bounds=self.spec.space.bounds,
                generator=torch.Generator().manual_seed(seed),
                round=self.spec.space.round,
                n_trials=len(trials),
                n_workers=n_workers,
                n_initial=self.spec.resolved_n_initial,
                history=self._history(trials),
                pace=pace,
                ref_point=self.ref_point(trials),
                feasibility=feasibility,
                inequality_constraints=self._unit_linear or None,
                fidelity=self.fidelity_levels(trials, reports),
            )
            if needs_model and fitted is None:
                why = {"strategy": "random", "fallback_reason": "the model could not be fitted"}
                proposal = Proposal(ctx.uniform(m), [why] * m)
            else:
                try:
                    proposal = self.strategy.propose(ctx, m)
                except Exception as exc:
                    raise StrategyError(
                        f"strategy: {self.spec.strategy} failed to propose "
                        f"({type(exc).__name__}: {exc})",
                        field="strategy",
                    ) from exc
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
        records = []
        for info in proposal.info:
            details = {k: v for k, v in info.items() if k not in ("strategy", "arm")}
            if lam is not None:
                details["output_lambda"] = round(lam, 6)  # the power transform's exponent
            arm = info.get("arm")
            records.append(
                ProposalRecord(
                    strategy=str(info.get("strategy", self.spec.strategy)),
                    arm=str(arm) if arm is not None else None,
                    details=details,
                    **common,
                )
            )
        return proposal.X, records

    def fidelity_levels(
        self, trials: Sequence[Trial], reports: Mapping[int, Sequence[Report]] | None = None
    ) -> FidelityLevels | None:
        """The fidelities a proposal weighs, their encodings and costs (``None`` without a
        fidelity): the cost model is the study's, or learned from the trials' durations. With
        a stopping rule only the target: the rule decides what stops, the model what starts
        (as MOBSTER does), and the runs' reports are the lower fidelities."""
        fidelity = self.spec.fidelity_of
        if fidelity is None:
            return None
        # with a stopping rule the rule is the schedule: every trial starts at the target and
        # the rule decides what stops (its reports teach the model the lower fidelities)
        values = [fidelity.target] if self.spec.stopping is not None else fidelity.levels()
        model = fidelity.cost_model(trials, reports or {})
        return FidelityLevels(
            columns=self.spec.space._slices[fidelity.parameter],
            levels=torch.tensor([fidelity.encode(v) for v in values], dtype=torch.double),
            costs=torch.tensor([fidelity.cost_of(v, model) for v in values], dtype=torch.double),
            target=values.index(fidelity.target),
        )

    def _history(self, trials: Sequence[Trial]) -> tuple[dict[str, Any], ...]:
        """The records this study's strategy made on earlier trials (``arm`` and details)."""
        name = self.spec.strategy
        return tuple(
            {"arm": t.proposal.arm, **t.proposal.details}
            for t in trials
            if t.proposal is not None and t.proposal.strategy == name
        )

    def _deduplicate(
        self, X: Tensor, trials: Sequence[Trial], seed: int, records: list[ProposalRecord]
    ) -> tuple[Tensor, list[ProposalRecord]]:
        """Replace proposals that repeat a busy or evaluated point by random valid points."""
        space = self.spec.space
        existing = self.unit([t for t in trials if t.state is not TrialState.LOST])
        gen = torch.Generator().manual_seed(seed + 1)
        out: list[Tensor] = []
        records = list(records)
        for i, x in enumerate(X):
            ref = torch.cat([existing, *[o.unsqueeze(0) for o in out]])
            candidate = x
            for _ in range(100):
                if ref.shape[0] == 0 or torch.cdist(candidate[None], ref).min() > DUPLICATE_TOL:
                    break
                uniform = torch.rand(1, space.dim, generator=gen, dtype=torch.double)
                candidate = space.round(uniform)[0]
                records[i] = _with(records[i], deduplicated=True)
            out.append(candidate)
        return torch.stack(out), records


def _gp_points(model: Any) -> int:
    """Observations the GP (the first objective's, of several) conditions on."""
    gp: Any = model.models[0] if isinstance(model, ModelListGP) else model
    return int(gp.train_inputs[0].shape[-2])


def _with(record: ProposalRecord, **changes: Any) -> ProposalRecord:
    return replace(record, **changes)
