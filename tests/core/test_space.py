"""Space: exact unit-cube round trips, valid rounding, one-hot categoricals, clear errors."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tomllib
from decimal import Decimal

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from abo import Categorical, Float, Int, SearchSpaceError, Space

CHOICES = ["sgd", "adam", "rmsprop"]
SPACE = Space(
    {
        "x": Float(-5.0, 5.0),
        "lr": Float(1e-5, 1e-1, log=True),
        "n": Int(-3, 7),
        "width": Int(1, 1024, log=True),
        "opt": Categorical(CHOICES),
    }
)


@st.composite
def params(draw: st.DrawFn) -> dict:
    return {
        "x": draw(st.floats(-5.0, 5.0)),
        "lr": draw(st.floats(1e-5, 1e-1)),
        "n": draw(st.integers(-3, 7)),
        "width": draw(st.integers(1, 1024)),
        "opt": draw(st.sampled_from(CHOICES)),
    }


@settings(max_examples=200, deadline=None)
@given(params())
def test_from_unit_inverts_to_unit(p: dict) -> None:
    u = SPACE.to_unit(p)
    assert u.shape == (SPACE.dim,)
    assert bool(((u >= 0) & (u <= 1)).all())
    back = SPACE.from_unit(u)
    assert back["x"] == pytest.approx(p["x"], abs=1e-9)
    assert back["lr"] == pytest.approx(p["lr"], rel=1e-9)
    for name in ("n", "width"):
        assert type(back[name]) is int and back[name] == p[name]
    assert back["opt"] == p["opt"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=SPACE.dim, max_size=SPACE.dim))
def test_round_then_from_unit_is_always_valid(coords: list[float]) -> None:
    X = torch.tensor([coords], dtype=torch.double)
    rounded = SPACE.round(X)
    decoded = SPACE.from_unit(rounded[0])
    assert SPACE.validate(decoded) == decoded
    assert type(decoded["n"]) is int and -3 <= decoded["n"] <= 7
    assert type(decoded["width"]) is int and 1 <= decoded["width"] <= 1024
    assert decoded["opt"] in CHOICES
    # the rounded point is the exact encoding of what it decodes to (rounding is idempotent)
    assert torch.allclose(SPACE.to_unit(decoded), rounded[0], atol=1e-12)
    assert torch.equal(SPACE.round(rounded), rounded)


def test_round_snaps_categorical_block_one_hot_at_argmax() -> None:
    space = Space({"opt": Categorical(CHOICES)})
    rounded = space.round(torch.tensor([[0.2, 0.9, 0.4]], dtype=torch.double))
    assert rounded.tolist() == [[0.0, 1.0, 0.0]]


def test_categoricals_are_one_hot_not_ordinal() -> None:
    space = Space({"opt": Categorical(CHOICES), "x": Float(0, 1)})
    assert space.dim == 4
    assert space.to_unit({"opt": "adam", "x": 0.5}).tolist() == [0.0, 1.0, 0.0, 0.5]
    assert space.to_unit({"opt": "rmsprop", "x": 0.0}).tolist() == [0.0, 0.0, 1.0, 0.0]


def test_int_and_log_float_decode_to_bounds_at_cube_corners() -> None:
    space = Space({"w": Int(1, 1024, log=True), "lr": Float(1e-5, 1e-1, log=True)})
    assert space.from_unit([0.0, 0.0]) == {"w": 1, "lr": pytest.approx(1e-5)}
    assert space.from_unit([1.0, 1.0]) == {"w": 1024, "lr": pytest.approx(1e-1)}


def test_json_round_trip_keeps_space_and_types() -> None:
    mixed = Space({**SPACE, "flag": Categorical([True, 3, 2.5, "s"])})
    text = json.dumps(mixed.to_json())
    back = Space.from_json(json.loads(text))
    assert back == mixed
    assert list(back) == list(mixed)
    assert back["lr"] == Float(1e-5, 1e-1, log=True)
    assert back["width"] == Int(1, 1024, log=True)
    assert [type(c) for c in back["flag"].choices] == [bool, int, float, str]


def test_spaces_with_differently_typed_choices_differ() -> None:
    assert Space({"c": Categorical([1, 2])}) != Space({"c": Categorical([1.0, 2.0])})
    assert Space({"c": Categorical([True, 2])}) != Space({"c": Categorical([1, 2])})
    assert Space({"x": Float(0, 1)}) == Space({"x": Float(0.0, 1.0)})


@pytest.mark.parametrize(
    ("build", "words"),
    [
        (lambda: Float(1.0, 1.0), ["low", "high"]),
        (lambda: Float(2.0, 1.0), ["low", "high"]),
        (lambda: Float(0.0, 1.0, log=True), ["log", "low"]),
        (lambda: Float(-1.0, 1.0, log=True), ["log", "low"]),
        (lambda: Float(0.0, math.inf), ["finite"]),
        (lambda: Float(0.0, 10**400), ["finite"]),
        (lambda: Float("0", 1.0), ["low", "real"]),
        (lambda: Int(3, 3), ["low", "high"]),
        (lambda: Int(5, 1), ["low", "high"]),
        (lambda: Int(0, 10, log=True), ["log", "low"]),
        (lambda: Int(0.5, 3), ["low", "integer"]),
        (lambda: Categorical([]), ["choices", "empty"]),
        (lambda: Categorical(["a", "b", "a"]), ["choices", "distinct"]),
        (lambda: Categorical("ab"), ["choices"]),
        (lambda: Space({}), ["space"]),
        (lambda: Space({"x": (0.0, 1.0)}), ["x", "abo.Float"]),
        (lambda: Space({"x": "float"}), ["x", "abo.Float"]),
    ],
)
def test_invalid_spaces_raise_naming_the_field(build, words: list[str]) -> None:
    with pytest.raises(SearchSpaceError) as info:
        build()
    message = str(info.value)
    for word in words:
        assert word in message


def test_from_json_rejects_unknown_or_incomplete_parameters() -> None:
    with pytest.raises(SearchSpaceError, match="unknown type"):
        Space.from_json({"x": {"type": "complex", "low": 0, "high": 1}})
    with pytest.raises(SearchSpaceError, match="'high'"):
        Space.from_json({"x": {"type": "float", "low": 0}})


GOOD = {"x": 0.0, "lr": 1e-3, "n": 2, "width": 64, "opt": "adam"}


@pytest.mark.parametrize(
    ("change", "field", "reason"),
    [
        ({"x": None}, "x", "missing"),
        ({"extra": 1.0}, "extra", "unknown"),
        ({"x": 5.5}, "x", "outside"),
        ({"lr": 1.0}, "lr", "outside"),
        ({"n": 8}, "n", "outside"),
        ({"width": 0}, "width", "outside"),
        ({"x": "0.3"}, "x", "real number"),
        ({"x": True}, "x", "real number"),
        ({"x": math.nan}, "x", "finite"),
        ({"n": 2.5}, "n", "integer"),
        ({"n": "2"}, "n", "integer"),
        ({"opt": "adagrad"}, "opt", "not one of"),
        ({"opt": 1}, "opt", "not one of"),
        ({"x": 10**400}, "x", "outside"),
        ({"n": 10**400}, "n", "outside"),
        ({"n": math.inf}, "n", "integer"),
    ],
)
def test_validate_names_the_bad_field(change: dict, field: str, reason: str) -> None:
    p = {**GOOD, **change}
    if change.get("x", 0.0) is None:
        del p["x"]
    with pytest.raises(SearchSpaceError) as info:
        SPACE.validate(p)
    assert str(info.value).startswith(f"{field}:")
    assert reason in str(info.value)


def test_validate_normalises_good_params() -> None:
    out = SPACE.validate({**GOOD, "x": 1, "n": 2.0})
    assert out == {**GOOD, "x": 1.0, "n": 2}
    assert type(out["x"]) is float and type(out["n"]) is int


def test_validate_rejects_non_dict() -> None:
    with pytest.raises(SearchSpaceError, match="params"):
        SPACE.validate([("x", 0.0)])


def test_sample_is_seeded_and_valid() -> None:
    a = SPACE.sample(5, seed=3)
    assert a == SPACE.sample(5, seed=3)
    assert a != SPACE.sample(5, seed=4)
    for p in a:
        assert SPACE.validate(p) == p


def test_validate_accepts_numpy_scalars_as_plain_python_values() -> None:
    np = pytest.importorskip("numpy")
    out = SPACE.validate({**GOOD, "x": np.float32(0.5), "n": np.int64(3)})
    assert out["x"] == 0.5 and type(out["x"]) is float
    assert out["n"] == 3 and type(out["n"]) is int


def test_categorical_matches_numpy_values_and_stores_plain_ones() -> None:
    np = pytest.importorskip("numpy")
    cat = Categorical([np.int64(1), 2, np.float64(0.5), np.str_("a"), True])
    assert [type(c) for c in cat.choices] == [int, int, float, str, bool]
    assert cat == Categorical([1, 2, 0.5, "a", True])
    assert cat.check("c", np.int64(2)) == 2 and type(cat.check("c", np.int64(2))) is int
    assert cat.check("c", np.str_("a")) == "a"
    with pytest.raises(SearchSpaceError, match="not one of"):
        cat.check("c", 1.0)  # a float is not the int choice 1


def test_float_range_too_wide_to_encode_is_rejected() -> None:
    with pytest.raises(SearchSpaceError, match="too wide"):
        Float(-1e308, 1e308)


# -- stepped parameters -----------------------------------------------------------------------
def _d(value: float) -> Decimal:
    return Decimal(repr(value))


@st.composite
def stepped_float(draw: st.DrawFn) -> tuple[Float, float, float, int]:
    """A stepped Float of decimal bounds and step: ``(param, low, step, n_steps)``."""
    low = draw(st.integers(-2000, 2000)) / 10 ** draw(st.integers(0, 3))
    step = draw(st.integers(1, 50)) / 10 ** draw(st.integers(0, 3))
    n = draw(st.integers(1, 500))
    high = float(_d(low) + n * _d(step))
    return Float(low, high, step=step), low, step, n


@settings(max_examples=300, deadline=None)
@given(stepped_float(), st.data())
def test_stepped_float_round_trips_exactly_on_a_noise_free_grid(case, data: st.DataObject) -> None:
    param, low, step, n = case
    space = Space({"s": param})
    k = data.draw(st.integers(0, n))
    value = float(_d(low) + k * _d(step))  # what a user means by low + k * step
    assert space.validate({"s": value}) == {"s": value}
    back = space.from_unit(space.to_unit({"s": value}))["s"]
    assert back == value and type(back) is float
    assert _d(back) == _d(low) + k * _d(step)  # prints as the decimal: 0.3, not 0.30000000000000004
    # any point of the cube decodes onto the grid, within the bounds, and rounds idempotently
    u = data.draw(st.floats(0.0, 1.0))
    rounded = space.round(torch.tensor([[u]], dtype=torch.double))
    decoded = space.from_unit(rounded[0])["s"]
    assert param.low <= decoded <= param.high
    assert (_d(decoded) - _d(low)) % _d(step) == 0
    assert space.from_unit([u]) == {"s": decoded}
    assert torch.equal(space.round(rounded), rounded)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(-(10**6), 10**6),
    st.integers(1, 50),
    st.integers(1, 300),
    st.data(),
)
def test_stepped_int_round_trips_exactly(low: int, step: int, n: int, data: st.DataObject) -> None:
    space = Space({"n": Int(low, low + n * step, step=step)})
    value = low + data.draw(st.integers(0, n)) * step
    back = space.from_unit(space.to_unit({"n": value}))["n"]
    assert back == value and type(back) is int
    u = data.draw(st.floats(0.0, 1.0))
    decoded = space.from_unit(space.round(torch.tensor([[u]], dtype=torch.double))[0])["n"]
    assert low <= decoded <= low + n * step and (decoded - low) % step == 0


def test_a_stepped_float_takes_the_values_a_user_writes() -> None:
    space = Space({"x": Float(0.0, 1.0, step=0.1), "n": Int(0, 100, step=5)})
    assert space.dim == 2
    xs = sorted({space.from_unit([u / 200, 0.0])["x"] for u in range(201)})
    assert [repr(x) for x in xs] == [repr(k / 10) for k in range(11)]
    ns = sorted({space.from_unit([0.0, u / 200])["n"] for u in range(201)})
    assert ns == list(range(0, 101, 5))
    # each value owns an equal share of the dimension, as Int's integers do
    assert space.to_unit({"x": 0.3, "n": 50}).tolist() == [3.5 / 11, 10.5 / 21]
    assert space.validate({"x": 0.1 + 0.2, "n": 50.0}) == {"x": 0.3, "n": 50}
    assert space.validate({"x": 1, "n": 100})["x"] == 1.0
    assert not space.is_continuous


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            {"x": 0.35},
            "x: 0.35 is not on the grid 0.0 + k * 0.1 (the nearest values are 0.3 and 0.4)",
        ),
        ({"x": 0.3001}, "x: 0.3001 is not on the grid"),
        ({"n": 7}, "n: 7 is not on the grid 0 + k * 5 (the nearest values are 5 and 10)"),
        ({"n": 105}, "n: 105 is outside [0, 100]"),
    ],
)
def test_validate_refuses_off_grid_values(change: dict, reason: str) -> None:
    space = Space({"x": Float(0.0, 1.0, step=0.1), "n": Int(0, 100, step=5)})
    with pytest.raises(SearchSpaceError) as info:
        space.validate({"x": 0.3, "n": 5, **change})
    assert str(info.value).startswith(reason)


def test_steps_survive_json_and_study_files() -> None:
    space = Space({"x": Float(0.0, 1.0, step=0.1), "n": Int(0, 100, step=5)})
    assert Space.from_json(json.loads(json.dumps(space.to_json()))) == space
    toml = (
        'x = {type = "float", low = 0, high = 1, step = 0.1}\n'
        'n = {type = "int", low = 0, high = 100, step = 5}\n'
    )
    assert Space.from_json(tomllib.loads(toml)) == space
    # no step, no key: spaces stored before steps existed read back equal
    assert "step" not in Float(0.0, 1.0).to_json() and "step" not in Int(0, 9).to_json()
    assert Space.from_json({"n": {"type": "int", "low": 0, "high": 9, "step": None}}) == Space(
        {"n": Int(0, 9)}
    )


@pytest.mark.parametrize(
    ("build", "words"),
    [
        (lambda: Float(0.0, 1.0, step=0.3), ["Float:", "whole multiple of step (0.3)", "1e-09"]),
        (lambda: Float(0.0, 1.0, step=2.0), ["whole multiple of step"]),
        (lambda: Float(1e-3, 1.0, log=True, step=0.1), ["step", "log=True"]),
        (lambda: Float(0.0, 1.0, step=0), ["step", "positive"]),
        (lambda: Float(0.0, 1.0, step=-0.1), ["step", "positive"]),
        (lambda: Float(0.0, 1.0, step=math.inf), ["step", "finite"]),
        (lambda: Float(0.0, 1.0, step="0.1"), ["step", "'0.1'"]),
        (lambda: Float(0.0, 1.0, step=1e-300), ["step", "2**53"]),
        (lambda: Int(0, 100, step=7), ["whole multiple of step (7)"]),
        (lambda: Int(0, 100, step=0), ["step", "positive"]),
        (lambda: Int(0, 100, step=2.5), ["step", "integer"]),
        (lambda: Int(1, 100, log=True, step=3), ["step", "log=True"]),
        (lambda: Float(0.0, 1.0, log="yes"), ["log", "true or false"]),
        (lambda: Int(0, 10, log=1), ["log", "true or false"]),
    ],
)
def test_invalid_steps_raise_saying_why(build, words: list[str]) -> None:
    with pytest.raises(SearchSpaceError) as info:
        build()
    for word in words:
        assert word in str(info.value)


# -- bounds the encoding cannot represent, and malformed JSON -------------------------------------
HUGE = 10**400


@pytest.mark.parametrize(
    ("build", "words"),
    [
        (lambda: Int(0, HUGE), ["Int: high", "2**53", "an integer of 401 digits"]),
        (lambda: Int(-HUGE, 0), ["Int: low", "2**53"]),
        (lambda: Int(0, 2**53 + 1), ["Int: high", "2**53"]),
        (lambda: Int(0, 1e300), ["Int: high", "2**53"]),
        (lambda: Float(0, HUGE), ["Float: high", "finite", "an integer of 401 digits"]),
        (lambda: Float(-HUGE, 0.0), ["Float: low", "finite"]),
    ],
)
def test_bounds_beyond_the_encoding_are_refused(build, words: list[str]) -> None:
    with pytest.raises(SearchSpaceError) as info:
        build()
    for word in words:
        assert word in str(info.value)
    assert Int(-(2**53), 2**53).decode([1.0]) == 2**53  # the limits themselves are fine


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({"type": "int", "low": 0, "high": HUGE}, "high must lie within +-2**53"),
        ({"type": "int", "low": -HUGE, "high": 0}, "low must lie within +-2**53"),
        ({"type": "float", "low": 0, "high": HUGE}, "high must be finite"),
        ({"type": "float", "low": -1e308, "high": 1e308}, "the range"),
        ({"type": "float", "low": "0", "high": 1}, "low must be a real number, got '0'"),
        ({"type": "int", "low": 0, "high": [1]}, "high must be an integer, got [1]"),
        ({"type": "float", "low": 1, "high": 1}, "low (1) must be below high (1)"),
        ({"type": "int", "low": 5, "high": 1}, "low (5) must be below high (1)"),
        ({"type": "float", "low": 0, "high": 1, "log": "false"}, "log must be true or false"),
        ({"type": "float", "low": 0, "high": 1, "step": 0.3}, "whole multiple of step"),
        ({"type": "int", "low": 0, "high": 1, "lo": 0}, "unknown key 'lo' for a int parameter"),
        ({"type": "categorical", "choices": "ab"}, "choices must be a list"),
        ({"type": "categorical", "choices": {"a": 1}}, "choices must be a list"),
        ({"type": "categorical", "choices": []}, "choices must not be empty"),
        ({"type": "categorical", "choices": [1, None]}, "choices must be str, int, float"),
        ({"type": "categorical"}, "categorical is missing 'choices'"),
        ({"type": "float", "low": 0}, "float is missing 'high'"),
        ({"type": "complex"}, "unknown type 'complex'"),
        ({"type": ["float"], "low": 0, "high": 1}, "unknown type ['float']"),
        ({"low": 0, "high": 1}, "unknown type None"),
        ([0, 1], "expected an object"),
        ("float", "expected an object"),
    ],
)
def test_from_json_names_the_parameter_and_the_reason(spec: object, reason: str) -> None:
    with pytest.raises(SearchSpaceError) as info:
        Space.from_json({"ok": {"type": "float", "low": 0, "high": 1}, "n": spec})
    assert str(info.value).startswith("n: "), str(info.value)
    assert reason in str(info.value)


def test_from_json_refuses_bad_names_and_non_objects() -> None:
    with pytest.raises(SearchSpaceError, match="^space: parameter names"):
        Space.from_json({"": {"type": "float", "low": 0, "high": 1}})
    with pytest.raises(SearchSpaceError, match="^space: expected an object"):
        Space.from_json([("x", {"type": "float", "low": 0, "high": 1})])


def test_importing_the_space_module_does_not_import_torch() -> None:
    # `abo studies` builds spaces from storage but never encodes: it must not pay for torch
    code = (
        "import sys\n"
        "from abo.core.space import Float, Int, Space\n"
        "space = Space.from_json({'x': {'type': 'float', 'low': 0, 'high': 1, 'step': 0.1},"
        " 'n': {'type': 'int', 'low': 0, 'high': 10}})\n"
        "space.validate({'x': 0.3, 'n': 2})\n"
        "assert space == Space({'x': Float(0, 1, step=0.1), 'n': Int(0, 10)})\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n"
        "space.to_unit({'x': 0.3, 'n': 2})  # encoding does import it\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.split("\n")[:2] == ["[]", "True"], out.stdout + out.stderr


def _values(space: Space, X: torch.Tensor) -> list[dict]:
    return [space.from_unit(x) for x in X]


def test_neighbours_move_one_discrete_parameter_by_one_step_or_choice() -> None:
    space = Space(
        {"n": Int(0, 10), "s": Float(0.0, 1.0, step=0.25), "x": Float(0.0, 1.0),
         "opt": Categorical(CHOICES)}
    )  # fmt: skip
    x = space.to_unit({"n": 4, "s": 0.5, "x": 0.3, "opt": "adam"})
    got = _values(space, space.neighbours(x))
    want = [{"n": 3}, {"n": 5}, {"s": 0.25}, {"s": 0.75}, {"opt": "sgd"}, {"opt": "rmsprop"}]
    for w in want:  # each expected move is there, the rest unchanged
        assert any(all(g[k] == v for k, v in w.items()) and g["x"] == pytest.approx(0.3)
                   for g in got), w  # fmt: skip
    assert len(got) == len(want)  # x (a plain Float) is never moved, x itself never returned
    edge = _values(space, space.neighbours(space.to_unit({"n": 10, "s": 0.0, "x": 0.3,
                                                          "opt": "sgd"})))  # fmt: skip
    assert sorted((g["n"], g["s"]) for g in edge if g["opt"] == "sgd") == [(9, 0.0), (10, 0.25)]


def test_neighbours_of_a_log_int_are_the_adjacent_integers() -> None:
    space = Space({"width": Int(1, 1024, log=True)})
    got = _values(space, space.neighbours(space.to_unit({"width": 1})))
    assert got == [{"width": 2}]
    got = sorted(g["width"] for g in _values(space, space.neighbours(space.to_unit({"width": 37}))))
    assert got == [36, 38]


def test_neighbours_of_many_points_are_each_points_own_with_its_row() -> None:
    space = Space({"n": Int(0, 10), "k": Int(1, 64, log=True), "x": Float(0.0, 1.0),
                   "opt": Categorical(CHOICES)})  # fmt: skip
    configs = [
        {"n": 4, "k": 8, "x": 0.3, "opt": "adam"},
        {"n": 10, "k": 1, "x": 0.9, "opt": "sgd"},
        {"n": 4, "k": 8, "x": 0.3, "opt": "adam"},
        {"n": 0, "k": 64, "x": 0.1, "opt": "sgd"},
    ]
    X = torch.stack([space.to_unit(c) for c in configs])  # fmt: skip
    Y, owner = space.neighbours_of(X)
    assert owner.dtype == torch.long and Y.shape[0] == owner.shape[0]
    for i in range(len(configs)):  # the same points, in the same order, as one at a time
        assert torch.equal(Y[owner == i], space.neighbours(X[i]))
    assert int((owner == 0).sum()) == 2 + 2 + 2  # n and k one step each way, two other choices
    empty, none = space.neighbours_of(X[:0])
    assert empty.shape == (0, X.shape[1]) and none.shape == (0,)


def test_neighbours_in_a_space_of_plain_reals_are_none() -> None:
    space = Space({"x": Float(0.0, 1.0), "lr": Float(1e-5, 1e-1, log=True)})
    assert space.neighbours(space.to_unit({"x": 0.2, "lr": 1e-3})).shape == (0, 2)
