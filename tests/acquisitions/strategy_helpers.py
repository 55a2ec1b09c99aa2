"""Small fitted models and proposal contexts for testing strategies directly."""

from __future__ import annotations

import torch
from torch import Tensor

from abo.acquisitions.base import ProposalContext

PEAK = torch.tensor([0.7, 0.3], dtype=torch.double)


def peaked_data(n: int = 24, seed: int = 0) -> tuple[Tensor, Tensor]:
    """``n x 2`` Sobol points and utilities of a single smooth peak at ``PEAK``."""
    X = torch.quasirandom.SobolEngine(2, scramble=True, seed=seed).draw(n, dtype=torch.double)
    Y = -10.0 * (X - PEAK).pow(2).sum(-1, keepdim=True)
    return X, Y


def make_ctx(
    model,
    X: Tensor,
    Y: Tensor,
    busy: Tensor | None = None,
    seed: int = 0,
    n_trials: int | None = None,
    n_workers: int | None = None,
) -> ProposalContext:
    """A proposal context over the unit cube of ``X``'s dimension (no rounding)."""
    d = X.shape[-1]
    busy = torch.zeros(0, d, dtype=torch.double) if busy is None else busy
    return ProposalContext(
        model=model,
        X=X,
        Y=Y,
        X_pending=busy,
        bounds=torch.stack([torch.zeros(d), torch.ones(d)]).to(torch.double),
        generator=torch.Generator().manual_seed(seed),
        round=lambda x: x,
        n_trials=X.shape[0] + busy.shape[0] if n_trials is None else n_trials,
        n_workers=n_workers,
    )
