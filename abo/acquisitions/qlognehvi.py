"""``qlognehvi``: BoTorch's qLogNoisyExpectedHypervolumeImprovement, busy points as ``X_pending``.

For a study of several objectives, with one GP per objective (a ``ModelListGP``). The
acquisition is the expected improvement of the Pareto front's hypervolume (over the study's
reference point, ``ctx.ref_point``), integrated over the noisy observations and over the busy
points' unknown outcomes: BoTorch adds ``X_pending`` to the baseline and samples them jointly
with the candidate, so a proposal never counts the improvement a running trial is about to
bring. Several points at once are chosen greedily, each joining ``X_pending`` before the next.

With outcome constraints or a failure classifier (``ctx.feasibility``) the constraints' slack
GPs (and the classifier's log-odds GP) join the objectives' in one ``ModelListGP``, and
BoTorch's own constrained qLogNEHVI weighs every sample by its (smoothed) feasibility: the
acquisition's ``objective`` keeps the objectives' outputs, and each ``constraints`` callable
is a negated slack (BoTorch's convention: feasible where it is negative), so the noisy front,
the busy points and the candidate are all judged feasible or not sample by sample.

BoTorch's JIT-compiled fused kernel for this acquisition is switched off here (``no_jit_kernel``):
its first use in an environment compiled C++ for 30-65 s while the first ask waited, again for
every new virtual environment, and its ``-march=native`` build lands in a cache under the home
directory, which cluster nodes of other CPU types may share; BoTorch's PyTorch path computes the
same values, at about 1.2 times the cost of a whole ask here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.acquisition.multi_objective.logei import (
    qLogNoisyExpectedHypervolumeImprovement,
)
from botorch.acquisition.multi_objective.objective import IdentityMCMultiOutputObjective
from botorch.acquisition.multi_objective.utils import prune_inferior_points_multi_objective
from botorch.models import ModelListGP
from botorch.models.gpytorch import GPyTorchModel
from botorch.models.model import Model
from botorch.sampling import SobolQMCNormalSampler
from torch import Tensor

from abo.acquisitions.base import Proposal, ProposalContext, register_strategy
from abo.acquisitions.joint import JointPosterior, remembering
from abo.acquisitions.optimize import OptimizerBudget, greedy_batch
from abo.acquisitions.quiet import quiet_proposal
from abo.acquisitions.seeded import seeded_maximize
from abo.acquisitions.thompson import replace_duplicates
from abo.core.pareto import pareto_mask


def no_jit_kernel() -> None:
    """Mark BoTorch's fused qLogEHVI kernel as already tried (and absent), so no acquisition
    of this process compiles it; the PyTorch path is used (see the module)."""
    from botorch.acquisition.multi_objective import logei

    if getattr(logei, "_C", None) is None:
        logei._load_attempted = True  # BoTorch's own "tried once, failed" marker


no_jit_kernel()


MAX_BASELINE = 64
"""The most observed points qLogNEHVI's noisy front is sampled over (``front_layers``)."""
PRUNE_SAMPLES = 512
"""Posterior samples the baseline is pruned with (BoTorch's default, 2048, made the pruning's
Pareto comparisons a tenth of an ask at 300 results): a point kept is Pareto-optimal in at
least one sample, so only points on the front less than once in 512 samples are dropped."""


def front_layers(X: Tensor, Y: Tensor, k: int = MAX_BASELINE) -> Tensor:
    """The observed points the noisy Pareto front may be made of: all of them up to ``k``,
    then whole non-dominated layers of the observed utilities (the front, the front of the
    rest, ...) until at least ``k`` are taken, in their original order.

    qLogNEHVI prunes its baseline by sampling the posterior at every point and keeping the
    ones that are Pareto-optimal in some sample: ``O(n^2)`` comparisons per sample, over a
    second per ask at 300 results. A point several layers behind the observed front is, short
    of extreme noise, on no sampled front (the same approximation as ``qlognei``'s
    ``best_observed``); studies of at most ``k`` results are unchanged.
    """
    if X.shape[0] <= k:
        return X
    keep = torch.zeros(X.shape[0], dtype=torch.bool, device=X.device)
    while int(keep.sum()) < k:
        rest = (~keep).nonzero().squeeze(-1)
        keep[rest[pareto_mask(Y[rest])]] = True
    return X[keep]


def _negated(column: int) -> Callable[[Tensor], Tensor]:
    """BoTorch's constraint callable for a slack output: negative (feasible) where the
    sampled slack is positive."""

    def constraint(Z: Tensor) -> Tensor:
        return -Z[..., column]

    return constraint


@register_strategy(
    "qlognehvi",
    "qLogNoisyExpectedHypervolumeImprovement with busy points as X_pending (several objectives)",
    objectives="multi",
    constraints="any",
)
class QLogNEHVIStrategy:
    """Expected hypervolume improvement integrated over the busy points' outcomes.

    Args:
        mc_samples: quasi-MC samples of the joint posterior.
        raw_samples, num_restarts: acquisition optimiser budget per point: 256 and 4, half the
            single-objective strategies' raw samples and two restarts fewer, because an
            evaluation of qLogNEHVI (a joint posterior over the baseline and a hypervolume
            per sample) costs several of theirs; the multi-objective benchmarks ran with
            256 and 2 (``docs/benchmarks.md``), and 512 and 6 made an ask at 300 results
            take 1.5 times as long.
    """

    name = "qlognehvi"
    needs_model = True

    def __init__(self, mc_samples: int = 128, raw_samples: int = 256, num_restarts: int = 4):
        if isinstance(mc_samples, bool) or not isinstance(mc_samples, int) or mc_samples < 1:
            raise ValueError(f"mc_samples: expected a positive integer, got {mc_samples!r}")
        self.mc_samples = mc_samples
        self.budget = OptimizerBudget(raw_samples=raw_samples, num_restarts=num_restarts)

    def acquisition(
        self, ctx: ProposalContext, ref: Tensor, pending: Tensor
    ) -> AcquisitionFunction:
        """qLogNEHVI over the observed points, with ``pending`` as ``X_pending`` (and the
        outcome constraints, see the module)."""
        assert ctx.model is not None
        base: Model = ctx.model
        constrained: dict[str, Any] = {}
        if ctx.feasibility is not None:
            m = ctx.Y.shape[-1]
            sampled = ctx.feasibility.sampled
            gps = [*cast(ModelListGP, ctx.model).models, *sampled]
            base = ModelListGP(*cast(list[GPyTorchModel], gps))
            constrained = {
                "objective": IdentityMCMultiOutputObjective(outcomes=list(range(m))),
                "constraints": [_negated(m + i) for i in range(len(sampled))],
            }
        model = JointPosterior.wrap(base, ctx.X)  # the same posterior, in matrix products
        baseline = prune_inferior_points_multi_objective(
            model=model,
            X=front_layers(ctx.X, ctx.Y),
            ref_point=ref.to(ctx.X),
            num_samples=PRUNE_SAMPLES,
            **constrained,
        )
        acq = qLogNoisyExpectedHypervolumeImprovement(
            model=model,
            ref_point=ref.tolist(),
            X_baseline=baseline,
            X_pending=pending if pending.shape[0] else None,
            sampler=SobolQMCNormalSampler(torch.Size([self.mc_samples]), seed=ctx.seed()),
            prune_baseline=False,  # pruned above
            **constrained,
        )
        return remembering(acq)  # every evaluation is over the pruned baseline

    @quiet_proposal
    def propose(self, ctx: ProposalContext, n: int) -> Proposal:
        assert ctx.model is not None
        if ctx.Y.shape[-1] < 2:
            raise ValueError("qlognehvi: proposes for several objectives; ctx.Y has one column")
        ref = ctx.reference()
        proposal = greedy_batch(
            ctx,
            n,
            self.name,
            lambda busy: self.acquisition(ctx, ref, busy),
            seeded_maximize,
            self.budget,
        )
        # a flat improvement (the front there is already found) can end the search on a seen
        # point; a Thompson point for several objectives replaces it, not a random one
        X, replaced = replace_duplicates(ctx, proposal.X, self.budget)
        for info, extra in zip(proposal.info, replaced, strict=True):
            info["ref_point"] = [round(float(v), 6) for v in ref]
            if extra is not None:
                info["replaced"] = {"by": "thompson", **extra}
        return Proposal(X, proposal.info)
