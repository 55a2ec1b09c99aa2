"""Metadata and info: a NaN or infinity anywhere inside is refused by the Python API, naming
where it is, as the HTTP API refuses it (it would be stored as null); an objective's returned
extras keep them as text."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import abo
from abo import Float, InvalidValueError, Space
from abo.core.userdata import check_mapping, storable
from abo.executors import ThreadExecutor

SPACE = Space({"x": Float(0.0, 1.0)})
BAD = [
    ({"loss": float("nan")}, "loss"),
    ({"a": {"b": [1.0, float("inf")]}}, "a.b.1"),
    ({"t": (0.5, -float("inf"))}, "t.1"),
    ({"n": np.float32("nan")}, "n"),
]


def _stored(study: abo.Study) -> list[dict[str, Any]]:
    fresh = abo.load_study(study.name, storage=study.storage)
    return [t.to_dict() for t in fresh.trials]


@pytest.fixture()
def study(tmp_path: Path) -> abo.Study:
    url = f"sqlite:///{tmp_path / 'u.db'}"
    return abo.create_study(SPACE, name="u", storage=url, strategy="random", seed=0)


@pytest.mark.parametrize(("bad", "path"), BAD)
def test_tell_fail_add_and_ask_refuse_non_finite_numbers_naming_them(
    study: abo.Study, bad: dict[str, Any], path: str
) -> None:
    trial = study.ask()
    before = _stored(study)
    calls = {
        "metadata": [
            lambda: study.tell(trial.id, 0.5, bad),
            lambda: study.fail(trial.id, "r", metadata=bad),
            lambda: study.add({"x": 0.3}, 0.1, metadata=bad),
        ],
        "info": [
            lambda: study.tell(trial.id, 0.5, info=bad),
            lambda: study.fail(trial.id, "r", info=bad),
            lambda: study.ask(info=bad),
        ],
    }
    for field, makers in calls.items():
        for make in makers:
            with pytest.raises(InvalidValueError) as err:
                make()
            assert err.value.field == f"{field}.{path}", str(err.value)
            assert str(err.value).startswith(f"{field}.{path}: must be a finite number")
    assert _stored(study) == before  # nothing changed
    with pytest.raises(InvalidValueError, match=r"^info\[1\]\.loss"):
        study.ask_batch(2, info=[{}, {"loss": float("nan")}])
    assert _stored(study) == before


def test_finite_values_nested_anywhere_are_kept(study: abo.Study) -> None:
    trial = study.ask(info={"host": "a", "sizes": [1, 2]})
    meta = {"loss": 0.5, "curve": [0.1, 0.2], "big": 10**30, "flag": True, "none": None}
    study.tell(trial.id, 0.5, meta)
    assert abo.load_study("u", storage=study.storage).trial(trial.id).user == meta


def test_any_depth_is_checked_and_a_cycle_ends() -> None:
    deep: list = [float("inf")]
    for _ in range(2000):
        deep = [deep]
    with pytest.raises(InvalidValueError, match=r"^metadata\.d(\.0){2000}\.0: must be a finite"):
        check_mapping({"d": deep}, "metadata")
    cyclic: dict[str, Any] = {"x": 1.0}
    cyclic["self"] = cyclic
    assert check_mapping(cyclic, "metadata")["x"] == 1.0


def test_storable_writes_non_finite_numbers_as_text(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="abo"):
        out = storable({"a": float("nan"), "b": [1.0, float("-inf")], "c": 2}, "metadata")
    assert out == {"a": "nan", "b": [1.0, "-inf"], "c": 2}
    assert "metadata.a, metadata.b.1: not finite" in caplog.text
    assert storable(None, "metadata") is None


def test_optimize_keeps_a_result_whose_returned_extras_are_not_finite(study: abo.Study) -> None:
    def objective(p: dict[str, Any]) -> dict[str, Any]:
        return {"value": p["x"], "grad_norm": float("nan")}

    with ThreadExecutor(2) as ex:
        result = study.optimize(objective, n_trials=3, executor=ex, lookahead=0, verbosity=0)
    assert result.n_done == 3
    assert all(t.user == {"grad_norm": "nan"} for t in study.trials)
