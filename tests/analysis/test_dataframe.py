"""``trials_dataframe``: the trials as a pandas frame, from a study and over HTTP."""

from __future__ import annotations

import sys

import pandas as pd
import pytest

import abo

SPACE = abo.Space({"x": abo.Float(0.0, 1.0), "opt": abo.Categorical(["sgd", "adam"])})


def test_a_study_of_one_objective_has_a_column_per_field() -> None:
    study = abo.create_study(SPACE, strategy="random", seed=1)
    a, b, c = study.ask_batch(3)
    study.tell(a.id, 0.25, metadata={"epochs": 3})
    study.fail(b.id, "diverged")
    frame = study.trials_dataframe()
    assert list(frame.columns[:5]) == ["id", "state", "value", "params_x", "params_opt"]
    assert list(frame["state"]) == ["done", "failed", "running"]
    assert frame.loc[0, "value"] == 0.25 and pd.isna(frame.loc[1, "value"])
    assert frame.loc[0, "user_epochs"] == 3 and pd.isna(frame.loc[1, "user_epochs"])
    assert frame.loc[1, "reason"] == "diverged" and list(frame["strategy"]) == ["sobol"] * 3
    assert str(frame["created"].dtype) == "datetime64[ns, UTC]"
    assert frame.loc[0, "finished"] >= frame.loc[0, "created"]
    assert pd.isna(frame.loc[2, "finished"]) and str(frame["retry_of"].dtype) == "Int64"
    assert list(frame["params_opt"]) == [t.params["opt"] for t in (a, b, c)]


def test_several_outcomes_get_a_column_each_and_an_empty_study_an_empty_frame() -> None:
    outcomes = {"error": "minimize", "latency": "minimize", "memory": "<= 4"}
    study = abo.create_study(SPACE, strategy="random", seed=2, outcomes=outcomes)
    assert study.trials_dataframe().empty
    t = study.ask()
    study.tell(t.id, {"error": 0.1, "latency": 20.0, "memory": 3.0})
    frame = study.trials_dataframe()
    assert ["values_error", "values_latency", "values_memory"] == [
        c for c in frame.columns if c.startswith("values_")
    ]
    assert "value" not in frame.columns and frame.loc[0, "values_memory"] == 3.0


def test_without_pandas_the_error_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    study = abo.create_study(SPACE, strategy="random", seed=3)
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if it were not installed
    with pytest.raises(ImportError, match=r'pip install "abo\[pandas\]"'):
        study.trials_dataframe()
