"""The model side of a warm start (``abo.spec.warm_start``): the sources' GP, fitted once, whose
posterior mean is the prior mean of the study's GP (``abo.model.prior_mean.PriorMean``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from abo.core.space import INACTIVE
from abo.model.options import MAX_EXACT
from abo.model.warping import warp
from abo.spec.study_spec import StudySpec
from abo.spec.warm_start import WEIGHT_PRIOR, error, span, unresolved


class WarmPrior:
    """The sources of a study's warm start as a GP, whose posterior mean is the new GP's prior
    mean (``abo.model.prior_mean.PriorMean``); picklable (the refit process rebuilds the GP from its
    hyperparameters, fitted once)."""

    def __init__(self, spec: StudySpec) -> None:

        if unresolved(spec):
            raise error(
                f"study names ({', '.join(map(repr, unresolved(spec)))}) are resolved when the "
                "study is created (abo.create_study); this spec still holds them"
            )
        sources = [e for e in spec.warm_start_from if isinstance(e, Mapping)]
        space = spec.space
        rows = [r["params"] for s in sources for r in s["trials"]]
        # a parameter every source trial sets, or a conditional one some set (absent in the
        # others by its condition: INACTIVE, as in the study's own GP); one the sources lack
        # because their space did not have it says nothing and is left out
        names = [
            n for n in space
            if all(n in r for r in rows) or (space[n].when and any(n in r for r in rows))
        ]  # fmt: skip
        if not names:
            raise error("the sources share no parameter that every trial of theirs sets")
        self.names = tuple(names)
        self.columns = tuple(i for n in names for i in range(*span(space, n)))
        self.noise = spec.noise
        self.max_exact = spec.max_exact or MAX_EXACT  # on the CPU (abo.propose.proposer)
        blocks_X, blocks_Y = [], []
        for s in sources:
            sign = 1.0 if s["direction"] == "maximize" else -1.0  # utilities: larger is better
            Y = torch.tensor([[sign * r["value"]] for r in s["trials"]], dtype=torch.double)
            Y, _ = warp(Y, spec.resolved_output_transform)
            std = Y.std() if Y.shape[0] > 1 else torch.tensor(1.0, dtype=torch.double)
            Y = (Y - Y.mean()) / (std if float(std) > 0 else 1.0)  # each source on its own
            X = [[u for n in names for u in _encode(space, n, r["params"])] for r in s["trials"]]
            blocks_X.append(torch.tensor(X, dtype=torch.double))
            blocks_Y.append(Y)
        self.X: Tensor = torch.cat(blocks_X)
        self.Y: Tensor = torch.cat(blocks_Y)
        self.hypers: dict[str, list[float]] | None = None
        self._model: Any = None

    def __getstate__(self) -> dict[str, Any]:
        self.source()  # the hyperparameters travel; the child conditions on them
        return {k: v for k, v in self.__dict__.items() if k != "_model"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._model = None

    def source(self) -> Any:
        """The sources' GP (fitted on the first call: a full, seeded multi-start fit)."""
        if self._model is None:
            from abo.model.surrogate import condition, export_hypers, fit_gp, subset

            idx = subset(self.X, self.Y, self.max_exact)
            X, Y = self.X[idx], self.Y[idx]
            if self.hypers is None:
                fitted = fit_gp(X, Y, noise=self.noise, full=True, seed=0)
                self.hypers = export_hypers(fitted.model)
                self._model = fitted.model
            else:
                self._model = condition(X, Y, self.noise, self.hypers).model
            for p in self._model.parameters():
                p.requires_grad_(False)
            self._model.eval()
        return self._model

    def mean_module(self) -> Any:
        """A fresh ``PriorMean`` over this prior's GP, for a new GP of the study."""
        from abo.model.prior_mean import PriorMean

        return PriorMean(self.source(), self.columns, WEIGHT_PRIOR)


def _encode(space: Any, name: str, params: Mapping[str, Any]) -> list[float]:
    """A source trial's coordinates of ``name``: its value's, or ``INACTIVE`` where absent."""
    if name in params:
        return space[name].encode(params[name])
    return [INACTIVE] * space[name].width
