"""Search spaces: Float, Int and Categorical parameters, and their unit-cube encoding.

The model and every strategy work in the unit cube ``[0, 1]^D``. A ``Float`` or ``Int`` takes one
dimension (log-scaled when ``log=True``); a ``Categorical`` with ``c`` choices takes ``c``
dimensions, one-hot, so choices are never treated as ordered. ``Space.round`` snaps a relaxed
point of the cube onto a point that encodes valid parameters (integer bins at their centres,
categorical blocks one-hot at their argmax), and ``from_unit`` decodes it exactly: an ``Int`` is
always an ``int`` within its bounds and a ``Categorical`` always one of its choices.

Example:
    >>> space = Space({"lr": Float(1e-4, 1e-1, log=True), "opt": Categorical(["sgd", "adam"])})
    >>> space.dim
    3
    >>> space.from_unit(space.to_unit({"lr": 1e-2, "opt": "adam"}))["opt"]
    'adam'
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from abo.exceptions import SearchSpaceError

Choice = str | int | float | bool
ParamValue = float | int | str | bool


def _is_real(value: Any) -> bool:
    # numbers.Real admits numpy scalars (np.int64, np.float32), which users pass all the time
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_whole(value: Any) -> bool:
    """True for a real that is a whole number (exact for ints of any size, no overflow)."""
    if isinstance(value, numbers.Integral):
        return not isinstance(value, bool)
    return _is_real(value) and math.isfinite(value) and float(value).is_integer()


def _kind(value: Any) -> str | None:
    """What a categorical choice is, ignoring numpy's scalar types: bool, int, float or str."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, numbers.Integral):
        return "int"
    if isinstance(value, numbers.Real):
        return "float"
    if isinstance(value, str):
        return "str"
    return None


def _plain(value: Any) -> Choice:
    """A choice as the plain Python value JSON stores (np.int64(3) -> 3)."""
    return {"bool": bool, "int": int, "float": float, "str": str}[_kind(value) or "str"](value)


@dataclass(frozen=True)
class Float:
    """A real parameter in ``[low, high]``; ``log=True`` models it on a log scale.

    Example:
        >>> Float(1e-5, 1e-1, log=True).high
        0.1
    """

    low: float
    high: float
    log: bool = False

    def __post_init__(self) -> None:
        if not (_is_real(self.low) and _is_real(self.high)):
            raise SearchSpaceError("Float: low and high must be real numbers")
        try:
            finite = math.isfinite(self.low) and math.isfinite(self.high)
        except OverflowError:  # an int too large for a float
            finite = False
        if not finite:
            raise SearchSpaceError("Float: low and high must be finite")
        if self.low >= self.high:
            raise SearchSpaceError(f"Float: low ({self.low}) must be below high ({self.high})")
        if not math.isfinite(float(self.high) - float(self.low)):
            raise SearchSpaceError(f"Float: the range [{self.low}, {self.high}] is too wide")
        if self.log and self.low <= 0:
            raise SearchSpaceError(f"Float: log scale needs low > 0, got low={self.low}")

    @property
    def width(self) -> int:
        return 1

    def _lo_hi(self) -> tuple[float, float]:
        if self.log:
            return math.log(self.low), math.log(self.high)
        return float(self.low), float(self.high)

    def encode(self, value: ParamValue) -> list[float]:
        lo, hi = self._lo_hi()
        v = math.log(float(value)) if self.log else float(value)
        return [min(1.0, max(0.0, (v - lo) / (hi - lo)))]

    def decode(self, u: Sequence[float]) -> float:
        lo, hi = self._lo_hi()
        v = lo + min(1.0, max(0.0, float(u[0]))) * (hi - lo)
        value = math.exp(v) if self.log else v
        return min(float(self.high), max(float(self.low), value))

    def round(self, u: Tensor) -> Tensor:
        return u.clamp(0.0, 1.0)

    def check(self, name: str, value: Any) -> ParamValue:
        if not _is_real(value):
            raise SearchSpaceError(f"{name}: expected a real number, got {value!r}")
        if not isinstance(value, numbers.Integral) and not math.isfinite(value):
            raise SearchSpaceError(f"{name}: must be finite, got {value!r}")
        if not self.low <= value <= self.high:
            raise SearchSpaceError(f"{name}: {value!r} is outside [{self.low}, {self.high}]")
        return float(value)

    def to_json(self) -> dict[str, Any]:
        return {"type": "float", "low": self.low, "high": self.high, "log": self.log}


@dataclass(frozen=True)
class Int:
    """An integer parameter in ``[low, high]`` (both included); ``log=True`` needs ``low >= 1``.

    Each integer ``k`` owns the bin ``[k - 0.5, k + 0.5]`` of its unit dimension (measured on
    the log scale when ``log=True``, so small integers get wider bins), so the model sees a
    continuous input and decoding rounds to the bin.

    Example:
        >>> Int(1, 8).decode([0.99])
        8
    """

    low: int
    high: int
    log: bool = False

    def __post_init__(self) -> None:
        for field in ("low", "high"):
            v = getattr(self, field)
            if not _is_whole(v):
                raise SearchSpaceError(f"Int: {field} must be an integer, got {v!r}")
            object.__setattr__(self, field, int(v))
        if self.low >= self.high:
            raise SearchSpaceError(f"Int: low ({self.low}) must be below high ({self.high})")
        if self.log and self.low < 1:
            raise SearchSpaceError(f"Int: log scale needs low >= 1, got low={self.low}")

    @property
    def width(self) -> int:
        return 1

    def _lo_hi(self) -> tuple[float, float]:
        lo, hi = self.low - 0.5, self.high + 0.5
        return (math.log(lo), math.log(hi)) if self.log else (lo, hi)

    def encode(self, value: ParamValue) -> list[float]:
        lo, hi = self._lo_hi()
        v = math.log(float(value)) if self.log else float(value)
        return [(v - lo) / (hi - lo)]

    def decode(self, u: Sequence[float]) -> int:
        lo, hi = self._lo_hi()
        v = lo + min(1.0, max(0.0, float(u[0]))) * (hi - lo)
        value = math.exp(v) if self.log else v
        return int(min(self.high, max(self.low, round(value))))

    def round(self, u: Tensor) -> Tensor:
        return torch.tensor(
            [self.encode(self.decode([float(x)]))[0] for x in u.reshape(-1)],
            dtype=u.dtype,
        ).reshape(u.shape)

    def check(self, name: str, value: Any) -> ParamValue:
        if not _is_whole(value):
            raise SearchSpaceError(f"{name}: expected an integer, got {value!r}")
        if not self.low <= value <= self.high:
            raise SearchSpaceError(f"{name}: {value!r} is outside [{self.low}, {self.high}]")
        return int(value)

    def to_json(self) -> dict[str, Any]:
        return {"type": "int", "low": self.low, "high": self.high, "log": self.log}


@dataclass(frozen=True)
class Categorical:
    """One of a fixed list of choices, modelled one-hot (never as an ordinal integer).

    Example:
        >>> Categorical(["sgd", "adam"]).decode([0.2, 0.7])
        'adam'
    """

    choices: tuple[Choice, ...]

    def __init__(self, choices: Sequence[Choice]) -> None:
        if isinstance(choices, str) or not isinstance(choices, Sequence):
            raise SearchSpaceError("Categorical: choices must be a list")
        choices = tuple(choices)
        if not choices:
            raise SearchSpaceError("Categorical: choices must not be empty")
        for c in choices:
            if _kind(c) is None:
                raise SearchSpaceError(
                    f"Categorical: choices must be str, int, float or bool, got {c!r}"
                )
            if _kind(c) == "float" and not math.isfinite(c):
                raise SearchSpaceError(f"Categorical: choices must be finite, got {c!r}")
        choices = tuple(_plain(c) for c in choices)
        keys = [(type(c), c) for c in choices]
        if len(set(keys)) != len(keys):
            raise SearchSpaceError(f"Categorical: choices must be distinct, got {list(choices)}")
        object.__setattr__(self, "choices", choices)

    def __eq__(self, other: object) -> bool:
        # typed: choices 1, 1.0 and True are different (they decode to different values)
        return isinstance(other, Categorical) and self._typed() == other._typed()

    def __hash__(self) -> int:
        return hash(self._typed())

    def _typed(self) -> tuple[tuple[str, Choice], ...]:
        return tuple((type(c).__name__, c) for c in self.choices)

    @property
    def width(self) -> int:
        return len(self.choices)

    def _index(self, value: Any) -> int | None:
        kind = _kind(value)
        for i, c in enumerate(self.choices):
            if _kind(c) == kind and c == value:
                return i
        return None

    def encode(self, value: ParamValue) -> list[float]:
        idx = self._index(value)
        return [1.0 if i == idx else 0.0 for i in range(len(self.choices))]

    def decode(self, u: Sequence[float]) -> Choice:
        values = [float(x) for x in u]
        return self.choices[max(range(len(values)), key=values.__getitem__)]

    def round(self, u: Tensor) -> Tensor:
        out = torch.zeros_like(u)
        out[..., u.argmax(dim=-1)] = 1.0
        return out

    def check(self, name: str, value: Any) -> ParamValue:
        idx = self._index(value)
        if idx is None:
            raise SearchSpaceError(f"{name}: {value!r} is not one of {list(self.choices)}")
        return self.choices[idx]

    def to_json(self) -> dict[str, Any]:
        return {"type": "categorical", "choices": list(self.choices)}


Parameter = Float | Int | Categorical


def parameter_from_json(data: Mapping[str, Any]) -> Parameter:
    """Rebuild a parameter from ``Parameter.to_json()`` output."""
    if not isinstance(data, Mapping):
        raise SearchSpaceError(f"parameter: expected an object, got {data!r}")
    kind = data.get("type")
    try:
        if kind == "float":
            return Float(data["low"], data["high"], log=bool(data.get("log", False)))
        if kind == "int":
            return Int(data["low"], data["high"], log=bool(data.get("log", False)))
        if kind == "categorical":
            return Categorical(data["choices"])
    except KeyError as exc:
        raise SearchSpaceError(f"parameter: {kind} is missing {exc.args[0]!r}") from None
    raise SearchSpaceError(f"parameter: unknown type {kind!r} (float, int or categorical)")


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
        missing = [n for n in self._params if n not in params]
        if missing:
            raise SearchSpaceError(f"{missing[0]}: missing parameter")
        return {n: p.check(n, params[n]) for n, p in self._params.items()}

    def to_unit(self, params: Mapping[str, ParamValue]) -> Tensor:
        """Encode one parameter dict as a ``D`` tensor in the unit cube."""
        out: list[float] = []
        for name, p in self._params.items():
            out.extend(p.encode(params[name]))
        return torch.tensor(out, dtype=torch.double)

    def to_unit_batch(self, params: Sequence[Mapping[str, ParamValue]]) -> Tensor:
        """Encode many parameter dicts as an ``n x D`` tensor."""
        if not params:
            return torch.zeros(0, self.dim, dtype=torch.double)
        return torch.stack([self.to_unit(p) for p in params])

    def from_unit(self, x: Tensor | Sequence[float]) -> dict[str, ParamValue]:
        """Decode a ``D`` point of the unit cube into a parameter dict (always valid)."""
        values = [float(v) for v in (x.tolist() if isinstance(x, Tensor) else x)]
        if len(values) != self.dim:
            raise SearchSpaceError(f"x: expected {self.dim} coordinates, got {len(values)}")
        return {n: p.decode(values[self._slices[n]]) for n, p in self._params.items()}

    def round(self, X: Tensor) -> Tensor:
        """Snap ``n x D`` relaxed points onto encodings of valid parameters."""
        X = X.detach().to(torch.double).clamp(0.0, 1.0).clone()
        for name, p in self._params.items():
            s = self._slices[name]
            for i in range(X.shape[0]):
                X[i, s] = p.round(X[i, s])
        return X

    @property
    def is_continuous(self) -> bool:
        """True when every parameter is a ``Float`` (no rounding needed)."""
        return all(isinstance(p, Float) for p in self._params.values())

    def sample(self, n: int, seed: int | None = None) -> list[dict[str, ParamValue]]:
        """Draw ``n`` uniformly random parameter dicts (uniform in the unit encoding)."""
        gen = torch.Generator().manual_seed(0 if seed is None else seed)
        X = torch.rand(n, self.dim, generator=gen, dtype=torch.double)
        return [self.from_unit(x) for x in self.round(X)]

    def to_json(self) -> dict[str, Any]:
        return {name: p.to_json() for name, p in self._params.items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Space:
        if not isinstance(data, Mapping):
            raise SearchSpaceError(f"space: expected an object, got {type(data).__name__}")
        return cls({name: parameter_from_json(p) for name, p in data.items()})
