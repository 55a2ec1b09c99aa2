"""The one Strategy protocol: tensors in the unit cube in, proposals out.

A strategy never sees storage, executors or parameter names. It is handed a frozen
``ProposalContext`` on every call — the fitted model, what has been observed, *all* running
trials as busy points — and returns ``n`` points. ``abo.propose.proposer`` rounds them onto valid
parameters, drops duplicates and records each point's ``info`` (which strategy, which arm) in
its trial's ``ProposalRecord``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import torch
from botorch.models.model import Model
from torch import Tensor

from abo.core.pareto import reference_point

if TYPE_CHECKING:
    from abo.acquisitions.feasibility import Feasibility

DUPLICATE_TOL = 1e-6
"""Points closer than this in the unit cube are the same point (one tolerance for abo)."""


@dataclass(frozen=True)
class FidelityLevels:
    """The fidelities a strategy may evaluate a point at, in a study with a fidelity
    (``abo.core.fidelity``): the fidelity parameter's columns of the unit cube, each level's
    encoding there and its cost.

    Attributes:
        columns: the fidelity parameter's slice of the unit cube's ``d`` columns.
        levels: ``L x w`` encodings of the fidelities weighed (``w`` columns), cheapest first.
        costs: ``L`` costs of an evaluation at each level (only their ratios matter).
        target: the index of the target fidelity in ``levels``.
    """

    columns: slice
    levels: Tensor
    costs: Tensor
    target: int

    def at(self, X: Tensor, level: int) -> Tensor:
        """``X`` (``n x d``) with its fidelity columns set to level ``level``."""
        out = X.clone()
        out[..., self.columns] = self.levels[level].to(X)
        return out

    def bounds_at_target(self, bounds: Tensor) -> Tensor:
        """``bounds`` with the fidelity columns pinned to the target (a search over the
        other parameters only)."""
        out = bounds.clone()
        out[:, self.columns] = self.levels[self.target].to(bounds)
        return out


@dataclass(frozen=True)
class ProposalContext:
    """Everything a strategy may use to propose points.

    Attributes:
        model: the GP fitted on ``X``, ``Y`` (``None`` when there are too few observations).
        X: ``n x d`` completed points in the unit cube.
        Y: ``n x 1`` their utilities: **larger is better** (the sign is flipped for
            minimisation), as BoTorch's acquisition functions assume; ``n x m`` in a study of
            ``m`` objectives, one column per objective in the order declared.
        X_pending: ``m x d`` busy points: every running trial, on every call.
        bounds: ``2 x d`` bounds of the cube.
        generator: the only source of randomness a strategy may use directly; seeded from the
            study seed and the number of trials so far, so proposals are reproducible.
        round: snaps ``k x d`` relaxed points onto encodings of valid parameters.
        n_trials: proposals made so far in the study (AEGiS's schedule uses it).
        n_workers: how many evaluations run at once, when the caller knows (else ``None``).
        n_initial: the size of the study's quasi-random initial design.
        history: what this strategy recorded on the study's earlier proposals (each
            record's ``arm`` and details), oldest first: a strategy that learns across asks
            (``portfolio``) keeps its state there, so a resumed study continues it.
        pace: seconds each point may take before a worker waits for it, when the caller runs
            asynchronously and says so (``optimize``'s automatic lookahead); ``None`` means no
            hurry, and a strategy must then propose the same points for the same data.
        ref_point: ``m`` utilities, the hypervolume's reference point of a study of several
            objectives (``abo.core.pareto.reference_point``); ``None`` for one objective.
        feasibility: the models of the study's outcome constraints and which rows of ``X``
            were feasible (``abo.acquisitions.feasibility``); ``None`` without constraints.
            Only strategies registered with ``constraints=`` get a context that has it.
        inequality_constraints: the study's linear parameter constraints on the unit cube,
            in BoTorch's form (``(indices, coefficients, rhs)``: ``sum(c * x[i]) >= rhs``),
            for ``optimize_acqf``; ``None`` without any. Points that break them after
            rounding are replaced by the proposer, whatever the strategy does.
        fidelity: the fidelities a point may be evaluated at and their costs, in a study with
            a fidelity (``FidelityLevels``); ``None`` otherwise. ``X`` then holds each
            observation at its own fidelity (reports included, at their steps), and only
            strategies registered with ``fidelity=True`` get such a context.
        free_columns: columns of the cube a local search must leave whole: the one-hot
            columns of categorical parameters and the columns of conditional ones (a box
            around an encoding there would pin a choice, not bound a distance).
        neighbours: the valid points one discrete move from each of ``n x D`` rounded
            points (``Space.neighbours_of``: an integer one step, a categorical another
            choice), with the row each moves, where ``maximize`` climbs from the rounded
            optimum; ``None`` in a space of plain reals.
    """

    model: Model | None
    X: Tensor
    Y: Tensor
    X_pending: Tensor
    bounds: Tensor
    generator: torch.Generator
    round: Callable[[Tensor], Tensor]
    n_trials: int = 0
    n_workers: int | None = None
    n_initial: int | None = None
    history: tuple[Mapping[str, Any], ...] = ()
    pace: float | None = None
    ref_point: Tensor | None = None
    feasibility: Feasibility | None = None
    inequality_constraints: list[tuple[Tensor, Tensor, float]] | None = None
    fidelity: FidelityLevels | None = None
    free_columns: tuple[int, ...] = ()
    neighbours: Callable[[Tensor], tuple[Tensor, Tensor]] | None = None

    @property
    def dim(self) -> int:
        return self.bounds.shape[-1]

    def seed(self) -> int:
        """A fresh integer seed drawn from ``generator`` (for BoTorch samplers and engines)."""
        return int(torch.randint(0, 2**31 - 1, (1,), generator=self.generator).item())

    @contextmanager
    def torch_seed(self) -> Iterator[None]:
        """Seed torch's *global* generator from ``generator`` inside the block, then restore it.

        BoTorch draws from the global generator outside the seeds abo passes it (Boltzmann
        sampling of search starts, samples around the incumbent); seeding it from the context
        makes a strategy reproducible even when called directly or twice in one proposal.
        """
        seed = self.seed()
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            yield

    def reference(self) -> Tensor:
        """The hypervolume's reference point in utilities: ``ref_point``, or when the caller
        gave none the study's rule on ``Y`` (``abo.core.pareto.reference_point``)."""
        ref = self.ref_point
        if ref is None:
            ref = reference_point(self.Y, self.n_initial or self.Y.shape[0])
        return ref.to(torch.double)

    def satisfies(self, X: Tensor) -> Tensor:
        """``n`` booleans: which rows of ``X`` (unit cube) satisfy ``inequality_constraints``
        (all, without any), in their relaxed unit-cube form."""
        ok = torch.ones(X.shape[0], dtype=torch.bool, device=X.device)
        for idx, coef, rhs in self.inequality_constraints or ():
            ok &= X[:, idx] @ coef.to(X) >= rhs - 1e-9
        return ok

    def uniform(self, n: int) -> Tensor:
        """``n x d`` uniform points in the cube from ``generator``."""
        unit = torch.rand(n, self.dim, generator=self.generator, dtype=torch.double)
        return unit.to(self.bounds.device)  # drawn on the CPU: the same numbers on any device


@dataclass(frozen=True)
class Proposal:
    """``n x d`` proposed points and, per point, what produced it (recorded on the trial)."""

    X: Tensor
    info: list[dict[str, Any]] = field(default_factory=list)


@runtime_checkable
class Strategy(Protocol):
    """Proposes ``n`` new points; a model is fitted for it when ``needs_model`` is true."""

    name: str
    needs_model: bool

    def propose(self, ctx: ProposalContext, n: int) -> Proposal:
        """``n`` points in the unit cube (``n x d``), aware of ``ctx.X_pending``."""
        ...


T = TypeVar("T")


OBJECTIVE_KINDS = ("single", "multi", "any")
"""What studies a strategy proposes for: one objective, several, or either."""


@dataclass(frozen=True)
class Registered:
    """A strategy's factory (its class), its one-line description and the studies it fits."""

    factory: Callable[..., Any]
    description: str
    objectives: str = "single"
    constraints: str = "none"
    fidelity: bool = False

    def fits(self, n_objectives: int) -> bool:
        """Whether the strategy proposes for a study of ``n_objectives`` objectives."""
        if self.objectives == "any":
            return True
        return (self.objectives == "multi") == (n_objectives > 1)

    def fits_constraints(self, n_objectives: int) -> bool:
        """Whether the strategy handles outcome constraints in a study of ``n_objectives``."""
        if self.constraints == "any":
            return True
        return self.constraints == "single" and n_objectives == 1


REGISTRY: dict[str, Registered] = {}
"""Name -> strategy; ``abo.acquisitions.registry`` looks names up here (after loading the
built-ins)."""


CONSTRAINT_KINDS = ("none", "single", "any")
"""Which studies with outcome constraints a strategy handles: none, one objective's, or any."""


def register_strategy(
    name: str,
    description: str,
    objectives: str = "single",
    constraints: str = "none",
    fidelity: bool = False,
) -> Callable[[T], T]:
    """Class decorator: make a strategy buildable by ``name`` (also for third parties).

    ``objectives``: ``"single"`` (the default: ``ctx.Y`` has one column), ``"multi"`` (studies
    of several objectives only) or ``"any"``. ``constraints``: whether the strategy reads
    ``ctx.feasibility`` (``"single"``: in studies of one objective, ``"any"``), or studies with
    outcome constraints are refused it (``"none"``, the default). ``fidelity``: whether it
    proposes for a study with a fidelity (reading ``ctx.fidelity``); others are refused one.
    """
    if objectives not in OBJECTIVE_KINDS:
        raise ValueError(f"objectives: expected one of {OBJECTIVE_KINDS}, got {objectives!r}")
    if constraints not in CONSTRAINT_KINDS:
        raise ValueError(f"constraints: expected one of {CONSTRAINT_KINDS}, got {constraints!r}")

    def wrap(factory: T) -> T:
        REGISTRY[name] = Registered(factory, description, objectives, constraints, fidelity)  # type: ignore[arg-type]
        return factory

    return wrap
