"""Where a proposal's points come from besides the strategy: the Sobol design (or a warm
start's best points), and the repairs after it (duplicates, parameter constraints)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor
from torch.quasirandom import SobolEngine

from abo.acquisitions.base import DUPLICATE_TOL
from abo.core.linear import LinearConstraint, feasible_mask
from abo.core.space import ParamValue
from abo.core.trial import ProposalRecord, Trial, TrialState
from abo.propose.data import ProposalData
from abo.propose.warm_prior import WarmPrior
from abo.spec.warm_start import WARM, ranked


class ProposalDesign(ProposalData):
    """The initial design and the repairs of a ``Proposer`` (which sets ``linear``, ``warm``
    and the cache of the warm start's ranked points, ``_ranked``)."""

    linear: Sequence[LinearConstraint]  # parameter constraints (abo.core.linear)
    warm: WarmPrior | None
    _ranked: list[dict[str, ParamValue]] | None

    def _initial(
        self, trials: Sequence[Trial], designed: int, n: int
    ) -> tuple[Tensor, list[ProposalRecord]]:
        """``n`` initial points: the study's Sobol design, or with a warm start the sources'
        best configurations not proposed yet (``abo.spec.warm_start``; the parameters they lack
        from the design), then the design once they run out."""
        X = self._design(designed, n)
        records = [ProposalRecord("sobol") for _ in range(n)]
        if self.warm is None:
            return self._at_target(X), records
        if self._ranked is None:
            self._ranked = ranked(self.spec)
        used = sum(1 for t in trials if t.proposal is not None and t.proposal.strategy == WARM)
        space = self.spec.space
        k = max(0, min(n, len(self._ranked) - used))
        best = self._ranked[used : used + k]
        warm = [space.to_unit({**space.from_unit(X[i]), **p}) for i, p in enumerate(best)]
        records = [ProposalRecord(WARM) for _ in range(k)] + records[: n - k]
        return self._at_target(torch.cat([*[w.unsqueeze(0) for w in warm], X[: n - k]])), records

    def _at_target(self, X: Tensor) -> Tensor:
        """``X`` with the fidelity at its target when a stopping rule is set: the rule is then
        the schedule and every trial starts at the target (as MOBSTER's do), the design's and
        the random repairs' too; without a rule, or without a fidelity, ``X`` unchanged."""
        fidelity = self.spec.fidelity_of
        if fidelity is None or self.spec.stopping is None:
            return X
        X = X.clone()
        target = fidelity.encode(fidelity.target)
        X[:, self.spec.space._slices[fidelity.parameter]] = torch.tensor(target, dtype=X.dtype)
        return X

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
                candidate = self._at_target(
                    space.round(torch.rand(64, space.dim, generator=gen, dtype=torch.double))
                )
                inside = candidate[feasible_mask(space, candidate, self.linear)]
                if inside.shape[0]:
                    X[i] = inside[0]
                    records[i] = _with(records[i], details={**records[i].details, "outside": True})
                    break
        return X, records

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
                candidate = self._at_target(space.round(uniform))[0]
                records[i] = _with(records[i], deduplicated=True)
            out.append(candidate)
        return torch.stack(out), records


def _with(record: ProposalRecord, **changes: Any) -> ProposalRecord:
    return replace(record, **changes)
