"""One contract suite over both kinds of ``abo.study.protocol.StudyLike``: a ``Study`` in this
process on a SQLite file, and a ``RemoteStudy`` against a real ``abo serve`` on 127.0.0.1.

Their shared methods live once (``abo.study.api``); these tests check that ask, tell, fail,
report, add, enqueue, best, trials and len, and their errors, come out the same from both.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from service.conftest import Server

import abo
from abo.service import Client
from abo.study.protocol import StudyLike

SPACE = abo.Space({"x": abo.Float(-2.0, 2.0), "n": abo.Int(1, 8)})
Make = Callable[[str], StudyLike]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("study-like")
    srv = Server(f"sqlite:///{folder / 'abo.db'}", folder / "server.log").start()
    yield srv
    srv.stop()


@pytest.fixture()
def local(tmp_path) -> Make:
    url = f"sqlite:///{tmp_path / 'abo.db'}"
    return lambda name: abo.create_study(SPACE, name=name, storage=url, strategy="random", seed=0)


@pytest.fixture()
def remote(server: Server) -> Iterator[Make]:
    with Client(server.url) as client:
        yield lambda name: client.create_study(SPACE, name=name, strategy="random", seed=0)


@pytest.fixture(params=["local", "remote"])
def make(request: pytest.FixtureRequest) -> Make:
    """Builds a study of either kind (each test names its own)."""
    return request.getfixturevalue(request.param)


def _error(call: Callable[[], Any]) -> tuple[str, str | None, str]:
    with pytest.raises(abo.AboError) as caught:
        call()
    return type(caught.value).__name__, caught.value.field, str(caught.value)


def test_both_kinds_are_study_like(make: Make) -> None:
    assert isinstance(make("like"), StudyLike)


def test_ask_tell_fail_report_and_their_reads(make: Make) -> None:
    study = make("basic")
    first, second, third = study.ask(), *study.ask_batch(2, n_workers=2)
    assert [t.id for t in (first, second, third)] == [1, 2, 3]
    done = study.tell(first.id, 0.5, {"note": "hi"}, info={"worker": "w"})
    assert done.state is abo.TrialState.DONE and done.value == 0.5
    assert done.user == {"note": "hi"} and done.info["worker"] == "w"
    assert study.tell(np.int64(first.id), 0.5).value == 0.5  # the same again: a no-op
    assert study.fail(second.id, "diverged").state is abo.TrialState.FAILED
    assert study.report(third.id, 1, 0.9) is False
    assert [(r.step, r.value) for r in study.reports(third.id)[third.id]] == [(1.0, 0.9)]
    assert study.best is not None and study.best.id == first.id
    assert [t.id for t in study.best_trials] == [first.id]
    assert [t.id for t in study.pending] == [third.id]
    assert len(study) == 3 and [t.id for t in study.trials] == [1, 2, 3]
    assert study.trial(third.id).state is abo.TrialState.RUNNING


def test_add_and_enqueue_are_idempotent(make: Make) -> None:
    study = make("warm")
    added = study.add({"x": 0.25, "n": 2}, 0.1, {"source": "paper"})
    assert added.state is abo.TrialState.DONE and added.params == {"x": 0.25, "n": 2}
    assert study.add({"x": 0.25, "n": 2}, 0.1).id == added.id  # the same result again
    assert study.add({"x": 0.25, "n": 2}, 0.1, allow_duplicate=True).id != added.id
    assert study.enqueue({"x": -1.0, "n": 3}) is True
    assert study.enqueue({"x": -1.0, "n": 3}) is False
    assert study.ask().params == {"x": -1.0, "n": 3}
    assert len(study) == 3


def test_errors_are_the_same_exceptions(make: Make) -> None:
    study = make("errors")
    trial = study.ask()
    study.tell(trial.id, 1.0)
    other = study.ask()
    with pytest.raises(abo.TrialStateError, match="value"):
        study.tell(trial.id, 2.0)  # a second, different tell
    with pytest.raises(abo.TrialNotFoundError, match="trial_id"):
        study.tell(999, 1.0)
    with pytest.raises(abo.TrialNotFoundError):
        study.trial(999)
    with pytest.raises(abo.InvalidValueError, match="value"):
        study.tell(other.id, math.nan)
    with pytest.raises(abo.SearchSpaceError, match="x"):
        study.enqueue({"x": 9.0, "n": 1})
    with pytest.raises(abo.SearchSpaceError, match="n"):
        study.add({"x": 0.0, "n": 99}, 1.0)
    with pytest.raises(abo.AboError, match="objective"):
        study.hypervolume()
    assert [t.id for t in study.pending] == [other.id] and len(study) == 2  # nothing changed


def _transcript(study: StudyLike) -> list[Any]:
    """What a script of good and bad calls gives: results as plain data, errors as their
    type, field and message."""
    t1, t2 = study.ask_batch(2)
    t3 = study.ask(info={"driver": "d"})
    out: list[Any] = [[t.params for t in (t1, t2, t3)]]
    bad: list[Callable[[], Any]] = [
        lambda: study.tell(t1.id, math.nan),
        lambda: study.tell(t1.id, 1.0, {"loss": math.inf}),
        lambda: study.tell(999, 1.0),
        lambda: study.tell("1", 1.0),  # type: ignore[arg-type]
        lambda: study.tell(True, 1.0),  # type: ignore[arg-type]
        lambda: study.trial("1"),  # type: ignore[arg-type]
        lambda: study.fail(t2.id, "x", info={"t": math.nan}),
        lambda: study.report(t3.id, -1, 0.5),
        lambda: study.report(t3.id, 1, "high"),
        lambda: study.enqueue({"x": 9.0, "n": 1}),
        lambda: study.add({"x": 0.0}, 1.0),
        lambda: study.add({"x": 0.0, "n": 1}, {"loss": 1.0}),
        lambda: study.ask_batch(0),
        lambda: study.ask_batch(1, pace=-1.0),
        lambda: study.ask_batch(2, info=[{}]),
        lambda: study.reference_point(),
        lambda: study.hypervolume({"value": 1.0}),
    ]
    out += [_error(call) for call in bad]
    done = study.tell(t1.id, 0.5, {"note": "hi"})
    out += [(done.id, done.state.value, done.values, done.user)]
    out += [_error(lambda: study.tell(t1.id, 0.6))]
    out += [study.fail(np.int64(t2.id), "diverged").reason, study.report(t3.id, 2, 0.4)]
    out += [_error(lambda: study.report(t3.id, 1, 0.3)), _error(lambda: study.fail(t1.id))]
    out += [study.add({"x": 0.5, "n": 4}, 0.25).id, study.enqueue({"x": 1.0, "n": 2})]
    out += [study.heartbeat(t3.id).state.value, study.lose(t3.id, "node died").state.value]
    out += [[(t.id, t.state.value, t.params, t.values) for t in study.trials]]
    best = study.best
    out += [best.id if best else None, len(study), sorted(study.reports())]
    return out


def test_a_script_gives_the_same_transcript_locally_and_over_http(
    local: Make, remote: Make
) -> None:
    """Same seed, same calls, same name: the same trials, values and errors, message for
    message, from a study in this process and one on the service."""
    mine, theirs = _transcript(local("script")), _transcript(remote("script"))
    for step, (a, b) in enumerate(zip(mine, theirs, strict=True)):
        assert a == b, (step, a, b)
