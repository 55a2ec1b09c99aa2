"""Study API: ask/tell/fail/enqueue/add, bad input that changes nothing, leases, determinism."""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import abo
from abo import (
    AboError,
    Categorical,
    Float,
    Int,
    InvalidValueError,
    SearchSpaceError,
    Space,
    StorageError,
    StudyNotFoundError,
    TrialNotFoundError,
    TrialState,
    TrialStateError,
    UnknownStrategyError,
)
from abo.storage import SQLStorage, StudyRecord

SPACE = Space({"x": Float(-2.0, 2.0), "k": Int(1, 5), "c": Categorical(["a", "b", "c"])})
MIXED = Space(
    {
        "lr": Float(1e-5, 1e-1, log=True),
        "layers": Int(1, 8),
        "width": Int(4, 512, log=True),
        "opt": Categorical(["sgd", "adam", "rmsprop"]),
    }
)
# a small acquisition budget keeps the model phase fast; the strategy is still the default
FAST = {"mc_samples": 32, "raw_samples": 64, "num_restarts": 2}


def objective(p: dict[str, Any]) -> float:
    return (p["x"] - 0.5) ** 2 + 0.1 * p["k"] + {"a": 0.0, "b": 0.3, "c": 0.6}[p["c"]]


def mixed_objective(p: dict[str, Any]) -> float:
    opt = {"sgd": 0.3, "adam": 0.0, "rmsprop": 0.1}[p["opt"]]
    return abs(math.log10(p["lr"]) + 3) + abs(p["layers"] - 3) / 10 + opt + p["width"] / 512


def snapshot(study: abo.Study) -> tuple:
    """Everything the storage holds for a study, to show that bad input changed nothing."""
    fresh = abo.load_study(study.name, storage=study.storage)
    return (
        [t.to_dict() for t in fresh.trials],
        [q.__dict__ for q in fresh.storage.queued(fresh.record)],
        len(fresh),
    )


@pytest.fixture()
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'study.db'}"


@pytest.fixture()
def study(sqlite_url: str) -> abo.Study:
    """A SQLite study with one done, one failed and one running trial."""
    s = abo.create_study(SPACE, name="s", storage=sqlite_url, strategy="random", seed=0)
    done, failed, _running = s.ask_batch(3)
    s.tell(done.id, 1.25)
    s.fail(failed.id, "diverged")
    return s


# -- create / load ---------------------------------------------------------------------------
def test_create_then_load_from_the_same_url(sqlite_url: str) -> None:
    s = abo.create_study(SPACE, name="tune", storage=sqlite_url, strategy="random", seed=3)
    t = s.ask()
    s.tell(t.id, 0.5)
    loaded = abo.load_study("tune", storage=sqlite_url)
    assert loaded.space == SPACE and loaded.seed == 3 and loaded.strategy == "random"
    assert [(x.id, x.state, x.value, x.params) for x in loaded.trials] == [
        (t.id, TrialState.DONE, 0.5, t.params)
    ]


def test_create_twice_needs_load_if_exists(sqlite_url: str) -> None:
    s = abo.create_study(SPACE, name="tune", storage=sqlite_url, strategy="random", seed=3)
    s.tell(s.ask().id, 0.5)
    with pytest.raises(abo.DuplicatedStudyError, match="name"):
        abo.create_study(SPACE, name="tune", storage=sqlite_url, strategy="random")
    resumed = abo.create_study(
        SPACE, name="tune", storage=sqlite_url, strategy="random", load_if_exists=True
    )
    assert len(resumed) == 1 and resumed.seed == 3
    other = Space({**SPACE, "x": Float(-3.0, 2.0)})
    with pytest.raises(SearchSpaceError, match="space"):
        abo.create_study(other, name="tune", storage=sqlite_url, load_if_exists=True)
    with pytest.raises(SearchSpaceError, match="space"):
        abo.create_study(
            {"x": Float(-2.0, 2.0)}, name="tune", storage=sqlite_url, load_if_exists=True
        )
    assert len(abo.load_study("tune", storage=sqlite_url)) == 1


class RivalCreates(SQLStorage):
    """A real storage on which another client creates the study right after our first look.

    This pins down the interleaving that workers started at once hit by chance: both look, find
    nothing, and both insert.
    """

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.rival_created = False

    def load_study(self, name: str) -> StudyRecord:
        try:
            return super().load_study(name)
        except StudyNotFoundError:
            if not self.rival_created:
                self.rival_created = True
                rival = SQLStorage(self.url)
                abo.create_study(SPACE, name=name, storage=rival, strategy="random", seed=9)
                rival.dispose()
            raise


def test_load_if_exists_resumes_a_study_created_between_look_and_insert(
    storage_url: str,
) -> None:
    store = RivalCreates(storage_url)
    s = abo.create_study(SPACE, name="race", storage=store, strategy="random", load_if_exists=True)
    assert store.rival_created
    assert s.seed == 9  # the rival's study, resumed
    assert [r.name for r in store.list_studies()] == ["race"]
    other = Space({"x": Float(0.0, 1.0)})
    with pytest.raises(SearchSpaceError, match="space"):
        abo.create_study(
            other, name="race2", storage=RivalCreates(storage_url), load_if_exists=True
        )
    store.dispose()


def test_load_study_needs_a_string_name(sqlite_url: str) -> None:
    with pytest.raises(AboError, match="^name:"):
        abo.load_study(3, storage=sqlite_url)  # type: ignore[arg-type]


def test_missing_study_raises_study_not_found(sqlite_url: str) -> None:
    abo.create_study(SPACE, name="there", storage=sqlite_url)
    with pytest.raises(StudyNotFoundError, match="nope") as info:
        abo.load_study("nope", storage=sqlite_url)
    assert "there" in str(info.value)  # lists what exists


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:////definitely/not/a/folder/abo.db",
        "garbage",
        "nosuchdialect://host/db",
        "postgresql://postgres@127.0.0.1:1/test",
    ],
)
def test_unopenable_storage_raises_storage_error(url: str) -> None:
    with pytest.raises(StorageError, match="storage"):
        abo.create_study(SPACE, storage=url)
    with pytest.raises(StorageError, match="storage"):
        abo.load_study("x", storage=url)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"direction": "up"}, "direction"),
        ({"name": "bad name!"}, "name"),
        ({"seed": -1}, "seed"),
        ({"seed": 1.5}, "seed"),
        ({"n_initial": 0}, "n_initial"),
        ({"lease_seconds": 0}, "lease_seconds"),
        ({"seed": 2**64}, "seed"),
        ({"n_initial": True}, "n_initial"),
        ({"lease_seconds": math.inf}, "lease_seconds"),
        ({"lease_seconds": math.nan}, "lease_seconds"),
        ({"max_retries": -1}, "max_retries"),
        ({"max_retries": True}, "max_retries"),
        ({"noise": "loud"}, "noise"),
    ],
)
def test_bad_create_arguments_name_the_field(sqlite_url: str, kwargs: dict, field: str) -> None:
    with pytest.raises(AboError) as info:
        abo.create_study(SPACE, storage=sqlite_url, **kwargs)
    assert str(info.value).startswith(f"{field}:")
    assert SQLStorage(sqlite_url).list_studies() == []


def test_unknown_strategy_lists_the_valid_ones(sqlite_url: str) -> None:
    with pytest.raises(UnknownStrategyError) as info:
        abo.create_study(SPACE, storage=sqlite_url, strategy="bogus")
    message = str(info.value)
    assert message.startswith("strategy:") and "bogus" in message
    for name in abo.strategies():
        assert name in message
    with pytest.raises(UnknownStrategyError, match="strategy_options"):
        abo.create_study(SPACE, storage=sqlite_url, strategy="random", strategy_options={"nope": 1})
    assert SQLStorage(sqlite_url).list_studies() == []


# -- ask / tell / fail -------------------------------------------------------------------------
def test_ask_returns_a_running_trial_with_decoded_params() -> None:
    s = abo.create_study(SPACE, strategy="random", seed=1)
    before = time.time()
    t = s.ask()
    assert t.state is TrialState.RUNNING and t.id == 1 and t.value is None
    assert SPACE.validate(t.params) == t.params
    assert type(t.params["k"]) is int and t.params["c"] in ("a", "b", "c")
    assert t.lease_expires_at is not None and t.lease_expires_at > before + 3600
    assert [p.id for p in s.pending] == [t.id]


def test_ask_batch_gives_distinct_running_trials() -> None:
    s = abo.create_study(SPACE, strategy="random", seed=1)
    batch = s.ask_batch(4)
    assert len(batch) == 4
    assert [t.id for t in batch] == [1, 2, 3, 4]
    assert all(t.state is TrialState.RUNNING for t in batch)
    assert len({tuple(sorted(t.params.items())) for t in batch}) == 4
    assert len(s.pending) == 4 and len(s) == 4


def test_tell_and_fail_finish_trials_and_best_follows_direction() -> None:
    for direction, expected in (("minimize", -1.0), ("maximize", 7.0)):
        s = abo.create_study(SPACE, strategy="random", seed=2, direction=direction)
        a, b, c, d = s.ask_batch(4)
        assert s.best is None
        told = s.tell(a.id, 3.0, metadata={"epoch": 4})
        assert told.state is TrialState.DONE and told.value == 3.0 and told.user == {"epoch": 4}
        s.tell(b.id, -1.0)
        s.tell(c.id, 7.0)
        failed = s.fail(d.id, "diverged")
        assert failed.state is TrialState.FAILED and failed.reason == "diverged"
        assert s.best is not None and s.best.value == expected
        assert s.pending == []
        assert [t.state for t in s.trials] == [TrialState.DONE] * 3 + [TrialState.FAILED]
        assert len(s) == 4


def test_tell_accepts_numpy_and_tensor_scalars() -> None:
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    s = abo.create_study(SPACE, strategy="random", seed=2)
    a, b = s.ask_batch(2)
    assert s.tell(a.id, np.float32(0.5)).value == 0.5
    assert s.tell(b.id, torch.tensor(2.0)).value == 2.0


def test_numpy_params_are_stored_as_plain_python_values(sqlite_url: str) -> None:
    np = pytest.importorskip("numpy")
    s = abo.create_study(SPACE, name="np", storage=sqlite_url, strategy="random", seed=4)
    s.add({"x": np.float64(0.5), "k": np.int64(3), "c": np.str_("b")}, np.float32(1.0))
    (t,) = abo.load_study("np", storage=sqlite_url).trials
    assert t.params == {"x": 0.5, "k": 3, "c": "b"} and t.value == 1.0
    assert [type(v) for v in t.params.values()] == [float, int, str]


def test_enqueued_params_come_back_from_the_next_ask() -> None:
    s = abo.create_study(SPACE, strategy="random", seed=4)
    first = {"x": 0.25, "k": 3, "c": "b"}
    second = {"x": -1, "k": 5.0, "c": "a"}
    s.enqueue(first)
    s.enqueue(second)
    a = s.ask()
    assert a.params == first and a.proposal.strategy == "enqueued"
    b, c = s.ask_batch(2)
    assert b.params == {"x": -1.0, "k": 5, "c": "a"}
    assert type(b.params["x"]) is float and type(b.params["k"]) is int
    assert c.proposal.strategy != "enqueued"


def test_added_results_are_done_trials_the_model_uses() -> None:
    s = abo.create_study(SPACE, seed=5, n_initial=2, strategy_options=FAST)
    a = s.add({"x": 0.5, "k": 1, "c": "a"}, 0.1, metadata={"source": "paper"})
    s.add({"x": -2.0, "k": 5, "c": "c"}, 5.0)
    assert a.state is TrialState.DONE and a.value == 0.1 and a.user == {"source": "paper"}
    assert a.proposal.strategy == "added"
    t = s.ask()  # two observations and n_initial=2 reached: the GP proposes this one
    assert t.proposal.strategy == "auto"
    assert t.proposal.n_observations == 2
    assert s.best is not None and s.best.id == a.id


# -- bad input changes nothing ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (math.nan, "finite"),
        (math.inf, "finite"),
        (-math.inf, "finite"),
        ("0.3", "real number"),
        (None, "real number"),
        ([0.3], "real number"),
        (True, "real number"),
        (10**400, "finite"),
    ],
)
def test_tell_with_a_bad_value_changes_nothing(study: abo.Study, value: Any, reason: str) -> None:
    running = study.pending[0]
    before = snapshot(study)
    with pytest.raises(InvalidValueError) as info:
        study.tell(running.id, value)
    assert str(info.value).startswith("value:") and reason in str(info.value)
    assert snapshot(study) == before


@pytest.mark.parametrize("trial_id", [99, 0, -5, 2**40, 2**70])
@pytest.mark.parametrize("call", ["tell", "fail", "heartbeat", "trial", "lose"])
def test_unknown_trial_id_changes_nothing(study: abo.Study, call: str, trial_id: int) -> None:
    before = snapshot(study)
    args = {"tell": (trial_id, 1.0), "lose": (trial_id, "gone")}.get(call, (trial_id,))
    with pytest.raises(TrialNotFoundError) as info:
        getattr(study, call)(*args)
    assert str(info.value).startswith("trial_id:") and str(trial_id) in str(info.value)
    with pytest.raises(AboError, match="trial_id"):
        study.tell("1", 1.0)
    assert snapshot(study) == before


def test_second_tell_same_value_is_a_no_op_different_is_an_error(study: abo.Study) -> None:
    done = study.trials[0]
    before = snapshot(study)
    again = study.tell(done.id, 1.25)
    assert again == done
    assert snapshot(study) == before
    with pytest.raises(TrialStateError) as info:
        study.tell(done.id, 2.0)
    assert str(info.value).startswith("value:") and "1.25" in str(info.value)
    assert snapshot(study) == before


def test_fail_after_done_and_tell_after_failed_are_refused(study: abo.Study) -> None:
    done, failed = study.trials[0], study.trials[1]
    before = snapshot(study)
    with pytest.raises(TrialStateError, match="trial_id: trial 1 is already done"):
        study.fail(done.id, "oops")
    with pytest.raises(TrialStateError, match="trial_id: trial 2 is already failed"):
        study.tell(failed.id, 1.0)
    assert study.fail(failed.id, "diverged") == failed  # an identical repeat
    assert snapshot(study) == before


GOOD = {"x": 0.0, "k": 2, "c": "a"}


@pytest.mark.parametrize(
    ("params", "field", "reason"),
    [
        ({"x": 0.0, "k": 2}, "c", "missing"),
        ({**GOOD, "y": 1.0}, "y", "unknown"),
        ({**GOOD, "x": 2.5}, "x", "outside"),
        ({**GOOD, "k": 0}, "k", "outside"),
        ({**GOOD, "x": "0.3"}, "x", "real number"),
        ({**GOOD, "x": True}, "x", "real number"),
        ({**GOOD, "k": 2.5}, "k", "integer"),
        ({**GOOD, "c": "d"}, "c", "not one of"),
        ({**GOOD, "x": math.nan}, "x", "finite"),
        ({**GOOD, "x": 10**400}, "x", "outside"),
        ({**GOOD, "k": 10**400}, "k", "outside"),
    ],
)
@pytest.mark.parametrize("call", ["enqueue", "add"])
def test_enqueue_and_add_with_bad_params_change_nothing(
    study: abo.Study, call: str, params: dict, field: str, reason: str
) -> None:
    before = snapshot(study)
    with pytest.raises(SearchSpaceError) as info:
        if call == "enqueue":
            study.enqueue(params)
        else:
            study.add(params, 1.0)
    assert str(info.value).startswith(f"{field}:") and reason in str(info.value)
    assert snapshot(study) == before


@pytest.mark.parametrize("value", [math.nan, math.inf, "1", None])
def test_add_with_a_bad_value_changes_nothing(study: abo.Study, value: Any) -> None:
    before = snapshot(study)
    with pytest.raises(InvalidValueError, match="^value:"):
        study.add(GOOD, value)
    assert snapshot(study) == before


@pytest.mark.parametrize("n", [0, -1, 1.5, "2", True])
def test_ask_batch_with_bad_n_changes_nothing(study: abo.Study, n: Any) -> None:
    before = snapshot(study)
    with pytest.raises(AboError, match="^n:"):
        study.ask_batch(n)
    assert snapshot(study) == before


@pytest.mark.parametrize("pace", [0, -1.0, math.nan, math.inf, "0.5", True])
def test_ask_batch_with_a_bad_pace_changes_nothing(study: abo.Study, pace: Any) -> None:
    before = snapshot(study)
    with pytest.raises(AboError, match="^pace:") as info:
        study.ask_batch(2, pace=pace)
    assert info.value.field == "pace"
    assert snapshot(study) == before


def test_ask_batch_takes_a_pace(study: abo.Study) -> None:
    trials = study.ask_batch(2, pace=0.25)
    assert len({t.id for t in trials}) == 2 and all(t.state is TrialState.RUNNING for t in trials)


# -- leases ------------------------------------------------------------------------------------
LEASE = 0.5


def lease_study(url: str, lease: float = LEASE, **kwargs: Any) -> abo.Study:
    return abo.create_study(
        SPACE, storage=url, strategy="random", seed=7, lease_seconds=lease, **kwargs
    )


def test_expired_lease_is_lost_on_the_next_ask_and_retried(storage_url: str) -> None:
    s = lease_study(storage_url)
    t = s.ask()
    time.sleep(LEASE + 0.2)
    retry = s.ask()
    lost = s.trial(t.id)
    assert lost.state is TrialState.LOST and lost.reason == "lease expired"
    assert retry.id == t.id + 1 and retry.state is TrialState.RUNNING
    assert retry.retry_of == t.id and retry.attempt == 1 and retry.params == t.params
    # lost exactly once (the retry's own short lease may run out too on loaded cores)
    assert t.id not in [x.id for x in s.reap()]


def test_expired_lease_is_lost_on_the_next_tell_and_retried(storage_url: str) -> None:
    s = lease_study(storage_url)
    stale, fresh = s.ask_batch(2)
    time.sleep(0.3)
    s.heartbeat(fresh.id)
    time.sleep(0.3)  # stale's lease expired, fresh's not
    assert s.tell(fresh.id, 1.0).state is TrialState.DONE
    assert s.trial(stale.id).state is TrialState.LOST
    queue = s.storage.queued(s.record)
    assert [(q.params, q.retry_of, q.attempt) for q in queue] == [(stale.params, stale.id, 1)]
    retry = s.ask()
    assert (retry.params, retry.retry_of, retry.attempt) == (stale.params, stale.id, 1)


def test_heartbeat_keeps_a_trial_alive_past_its_first_expiry(storage_url: str) -> None:
    s = lease_study(storage_url)
    t = s.ask()
    first_expiry = t.lease_expires_at
    deadline = time.time() + 2.5 * LEASE
    while time.time() < deadline:
        time.sleep(LEASE / 3)
        beat = s.heartbeat(t.id)
    assert beat.lease_expires_at > first_expiry + LEASE
    nxt = s.ask()
    assert s.trial(t.id).state is TrialState.RUNNING
    assert nxt.retry_of is None and nxt.attempt == 0
    assert s.tell(t.id, 2.0).state is TrialState.DONE


def test_a_heartbeat_after_expiry_does_not_revive_the_trial(storage_url: str) -> None:
    s = lease_study(storage_url)
    t = s.ask()
    time.sleep(LEASE + 0.2)  # expired, and nobody has reaped it yet
    with pytest.raises(TrialStateError, match="lost"):
        s.heartbeat(t.id)
    assert s.trial(t.id).state is TrialState.LOST
    assert s.ask().retry_of == t.id


def test_a_second_loss_is_not_requeued_after_max_retries(storage_url: str) -> None:
    s = lease_study(storage_url, max_retries=1)
    t = s.ask()
    time.sleep(LEASE + 0.2)
    retry = s.ask()
    assert retry.retry_of == t.id and retry.attempt == 1
    time.sleep(LEASE + 0.2)
    third = s.ask()
    assert s.trial(retry.id).state is TrialState.LOST
    assert third.retry_of is None and third.attempt == 0
    assert s.storage.queued(s.record) == []
    assert sum(1 for x in s.trials if x.retry_of is not None) == 1


def test_a_late_tell_on_a_lost_trial_keeps_it_lost_and_out_of_best(storage_url: str) -> None:
    # a longer lease: the retry must stay alive through the calls below on a loaded machine
    s = lease_study(storage_url, lease=2.0, direction="minimize")
    t = s.ask()
    time.sleep(2.2)
    retry = s.ask()
    late = s.tell(t.id, -100.0)  # would be the best value by far
    assert late.state is TrialState.LOST
    assert s.tell(t.id, -100.0).state is TrialState.LOST  # repeat: no-op
    with pytest.raises(TrialStateError):
        s.tell(t.id, -50.0)
    s.tell(retry.id, 3.0)
    assert s.best is not None and s.best.id == retry.id and s.best.value == 3.0
    assert [x.id for x in s.storage.trials(s.record, [TrialState.DONE])] == [retry.id]


# -- reproducibility and decoding through the whole study ---------------------------------
def run_study(space: Space, seed: int, n: int, f, **kwargs: Any) -> list[abo.Trial]:
    s = abo.create_study(space, seed=seed, strategy_options=FAST, **kwargs)
    out = []
    for i in range(n):
        if i % 4 == 3:
            batch = s.ask_batch(2)
        else:
            batch = [s.ask()]
        for t in batch:
            s.tell(t.id, f(t.params))
        out += batch
    return out


REPRO_SPACE = Space(
    {"x": Float(-2.0, 2.0), "k": Int(1, 5, log=True), "c": Categorical(["a", "b", "c"])}
)


@pytest.mark.slow
def test_same_seed_same_proposals_through_the_model_phase() -> None:
    a = run_study(REPRO_SPACE, 11, 7, objective, n_initial=3)
    b = run_study(REPRO_SPACE, 11, 7, objective, n_initial=3)
    assert len(a) == 8
    assert sum(t.proposal.strategy == "auto" for t in a) >= 5  # well past n_initial
    assert [t.params for t in a] == [t.params for t in b]
    assert [t.proposal.strategy for t in a] == [t.proposal.strategy for t in b]
    c = run_study(REPRO_SPACE, 12, 3, objective, n_initial=3)
    assert [t.params for t in c] != [t.params for t in a[: len(c)]]


@pytest.mark.slow
def test_mixed_space_decodes_to_valid_values_in_both_phases() -> None:
    trials = run_study(MIXED, 3, 7, mixed_objective, n_initial=4)
    phases = {t.proposal.strategy for t in trials}
    assert {"sobol", "auto"} <= phases
    for t in trials:
        p = t.params
        assert MIXED.validate(p) == p
        assert type(p["layers"]) is int and 1 <= p["layers"] <= 8
        assert type(p["width"]) is int and 4 <= p["width"] <= 512
        assert type(p["lr"]) is float and 1e-5 <= p["lr"] <= 1e-1
        assert p["opt"] in ("sgd", "adam", "rmsprop")
    assert len({tuple(sorted(t.params.items())) for t in trials}) == len(trials)


def test_threads_sharing_one_study_get_distinct_trials(storage_url: str) -> None:
    s = abo.create_study(SPACE, storage=storage_url, strategy="random", seed=8)
    told: dict[int, float] = {}
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for _ in range(5):
                t = s.ask()
                told[t.id] = s.tell(t.id, objective(t.params) + k).value
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    trials = s.trials
    assert [t.id for t in trials] == list(range(1, 21)) and sorted(told) == list(range(1, 21))
    assert all(t.state is TrialState.DONE and t.value == told[t.id] for t in trials)


@pytest.mark.parametrize("failure_model", ["worst", "classifier"])
def test_failed_trials_steer_the_model_away_and_caller_info_survives_the_model_phase(
    failure_model: str,
) -> None:
    """A failed region is modelled at the worst value, or learnt by the failure classifier
    (the default under qlognei); ask_batch(info=...) reaches GP trials.

    The objective improves towards x = 0.5 and fails below it: a model blind to failures
    extrapolates the trend into the failing region again and again.
    """
    import abo

    space = abo.Space({"x": abo.Float(0.0, 1.0)})
    study = abo.create_study(
        space, strategy="qlognei", seed=5, n_initial=4, failure_model=failure_model
    )

    def evaluate(t: abo.Trial) -> None:
        if t.params["x"] > 0.5:
            study.tell(t.id, t.params["x"])
        else:
            study.fail(t.id, reason="diverged")

    for _ in range(4):
        evaluate(study.ask())
    proposals = []
    for _ in range(6):
        t = study.ask_batch(1, info={"client_id": "c1"})[0]
        assert t.info["client_id"] == "c1" and t.proposal.strategy == "qlognei"
        done = sum(1 for u in study.trials if u.state is TrialState.DONE)
        modelled = done if failure_model == "classifier" else 4 + len(proposals)
        assert t.proposal.n_observations == modelled
        proposals.append(t.params["x"])
        evaluate(t)
    assert sum(x < 0.45 for x in proposals) <= 1, proposals


# -- abo's own records are apart from the caller's ------------------------------------------------
def test_a_callers_info_never_reaches_abos_proposal_record(tmp_path: Path) -> None:
    """The repro: ``info={"model": "resnet50"}`` with an ask was stored over abo's GP record,
    and every ask after a restart failed, for good. Now ``info`` is the caller's namespace and
    the proposal record (``trial.proposal``) is abo's."""
    url = f"sqlite:///{tmp_path / 'apart.db'}"
    s = abo.create_study(SPACE, name="apart", storage=url, seed=3, strategy_options=FAST)
    for _ in range(10):
        t = s.ask()
        s.tell(t.id, objective(t.params))
    t = s.ask(info={"model": "resnet50", "strategy": "mine"})
    assert t.info == {"model": "resnet50", "strategy": "mine"}
    assert t.proposal.strategy == "auto" and t.proposal.model is not None
    told = s.tell(t.id, 1.0, info={"model": "x", "worker": "w1"})
    assert told.info["model"] == "resnet50" and told.info["worker"] == "w1"  # adds, never sets
    assert told.proposal == t.proposal
    reopened = abo.load_study("apart", storage=url)  # a restart
    nxt = reopened.ask()
    assert nxt.proposal.strategy == "auto" and nxt.proposal.model is not None


def test_a_malformed_model_record_is_skipped_for_the_warm_start(tmp_path: Path) -> None:
    """A stray GP record (written by hand, or by an older release from a caller's info)
    can never break the study's proposals: the newest well-formed record is used."""
    import sqlalchemy as sa

    url = f"sqlite:///{tmp_path / 'old.db'}"
    s = abo.create_study(SPACE, name="old", storage=url, seed=2, strategy_options=FAST)
    for _ in range(10):
        t = s.ask()
        s.tell(t.id, objective(t.params))
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for number, bad in ((9, '"resnet50"'), (10, '{"hypers": "x", "key": 1, "n": "a"}')):
            conn.exec_driver_sql(
                "UPDATE abo_trials SET proposal = ? WHERE number = ?",
                (f'{{"strategy": "qlognei", "model": {bad}}}', number),
            )
    engine.dispose()
    reopened = abo.load_study("old", storage=url)
    assert reopened.trial(10).proposal.model is None and reopened.trial(8).proposal.model
    t = reopened.ask()  # a model proposal, warm-started from trial 8's well-formed record
    assert t.proposal.strategy == "auto" and t.proposal.model is not None


# -- running an example twice ------------------------------------------------------------------
def test_enqueue_and_add_skip_what_the_study_already_has(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'twice.db'}"
    start = {"x": 0.25, "k": 3, "c": "b"}
    known = {"x": 1.0, "k": 2, "c": "a"}
    for run in range(2):  # a script run twice against the same database
        s = abo.create_study(SPACE, name="twice", storage=url, seed=1, load_if_exists=True)
        assert s.enqueue(start) is (run == 0)
        added = s.add(known, 0.8)
        assert added.id == (1 if run == 0 else s.trials[0].id)
        t = s.ask()
        s.tell(t.id, objective(t.params))
    params = [t.params for t in s.trials]
    assert params.count(start) == 1 and params.count(known) == 1 and len(params) == 3
    assert s.add(known, 0.9).id != added.id  # another value is a new observation
    assert s.enqueue(start, allow_duplicate=True)
    assert s.add(known, 0.8, allow_duplicate=True).id not in (added.id,)
    assert s.ask().params == start  # the duplicate was queued on purpose
    assert [t.params for t in s.trials].count(known) == 3


# -- abo's torch threads ------------------------------------------------------------------------
def test_proposals_use_abos_thread_count_and_leave_the_users(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch

    from abo.acquisitions.base import Proposal
    from abo.acquisitions.registry import register_strategy

    seen: list[int] = []

    @register_strategy("test-threads", "records torch's thread count while it proposes")
    class Recording:
        name = "test-threads"
        needs_model = True

        def propose(self, ctx: Any, n: int) -> Proposal:
            seen.append(torch.get_num_threads())
            return Proposal(ctx.uniform(n), [{"strategy": self.name}] * n)

    import threading

    for thread in threading.enumerate():  # an earlier test's background fit in this process
        if thread.name.startswith("abo-"):  # sets the (process-wide) count while it runs
            thread.join(60)
    users = torch.get_num_threads()
    try:
        torch.set_num_threads(3)  # the user's own setting
        s = abo.create_study(SPACE, strategy="test-threads", seed=1, n_initial=2)
        for _ in range(3):
            t = s.ask()
            s.tell(t.id, objective(t.params))
            assert torch.get_num_threads() == 3
        monkeypatch.setenv("ABO_TORCH_THREADS", "2")
        s.tell(s.ask().id, 1.0)
        assert torch.get_num_threads() == 3
        monkeypatch.setenv("ABO_TORCH_THREADS", "many")
        with pytest.raises(AboError, match="ABO_TORCH_THREADS: expected a positive integer"):
            s.ask()
    finally:
        torch.set_num_threads(users)
        from abo.acquisitions import registry

        registry.REGISTRY.pop("test-threads", None)
    assert seen == [1, 2]


# -- named outcomes --------------------------------------------------------------------------
def test_a_named_objective_is_told_a_number_or_a_dict() -> None:
    s = abo.create_study(SPACE, outcomes={"error": "maximize"}, strategy="random", seed=1)
    a, b = s.ask_batch(2)
    assert s.tell(a.id, 0.3).values == {"error": 0.3}
    assert s.tell(b.id, {"error": 0.7}).value == 0.7
    assert s.best.id == b.id and s.direction == "maximize"


@pytest.mark.parametrize(
    ("told", "field"),
    [
        ({"error": 0.1}, "value.cost"),
        ({"error": 0.1, "cost": 2.0, "typo": 1.0}, "value.typo"),
        ({"error": math.nan, "cost": 2.0}, "value.error"),
        ({"error": 0.1, "cost": "cheap"}, "value.cost"),
        (0.5, "value"),
    ],
)
def test_bad_outcome_values_name_the_outcome_and_change_nothing(told: Any, field: str) -> None:
    s = abo.create_study(
        SPACE, outcomes={"error": "minimize", "cost": "minimize"}, strategy="random", seed=1
    )
    t = s.ask()
    before = snapshot(s)
    with pytest.raises(InvalidValueError) as info:
        s.tell(t.id, told)
    assert info.value.field == field and str(info.value).startswith(f"{field}:")
    assert snapshot(s) == before
    done = s.tell(t.id, {"cost": 2.0, "error": 0.1})
    assert done.values == {"error": 0.1, "cost": 2.0} and done.value is None


def test_several_objectives_need_a_strategy_that_fits_and_have_no_single_best() -> None:
    outcomes = {"error": "minimize", "cost": "minimize"}
    with pytest.raises(AboError) as info:
        abo.create_study(SPACE, outcomes=outcomes, strategy="believer")
    assert info.value.field == "strategy"
    assert str(info.value).startswith("strategy: 'believer' models one objective")
    fitting = "strategies for several objectives: auto, parego, qlognehvi, random, thompson"
    assert fitting in str(info.value)
    with pytest.raises(AboError) as info:
        abo.create_study(SPACE, strategy="qlognehvi")
    assert str(info.value).startswith("strategy: 'qlognehvi' is for several objectives")
    assert "believer" in str(info.value) and "qlognehvi," not in str(info.value)
    s = abo.create_study(SPACE, outcomes=outcomes, seed=1)  # the default fits both kinds
    assert s.strategy == "auto"
    s.tell(s.ask().id, {"error": 0.1, "cost": 2.0})
    with pytest.raises(AboError, match="best: this study has 2 objectives .* use best_trials"):
        _ = s.best


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"outcomes": {"a": "smallest"}}, "outcomes.a.direction"),
        ({"outcomes": {}}, "outcomes"),
        ({"outcomes": {"a": "minimize"}, "direction": "maximize"}, "direction"),
        ({"n_intial": 3}, "n_intial"),
        ({"lease_seconds": math.inf}, "lease_seconds"),
        ({"refit": "sometimes"}, "refit"),
        ({"strategy_options": {"no_such_option": 1}}, "strategy_options"),
    ],
)
def test_study_options_are_checked_once_with_a_field(options: dict, field: str) -> None:
    with pytest.raises(AboError) as info:
        abo.create_study(SPACE, **options)
    assert info.value.field == field, str(info.value)


def test_resuming_with_other_outcomes_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'o.db'}"
    abo.create_study(SPACE, name="o", storage=url, outcomes={"error": "minimize"}, seed=1)
    same = abo.create_study(
        SPACE, name="o", storage=url, outcomes={"error": "minimize"}, load_if_exists=True
    )
    assert same.outcomes[0].name == "error"
    with pytest.raises(AboError, match="outcomes: study 'o' exists with other outcomes"):
        abo.create_study(SPACE, name="o", storage=url, load_if_exists=True)
