"""A fixed GP's posterior mean as the prior mean of another GP: how a warm start's sources
(``abo.propose.warm_prior``) shape a new study's model."""

from __future__ import annotations

from typing import Any

import torch
from botorch.models import SingleTaskGP
from gpytorch.means import Mean
from gpytorch.priors import NormalPrior
from torch import Tensor


class _Source:
    """A fixed GP's posterior mean as a function, ``mean(X) + k(x, X) @ alpha`` with ``alpha``
    solved once: cheap inside another GP's mean, and shared, not copied, by the deep copies
    a fantasy model makes (the source never changes)."""

    def __init__(self, model: SingleTaskGP) -> None:
        X = model.train_inputs[0]
        y = model.train_targets
        with torch.no_grad():
            K = model.covar_module(X).to_dense() + model.likelihood.noise * torch.eye(
                X.shape[0], dtype=X.dtype, device=X.device
            )
            L = torch.linalg.cholesky(K)
            self.alpha = torch.cholesky_solve((y - model.mean_module(X)).unsqueeze(-1), L)
        self.X = X
        self.model = model

    def __call__(self, x: Tensor) -> Tensor:
        cross = self.model.covar_module(x, self.X).to_dense()
        return self.model.mean_module(x) + (cross @ self.alpha).squeeze(-1)

    def __deepcopy__(self, memo: dict[int, Any]) -> _Source:
        return self


class PriorMean(Mean):
    """``c + w * m(x[columns])``: a fixed GP's posterior mean ``m`` (on its own standardised
    scale) as the prior mean of another GP, with ``c`` and ``w`` learned
    (``abo.spec.warm_start``)."""

    def __init__(self, source: Any, columns: tuple[int, ...], weight_prior: tuple[float, float]):
        super().__init__()
        self._source = _Source(source)  # not a submodule: its hyperparameters stay fixed
        self.columns = list(columns)
        self.register_parameter("weight", torch.nn.Parameter(torch.ones(1, dtype=torch.double)))
        self.register_parameter("constant", torch.nn.Parameter(torch.zeros(1, dtype=torch.double)))
        self.register_prior("weight_prior", NormalPrior(*weight_prior), "weight")

    def forward(self, x: Tensor) -> Tensor:
        return self.constant + self.weight * self._source(x[..., self.columns])
