"""Trial states: only ``running`` moves; snapshots serialise to JSON."""

from __future__ import annotations

import json

import pytest

from abo import Trial, TrialState, TrialStateError
from abo.storage.lifecycle import check_transition


@pytest.mark.parametrize("new", [TrialState.DONE, TrialState.FAILED, TrialState.LOST])
def test_running_moves_to_any_final_state(new: TrialState) -> None:
    check_transition(1, TrialState.RUNNING, new)
    assert new.is_finished
    assert not TrialState.RUNNING.is_finished


@pytest.mark.parametrize("old", [TrialState.DONE, TrialState.FAILED, TrialState.LOST])
@pytest.mark.parametrize("new", list(TrialState))
def test_final_states_never_move(old: TrialState, new: TrialState) -> None:
    with pytest.raises(TrialStateError, match=f"trial 7: cannot move from {old} to {new}"):
        check_transition(7, old, new)


def test_running_cannot_move_to_running() -> None:
    with pytest.raises(TrialStateError):
        check_transition(1, TrialState.RUNNING, TrialState.RUNNING)


def test_state_is_a_string() -> None:
    assert str(TrialState.DONE) == "done"
    assert TrialState("lost") is TrialState.LOST


def test_trial_is_a_frozen_snapshot_with_json_dict() -> None:
    t = Trial(
        id=3,
        study="s",
        params={"x": 0.5, "k": "a"},
        state=TrialState.DONE,
        value=1.5,
        retry_of=1,
        attempt=1,
        info={"strategy": "sobol"},
        created_at=10.0,
        finished_at=12.5,
    )
    with pytest.raises(AttributeError):
        t.value = 2.0  # type: ignore[misc]
    d = json.loads(json.dumps(t.to_dict()))
    assert d["state"] == "done" and d["params"] == {"x": 0.5, "k": "a"}
    assert d["retry_of"] == 1 and d["attempt"] == 1 and d["value"] == 1.5
    assert t.duration == 2.5
    assert Trial(id=1, study="s", params={}, state=TrialState.RUNNING).duration is None
    # the dict is a copy: changing it leaves the snapshot alone
    t.to_dict()["params"]["x"] = 9.0
    assert t.params["x"] == 0.5
