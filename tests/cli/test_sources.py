"""Where each trial's parameters came from: the design is 2 × parameters, a late first fit is
waited for within a bound or its quasi-random points are recorded as fallbacks, and every
view (the summary, ``OptimizeResult``, ``abo trials``, the live panel) counts the sources.

The slow fit is a real one: a first fit on 300 observations (no mock, no sleep)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

import abo
from abo.analysis.summary import proposal_source, source_counts, sources_line, study_summary
from abo.cli.main import app
from abo.core.exceptions import FailureRateExceeded
from abo.executors import ThreadExecutor
from abo.run.loop import FailureGuard

SPACE = abo.Space({"x": abo.Float(0.0, 1.0), "y": abo.Float(0.0, 1.0)})


def _loss(p: dict) -> float:
    return (p["x"] - 0.3) ** 2 + (p["y"] - 0.6) ** 2


def _observed(n: int, **kw: object) -> abo.Study:
    """A study told ``n`` results by the user (its first fit takes a while: a real slow fit)."""
    study = abo.create_study(SPACE, seed=0, **kw)  # type: ignore[arg-type]
    rng = random.Random(0)
    for _ in range(n):
        params = {"x": rng.random(), "y": rng.random()}
        study.add(params, _loss(params))
    return study


def test_a_hurried_ask_with_a_late_first_fit_records_fallbacks_not_design_points() -> None:
    study = _observed(300)  # the design is done: every point was told by the user
    trials = study.ask_batch(3, n_workers=1, pace=1e-6)  # waits at most a second
    for t in trials:
        assert t.proposal is not None
        if proposal_source(t) == "fallback":  # the fit was still running: said so
            assert t.proposal.details["fallback_reason"] == "the first model fit was still running"
        else:
            assert proposal_source(t) == "model" and t.proposal.model is not None
    assert source_counts(study.trials).get("design", 0) == 0
    assert source_counts(study.trials)["added"] == 300


def test_a_hurried_ask_waits_for_the_first_fit_within_a_mean_evaluation() -> None:
    study = _observed(300)
    trials = study.ask_batch(2, n_workers=2, pace=30.0)  # a point may take a minute: wait
    assert [proposal_source(t) for t in trials] == ["model", "model"]
    assert all(t.proposal is not None and t.proposal.model is not None for t in trials)


def test_points_past_the_design_before_two_results_are_fallbacks() -> None:
    study = abo.create_study(SPACE, seed=0)
    trials = study.ask_batch(6)  # 2 parameters: a design of 4, then nothing to fit on
    assert [proposal_source(t) for t in trials] == ["design"] * 4 + ["fallback"] * 2
    assert trials[-1].proposal is not None
    assert "fewer than 2 results" in trials[-1].proposal.details["fallback_reason"]
    summary = study_summary(study.storage, study.record)
    assert summary["sources"] == {"design": 4, "fallback": 2}


def test_optimize_designs_two_points_per_parameter_and_counts_every_source() -> None:
    study = abo.create_study(SPACE, seed=1)
    study.enqueue({"x": 0.5, "y": 0.5})
    with ThreadExecutor(2) as ex:
        result = study.optimize(_loss, n_trials=14, executor=ex)
    counts = source_counts(study.trials)
    assert counts == result.sources
    assert counts["enqueued"] == 1 and counts["design"] == 3  # the enqueued point counts
    assert counts.get("model", 0) + counts.get("fallback", 0) == 10
    for t in study.trials:
        if proposal_source(t) == "fallback":
            assert t.proposal is not None and t.proposal.details["fallback_reason"]
    assert sources_line(counts) in result.summary()


def test_the_failure_rate_stop_quotes_the_most_common_cause() -> None:
    def objective(p: dict) -> float:
        if p["x"] < 0.2:
            raise RuntimeError("rare")
        raise ValueError("out of memory")

    study = abo.create_study(SPACE, strategy="random", seed=0)
    with ThreadExecutor(1) as ex, pytest.raises(FailureRateExceeded) as err:
        study.optimize(objective, n_trials=40, executor=ex, guard=FailureGuard(0.5, 6))
    result = err.value.result  # type: ignore[attr-defined]
    reason, count = result.common_failure
    assert reason == "ValueError: out of memory" and count == result.failure_reasons[reason]
    assert f"Most common cause ({count} of {result.n_failed}): {reason}." in str(err.value)


def test_abo_trials_shows_each_trials_source_and_why_it_failed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    study = abo.create_study(SPACE, name="s", storage=url, seed=0)
    study.add({"x": 0.1, "y": 0.1}, 0.3)
    for t in study.ask_batch(3):  # the design: 3, with the added point
        study.tell(t.id, _loss(t.params))
    trial = study.ask()
    study.tell(trial.id, _loss(trial.params))
    study.fail(study.ask().id, "diverged at step 12")
    runner = CliRunner()
    table = runner.invoke(app, ["trials", "s", "--storage", url], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    assert "source" in table.stdout and "reason" in table.stdout
    assert "diverged at step 12" in table.stdout
    rows = runner.invoke(app, ["trials", "s", "--storage", url, "--format", "csv"]).stdout
    header, *lines = rows.strip().splitlines()
    assert header.split(",")[:8] == [
        "id", "state", "value", "duration", "reason", "source", "strategy", "arm",
    ]  # fmt: skip
    sources = [line.split(",")[5] for line in lines]
    assert sources == ["added", "design", "design", "design", "model", "model"]
    assert lines[-1].split(",")[4] == "diverged at step 12"
    listed = json.loads(
        runner.invoke(app, ["studies", "--storage", url, "--format", "json"]).stdout
    )
    assert listed[0]["sources"] == {"design": 3, "model": 2, "added": 1}
