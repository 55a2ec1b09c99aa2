"""The checks of a ``StudySpec``'s options, one function per group of options, in order.

``StudySpec.check`` runs ``CHECKS`` one after the other: the first bad option raises an
``AboError`` whose ``field`` names it. This module imports nothing of ``abo.spec.study_spec`` at
run time
(the spec is passed in), so ``abo.spec.study_spec`` can import it.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from abo.core.exceptions import AboError, InvalidValueError
from abo.core.outcomes import Objective, check_number, constraints, finite_float, objectives, shown
from abo.model.options import DEVICE_FORM, DEVICES
from abo.model.options import NOISE_MODES as NOISE_MODES
from abo.model.options import OUTPUT_TRANSFORMS as OUTPUT_TRANSFORMS
from abo.model.options import REFIT_MODES as REFIT_MODES

if TYPE_CHECKING:
    from abo.spec.study_spec import StudySpec

MAX_SEED = 2**63  # stored as a signed 64-bit integer
FAILURE_MODELS = ("auto", "classifier", "worst")


def check_counts(spec: StudySpec) -> None:
    """The seed and the size of the initial design."""
    _check_int(spec.seed, "seed", 0, MAX_SEED - 1, "an integer in [0, 2**63)")
    if spec.n_initial is not None:
        _check_int(spec.n_initial, "n_initial", 1, 1_000_000, "a positive integer")


def check_lease(spec: StudySpec) -> None:
    """How long a running trial may go without a heartbeat, and how often a lost one is retried."""
    lease = finite_float(spec.lease_seconds)  # None for 10**400 too (no OverflowError)
    if lease is None or not lease > 0:
        raise (InvalidValueError if lease is None else AboError)(
            f"lease_seconds: expected a positive, finite number, got {shown(spec.lease_seconds)}",
            field="lease_seconds",
        )
    _check_int(spec.max_retries, "max_retries", 0, 1000, "a non-negative integer")


def check_model(spec: StudySpec) -> None:
    """What the GP models and when it is refitted."""
    _check_choice(spec.noise, "noise", NOISE_MODES)
    _check_choice(spec.refit, "refit", REFIT_MODES)
    if spec.max_staleness is not None:
        _check_int(spec.max_staleness, "max_staleness", 0, 10**9, "a non-negative integer")
    if spec.max_exact is not None:
        _check_int(spec.max_exact, "max_exact", 10, 10**7, "an integer of at least 10")
    if not isinstance(spec.device, str) or not DEVICE_FORM.match(spec.device):
        raise AboError(f"device: expected {DEVICES}, got {shown(spec.device)}", field="device")
    _check_choice(spec.output_transform, "output_transform", OUTPUT_TRANSFORMS)
    _check_choice(spec.failure_model, "failure_model", FAILURE_MODELS)


def check_linear(spec: StudySpec) -> None:
    """The linear parameter constraints: parsed (stored as their canonical text), on parameters
    every trial has, and satisfiable by sampled points."""
    from abo.core.linear import FIELD, parse_all, reachable

    linear = parse_all(spec.parameter_constraints, spec.space)
    object.__setattr__(spec, "parameter_constraints", tuple(c.text for c in linear))
    for c in linear:
        for name, _ in c.terms:
            if spec.space[name].when:
                raise AboError(
                    f"{FIELD}: {c.text!r} involves {name!r}, which is conditional (absent "
                    "from some trials); a linear constraint needs parameters every trial has",
                    field=FIELD,
                )
    if linear and not reachable(spec.space, linear):
        raise AboError(
            f"{FIELD}: no point of the first 4096 Sobol points satisfies them all; the "
            "feasible region is too small (or empty) to sample",
            field=FIELD,
        )


def check_strategy_types(spec: StudySpec) -> None:
    """The strategy's options a dict of finite numbers, and its name a string."""
    if not isinstance(spec.strategy_options, Mapping):
        raise AboError(
            f"strategy_options: expected a dict, got {type(spec.strategy_options).__name__}",
            field="strategy_options",
        )
    _check_numbers(spec.strategy_options, "strategy_options")
    if not isinstance(spec.strategy, str):
        raise AboError(f"strategy: expected a name, got {spec.strategy!r}", field="strategy")


def check_reference_point(spec: StudySpec) -> None:
    """A reference point only for several objectives, with a value for each."""
    if spec.reference_point is None:
        return
    if len(spec.objectives) < 2:
        raise AboError(
            "reference_point: only for a study of several objectives (this one has "
            f"one, {spec.objectives[0].name})",
            field="reference_point",
        )
    check_reference(spec.reference_point, spec.objectives)


def check_stopping(spec: StudySpec) -> None:
    """A stopping rule already parsed, on a study of one objective."""
    if spec.stopping is None:
        return
    from abo.core.stopping import FIELD, parse_stopping

    if parse_stopping(spec.stopping) != dict(spec.stopping):
        raise AboError(f"{FIELD}: not a parsed stopping option", field=FIELD)
    if len(spec.objectives) != 1:
        raise AboError(
            f"{FIELD}: a stopping rule ranks the values trials report, which needs a "
            f"study of one objective (this one has {len(spec.objectives)})",
            field=FIELD,
        )


def check_fidelity(spec: StudySpec) -> None:
    """A fidelity already parsed, on a parameter every trial has, in a study of one objective,
    and in no linear constraint."""
    if spec.fidelity is None:
        return
    from abo.core.fidelity import FIELD, Fidelity

    if Fidelity.parse(spec.fidelity, spec.space).to_json() != dict(spec.fidelity):
        raise AboError(f"{FIELD}: not a parsed fidelity option", field=FIELD)
    fid = spec.fidelity["parameter"]
    if spec.space[fid].when:
        raise AboError(
            f"{FIELD}: {fid!r} is conditional; every trial needs a fidelity", field=FIELD
        )
    if len(spec.objectives) != 1:
        raise AboError(
            f"{FIELD}: a fidelity is for a study of one objective (this one has "
            f"{len(spec.objectives)}: {', '.join(o.name for o in spec.objectives)})",
            field=FIELD,
        )
    if spec.parameter_constraints:
        from abo.core.linear import FIELD as LINEAR

        for c in spec.linear_constraints:
            if fid in dict(c.terms):
                raise AboError(
                    f"{LINEAR}: {c.text!r} involves the fidelity {fid!r}, which the "
                    "proposals choose apart from the other parameters",
                    field=LINEAR,
                )


def check_warm_start(spec: StudySpec) -> None:
    """The studies to warm-start from (stored in their checked form)."""
    from abo.spec.warm_start import check

    object.__setattr__(spec, "warm_start_from", check(spec.warm_start_from, spec))


def check_strategy(spec: StudySpec) -> None:
    """The strategy takes this study's outcomes and fidelity, and its options."""
    from abo.acquisitions.registry import check_fits, make_strategy

    check_fits(
        spec.strategy,
        [o.name for o in objectives(spec.outcomes)],
        [c.name for c in constraints(spec.outcomes)],
        fidelity=spec.fidelity["parameter"] if spec.fidelity is not None else None,
    )
    try:
        make_strategy(spec.strategy, **dict(spec.strategy_options))
    except AboError:
        raise
    except TypeError as exc:
        raise AboError(f"strategy_options: {exc}", field="strategy_options") from None


CHECKS: tuple[Callable[[StudySpec], None], ...] = (
    check_counts,
    check_lease,
    check_model,
    check_linear,
    check_strategy_types,
    check_reference_point,
    check_stopping,
    check_fidelity,
    check_warm_start,
    check_strategy,
)
"""Every check, in the order ``StudySpec.check`` runs them (the first error is the one told)."""


def check_reference(
    reference: Mapping[str, float], objectives: Sequence[Objective]
) -> dict[str, float]:
    """A reference point by objective name, checked (``AboError`` naming the field)."""
    if not isinstance(reference, Mapping):
        raise AboError(
            "reference_point: expected a value per objective by name "
            f"({', '.join(o.name for o in objectives)}), got {type(reference).__name__}",
            field="reference_point",
        )
    names = {o.name for o in objectives}
    unknown = sorted(set(map(str, reference)) - names)
    if unknown:
        raise AboError(
            f"reference_point.{unknown[0]}: not an objective of this study "
            f"({', '.join(o.name for o in objectives)})",
            field=f"reference_point.{unknown[0]}",
        )
    out = {}
    for o in objectives:
        if o.name not in reference:
            raise AboError(
                f"reference_point.{o.name}: missing (every objective needs a value)",
                field=f"reference_point.{o.name}",
            )
        out[o.name] = check_number(reference[o.name], f"reference_point.{o.name}")
    return out


def _check_int(value: Any, name: str, low: int, high: int, what: str) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Integral)
        or not low <= int(value) <= high
    ):
        raise AboError(f"{name}: expected {what}, got {shown(value)}", field=name)


def _check_numbers(value: Any, name: str) -> None:
    """Every number nested in ``value`` (dicts, lists) finite and within the float range, or
    ``AboError`` naming its path: a strategy's options reach float arithmetic unchecked."""
    stack: list[tuple[Any, str]] = [(value, name)]
    seen: set[int] = set()
    while stack:
        item, path = stack.pop()
        if isinstance(item, Mapping | list | tuple):
            if id(item) in seen:
                continue  # a cycle: each container once
            seen.add(id(item))
            pairs = item.items() if isinstance(item, Mapping) else enumerate(item)
            stack += [(v, f"{path}.{k}") for k, v in pairs]
        elif isinstance(item, numbers.Number) and not isinstance(item, bool):
            if finite_float(item) is None:
                raise InvalidValueError(
                    f"{path}: expected a finite number, got {shown(item)}", field=path
                )


def _check_choice(value: Any, name: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise AboError(f"{name}: expected one of {', '.join(choices)}, got {value!r}", field=name)
