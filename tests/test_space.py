"""Space: exact unit-cube round trips, valid rounding, one-hot categoricals, clear errors."""

from __future__ import annotations

import json
import math

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
