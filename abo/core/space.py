"""Search spaces: Float, Int and Categorical parameters, and their unit-cube encoding.

The model and every strategy work in the unit cube ``[0, 1]^D``. A ``Float`` or ``Int`` takes one
dimension (log-scaled when ``log=True``); a ``Categorical`` with ``c`` choices takes ``c``
dimensions, one-hot, so choices are never treated as ordered. A ``step`` quantises a ``Float``
or an ``Int`` to the grid ``low + k * step``: its dimension is cut into one equal bin per grid
value, as an ``Int``'s is cut into one bin per integer. ``Space.round`` snaps a relaxed point of
the cube onto a point that encodes valid parameters (bins at their centres, categorical blocks
one-hot at their argmax), and ``from_unit`` decodes it exactly: an ``Int`` is always an ``int``
within its bounds, a stepped value is always on its grid (and printed without float noise:
``0.3``, not ``0.30000000000000004``), and a ``Categorical`` is always one of its choices.

Bounds must be ones the encoding represents exactly: an ``Int``'s within ``+-2**53`` (beyond it
floats skip integers), a ``Float``'s finite and with a finite width. Torch is imported only by
the methods that make tensors, so reading a space (``abo studies``) does not load it.

Example:
    >>> space = Space({"lr": Float(1e-4, 1e-1, log=True), "opt": Categorical(["sgd", "adam"])})
    >>> space.dim
    3
    >>> space.from_unit(space.to_unit({"lr": 1e-2, "opt": "adam"}))["opt"]
    'adam'
    >>> Space({"x": Float(0.0, 1.0, step=0.1)}).validate({"x": 0.1 + 0.2})
    {'x': 0.3}
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from abo.core import conditions, encoding
from abo.core.encoding import INACTIVE
from abo.core.exceptions import SearchSpaceError
from abo.core.outcomes import shown
from abo.core.param_values import GRID_TOL, MAX_INT, Choice, Condition, ParamValue
from abo.core.params import Categorical, Float, Int, Parameter

if TYPE_CHECKING:
    from torch import Tensor

__all__ = [
    "GRID_TOL",
    "INACTIVE",
    "MAX_INT",
    "Categorical",
    "Choice",
    "Condition",
    "Float",
    "Int",
    "ParamValue",
    "Parameter",
    "Space",
    "parameter_from_json",
]


_KEYS: dict[str, tuple[str, ...]] = {
    "float": ("type", "low", "high", "log", "step", "when"),
    "int": ("type", "low", "high", "log", "step", "when"),
    "categorical": ("type", "choices", "when"),
}


def parameter_from_json(data: Any, name: str = "parameter") -> Parameter:
    """Rebuild a parameter from ``Parameter.to_json()`` output (or a study file's table).

    Raises:
        SearchSpaceError: ``"{name}: reason"`` for anything malformed: not an object, an unknown
            type or key, a missing or mistyped field, bounds the encoding cannot represent.
    """
    if not isinstance(data, Mapping):
        raise SearchSpaceError(
            f'{name}: expected an object such as {{"type": "float", "low": 0, "high": 1}}, '
            f"got {shown(data)}"
        )
    kind = data.get("type")
    if not isinstance(kind, str) or kind not in _KEYS:
        raise SearchSpaceError(f"{name}: unknown type {shown(kind)} (float, int or categorical)")
    unknown = sorted(str(key) for key in data if key not in _KEYS[kind])
    if unknown:
        raise SearchSpaceError(
            f"{name}: unknown key {unknown[0]!r} for a {kind} parameter "
            f"(keys: {', '.join(_KEYS[kind])})"
        )
    for key in ("choices",) if kind == "categorical" else ("low", "high"):
        if key not in data:
            raise SearchSpaceError(f"{name}: {kind} is missing {key!r}")
    try:
        when = data.get("when")
        if kind == "categorical":
            return Categorical(data["choices"], when=when)
        log = False if data.get("log") is None else data["log"]
        if kind == "float":
            return Float(data["low"], data["high"], log=log, step=data.get("step"), when=when)
        step = 1 if data.get("step") is None else data["step"]
        return Int(data["low"], data["high"], log=log, step=step, when=when)
    except SearchSpaceError as exc:
        reason = str(exc).split(": ", 1)[-1]  # "Float: low must be ..." -> "low must be ..."
        raise SearchSpaceError(f"{name}: {reason}") from None


class Space(Mapping[str, Parameter]):
    """An ordered mapping of parameter names to parameters, with the unit-cube encoding.

    Example:
        >>> space = Space({"x": Float(0, 1), "n": Int(1, 4)})
        >>> sorted(space.sample(2, seed=0)[0])
        ['n', 'x']
    """

    def __init__(self, params: Mapping[str, Parameter]) -> None:
        if not isinstance(params, Mapping) or not params:
            raise SearchSpaceError("space: needs at least one parameter")
        for name, p in params.items():
            if not isinstance(name, str) or not name:
                raise SearchSpaceError(f"space: parameter names must be strings, got {name!r}")
            if not isinstance(p, Float | Int | Categorical):
                raise SearchSpaceError(
                    f"{name}: expected abo.Float, abo.Int or abo.Categorical, got {p!r}"
                )
        self._params: dict[str, Parameter] = dict(params)
        self._slices: dict[str, slice] = {}
        start = 0
        for name, p in self._params.items():
            self._slices[name] = slice(start, start + p.width)
            start += p.width
        self.dim = start
        self._order = conditions.parents_first(self._params)
        self.conditional = any(p.when for p in self._params.values())

    def active(self, params: Mapping[str, Any]) -> dict[str, bool]:
        """Whether each parameter is active given the values of ``params`` (a parameter is
        active when every parent is active and takes one of the values its ``when`` lists)."""
        return conditions.active(self._params, self._order, params)

    def max_active(self) -> int:
        """The most parameters one configuration has (``len(self)`` without conditions): what
        the initial design's size scales with. Exact: over every combination of the parents'
        values that a condition names (and one value none names), up to 4096 of them."""
        if not self.conditional:
            return len(self)
        cached = self.__dict__.get("_max_active")
        if cached is None:
            cached = self.__dict__["_max_active"] = conditions.count_max_active(
                self._params, self._order
            )
        return int(cached)

    def condition_text(self, name: str) -> str:
        """``name``'s condition in words (``"optimizer is 'sgd'"``), for error messages."""
        return conditions.condition_text(self._params[name])

    def __getitem__(self, name: str) -> Parameter:
        return self._params[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._params)

    def __len__(self) -> int:
        return len(self._params)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Space) and self._params == other._params

    def __hash__(self) -> int:
        return hash(frozenset(self._params.items()))

    def __repr__(self) -> str:
        return f"Space({self._params!r})"

    @property
    def bounds(self) -> Tensor:
        """``2 x D`` bounds of the unit cube, as BoTorch expects."""
        import torch

        return torch.stack([torch.zeros(self.dim), torch.ones(self.dim)]).double()

    def validate(self, params: Any) -> dict[str, ParamValue]:
        """Check a parameter dict against the space; return it normalised (ints as int, ...).

        Raises:
            SearchSpaceError: naming the first missing, unknown, mistyped or out-of-bounds field.
        """
        if not isinstance(params, Mapping):
            raise SearchSpaceError(f"params: expected a dict, got {type(params).__name__}")
        unknown = sorted(set(map(str, params)) - set(self._params))
        if unknown:
            raise SearchSpaceError(f"{unknown[0]}: unknown parameter (space has {list(self)})")
        if not self.conditional:
            missing = [n for n in self._params if n not in params]
            if missing:
                raise SearchSpaceError(f"{missing[0]}: missing parameter")
            return {n: p.check(n, params[n]) for n, p in self._params.items()}
        checked: dict[str, ParamValue] = {}
        active: dict[str, bool] = {}
        for name in self._order:  # parents first: a child's activity needs their checked values
            p = self._params[name]
            active[name] = all(
                active[parent] and conditions.holds(self._params[parent], checked[parent], values)
                for parent, values in p.when
            )
            if active[name] and name not in params:
                raise SearchSpaceError(
                    f"{name}: missing parameter (active because {self.condition_text(name)})"
                )
            if not active[name] and name in params:
                raise SearchSpaceError(
                    f"{name}: inactive here, so it must not be given (it is active only when "
                    f"{self.condition_text(name)})"
                )
            if active[name]:
                checked[name] = p.check(name, params[name])
        return {n: checked[n] for n in self._params if n in checked}

    def to_unit(self, params: Mapping[str, ParamValue]) -> Tensor:
        """Encode one parameter dict as a ``D`` tensor in the unit cube."""
        return encoding.to_unit(self._params, params)

    def to_unit_batch(self, params: Sequence[Mapping[str, ParamValue]]) -> Tensor:
        """Encode many parameter dicts as an ``n x D`` tensor."""
        import torch

        if not params:
            return torch.zeros(0, self.dim, dtype=torch.double)
        return torch.stack([self.to_unit(p) for p in params])

    def from_unit(self, x: Tensor | Sequence[float]) -> dict[str, ParamValue]:
        """Decode a ``D`` point of the unit cube into a parameter dict (always valid)."""
        values = [float(v) for v in (x.tolist() if hasattr(x, "tolist") else x)]
        if len(values) != self.dim:
            raise SearchSpaceError(f"x: expected {self.dim} coordinates, got {len(values)}")
        decoded = {n: p.decode(values[self._slices[n]]) for n, p in self._params.items()}
        if not self.conditional:
            return decoded
        active = self.active(decoded)
        return {n: v for n, v in decoded.items() if active[n]}

    def round(self, X: Tensor) -> Tensor:
        """Snap ``n x D`` relaxed points onto encodings of valid parameters (on the CPU, the
        result on ``X``'s device)."""
        order = self._order if self.conditional else None
        return encoding.round_points(self._params, self._slices, order, X.cpu()).to(X.device)

    def neighbours(self, x: Tensor) -> Tensor:
        """The valid points one discrete move from the rounded point ``x`` (``D``), ``m x D``
        (``abo.core.encoding.neighbours``): where a local search of the acquisition goes
        once the relaxed optimum is rounded."""
        return self.neighbours_of(x.unsqueeze(0))[0]

    def neighbours_of(self, X: Tensor) -> tuple[Tensor, Tensor]:
        """The neighbours of each rounded point of ``X`` (``n x D``) at once: ``m x D`` points
        and the row of ``X`` each moves (``abo.core.encoding.neighbours``; found on the CPU,
        both on ``X``'s device)."""
        order = self._order if self.conditional else None
        Y, owner = encoding.neighbours(self._params, self._slices, order, X.cpu())
        return Y.to(X.device), owner.to(X.device)

    @property
    def is_continuous(self) -> bool:
        """True when every parameter is a ``Float`` without a step (no rounding needed)."""
        return all(isinstance(p, Float) and p.step is None for p in self._params.values())

    def sample(self, n: int, seed: int | None = None) -> list[dict[str, ParamValue]]:
        """Draw ``n`` uniformly random parameter dicts (uniform in the unit encoding)."""
        import torch

        gen = torch.Generator().manual_seed(0 if seed is None else seed)
        X = torch.rand(n, self.dim, generator=gen, dtype=torch.double)
        return [self.from_unit(x) for x in self.round(X)]

    def to_json(self) -> dict[str, Any]:
        return {name: p.to_json() for name, p in self._params.items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Space:
        """Rebuild a space from ``to_json()`` output; errors name the parameter (``"n: ..."``)."""
        if not isinstance(data, Mapping):
            raise SearchSpaceError(f"space: expected an object, got {type(data).__name__}")
        for name in data:
            if not isinstance(name, str) or not name:
                raise SearchSpaceError(f"space: parameter names must be strings, got {name!r}")
        return cls({name: parameter_from_json(p, name) for name, p in data.items()})
