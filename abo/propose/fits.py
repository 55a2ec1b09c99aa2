"""The GPs of a proposal: their data per model, the fits (objectives, constraints, failure
classifier) and their records, and how long a hurried ask waits for the first fit."""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from botorch.models import ModelListGP
from torch import Tensor

from abo.acquisitions.feasibility import Feasibility
from abo.core.exceptions import AboWarning, SurrogateFitError
from abo.core.trial import ModelRecord, Report, Trial
from abo.model.refit import ModelManager, data_key
from abo.model.surrogate import FittedModel
from abo.propose.data import ProposalData

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


def stored_model(trials: Sequence[Trial]) -> ModelRecord | None:
    """The newest GP record on a trial (malformed records were dropped when read)."""
    for t in reversed(trials):
        if t.proposal is not None and t.proposal.model is not None:
            return t.proposal.model
    return None


class ProposalFits(ProposalData):
    """The model state of a ``Proposer``: one ``ModelManager`` per objective (``models`` is
    the first), per outcome constraint, and the failure classifier's (set by ``Proposer``)."""

    models: ModelManager
    objective_models: list[ModelManager]
    constraint_models: list[ModelManager]
    failure_models: ModelManager
    device: torch.device  # where the GPs live (abo.model.device)

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
        """The GP for this data (see ``abo.model.refit``) and its record (``None, None``: no
        model)."""
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
        names, observed_on = tuple(c.name for c in cons), feasible.to(self.device)
        feasibility = Feasibility(names, tuple(models), observed_on, success=success)
        return feasibility, ModelRecord(hypers=hypers, key=record.key, n=record.n)

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


def _gp_points(model: Any) -> int:
    """Observations the GP (the first objective's, of several) conditions on."""
    gp: Any = model.models[0] if isinstance(model, ModelListGP) else model
    return int(gp.train_inputs[0].shape[-2])
