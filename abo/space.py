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

import math
import numbers
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

from abo.exceptions import SearchSpaceError
from abo.outcomes import shown

if TYPE_CHECKING:
    from torch import Tensor

Choice = str | int | float | bool
ParamValue = float | int | str | bool

MAX_INT = 2**53
"""Largest integer bound (in absolute value): every integer up to it is an exact float."""
GRID_TOL = 1e-9
"""Relative tolerance of "a whole multiple of step" and of "on the grid"."""


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


def _is_finite(value: Any) -> bool:
    """True for a real that is finite as a float (an int too large for a float is not)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


_show = shown  # repr(value), shortened for huge integers and long objects (error messages)


def _decimal(value: float | int) -> Decimal:
    """The decimal a user wrote for ``value`` (``0.1`` -> ``Decimal('0.1')``, not its binary)."""
    if isinstance(value, numbers.Integral):
        return Decimal(int(value))
    return Decimal(repr(float(value)))  # float(): numpy's repr is "np.float64(0.1)"


def _check_log(kind: str, log: Any) -> None:
    if not isinstance(log, bool):
        raise SearchSpaceError(f"{kind}: log must be true or false, got {_show(log)}")


def _bin_encode(k: int, n: int) -> float:
    """The centre of bin ``k`` of ``n`` equal bins of ``[0, 1]``."""
    return (k + 0.5) / n


def _bin_decode(u: float, n: int) -> int:
    """The bin of ``n`` equal bins of ``[0, 1]`` that holds ``u`` (clamped into the cube)."""
    return min(n - 1, max(0, round(min(1.0, max(0.0, u)) * n - 0.5)))


def _snap(param: Float | Int, u: Tensor) -> Tensor:
    """Every coordinate of ``u`` moved to the centre of its bin (see ``Space.round``)."""
    values = [param.encode(param.decode([float(x)]))[0] for x in u.reshape(-1).tolist()]
    return u.new_tensor(values).reshape(u.shape)


Condition = tuple[tuple[str, tuple[Choice, ...]], ...]
"""A parameter's ``when``, normalised: ``((parent, allowed values), ...)``, all must hold."""

INACTIVE = 0.5
"""The unit-cube coordinate of an inactive parameter (every column of its block): one fixed
value, so two configurations without it do not differ in it, in the middle of the cube, so no
active value is more than half the cube from it (``Space.to_unit``)."""


def _when(when: Any, kind: str) -> Condition:
    """``when`` as given (``{parent: value or [values]}``) in its normalised form."""
    if when is None or when == ():
        return ()
    if isinstance(when, tuple) and all(isinstance(c, tuple) and len(c) == 2 for c in when):
        when = {parent: list(values) for parent, values in when}  # already normalised
    if not isinstance(when, Mapping) or not when:
        raise SearchSpaceError(
            f"{kind}: when must map parent parameters to their values, such as "
            f"{{'optimizer': 'sgd'}}, got {_show(when)}"
        )
    out = []
    for parent, values in when.items():
        if not isinstance(parent, str) or not parent:
            raise SearchSpaceError(f"{kind}: when's keys must be parameter names, got {parent!r}")
        listed = list(values) if isinstance(values, list | tuple) else [values]
        if not listed:
            raise SearchSpaceError(f"{kind}: when[{parent!r}] lists no value")
        for v in listed:
            if _kind(v) is None:
                raise SearchSpaceError(
                    f"{kind}: when[{parent!r}] values must be str, int, float or bool, "
                    f"got {_show(v)}"
                )
        out.append((parent, tuple(_plain(v) for v in listed)))
    return tuple(out)


def _with_when(out: dict[str, Any], when: Condition) -> dict[str, Any]:
    """A parameter's JSON form with its condition (left out when it has none)."""
    if when:
        out["when"] = {parent: list(values) for parent, values in when}
    return out


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
        object.__setattr__(self, "when", _when(self.when, "Float"))
        for field in ("low", "high"):
            v = getattr(self, field)
            if not _is_real(v):
                raise SearchSpaceError(f"Float: {field} must be a real number, got {_show(v)}")
            if not _is_finite(v):
                raise SearchSpaceError(f"Float: {field} must be finite, got {_show(v)}")
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
        if step is None or not _is_real(step) or not _is_finite(step) or not step > 0:
            raise SearchSpaceError(
                f"Float: step must be a positive finite number, got {_show(step)}"
            )
        if self.log:
            raise SearchSpaceError("Float: step cannot be combined with log=True (as in Optuna)")
        ratio = (_decimal(self.high) - _decimal(self.low)) / _decimal(step)
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
        ratio = (_decimal(self.high) - _decimal(self.low)) / _decimal(self.step)
        return int(ratio.to_integral_value())

    def grid_value(self, k: int) -> float:
        """``low + k * step`` as the float nearest the decimal (``0.3``, not ``0.1 * 3``)."""
        n = self.n_steps
        assert n is not None and self.step is not None
        if k >= n:
            return float(self.high)
        value = float(_decimal(self.low) + max(0, k) * _decimal(self.step))
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
            return [_bin_encode(min(n, max(0, round(self._index(float(value))))), n + 1)]
        lo, hi = self._lo_hi()
        v = math.log(float(value)) if self.log else float(value)
        return [min(1.0, max(0.0, (v - lo) / (hi - lo)))]

    def decode(self, u: Sequence[float]) -> float:
        n = self.n_steps
        if n is not None:
            return self.grid_value(_bin_decode(float(u[0]), n + 1))
        lo, hi = self._lo_hi()
        v = lo + min(1.0, max(0.0, float(u[0]))) * (hi - lo)
        value = math.exp(v) if self.log else v
        return min(float(self.high), max(float(self.low), value))

    def round(self, u: Tensor) -> Tensor:
        return u.clamp(0.0, 1.0) if self.step is None else _snap(self, u)

    def check(self, name: str, value: Any) -> ParamValue:
        if not _is_real(value):
            raise SearchSpaceError(f"{name}: expected a real number, got {_show(value)}")
        if not isinstance(value, numbers.Integral) and not math.isfinite(value):
            raise SearchSpaceError(f"{name}: must be finite, got {value!r}")
        if not self.low <= value <= self.high:
            raise SearchSpaceError(f"{name}: {_show(value)} is outside [{self.low}, {self.high}]")
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
        return _with_when(out, self.when)


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
        object.__setattr__(self, "when", _when(self.when, "Int"))
        for field in ("low", "high", "step"):
            v = getattr(self, field)
            if not _is_whole(v):
                raise SearchSpaceError(f"Int: {field} must be an integer, got {_show(v)}")
            if not -MAX_INT <= v <= MAX_INT:
                raise SearchSpaceError(
                    f"Int: {field} must lie within +-2**53 (+-{MAX_INT}), where every integer "
                    f"is an exact float, got {_show(v)}"
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
            return [_bin_encode(min(n, max(0, k)), n + 1)]
        lo, hi = self._lo_hi()
        v = math.log(float(value)) if self.log else float(value)
        return [(v - lo) / (hi - lo)]

    def decode(self, u: Sequence[float]) -> int:
        if self.step != 1:
            n = (self.high - self.low) // self.step
            return self.low + _bin_decode(float(u[0]), n + 1) * self.step
        lo, hi = self._lo_hi()
        v = lo + min(1.0, max(0.0, float(u[0]))) * (hi - lo)
        value = math.exp(v) if self.log else v
        return int(min(self.high, max(self.low, round(value))))

    def round(self, u: Tensor) -> Tensor:
        return _snap(self, u)

    def check(self, name: str, value: Any) -> ParamValue:
        if not _is_whole(value):
            raise SearchSpaceError(f"{name}: expected an integer, got {_show(value)}")
        if not self.low <= value <= self.high:
            raise SearchSpaceError(f"{name}: {_show(value)} is outside [{self.low}, {self.high}]")
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
        return _with_when(out, self.when)


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
        object.__setattr__(self, "when", _when(when, "Categorical"))
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
            if _kind(c) == "float" and not math.isfinite(cast(float, c)):  # a real, per _kind
                raise SearchSpaceError(f"Categorical: choices must be finite, got {c!r}")
            if _kind(c) == "int" and not -MAX_INT <= int(cast(int, c)) <= MAX_INT:
                raise SearchSpaceError(
                    f"Categorical: an integer choice must lie within +-2**53 (+-{MAX_INT}), "
                    f"where JSON clients read it exactly, got {_show(c)}"
                )
        choices = tuple(_plain(c) for c in choices)
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
        out = u.new_zeros(u.shape)
        out[..., u.argmax(dim=-1)] = 1.0
        return out

    def check(self, name: str, value: Any) -> ParamValue:
        idx = self._index(value)
        if idx is None:
            raise SearchSpaceError(f"{name}: {value!r} is not one of {list(self.choices)}")
        return self.choices[idx]

    def to_json(self) -> dict[str, Any]:
        return _with_when({"type": "categorical", "choices": list(self.choices)}, self.when)


Parameter = Float | Int | Categorical


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
            f"got {_show(data)}"
        )
    kind = data.get("type")
    if not isinstance(kind, str) or kind not in _KEYS:
        raise SearchSpaceError(f"{name}: unknown type {_show(kind)} (float, int or categorical)")
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
        self._order = self._check_conditions()
        self.conditional = any(p.when for p in self._params.values())

    def _check_conditions(self) -> list[str]:
        """The parameters with every parent before its children (conditions checked: parents
        exist, are a ``Categorical`` or an ``Int``, the values are theirs, no cycle)."""
        for name, p in self._params.items():
            for parent, values in p.when:
                if parent == name:
                    raise SearchSpaceError(f"{name}: when names the parameter itself")
                if parent not in self._params:
                    raise SearchSpaceError(
                        f"{name}: when names {parent!r}, which is not a parameter "
                        f"(space has {list(self._params)})"
                    )
                q = self._params[parent]
                if not isinstance(q, Categorical | Int):
                    raise SearchSpaceError(
                        f"{name}: when's parent {parent!r} must be a Categorical or an Int "
                        "(a condition on a real value would hold on a set of measure zero)"
                    )
                for v in values:
                    try:
                        q.check(parent, v)
                    except SearchSpaceError as exc:
                        raise SearchSpaceError(f"{name}: when[{parent!r}]: {exc}") from None
        order: list[str] = []
        state: dict[str, int] = {}  # 1: being visited, 2: done

        def visit(name: str, path: list[str]) -> None:
            if state.get(name) == 2:
                return
            if state.get(name) == 1:
                cycle = " -> ".join([*path[path.index(name) :], name])
                raise SearchSpaceError(f"{name}: its conditions form a cycle ({cycle})")
            state[name] = 1
            for parent, _ in self._params[name].when:
                visit(parent, [*path, name])
            state[name] = 2
            order.append(name)

        for name in self._params:
            visit(name, [])
        return order

    def active(self, params: Mapping[str, Any]) -> dict[str, bool]:
        """Whether each parameter is active given the values of ``params`` (a parameter is
        active when every parent is active and takes one of the values its ``when`` lists)."""
        out: dict[str, bool] = {}
        for name in self._order:
            out[name] = all(
                out[parent] and parent in params and self._holds(parent, params[parent], values)
                for parent, values in self._params[name].when
            )
        return out

    def _holds(self, parent: str, value: Any, values: tuple[Choice, ...]) -> bool:
        q = self._params[parent]
        if isinstance(q, Categorical):
            return q._index(value) is not None and q._index(value) in {q._index(v) for v in values}
        return _is_real(value) and any(float(value) == float(v) for v in values)

    def max_active(self) -> int:
        """The most parameters one configuration has (``len(self)`` without conditions): what
        the initial design's size scales with. Exact: over every combination of the parents'
        values that a condition names (and one value none names), up to 4096 of them."""
        if not self.conditional:
            return len(self)
        cached = self.__dict__.get("_max_active")
        if cached is None:
            cached = self.__dict__["_max_active"] = self._count_max_active()
        return int(cached)

    def _count_max_active(self) -> int:
        parents = sorted({parent for p in self._params.values() for parent, _ in p.when})
        domains: list[list[Any]] = []
        for parent in parents:
            q = self._params[parent]
            named = [v for p in self._params.values() for par, vs in p.when if par == parent
                     for v in vs]  # fmt: skip
            options = list(q.choices) if isinstance(q, Categorical) else sorted(set(named))
            if isinstance(q, Int):  # and an integer no condition names, if there is one
                other = next((v for v in range(q.low, q.high + 1, q.step) if v not in named), None)
                options += [] if other is None else [other]
            domains.append(options)
        if math.prod(len(d) for d in domains) > 4096:
            return len(self)
        import itertools

        best = 0
        for combo in itertools.product(*domains):
            values = dict(zip(parents, combo, strict=True))
            best = max(best, sum(self.active(values).values()))
        return best

    def condition_text(self, name: str) -> str:
        """``name``'s condition in words (``"optimizer is 'sgd'"``), for error messages."""
        parts = []
        for parent, values in self._params[name].when:
            shown = repr(values[0]) if len(values) == 1 else f"one of {list(values)}"
            parts.append(f"{parent} is {shown}")
        return " and ".join(parts)

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
                active[parent] and self._holds(parent, checked[parent], values)
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
        import torch

        out: list[float] = []
        for name, p in self._params.items():
            # an inactive parameter is absent from a valid dict: INACTIVE in its every column
            out.extend(p.encode(params[name]) if name in params else [INACTIVE] * p.width)
        return torch.tensor(out, dtype=torch.double)

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
        """Snap ``n x D`` relaxed points onto encodings of valid parameters."""
        import torch

        X = X.detach().to(torch.double).clamp(0.0, 1.0).clone()
        for name, p in self._params.items():
            s = self._slices[name]
            if isinstance(p, Categorical):  # one-hot at each row's argmax (the first on ties)
                block = torch.zeros_like(X[:, s])
                X[:, s] = block.scatter_(-1, X[:, s].argmax(dim=-1, keepdim=True), 1.0)
            else:  # a Float's or an Int's rounding is coordinate by coordinate: all rows at once
                X[:, s] = p.round(X[:, s])
        if self.conditional:  # inactive parameters at INACTIVE: one encoding per configuration
            for name, on in self._active_rows(X).items():
                X[~on, self._slices[name]] = INACTIVE
        return X

    def _active_rows(self, X: Tensor) -> dict[str, Tensor]:
        """Per parameter, which rows of rounded points ``X`` (``n x D``) it is active in."""
        import torch

        out: dict[str, Tensor] = {}
        for name in self._order:
            on = torch.ones(X.shape[0], dtype=torch.bool)
            for parent, values in self._params[name].when:
                q, cols = self._params[parent], X[:, self._slices[parent]]
                if isinstance(q, Categorical):
                    allowed = torch.tensor([q._index(v) for v in values])
                    holds = torch.isin(cols.argmax(dim=-1), allowed)
                else:  # an Int: decode each distinct coordinate once
                    unique, inverse = torch.unique(cols[:, 0], return_inverse=True)
                    decoded = torch.tensor([float(q.decode([float(u)])) for u in unique])
                    holds = torch.isin(decoded[inverse], torch.tensor([float(v) for v in values]))
                on &= out[parent] & holds
            out[name] = on
        return out

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
