"""``trust_region``: search a box around the incumbent that grows on success and shrinks on
failure (TuRBO, Eriksson et al. 2019), asynchronously: every busy point sits in the region.

A GP of the whole space stops resolving the last digits near the incumbent in long campaigns,
and in wide spaces an acquisition search over the whole cube mostly explores corners. TuRBO's
answer is a *trust region*: a box centred on the best point, its sides shaped by the GP's
lengthscales (long where the objective barely changes; ``region_bounds``), whose size follows
the study's progress. The region's state is not kept in memory: it is replayed from the
observations in the order they were made (the initial design first), so a resumed study, a
second process and a service replica all see the same region for the same data:

* the incumbent is the best utility so far; a result that beats it by more than
  ``1e-3 * |best|`` is a success, any other a failure;
* ``SUCCESSES`` successes (without a shrink between) double the side, up to ``LENGTH_MAX``;
  ``failures`` failures in a row halve it: ``max(4, d)`` as TuRBO's, and at least the number
  of workers (one round of results, the asynchronous reading of TuRBO's batch rule);
* a side below ``LENGTH_MIN`` is a collapsed region: it restarts at ``LENGTH_INIT``, around
  the best point again, and the record counts the restart.

Inside the box an inner strategy proposes, seeing every busy point (``believer`` on exact
observations, ``qlognei`` on noisy ones, as ``auto`` chooses; or one named). ``auto`` itself
searches such a region in wide spaces (``abo.acquisitions.auto.WIDE``). Categorical
parameters and conditional ones keep their whole range: a box around a one-hot encoding
would pin the incumbent's choice. Each record's details say the region's side, how many
times it restarted, and which member proposed (``arm``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from abo.acquisitions.base import REGISTRY, Proposal, ProposalContext, register_strategy
from abo.model.local import (
    REFIT_EVERY,
    fit_local,
    from_box,
    local_rows,
    min_points,
    noise_of,
    to_box,
)

LENGTH_INIT = 0.8
"""The region's side at the start and after a restart (TuRBO's, in the unit cube)."""
LENGTH_MIN = 0.5**7
"""A side below this is a collapsed region, which restarts."""
LENGTH_MAX = 1.6
"""The longest side (a region of this side covers the cube in every direction)."""
SUCCESSES = 3
"""Improvements (without a shrink between) that double the side."""
MIN_FAILURES = 4
"""Failures in a row that halve the side, at least (TuRBO: ``max(4, d)``)."""
LOCAL_MODES = ("auto", "always", "never")
"""``local=``: when the region's own GP proposes (see ``TrustRegionStrategy``)."""
IMPROVEMENT = 1e-3
"""A result is a success when it beats the incumbent by more than this share of it."""


@dataclass(frozen=True)
class RegionState:
    """Where the replay of the observations left the region.

    Attributes:
        length: the side of the region along the shortest lengthscale, unit cube.
        restarts: how many times the region collapsed and restarted.
        successes, failures: the counters towards the next doubling and halving.
    """

    length: float = LENGTH_INIT
    restarts: int = 0
    successes: int = 0
    failures: int = 0


def replay(Y: Sequence[float], n_initial: int, failures: int) -> RegionState:
    """The region's state after the utilities ``Y`` (larger is better) in the order observed;
    the first ``n_initial`` (the initial design) only set the incumbent."""
    values = [float(y) for y in Y]
    if not values:
        return RegionState()
    start = min(max(n_initial, 1), len(values))
    best = max(values[:start])
    length, restarts, succ, fail = LENGTH_INIT, 0, 0, 0
    for y in values[start:]:
        if y > best + IMPROVEMENT * abs(best):
            succ, fail = succ + 1, 0
        else:
            fail += 1
        best = max(best, y)
        if succ >= SUCCESSES:
            length, succ, fail = min(2.0 * length, LENGTH_MAX), 0, 0
        elif fail >= failures:
            length, succ, fail = length / 2.0, 0, 0
            if length < LENGTH_MIN:
                length, restarts = LENGTH_INIT, restarts + 1
    return RegionState(length, restarts, succ, fail)


def failure_tolerance(dim: int, n_workers: int | None) -> int:
    """Failures in a row that halve the side: ``max(4, d)``, and one round of the workers."""
    return max(MIN_FAILURES, dim, n_workers or 0)


def lengthscales(model: Any, dim: int) -> Tensor | None:
    """The ``d`` lengthscales of the model's kernel (unit cube), or ``None`` when it has no
    ARD kernel of that width (the region is then a cube)."""
    covar = getattr(model, "covar_module", None)
    kernel = getattr(covar, "base_kernel", covar)
    ls = getattr(kernel, "lengthscale", None)
    if not isinstance(ls, Tensor) or ls.numel() != dim:
        return None
    return ls.detach().reshape(dim).to(torch.double)


def region_bounds(
    center: Tensor, length: float, ls: Tensor | None, free: Sequence[int] = ()
) -> Tensor:
    """``2 x d`` bounds of the box around ``center`` (``d``) whose side is ``length`` along the
    shortest lengthscale of ``ls`` and longer in proportion along the others, clipped to the
    cube; the ``free`` columns keep ``[0, 1]``.

    TuRBO keeps the sides' geometric mean at ``length`` instead; with many inert parameters
    (long lengthscales, their sides clipped at the cube's) that shrinks the sides of the few
    that matter to a sliver (in 100 dimensions with 6 active, about a twentieth of
    ``length``), and the region cannot leave a local optimum."""
    d = center.shape[-1]
    if ls is None:
        weights = torch.ones(d, dtype=torch.double)
    else:
        weights = ls.cpu() / ls.cpu().min()  # the shortest lengthscale's side: ``length``
    half = 0.5 * length * weights
    center = center.cpu().to(torch.double)
    lo, hi = (center - half).clamp(0.0, 1.0), (center + half).clamp(0.0, 1.0)
    if free:
        idx = torch.tensor(list(free), dtype=torch.long)
        lo[idx], hi[idx] = 0.0, 1.0
    return torch.stack([lo, hi])


def center_of(ctx: ProposalContext) -> Tensor:
    """``d``: the region's centre, the best observed point (of the feasible ones, when the
    study has outcome constraints and any was feasible)."""
    X, Y = ctx.X, ctx.Y[:, 0]
    feas = ctx.feasibility
    if feas is not None and feas.any_feasible:
        X, Y2 = feas.feasible_rows(ctx.X, ctx.Y)
        Y = Y2[:, 0]
    return X[Y.argmax()]


def region(ctx: ProposalContext, start: int = 0) -> tuple[Tensor, RegionState]:
    """The trust region of ``ctx`` (``2 x d`` bounds on its device) and its replayed state; the
    replay begins after the initial design or at observation ``start``, the later."""
    failures = failure_tolerance(ctx.dim, ctx.n_workers)
    state = replay(ctx.Y[:, 0].tolist(), max(ctx.n_initial or 0, start), failures)
    ls = lengthscales(ctx.model, ctx.dim)
    box = region_bounds(center_of(ctx), state.length, ls, ctx.free_columns)
    return box.to(ctx.bounds), state


def held(ctx: ProposalContext) -> int:
    """How many observations the study's GP holds (fewer than the study's above
    ``max_exact``; all of them without a GP that says)."""
    train = getattr(ctx.model, "train_inputs", None)
    if not isinstance(train, tuple) or not train or not isinstance(train[0], Tensor):
        return ctx.X.shape[0]
    return int(train[0].shape[-2])


def holds_subset(ctx: ProposalContext) -> bool:
    """Whether the study's GP holds fewer observations than the study (above ``max_exact``):
    a long campaign, where a region's own GP resolves more (``abo.model.local``)."""
    return held(ctx) < ctx.X.shape[0]


def fits_local(ctx: ProposalContext) -> bool:
    """Whether a region of ``ctx`` may have a GP of its own: one objective, without outcome or
    parameter constraints or a fidelity (whose models live in the cube's coordinates)."""
    return not (
        ctx.feasibility is not None
        or ctx.inequality_constraints
        or ctx.fidelity is not None
        or ctx.Y.shape[-1] > 1
    )


def last_hypers(history: Sequence[Mapping[str, Any]]) -> tuple[dict[str, list[float]] | None, int]:
    """The hyperparameters of the region's GP recorded last (``region_hypers``), if any, and
    how many proposals were made with the region's GP since."""
    since = 0
    for record in reversed(history):
        if "region_hypers" in record:
            return dict(record["region_hypers"]), since
        since += record.get("region_model") == "local"
    return None, since


def zoomed(ctx: ProposalContext, box: Tensor) -> tuple[ProposalContext, dict[str, Any]] | None:
    """``ctx`` seen from inside ``box``: its coordinates (the box's sides onto ``[0, 1]``),
    and a GP of the box's own on the observations there nearest its centre, with what the
    records keep of it; ``None`` where that does not apply (too few observations inside,
    outcome or parameter constraints, several objectives, a fidelity, a failed fit).
    Proposals come back through ``from_box``. The GP refits on every ``REFIT_EVERY``-th
    proposal made with it, else it keeps the hyperparameters recorded last
    (``abo.model.local``)."""
    if not fits_local(ctx):
        return None
    rows = local_rows(ctx.X, box, center_of(ctx))
    if rows.numel() < min_points(ctx.dim):
        return None
    X, Y = to_box(ctx.X[rows], box), ctx.Y[rows]
    last, since = last_hypers(ctx.history)
    refit = last is None or since + 1 >= REFIT_EVERY
    fitted = fit_local(X, Y, noise_of(ctx.model), box[1] - box[0], last, refit)
    if fitted is None:
        return None
    model, hypers = fitted
    nearby = ctx.neighbours

    def round_(Z: Tensor) -> Tensor:
        return to_box(ctx.round(from_box(Z, box)), box)

    def neighbours(Z: Tensor) -> tuple[Tensor, Tensor]:
        assert nearby is not None
        Y, owner = nearby(from_box(Z, box))
        return to_box(Y, box), owner

    inner = replace(
        ctx, model=model, X=X, Y=Y, X_pending=to_box(ctx.X_pending, box),
        bounds=torch.stack([torch.zeros_like(box[0]), torch.ones_like(box[0])]),
        round=round_, neighbours=None if nearby is None else neighbours,
    )  # fmt: skip
    info: dict[str, Any] = {"region_model": "local", "region_points": X.shape[0]}
    if refit:  # recorded where they change only: the proposals between use them as they are
        info.update(region_refit=True, region_hypers=hypers)
    return inner, info


def propose_inside(
    propose: Callable[[ProposalContext, int], Proposal],
    ctx: ProposalContext,
    n: int,
    box: Tensor,
    local: bool,
) -> tuple[Proposal, dict[str, Any]]:
    """``propose``'s ``n`` points inside ``box``: with the box's own GP when ``local`` and
    ``zoomed`` applies, else with the study's; and what the records say about the model."""
    inside = zoomed(ctx, box) if local else None
    if inside is None:
        return propose(replace(ctx, bounds=box), n), {}
    inner, info = inside
    try:
        proposal = propose(inner, n)
    except RuntimeError as exc:  # BoTorch's and linear_operator's numerical failures
        # a small region's GP can fail where the study's does not (busy points crowding a
        # tiny box; seen once in 10,000 asks): the study's GP proposes in the region instead
        reason = f"{type(exc).__name__}: {str(exc)[:200]}"
        return propose(replace(ctx, bounds=box), n), {"region_model_failed": reason}
    X = from_box(proposal.X.to(box), box).to(ctx.X)  # rounded there: valid here
    return Proposal(X, proposal.info), info


def region_info(box: Tensor, state: RegionState) -> dict[str, Any]:
    """What a proposal made inside the region records about it."""
    return {
        "region_length": round(state.length, 6),
        "region_side_max": round(float((box[1] - box[0]).max()), 6),
        "region_restarts": state.restarts,
    }


@register_strategy(
    "trust_region",
    "TuRBO-style trust region: a box around the incumbent, shaped by the GP's lengthscales, "
    "grown on success and shrunk on failure; the inner strategy proposes inside it",
    constraints="single",
)  # fmt: skip
class TrustRegionStrategy:
    """A trust region around the incumbent, replayed from the observations (see the module).

    Args:
        inner: the strategy that proposes inside the region (``"auto"``: ``believer`` on
            exact observations, ``qlognei`` on noisy ones, cheaper members under a pace).
        start: observations before which the inner strategy searches the whole cube; the
            region's replay begins there (``0``: after the initial design).
        raw_samples, num_restarts: the inner strategy's search budget (``None``: its own).
        local: when the inner strategy sees a GP of the region's own (``abo.model.local``)
            instead of the study's: ``"auto"`` once the study's GP holds a subset of the
            observations (above ``max_exact``), ``"always"``, or ``"never"``.
    """

    name = "trust_region"
    needs_model = True

    def __init__(
        self,
        inner: str = "auto",
        start: int = 0,
        raw_samples: int | None = None,
        num_restarts: int | None = None,
        local: str = "auto",
    ) -> None:
        if local not in LOCAL_MODES:
            raise ValueError(f"local: expected one of {LOCAL_MODES}, got {local!r}")
        self.local = local
        if inner == self.name:
            raise ValueError("inner: a trust region cannot hold another trust region")
        if inner not in REGISTRY:  # the built-ins are registered: this one is among them
            raise ValueError(f"inner: unknown strategy {inner!r}; choose one of {sorted(REGISTRY)}")
        if isinstance(start, bool) or not isinstance(start, int) or start < 0:
            raise ValueError(f"start: expected a whole number of observations >= 0, got {start!r}")
        self.start = start
        options: dict[str, Any] = {"raw_samples": raw_samples, "num_restarts": num_restarts}
        options = {k: v for k, v in options.items() if v is not None}
        if inner == "auto":  # its member, in this region (not in a second one of its own)
            options["trust_region"] = "never"
        self.inner = REGISTRY[inner].factory(**options)

    def region(self, ctx: ProposalContext) -> tuple[Tensor, RegionState]:
        """The region's ``2 x d`` bounds (on ``ctx``'s device) and its replayed state."""
        return region(ctx, self.start)

    def propose(self, ctx: ProposalContext, n: int) -> Proposal:
        assert ctx.model is not None
        if ctx.X.shape[0] < self.start:  # not yet: the whole cube
            inner = self.inner.propose(ctx, n)
            infos = [
                {**i, "strategy": self.name, "arm": i.get("arm", i.get("strategy"))}
                for i in inner.info
            ]
            return Proposal(inner.X, infos)
        box, state = self.region(ctx)
        local = self.local == "always" or (self.local == "auto" and holds_subset(ctx))
        inner, model = propose_inside(self.inner.propose, ctx, n, box, local)
        infos = []
        for info in inner.info:
            arm = info.get("arm", info.get("strategy", self.inner.name))
            infos.append(
                {**info, "strategy": self.name, "arm": arm, **region_info(box, state), **model}
            )
        return Proposal(inner.X, infos)
