"""``auto``: abo's default strategy — ``believer`` for exact observations beside more than four
workers, ``qlognei`` for noisy ones or beside four workers or fewer, and cheaper members while
those cannot keep up with the workers.

The benchmarks (``docs/benchmarks.md``) found no single strategy best everywhere, but a rule:
on deterministic objectives ``believer`` was the best or tied with the best in every smoke
cell (Branin and Hartmann-6, 4 and 16 workers), where ``qlognei`` fell behind at 16 workers;
on noisy ones ``qlognei``'s noisy expected improvement, which integrates over which observed
point is really the best, was significantly better (Hartmann-6 with noise). So each ask looks
at the fitted GP: when its observation noise is small (``noise="deterministic"``, or a
learned noise below ``EXACT_BELOW``) ``believer`` proposes, otherwise ``qlognei``.

Except beside few workers: when the caller says it runs at most ``FEW_WORKERS`` evaluations
at once (``ProposalContext.n_workers``: ``optimize`` and ``ask(n_workers=...)`` do),
``qlognei`` proposes on exact observations too. On the real-task suite (scikit-learn models'
cross-validated losses, 4 workers, 10 seeds) ``believer`` crept along a diagonal ridge in
tiny steps (the GP's axis-aligned lengthscales cannot follow it, and believed busy points
beside the incumbent pin its variance near zero) where ``qlognei``'s larger steps reached the
optimum: the mean normalised score went from 0.48 to 0.56, significantly better on one task
and no worse on the other five; on the smoke and broad problems at 4 workers (10 seeds) no
cell was significantly different. At 16 workers ``believer`` stays, as the smoke suite found.
An ask that does not say (``n_workers=None``) keeps the rule above.

``EXACT_BELOW`` is half the mode of the noise prior (``abo.model.surrogate``): a learned noise
below it is one the data pushed down, not the prior's guess. With ``noise="auto"`` on
deterministic Hartmann-6 the GP learned 2-3e-3 from 300-1,000 random points (believer),
on Hartmann-6 with noise of sd 0.1 1-2e-2 (qlognei, which was significantly better there),
on Branin with noise of sd 1 3-5e-4 (believer, tied with qlognei there), and from a few
dozen points of anything the prior's 6.7e-3 (qlognei, the safe choice while the data
cannot tell).

When the ask says how long a point may take (``ProposalContext.pace``: ``optimize``'s
automatic lookahead passes the evaluation time over the workers) and that member's measured
seconds per point exceed ``SHARE`` of it, the workers would wait for proposals, and the next
cheaper member proposes instead: ``believer`` for ``qlognei`` (an analytic acquisition
instead of a Monte-Carlo one), then ``thompson``, whose batches cost little more than one
point (its paths are drawn and climbed together), so many fast workers stay busy; when none
keeps the pace, or the pace is shorter than any greedy search takes (``GREEDY_FLOOR``),
``thompson`` proposes. Under a pace, ``qlognei`` is tried only once ``believer``'s measured
cost says it may keep up (``QLOGNEI_OVER_BELIEVER``): until then ``believer`` proposes, so a
short study's workers do not wait for the slow first calls of a member that would then be
dropped (the quadratic example: its first model points cost 0.7 s with ``qlognei`` against
0.05-0.1 s with ``believer``, beside 0.28 s evaluations). Each member's cost is measured each
time it proposes (its first call in a process, which also warms it up, only if even that
kept the pace) and decays while it rests, so it is tried again as evaluations slow down.
Asks without a pace (ask/tell, ``lookahead=0``) never switch, and stay exactly reproducible.
The member is recorded as the proposal's ``arm``.

A study of several objectives is proposed for by ``qlognehvi``, and by ``thompson`` (one
pathwise sample per objective, the point of largest sampled hypervolume improvement) while
``qlognehvi`` cannot keep the pace by the same rule: at 300 results with 8 busy points a
qLogNEHVI point took about 5 times a Thompson point (6-D, 2 objectives, 2 cores). Without a
pace it is ``qlognehvi`` on every ask.

A study with a fidelity (``abo.core.fidelity``) is proposed for by ``multifidelity`` at any pace:
it is the only member that chooses fidelities, and its points cost about a believer's.

In a wide space (``WIDE`` or more columns a box can bound) a study of one objective is proposed
for inside a trust region around its best point (``abo.acquisitions.trust_region``), by the
same members: in the wide suite's 20-D cells (Ackley and Rosenbrock, 8 and 32 workers, 10
seeds) the region's median was ahead of the whole cube's, and on Hartmann-6 hidden among 100
parameters it was within 0.011 of the optimum after 100 evaluations (seeds 0-2), where the
whole cube was 0.08 and 0.16 away on two; on Ackley-50 it ended behind (2 seeds). Each
record's details then carry the region (``region_length``). Narrower studies propose as before.

In a long campaign (the study's GP holds a subset: more observations than ``max_exact``) of one
objective without constraints, the member proposes inside the trust region too, with a GP of
the region's own (``abo.model.local``; the region's replay starts where the subset does): on
Ackley-10 with 64 busy points the whole-cube GP stopped improving after about 2,000
observations, where the region's GP went on (``docs/benchmarks.md``, "A long campaign").
Every ``CUBE_EVERY``-th proposal there still searches the whole cube with the study's GP, so a
region around a local optimum does not hold the campaign in it.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from abo.acquisitions.base import Proposal, ProposalContext, register_strategy
from abo.acquisitions.believer import BelieverStrategy
from abo.acquisitions.multifidelity import MultiFidelityStrategy
from abo.acquisitions.qlognehvi import QLogNEHVIStrategy
from abo.acquisitions.qlognei import QLogNEIStrategy
from abo.acquisitions.thompson import ThompsonStrategy
from abo.acquisitions.trust_region import (
    fits_local,
    held,
    holds_subset,
    propose_inside,
    region,
    region_info,
)

EXACT_BELOW = 0.5 * math.exp(-4.0 - 1.0**2)
"""Learned noise variance (standardised scale) under which ``believer`` proposes: half the mode
of the surrogate's LogNormal(-4, 1) noise prior (``abo.model.surrogate.NOISE_PRIOR_MODE``; a test
keeps the two in step, since importing the surrogate here would close an import cycle)."""

SHARE = 0.75
"""The share of the pace a member's point may take: above it, a cheaper member proposes."""
GREEDY_FLOOR = 0.05
"""Seconds under which no greedy member's point comes (an acquisition search is dozens of
GPyTorch evaluations of about a millisecond each): a smaller share of the pace goes straight
to ``thompson``, without trying them (a try of ``qlognei`` beside 32 busy points took over a
second)."""
QLOGNEI_OVER_BELIEVER = 3.0
"""A ``qlognei`` point's seconds over a ``believer`` point's, at least (a Monte-Carlo acquisition
over the joint posterior against an analytic one: 3-7x at 15 observations in a 4-D mixed
space, about 12x at 1,000 in 6-D), to decide from ``believer``'s measured cost whether trying
``qlognei`` under a pace is worth its slow first calls."""
FEW_WORKERS = 4
"""Workers (``ProposalContext.n_workers``) up to which ``qlognei`` proposes on exact
observations too (see the module)."""
REST_DECAY = 0.9
"""How a resting member's cost estimate shrinks per ask, so that it is tried again."""
WIDE = 20
"""Ordered columns of the cube (those a box can bound: not categorical, not conditional) from
which a study of one objective is proposed for inside a trust region (see the module)."""
CUBE_EVERY = 2
"""In a long campaign (see the module) every this-many-th proposal searches the whole cube with
the study's GP instead of the region with its own: on Ackley-10 (64 busy, seed 0) the region
alone once stayed in an outer basin, at 2.81, for more than 1,000 evaluations."""
REGION_MODES = ("auto", "always", "never")
"""``trust_region=``: from ``WIDE`` ordered columns, on every study of one objective, or never."""


def few_workers(ctx: ProposalContext) -> bool:
    """Whether the caller said it runs at most ``FEW_WORKERS`` evaluations at once."""
    return ctx.n_workers is not None and ctx.n_workers <= FEW_WORKERS


def exact_enough(model: Any) -> bool:
    """Whether the model's observation noise is under ``EXACT_BELOW`` (see the module)."""
    noise = getattr(getattr(model, "likelihood", None), "noise", None)
    return noise is not None and bool((noise.detach() < EXACT_BELOW).all())


@register_strategy(
    "auto", "abo's default: believer on exact observations beside more than 4 workers, qlognei "
    "on noisy ones or beside 4 workers or fewer (cheaper "
    "members when they cannot keep up with the workers); qlognehvi for several objectives "
    "(thompson when it cannot keep up); multifidelity for a study with a fidelity",
    objectives="any",
    constraints="any",
    fidelity=True,
)  # fmt: skip
class AutoStrategy:
    """``believer`` when the GP's noise is negligible, else ``qlognei``, and cheaper members
    for asks whose pace they cannot keep (see the module).

    Args:
        raw_samples, num_restarts: acquisition optimiser budget per point (every member;
            ``None``: each member's own default).
        mc_samples: quasi-MC samples of ``qlognei``'s and ``qlognehvi``'s joint posterior.
        trust_region: when the member proposes inside a trust region (``REGION_MODES``).
    """

    name = "auto"
    needs_model = True

    def __init__(
        self,
        raw_samples: int | None = None,
        num_restarts: int | None = None,
        mc_samples: int | None = None,
        trust_region: str = "auto",
    ):
        if trust_region not in REGION_MODES:
            raise ValueError(f"trust_region: expected one of {REGION_MODES}, got {trust_region!r}")
        self.trust_region = trust_region
        given = {"raw_samples": raw_samples, "num_restarts": num_restarts}
        budget: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
        mc: dict[str, Any] = {} if mc_samples is None else {"mc_samples": mc_samples}
        self.believer = BelieverStrategy(**budget)
        self.qlognei = QLogNEIStrategy(**mc, **budget)
        self.thompson = ThompsonStrategy(**budget)
        self.qlognehvi = QLogNEHVIStrategy(**mc, **budget)
        self.multifidelity = MultiFidelityStrategy(**budget)
        self.cost: dict[str, float] = {}  # measured seconds per point, by member (this process)
        self.calls: dict[str, int] = {}

    def member(self, ctx: ProposalContext, probe: bool = True) -> Any:
        """The member that proposes next for ``ctx`` (see the module); ``probe``: whether a
        member not yet measured in this process may be tried (once per ask)."""
        assert ctx.model is not None
        multi = ctx.Y.shape[-1] > 1
        exact: Any = self.qlognehvi if multi else self.qlognei
        if not multi and exact_enough(ctx.model) and not few_workers(ctx):
            exact = self.believer
        if ctx.pace is None:
            return exact
        if SHARE * ctx.pace < GREEDY_FLOOR:  # no greedy search is that fast: do not try
            return self.thompson
        # by preference, the first that keeps the pace (an unmeasured one may, once per ask);
        # else thompson, whose cost per point falls with the batch
        for m in (exact,) if multi else (exact, self.believer):
            cost = self.cost.get(m.name)
            if cost is None and m is self.qlognei and not self._worth_probing(ctx.pace):
                continue
            if (cost is None and probe) or (cost is not None and cost <= SHARE * ctx.pace):
                return m
        return self.thompson

    def _worth_probing(self, pace: float) -> bool:
        """Whether ``qlognei``, not yet measured, may be tried at ``pace``: only once
        ``believer`` is measured and ``QLOGNEI_OVER_BELIEVER`` times its cost keeps the pace.
        A try costs a slow call (two, with the warm-up) that a short study's workers wait for."""
        believer = self.cost.get(self.believer.name)
        return believer is not None and QLOGNEI_OVER_BELIEVER * believer <= SHARE * pace

    def wide(self, ctx: ProposalContext) -> bool:
        """Whether the member proposes inside a trust region (``trust_region``, ``WIDE``)."""
        if self.trust_region == "never" or ctx.Y.shape[-1] > 1 or ctx.fidelity is not None:
            return False
        return self.trust_region == "always" or ctx.dim - len(ctx.free_columns) >= WIDE

    def long(self, ctx: ProposalContext) -> bool:
        """Whether the member proposes inside a trust region with a GP of the region's own: a
        long campaign (the study's GP holds a subset), of one objective without constraints."""
        return self.trust_region != "never" and fits_local(ctx) and holds_subset(ctx)

    def propose(self, ctx: ProposalContext, n: int) -> Proposal:
        if ctx.fidelity is not None:  # one member chooses fidelities: it proposes at any pace
            inner = self.multifidelity.propose(ctx, n)
            infos = [{**info, "strategy": self.name, "arm": "multifidelity"} for info in inner.info]
            return Proposal(inner.X, infos)
        wide, long = self.wide(ctx), self.long(ctx)
        if long and not wide and ctx.n_trials % CUBE_EVERY == CUBE_EVERY - 1:
            cube = self._propose(ctx, n)  # the study's GP over the cube: other basins
            return Proposal(cube.X, [{**info, "region_model": "cube"} for info in cube.info])
        if not (wide or long):
            return self._propose(ctx, n)
        # the member searches the trust region: from the design on in a wide space, from the
        # first subset on in a long campaign (``region(ctx, start)``), there with its own GP
        box, state = region(ctx, 0 if wide else held(ctx))
        proposal, model = propose_inside(self._propose, ctx, n, box, long)
        local = {**region_info(box, state), **model}
        return Proposal(proposal.X, [{**info, **local} for info in proposal.info])

    def _propose(self, ctx: ProposalContext, n: int) -> Proposal:
        """The member's (or members') ``n`` points within ``ctx.bounds``."""
        if ctx.pace is None:  # the exact member, reproducibly
            member = self.member(ctx)
            inner = member.propose(ctx, n)
            infos = [{**info, "strategy": self.name, "arm": member.name} for info in inner.info]
            return Proposal(inner.X, infos)
        points: list[Tensor] = []
        infos = []
        used: set[str] = set()
        probe = True
        while len(infos) < n:
            member = self.member(ctx, probe)
            probe = probe and member.name in self.cost
            used.add(member.name)
            # a greedy member (whose cost per point grows with the busy points) proposes one
            # point at a time, re-measured before the next; thompson's paths are cheap
            # together and take the rest at once
            k = n - len(infos) if member is self.thompson else 1
            started = time.perf_counter()
            inner = member.propose(ctx, k)
            self._measure(member.name, (time.perf_counter() - started) / k, ctx.pace)
            points.append(inner.X)
            infos += [{**info, "strategy": self.name, "arm": member.name} for info in inner.info]
            ctx = replace(ctx, X_pending=torch.cat([ctx.X_pending, inner.X.to(ctx.X_pending)]))
        for name in self.cost:  # once per ask, the members that did not propose rest
            if name not in used:
                self.cost[name] *= REST_DECAY
        return Proposal(torch.cat(points), infos)

    def _measure(self, name: str, per_point: float, pace: float) -> None:
        """Note a member's seconds per point. Its first call in a process also warms it up:
        counted only if even that kept the pace (an upper bound), else the member stays
        unmeasured, to be tried again on a later ask."""
        self.calls[name] = self.calls.get(name, 0) + 1
        if self.calls[name] > 1 or per_point <= SHARE * pace:
            old = self.cost.get(name)
            self.cost[name] = per_point if old is None else 0.5 * (old + per_point)
