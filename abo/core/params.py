"""The parameter kinds of a search space, ``Float``, ``Int`` and ``Categorical``: their checks,
their JSON form and each one's own encoding into its columns of the unit cube."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

from abo.core.exceptions import SearchSpaceError
from abo.core.outcomes import shown
from abo.core.param_values import (
    GRID_TOL,
    MAX_INT,
    Choice,
    ParamValue,
    exact_decimal,
    is_finite,
    is_real,
    is_whole,
    kind_of,
    parse_when,
    plain,
    with_when,
)

if TYPE_CHECKING:
    from torch import Tensor


def _check_log(kind: str, log: Any) -> None:
    if not isinstance(log, bool):
        raise SearchSpaceError(f"{kind}: log must be true or false, got {shown(log)}")


def bin_encode(k: int, n: int) -> float:
    """The centre of bin ``k`` of ``n`` equal bins of ``[0, 1]``."""
    return (k + 0.5) / n


def bin_decode(u: float, n: int) -> int:
    """The bin of ``n`` equal bins of ``[0, 1]`` that holds ``u`` (clamped into the cube)."""
    return min(n - 1, max(0, round(min(1.0, max(0.0, u)) * n - 0.5)))


def snap(param: Float | Int, u: Tensor) -> Tensor:
    """Every coordinate of ``u`` moved to the centre of its bin (see ``Space.round``)."""
    values = [param.encode(param.decode([float(x)]))[0] for x in u.reshape(-1).tolist()]
    return u.new_tensor(values).reshape(u.shape)


@dataclass(frozen=True)
class Float:
    """A real parameter in ``[low, high]``; ``log=True`` models it on a log scale.

    ``step`` quantises it to ``low + k * step`` (``high - low`` must be a whole multiple of
    it; not with ``log=True``, as in Optuna): ``Float(0.0, 1.0, step=0.1)`` takes 11 values.

    Example:
        >>> Float(1e-5, 1e-1, log=True).high
        0.1
        >>> Float(0.0, 1.0, step=0.1).decode([0.29])
        0.3
    """

    low: float
    high: float
    log: bool = False
    step: float | None = None
    when: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "when", parse_when(self.when, "Float"))
        for field in ("low", "high"):
            v = getattr(self, field)
            if not is_real(v):
                raise SearchSpaceError(f"Float: {field} must be a real number, got {shown(v)}")
            if not is_finite(v):
                raise SearchSpaceError(f"Float: {field} must be finite, got {shown(v)}")
        if self.low >= self.high:
            raise SearchSpaceError(f"Float: low ({self.low}) must be below high ({self.high})")
        if not math.isfinite(float(self.high) - float(self.low)):
            raise SearchSpaceError(f"Float: the range [{self.low}, {self.high}] is too wide")
        _check_log("Float", self.log)
        if self.log and self.low <= 0:
            raise SearchSpaceError(f"Float: log scale needs low > 0, got low={self.low}")
        if self.step is not None:
            self._check_step()

    def _check_step(self) -> None:
        step = self.step
        if step is None or not is_real(step) or not is_finite(step) or not step > 0:
            raise SearchSpaceError(
                f"Float: step must be a positive finite number, got {shown(step)}"
            )
        if self.log:
            raise SearchSpaceError("Float: step cannot be combined with log=True (as in Optuna)")
        ratio = (exact_decimal(self.high) - exact_decimal(self.low)) / exact_decimal(step)
        n = int(ratio.to_integral_value())
        if n < 1 or abs(ratio - n) > Decimal(GRID_TOL) * n:
            raise SearchSpaceError(
                f"Float: high - low ({self.high} - {self.low}) must be a whole multiple of "
                f"step ({step}) within a relative {GRID_TOL:g}"
            )
        if n > MAX_INT:
            raise SearchSpaceError(
                f"Float: step ({step}) cuts [{self.low}, {self.high}] into more than 2**53 values"
            )

    @property
    def width(self) -> int:
        return 1

    @property
    def n_steps(self) -> int | None:
        """How many steps span ``[low, high]`` (``None`` without a step)."""
        if self.step is None:
            return None
        ratio = (exact_decimal(self.high) - exact_decimal(self.low)) / exact_decimal(self.step)
        return int(ratio.to_integral_value())

    def grid_value(self, k: int) -> float:
        """``low + k * step`` as the float nearest the decimal (``0.3``, not ``0.1 * 3``)."""
        n = self.n_steps
        assert n is not None and self.step is not None
        if k >= n:
            return float(self.high)
        value = float(exact_decimal(self.low) + max(0, k) * exact_decimal(self.step))
        return min(float(self.high), max(float(self.low), value))

    def _index(self, value: float) -> float:
        """Where ``value`` lies on the grid, in steps from ``low`` (not rounded)."""
        assert self.step is not None
        return (float(value) - float(self.low)) / float(self.step)

    def _lo_hi(self) -> tuple[float, float]:
        if self.log:
            return math.log(self.low), math.log(self.high)
        return float(self.low), float(self.high)

    def encode(self, value: ParamValue) -> list[float]:
        n = self.n_steps
        if n is not None:
            return [bin_encode(min(n, max(0, round(self._index(float(value))))), n + 1)]
        lo, hi = self._lo_hi()
        v = math.log(float(value)) if self.log else float(value)
        return [min(1.0, max(0.0, (v - lo) / (hi - lo)))]

    def decode(self, u: Sequence[float]) -> float:
        n = self.n_steps
        if n is not None:
            return self.grid_value(bin_decode(float(u[0]), n + 1))
        lo, hi = self._lo_hi()
        v = lo + min(1.0, max(0.0, float(u[0]))) * (hi - lo)
        value = math.exp(v) if self.log else v
        return min(float(self.high), max(float(self.low), value))

    def round(self, u: Tensor) -> Tensor:
        return u.clamp(0.0, 1.0) if self.step is None else snap(self, u)

    def check(self, name: str, value: Any) -> ParamValue:
        if not is_real(value):
            raise SearchSpaceError(f"{name}: expected a real number, got {shown(value)}")
        if not isinstance(value, numbers.Integral) and not math.isfinite(value):
            raise SearchSpaceError(f"{name}: must be finite, got {value!r}")
        if not self.low <= value <= self.high:
            raise SearchSpaceError(f"{name}: {shown(value)} is outside [{self.low}, {self.high}]")
        n = self.n_steps
        if n is None:
            return float(value)
        r = self._index(float(value))
        k = min(n, max(0, round(r)))
        if abs(r - k) > GRID_TOL * max(1, n):
            below = self.grid_value(math.floor(r))
            above = self.grid_value(min(n, math.floor(r) + 1))
            raise SearchSpaceError(
                f"{name}: {value!r} is not on the grid {self.low} + k * {self.step} "
                f"(the nearest values are {below} and {above})"
            )
        return self.grid_value(k)

    def to_json(self) -> dict[str, Any]:
        out = {"type": "float", "low": self.low, "high": self.high, "log": self.log}
        out = out if self.step is None else {**out, "step": self.step}
        return with_when(out, self.when)


@dataclass(frozen=True)
class Int:
    """An integer parameter in ``[low, high]`` (both included); ``log=True`` needs ``low >= 1``.

    Each integer ``k`` owns the bin ``[k - 0.5, k + 0.5]`` of its unit dimension (measured on
    the log scale when ``log=True``, so small integers get wider bins), so the model sees a
    continuous input and decoding rounds to the bin. ``step`` keeps every ``step``-th integer
    from ``low`` (``Int(0, 100, step=5)``: 0, 5, ..., 100; not with ``log=True``), each with an
    equal bin. Bounds must lie within ``+-2**53``.

    Example:
        >>> Int(1, 8).decode([0.99])
        8
        >>> Int(0, 100, step=5).decode([0.5])
        50
    """

    low: int
    high: int
    log: bool = False
    step: int = 1
    when: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "when", parse_when(self.when, "Int"))
        for field in ("low", "high", "step"):
            v = getattr(self, field)
            if not is_whole(v):
                raise SearchSpaceError(f"Int: {field} must be an integer, got {shown(v)}")
            if not -MAX_INT <= v <= MAX_INT:
                raise SearchSpaceError(
                    f"Int: {field} must lie within +-2**53 (+-{MAX_INT}), where every integer "
                    f"is an exact float, got {shown(v)}"
                )
            object.__setattr__(self, field, int(v))
        if self.low >= self.high:
            raise SearchSpaceError(f"Int: low ({self.low}) must be below high ({self.high})")
        _check_log("Int", self.log)
        if self.log and self.low < 1:
            raise SearchSpaceError(f"Int: log scale needs low >= 1, got low={self.low}")
        if self.step < 1:
            raise SearchSpaceError(f"Int: step must be a positive integer, got {self.step}")
        if self.step != 1 and self.log:
            raise SearchSpaceError("Int: step cannot be combined with log=True (as in Optuna)")
        if (self.high - self.low) % self.step:
            raise SearchSpaceError(
                f"Int: high - low ({self.high} - {self.low}) must be a whole multiple of "
                f"step ({self.step})"
            )

    @property
    def width(self) -> int:
        return 1

    def _lo_hi(self) -> tuple[float, float]:
        lo, hi = self.low - 0.5, self.high + 0.5
        return (math.log(lo), math.log(hi)) if self.log else (lo, hi)

    def encode(self, value: ParamValue) -> list[float]:
        if self.step != 1:
            n = (self.high - self.low) // self.step
            k = round((float(value) - self.low) / self.step)
            return [bin_encode(min(n, max(0, k)), n + 1)]
        lo, hi = self._lo_hi()
        v = math.log(float(value)) if self.log else float(value)
        return [(v - lo) / (hi - lo)]

    def decode(self, u: Sequence[float]) -> int:
        if self.step != 1:
            n = (self.high - self.low) // self.step
            return self.low + bin_decode(float(u[0]), n + 1) * self.step
        lo, hi = self._lo_hi()
        v = lo + min(1.0, max(0.0, float(u[0]))) * (hi - lo)
        value = math.exp(v) if self.log else v
        return int(min(self.high, max(self.low, round(value))))

    def round(self, u: Tensor) -> Tensor:
        return snap(self, u)

    def check(self, name: str, value: Any) -> ParamValue:
        if not is_whole(value):
            raise SearchSpaceError(f"{name}: expected an integer, got {shown(value)}")
        if not self.low <= value <= self.high:
            raise SearchSpaceError(f"{name}: {shown(value)} is outside [{self.low}, {self.high}]")
        value = int(value)
        off = (value - self.low) % self.step
        if off:
            raise SearchSpaceError(
                f"{name}: {value} is not on the grid {self.low} + k * {self.step} "
                f"(the nearest values are {value - off} and {value - off + self.step})"
            )
        return value

    def to_json(self) -> dict[str, Any]:
        out = {"type": "int", "low": self.low, "high": self.high, "log": self.log}
        out = out if self.step == 1 else {**out, "step": self.step}
        return with_when(out, self.when)


@dataclass(frozen=True)
class Categorical:
    """One of a fixed list of choices, modelled one-hot (never as an ordinal integer).

    Example:
        >>> Categorical(["sgd", "adam"]).decode([0.2, 0.7])
        'adam'
    """

    choices: tuple[Choice, ...]
    when: Any = None

    def __init__(self, choices: Sequence[Choice], when: Any = None) -> None:
        object.__setattr__(self, "when", parse_when(when, "Categorical"))
        if isinstance(choices, str) or not isinstance(choices, Sequence):
            raise SearchSpaceError("Categorical: choices must be a list")
        choices = tuple(choices)
        if not choices:
            raise SearchSpaceError("Categorical: choices must not be empty")
        for c in choices:
            if kind_of(c) is None:
                raise SearchSpaceError(
                    f"Categorical: choices must be str, int, float or bool, got {c!r}"
                )
            if kind_of(c) == "float" and not math.isfinite(cast(float, c)):  # a real, per kind_of
                raise SearchSpaceError(f"Categorical: choices must be finite, got {c!r}")
            if kind_of(c) == "int" and not -MAX_INT <= int(cast(int, c)) <= MAX_INT:
                raise SearchSpaceError(
                    f"Categorical: an integer choice must lie within +-2**53 (+-{MAX_INT}), "
                    f"where JSON clients read it exactly, got {shown(c)}"
                )
        choices = tuple(plain(c) for c in choices)
        keys = [(type(c), c) for c in choices]
        if len(set(keys)) != len(keys):
            raise SearchSpaceError(f"Categorical: choices must be distinct, got {list(choices)}")
        object.__setattr__(self, "choices", choices)

    def __eq__(self, other: object) -> bool:
        # typed: choices 1, 1.0 and True are different (they decode to different values)
        return (
            isinstance(other, Categorical)
            and self._typed() == other._typed()
            and self.when == other.when
        )

    def __hash__(self) -> int:
        return hash((self._typed(), self.when))

    def _typed(self) -> tuple[tuple[str, Choice], ...]:
        return tuple((type(c).__name__, c) for c in self.choices)

    @property
    def width(self) -> int:
        return len(self.choices)

    def _index(self, value: Any) -> int | None:
        kind = kind_of(value)
        for i, c in enumerate(self.choices):
            if kind_of(c) == kind and c == value:
                return i
        return None

    def encode(self, value: ParamValue) -> list[float]:
        idx = self._index(value)
        return [1.0 if i == idx else 0.0 for i in range(len(self.choices))]

    def decode(self, u: Sequence[float]) -> Choice:
        values = [float(x) for x in u]
        return self.choices[max(range(len(values)), key=values.__getitem__)]

    def round(self, u: Tensor) -> Tensor:
        out = u.new_zeros(u.shape)
        out[..., u.argmax(dim=-1)] = 1.0
        return out

    def check(self, name: str, value: Any) -> ParamValue:
        idx = self._index(value)
        if idx is None:
            raise SearchSpaceError(f"{name}: {value!r} is not one of {list(self.choices)}")
        return self.choices[idx]

    def to_json(self) -> dict[str, Any]:
        return with_when({"type": "categorical", "choices": list(self.choices)}, self.when)


Parameter = Float | Int | Categorical
