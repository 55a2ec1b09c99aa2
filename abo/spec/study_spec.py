"""What a study is: one frozen, validated ``StudySpec``, stored with the study.

Every interface builds its study from this one description: ``abo.create_study(space,
**options)``, the HTTP API's create body, ``Client.create_study`` and the ``[study]`` table of
an ``abo run`` file all pass the same option names to ``StudySpec.create``, and the service's
schema and the TOML loader list their keys from ``OPTIONS``. A new option is added here, once.
Validation happens here, once, and every error carries a real ``field``.

Example:
    >>> import abo
    >>> spec = StudySpec.create(abo.Space({"x": abo.Float(0, 1)}), seed=3, strategy="random")
    >>> spec.objective.direction, spec.strategy, spec.seed
    ('minimize', 'random', 3)
    >>> StudySpec.from_json(spec.to_json()) == spec
    True
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from abo.core.exceptions import AboError, SearchSpaceError
from abo.core.outcomes import (
    Constraint,
    Objective,
    Outcome,
    constraints,
    objectives,
    outcomes_to_json,
    parse_outcomes,
)
from abo.core.space import Space
from abo.model.options import MAX_EXACT as MAX_EXACT  # the GP sees a subset above it
from abo.spec.checks import CHECKS, check_reference
from abo.spec.checks import NOISE_MODES as NOISE_MODES  # the choices, for their users
from abo.spec.checks import OUTPUT_TRANSFORMS as OUTPUT_TRANSFORMS
from abo.spec.checks import REFIT_MODES as REFIT_MODES


def default_n_initial(d: int) -> int:
    """The default initial design for ``d`` parameters: 2 each (at least 2) up to 10, then 20
    and one more per 5 (38 for 100; docs/benchmarks.md, "Wide spaces")."""
    return max(2, 2 * d) if d <= 10 else 20 + (d - 10) // 5


def _doc(text: str) -> dict[str, str]:
    return {"doc": text}


DEFAULT_STRATEGY = "auto"
"""The strategy of a study created without one (see docs/benchmarks.md for the evidence)."""


@dataclass(frozen=True)
class StudySpec:
    """A study's definition: its space, outcomes, strategy and how trials are run and kept.

    Build one with ``StudySpec.create`` (validates and draws a seed when none is given).
    """

    space: Space
    outcomes: tuple[Outcome, ...] = field(
        default=(Objective(),),
        metadata=_doc(
            "The outcomes: a dict of name to 'minimize'/'maximize', or to a constraint such as "
            "'<= 250' (default: one objective called 'value', minimised; 'direction' sets "
            "its direction)."
        ),
    )
    strategy: str = field(default=DEFAULT_STRATEGY, metadata=_doc("A name from abo.strategies()."))
    strategy_options: Mapping[str, Any] = field(
        default_factory=dict, metadata=_doc("Keyword arguments for the strategy.")
    )
    seed: int = field(
        default=0, metadata=_doc("Fixes every random choice; drawn (and stored) when omitted.")
    )
    n_initial: int | None = field(
        default=None,
        metadata=_doc(
            "Quasi-random points before the model (2 x parameters; past 10, 20 + 1 per 5)."
        ),
    )
    lease_seconds: float = field(
        default=24 * 3600.0,
        metadata=_doc("A running trial without a heartbeat for this long is lost."),
    )
    max_retries: int = field(
        default=1, metadata=_doc("How often a lost trial's parameters are retried.")
    )
    noise: str = field(
        default="auto",
        metadata=_doc("'auto' (learned) or 'deterministic' (the GP interpolates the data)."),
    )
    refit: str = field(
        default="auto",
        metadata=_doc(
            "'auto' ('sync' for asks made one at a time, 'background' for the asks of "
            "optimize's automatic lookahead), 'sync' (refit before a proposal once the data "
            "grew by a step, 5 % past 40 observations: reproducible), 'background' (asks never "
            "wait for a fit) or 'full' (a multi-start refit before each proposal)."
        ),
    )
    max_staleness: int | None = field(
        default=None,
        metadata=_doc(
            "With refit='background', the most observations the proposing hyperparameters "
            "may lag behind the data (default 20, and a tenth of the data past 50, or the "
            "results that arrive during two refits at the measured pace when those are more)."
        ),
    )
    max_exact: int | None = field(
        default=None,
        metadata=_doc(
            "The most observations the GP is fitted on (a subset above it); default: chosen "
            "for the device, 500 on a CPU and 20,000 on a CUDA device."
        ),
    )
    device: str = field(
        default="auto",
        metadata=_doc(
            "Where the GP and the acquisition search run: 'auto' (a CUDA device when torch "
            "sees one, else the CPU), 'cpu', 'cuda' or 'cuda:N'; resolved by each process "
            "that proposes."
        ),
    )
    reference_point: Mapping[str, float] | None = field(
        default=None,
        metadata=_doc(
            "Several objectives: the hypervolume's reference point by objective name, the "
            "worst value of each that still counts (proposals aim at the front beyond it). "
            "Default: each objective's worst value among the first n_initial results, moved "
            "10 % of their range further."
        ),
    )
    output_transform: str = field(
        default="auto",
        metadata=_doc(
            "What the GP models: 'power' (a Yeo-Johnson transform fitted to the values, near "
            "the identity for Gaussian-looking ones), 'none' (the standardised values), or "
            "'auto' (the default): 'power' under the default strategy, 'none' under the others."
        ),
    )
    parameter_constraints: tuple[str, ...] = field(
        default=(),
        metadata=_doc(
            "Linear inequalities between numeric, linearly scaled parameters that every "
            "evaluated point satisfies, such as 'x1 + 2*x2 <= 1' (abo.core.linear)."
        ),
    )
    failure_model: str = field(
        default="auto",
        metadata=_doc(
            "What failed trials teach the model: 'classifier' (a GP classifier of where "
            "evaluations fail weighs every proposal by the probability of success, and the "
            "objective's GP sees successful trials only), 'worst' (failed trials are modelled "
            "at the worst observed value), or 'auto' (the default): 'classifier' under the "
            "strategies that take outcome constraints, 'worst' under the others."
        ),
    )
    stopping: Mapping[str, Any] | None = field(
        default=None,
        metadata=_doc(
            "Which running trials to end early from the values they report: 'none' (the "
            "default: every trial runs to its end), 'asha', 'hyperband', 'pasha', 'median', "
            "'curve', or a dict such as {'rule': 'asha', 'min_step': 1, 'max_step': 81} "
            "(abo.core.stopping)."
        ),
    )

    fidelity: Mapping[str, Any] | None = field(
        default=None,
        metadata=_doc(
            "The parameter that trades accuracy for cost (epochs, a mesh, coin or pouch "
            "cell): its name, or a dict such as {'parameter': 'epochs', 'target': 81, "
            "'cost': {'fixed': 1, 'per_unit': 1}} (default target: its highest value or "
            "last choice; default cost: learned from evaluation times). Proposals choose it "
            "per point; only trials at the target are results (abo.core.fidelity)."
        ),
    )
    warm_start_from: tuple[Any, ...] = field(
        default=(),
        metadata=_doc(
            "Earlier, related studies whose finished trials are prior knowledge: their names "
            "(in the same storage) or, from Python, the studies themselves. A snapshot of "
            "their results on the shared parameters is stored with the new study; their GP's "
            "mean is the new GP's prior mean, and their best points its first proposals "
            "(abo.spec.warm_start)."
        ),
    )

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        space: Space | Mapping[str, Any],
        *,
        outcomes: Any = None,
        direction: str | None = None,
        seed: int | None = None,
        **options: Any,
    ) -> StudySpec:
        """A checked spec from the options every interface takes (``OPTIONS``).

        Raises:
            AboError: the first bad option, its ``field`` naming it.
        """
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise AboError(
                f"{unknown[0]}: not a study option (options: {', '.join(sorted(OPTIONS))})",
                field=unknown[0],
            )
        if not isinstance(space, Space):
            if not isinstance(space, Mapping):
                raise SearchSpaceError(
                    f"space: expected an abo.Space or a dict of parameters, got "
                    f"{type(space).__name__}",
                    field="space",
                )
            space = Space.from_json(space) if _is_json_space(space) else Space(space)
        if direction is not None and direction not in ("minimize", "maximize"):
            raise AboError(
                f"direction: expected 'minimize' or 'maximize', got {direction!r}",
                field="direction",
            )
        if seed is None:
            seed = int.from_bytes(os.urandom(4), "little")
        if "strategy_options" in options and options["strategy_options"] is None:
            del options["strategy_options"]  # None: the strategy's defaults
        if "stopping" in options:
            from abo.core.stopping import parse_stopping

            options["stopping"] = parse_stopping(options["stopping"])
        if options.get("fidelity") is not None:
            from abo.core.fidelity import Fidelity

            options["fidelity"] = Fidelity.parse(options["fidelity"], space).to_json()
        parsed = parse_outcomes(outcomes, direction)
        spec = cls(space=space, outcomes=parsed, seed=seed, **options)
        spec.check()
        if spec.reference_point is not None:  # stored as plain floats in objective order
            spec = replace(
                spec, reference_point=check_reference(spec.reference_point, spec.objectives)
            )
        return spec

    def check(self) -> None:
        """Validate every field (``AboError`` with ``field`` set); ``create`` calls it. The
        checks, one per group of options, are ``abo.spec.checks.CHECKS``."""
        for check in CHECKS:
            check(self)

    # -- views ----------------------------------------------------------------------------
    @property
    def objectives(self) -> tuple[Objective, ...]:
        return objectives(self.outcomes)

    @property
    def linear_constraints(self) -> tuple[Any, ...]:
        """``parameter_constraints`` parsed (``abo.core.linear.LinearConstraint``)."""
        from abo.core.linear import parse_all

        return parse_all(self.parameter_constraints, self.space)

    @property
    def fidelity_of(self) -> Any:
        """The study's ``abo.core.fidelity.Fidelity`` (``None`` without one)."""
        if self.fidelity is None:
            return None
        cached = self.__dict__.get("_fidelity")
        if cached is None:
            from abo.core.fidelity import Fidelity

            cached = Fidelity.from_stored(self.fidelity, self.space)
            object.__setattr__(self, "_fidelity", cached)
        return cached

    def validate_params(self, params: Any) -> dict[str, Any]:
        """``space.validate`` and every parameter constraint (``AboError`` naming the one
        broken): what ``enqueue`` and ``add`` accept. A study's fidelity may be left out:
        it is then the target."""
        fidelity = self.fidelity_of
        if fidelity is not None and isinstance(params, Mapping):
            if fidelity.parameter not in params:
                params = {**params, fidelity.parameter: fidelity.target}
        checked = self.space.validate(params)
        if self.parameter_constraints:
            from abo.core.linear import check_params

            check_params(checked, self.linear_constraints)
        return checked

    @property
    def constraints(self) -> tuple[Constraint, ...]:
        """The outcome constraints a feasible trial satisfies (none by default)."""
        return constraints(self.outcomes)

    @property
    def objective(self) -> Objective:
        """The study's one objective (``AboError`` for a study of several)."""
        objs = self.objectives
        if len(objs) != 1:
            raise AboError(
                f"outcomes: this study has {len(objs)} objectives "
                f"({', '.join(o.name for o in objs)}), not one",
                field="outcomes",
            )
        return objs[0]

    @property
    def direction(self) -> str:
        """The direction of a single-objective study; ``"multi"`` for several objectives."""
        objs = self.objectives
        return objs[0].direction if len(objs) == 1 else "multi"

    @property
    def resolved_output_transform(self) -> str:
        """The transform the GP's values get: ``"auto"`` is ``"power"`` under the default
        strategy on one objective, where the benchmarks measured it (best or tied in all 14
        cells compared, against 10 of 14 on the raw values) and ``trust_region`` (its members in
        a box); ``"none"`` under the others (``ucb`` did worse with it) and for several."""
        if self.output_transform != "auto":
            return self.output_transform
        single = len(self.objectives) == 1  # the transform was measured on one objective
        return "power" if single and self.strategy in (DEFAULT_STRATEGY, "trust_region") else "none"

    @property
    def resolved_failure_model(self) -> str:
        """How failed trials are modelled: ``"auto"`` is ``"classifier"`` under the strategies
        that read ``ctx.feasibility`` (registered with ``constraints=``: the classifier's
        probability of success reaches proposals only there: every built-in one), ``"worst"``
        under the others."""
        if self.failure_model != "auto":
            return self.failure_model
        from abo.acquisitions.registry import supports_constraints

        n = len(self.objectives)
        return "classifier" if supports_constraints(self.strategy, n) else "worst"

    @property
    def resolved_n_initial(self) -> int:
        """Size of the initial design (``default_n_initial`` of the parameters one
        configuration has at most in a conditional space; 2 with a warm start, whose sources'
        best points it holds and whose GP guides the rest)."""
        if self.n_initial is not None:
            return self.n_initial
        return 2 if self.warm_start_from else default_n_initial(self.space.max_active())

    def replace(self, **changes: Any) -> StudySpec:
        spec = replace(self, **changes)
        spec.check()
        return spec

    # -- JSON -----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the form stored with the study and sent over HTTP)."""
        out: dict[str, Any] = {"space": self.space.to_json()}
        out["outcomes"] = outcomes_to_json(self.outcomes)
        for f in fields(self):
            if f.name not in ("space", "outcomes"):
                value = getattr(self, f.name)
                out[f.name] = dict(value) if isinstance(value, Mapping) else value
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StudySpec:
        """The spec ``to_json`` wrote (stored specs are trusted: not re-checked)."""
        options = {k: v for k, v in data.items() if k in OPTIONS}
        options["strategy_options"] = dict(options.get("strategy_options") or {})
        # a spec stored before the option existed modelled the raw values: it goes on doing so
        options.setdefault("output_transform", "none")
        options.setdefault("failure_model", "worst")  # so did a spec from before failure models
        options["parameter_constraints"] = tuple(options.get("parameter_constraints") or ())
        options["warm_start_from"] = tuple(options.get("warm_start_from") or ())
        options["seed"] = int(data["seed"])
        return cls(
            space=Space.from_json(data["space"]),
            outcomes=parse_outcomes(data.get("outcomes")),
            **options,
        )


def _is_json_space(space: Mapping[str, Any]) -> bool:
    return all(isinstance(v, Mapping) for v in space.values())


# every option a study takes beside its space and outcomes, with its default and description
OPTIONS: dict[str, tuple[Any, str]] = {
    f.name: (
        f.default_factory() if callable(f.default_factory) else f.default,
        f.metadata.get("doc", ""),
    )
    for f in fields(StudySpec)
    if f.name not in ("space", "outcomes", "seed")
}
CREATE_OPTIONS = ("outcomes", "direction", "seed", *OPTIONS)
"""The keyword arguments of ``StudySpec.create`` beside the space: what every interface takes."""
