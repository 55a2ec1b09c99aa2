"""Linear inequality constraints between parameters: ``"x1 + 2*x2 <= 1"``.

Known before any evaluation (unlike outcome constraints, ``abo.core.outcomes``), they restrict
which parameters may be evaluated at all: ``enqueue`` and ``add`` refuse points that break
them, the initial design draws its Sobol points by rejection, and every proposal is searched
inside them (BoTorch's ``inequality_constraints``) and checked after rounding.

A constraint is a sum of terms ``[coefficient *] name`` (``+`` or ``-`` between them), an
operator ``<=`` or ``>=``, and a number. Its parameters must be numeric and not log-scaled (a
log-scaled one makes the constraint nonlinear in the model's unit cube). For continuous
``Float`` parameters the unit-cube form is exact; for integers and stepped floats it is the
continuous relaxation, and the rounded point is checked again.

Example:
    >>> from abo.core.space import Float, Space
    >>> space = Space({"x1": Float(0, 1), "x2": Float(0, 1)})
    >>> c = parse_linear("x1 + 2*x2 <= 1", space)
    >>> c.holds({"x1": 0.5, "x2": 0.25}), c.holds({"x1": 0.5, "x2": 0.3}), str(c)
    (True, False, 'x1 + 2*x2 <= 1')
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from abo.core.exceptions import AboError
from abo.core.space import Float, Int, Space

FIELD = "parameter_constraints"
TOLERANCE = 1e-9  # relative slack for rounding in the encode/decode round trip
_TERM = re.compile(r"^\s*(?:([0-9.eE+-]+)\s*\*\s*)?([A-Za-z_][A-Za-z0-9_.-]*)\s*$")


@dataclass(frozen=True)
class LinearConstraint:
    """``sum(coef * params[name]) <= rhs`` (``op="<="``) or ``>= rhs``, as written."""

    text: str
    terms: tuple[tuple[str, float], ...]
    op: str
    rhs: float

    def __str__(self) -> str:
        return self.text

    def lhs(self, params: Mapping[str, Any]) -> float:
        return sum(c * float(params[name]) for name, c in self.terms)

    def holds(self, params: Mapping[str, Any]) -> bool:
        """Whether ``params`` (decoded values) satisfy the constraint, up to rounding."""
        lhs = self.lhs(params)
        tol = TOLERANCE * max(1.0, abs(self.rhs), *(abs(c) for _, c in self.terms))
        return lhs <= self.rhs + tol if self.op == "<=" else lhs >= self.rhs - tol

    def unit_form(self, space: Space) -> tuple[list[int], list[float], float]:
        """The constraint on the unit cube in BoTorch's form ``sum(a_i * u[i]) >= b``."""
        indices, coefs, rhs = [], [], self.rhs
        for name, c in self.terms:
            p = space[name]
            assert isinstance(p, Float | Int)
            low, high = float(p.low), float(p.high)
            indices.append(space._slices[name].start)
            coefs.append(c * (high - low))  # value = low + u * (high - low)
            rhs -= c * low
        if self.op == "<=":  # a.u <= b  <=>  -a.u >= -b
            return indices, [-a for a in coefs], -rhs
        return indices, coefs, rhs


def _number(text: str, constraint: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise AboError(
            f"{FIELD}: {text!r} in {constraint!r} is not a number", field=FIELD
        ) from None
    if not math.isfinite(value):
        raise AboError(f"{FIELD}: {constraint!r} has a non-finite number", field=FIELD)
    return value


def parse_linear(text: Any, space: Space) -> LinearConstraint:
    """One constraint from its text, checked against ``space`` (``AboError`` naming the field
    and the reason: a bad form, an unknown, categorical or log-scaled parameter)."""
    if not isinstance(text, str):
        raise AboError(
            f"{FIELD}: expected a string such as 'x + 2*y <= 1', got {text!r}", field=FIELD
        )
    match = re.match(r"^(.*?)(<=|>=)(.*)$", text)
    if match is None or "<=" in match.group(3) or ">=" in match.group(3):
        raise AboError(
            f"{FIELD}: {text!r} needs exactly one '<=' or '>=' (such as 'x + 2*y <= 1')",
            field=FIELD,
        )
    left, op, right = match.groups()
    rhs = _number(right.strip(), text)
    # split the left side into signed terms
    compact = left.replace(" ", "")
    # split before each + or - that is not a number's exponent sign (1e-3)
    chunks = [c for c in re.split(r"(?<![0-9.][eE])(?=[+-])", compact) if c]
    pieces = [(c[0], c[1:]) if c[0] in "+-" else ("", c) for c in chunks]
    terms: dict[str, float] = {}
    if not pieces:
        raise AboError(f"{FIELD}: {text!r} has no parameter on its left side", field=FIELD)
    for sign, body in pieces:
        term = _TERM.match(body)
        if term is None:
            raise AboError(
                f"{FIELD}: cannot read the term {sign + body!r} of {text!r} (write '2*x' or 'x')",
                field=FIELD,
            )
        coef = _number(term.group(1), text) if term.group(1) else 1.0
        name = term.group(2)
        if name not in space:
            raise AboError(
                f"{FIELD}: {name!r} in {text!r} is not a parameter (space has {list(space)})",
                field=FIELD,
            )
        p = space[name]
        if not isinstance(p, Float | Int):
            raise AboError(f"{FIELD}: {name!r} in {text!r} is categorical", field=FIELD)
        if p.log:
            raise AboError(
                f"{FIELD}: {name!r} in {text!r} is log-scaled; a linear constraint needs "
                "parameters on a linear scale",
                field=FIELD,
            )
        terms[name] = terms.get(name, 0.0) + (-coef if sign == "-" else coef)
    return LinearConstraint(text.strip(), tuple(terms.items()), op, rhs)


def parse_all(texts: Any, space: Space) -> tuple[LinearConstraint, ...]:
    """Every constraint of a study (a list of strings; ``None`` or empty: none)."""
    if texts is None:
        return ()
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise AboError(f"{FIELD}: expected a list of strings, got {texts!r}", field=FIELD)
    return tuple(parse_linear(t, space) for t in texts)


def check_params(params: Mapping[str, Any], constraints: Sequence[LinearConstraint]) -> None:
    """``AboError`` naming the first constraint ``params`` break."""
    for c in constraints:
        if not c.holds(params):
            raise AboError(
                f"{FIELD}: the parameters break {c.text!r} (left side {c.lhs(params):.6g})",
                field=FIELD,
            )


PROBE = 4096  # Sobol points that must hold at least one feasible point


def feasible_mask(space: Space, X: Any, constraints: Sequence[LinearConstraint]) -> Any:
    """Booleans: which rows of the ``n x D`` unit-cube points ``X`` decode to parameters that
    satisfy every constraint."""
    import torch

    return torch.tensor(
        [all(c.holds(space.from_unit(x)) for c in constraints) for x in X], dtype=torch.bool
    )


def reachable(space: Space, constraints: Sequence[LinearConstraint], seed: int = 0) -> bool:
    """Whether some of ``PROBE`` scrambled Sobol points satisfies every constraint."""
    import torch
    from torch.quasirandom import SobolEngine

    X = space.round(
        SobolEngine(space.dim, scramble=True, seed=seed).draw(PROBE, dtype=torch.double)
    )
    return bool(feasible_mask(space, X, constraints).any())
