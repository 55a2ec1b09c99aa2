"""Proposer leases between replicas on one database (``abo.service.proposers``), on a real
SQLite file and on PostgreSQL, with the storage clock under the test's control."""

from __future__ import annotations

import pytest

import abo
from abo.core.exceptions import ProposerMoved
from abo.service.proposers import ProposerLeases
from abo.storage import SQLStorage
from abo.study.study import Study


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture()
def shared(storage_url: str) -> tuple[SQLStorage, SQLStorage, Clock]:
    """Two replicas' storages on one database, sharing one clock."""
    clock = Clock()
    a, b = SQLStorage(storage_url, clock=clock), SQLStorage(storage_url, clock=clock)
    yield a, b, clock
    a.dispose()
    b.dispose()


def _study(storage: SQLStorage) -> abo.Study:
    return abo.create_study(
        {"x": abo.Float(0.0, 1.0)}, name="leased", storage=storage, strategy="random", seed=1
    )


def test_one_holder_until_its_lease_expires_then_the_next_at_a_new_epoch(shared) -> None:
    a_storage, b_storage, clock = shared
    record = _study(a_storage).record
    a = ProposerLeases(a_storage, "http://a:1", seconds=10.0, monotonic=clock)
    b = ProposerLeases(b_storage, "http://b:2", seconds=10.0, monotonic=clock)
    first = a.claim(record)
    assert (first.holder, first.address, first.epoch) == (a.holder, "http://a:1", 1)
    assert b.claim(record) == first and not b.holds(record)  # another's live lease: untouched
    clock.now += 9.0
    assert a.claim(record).expires_at == clock.now + 10.0  # renewed, same epoch
    clock.now += 10.5  # a stopped renewing (dead): b takes it over at the next epoch
    taken = b.claim(record)
    assert (taken.holder, taken.epoch) == (b.holder, 2) and b.holds(record)
    assert a.claim(record) == taken and not a.holds(record)
    a.release(record)  # not a's: stays b's
    with b_storage.reading(record) as tx:
        assert tx.proposer() == taken
    b.close()  # a stopping replica hands its studies on at once (its lease ends now)
    with b_storage.reading(record) as tx:
        assert tx.proposer().expires_at == 0.0
    assert a.claim(record).epoch == 3 and a.holds(record)


def test_a_round_whose_lease_moved_stores_nothing(shared) -> None:
    """The fencing token: a replica that lost the lease during its round (paused past the
    lease's length, another took over) cannot store the round's trials."""
    a_storage, b_storage, clock = shared
    record = _study(a_storage).record
    a = ProposerLeases(a_storage, "http://a:1", seconds=10.0, monotonic=clock)
    b = ProposerLeases(b_storage, "http://b:2", seconds=10.0, monotonic=clock)
    mine = Study(a_storage, record, fence=a.fence)
    with a.round(record):
        assert len(mine.ask_batch(2)) == 2  # holding the lease: stored
    with a.round(record):
        clock.now += 11.0
        b.claim(record)  # a's lease expired mid-round: b took it
        with pytest.raises(ProposerMoved, match="changed hands|lost the proposer lease"):
            mine.ask_batch(3)
    assert len(mine.trials) == 2  # nothing of the refused round
    with pytest.raises(ProposerMoved, match="another replica"):
        with a.round(record):
            pass  # b's live lease: a runs no round
    theirs = Study(b_storage, record, fence=b.fence)
    with b.round(record):
        assert [t.id for t in theirs.ask_batch(1)] == [3]


def test_idle_leases_are_released_and_used_ones_renewed(shared) -> None:
    a_storage, _, clock = shared
    record = _study(a_storage).record
    a = ProposerLeases(a_storage, None, seconds=10.0, idle=1.0, monotonic=clock)
    with a.round(record):
        pass
    assert a.proposing() == ["leased"]
    clock.now += 2.0
    a.renew()  # unused for longer than idle: released
    with a_storage.reading(record) as tx:
        assert tx.proposer().expires_at == 0.0
    assert a.proposing() == []
    busy = ProposerLeases(a_storage, None, seconds=10.0, idle=3600.0, monotonic=clock)
    with busy.round(record):
        pass
    before = busy.claim(record).expires_at
    clock.now += 5.0
    busy.renew()
    with a_storage.reading(record) as tx:
        assert tx.proposer().expires_at == before + 5.0


def test_a_round_longer_than_idle_keeps_its_lease(shared) -> None:
    """A round that runs past ``idle`` (a cold worker importing torch, a wide space) is not
    idle: its lease is renewed while it runs, and idle time counts from its end."""
    a_storage, _, clock = shared
    record = _study(a_storage).record
    a = ProposerLeases(a_storage, None, seconds=10.0, idle=1.0, monotonic=clock)
    with a.round(record):
        clock.now += 5.0
        a.renew()  # five idles into the round: renewed, not released
        with a_storage.reading(record) as tx:
            assert tx.proposer().expires_at == clock.now + 10.0
        assert a.proposing() == ["leased"]
    clock.now += 0.5
    a.renew()  # half an idle after the round's end: kept
    assert a.proposing() == ["leased"]
    clock.now += 1.0
    a.renew()
    assert a.proposing() == []


def test_deleting_a_study_removes_its_lease(shared) -> None:
    a_storage, _, clock = shared
    study = _study(a_storage)
    a = ProposerLeases(a_storage, None)
    a.claim(study.record)
    abo.delete_study("leased", storage=a_storage)
    clock.now += 1.0
    again = _study(a_storage)  # same name, a new study: no lease carried over
    with a_storage.reading(again.record) as tx:
        assert tx.proposer() is None
    a.renew()  # the old study's lease is dropped without error
    assert a.proposing() == []


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"advertise_url": "ftp://host:1"}, "advertise_url"),
        ({"advertise_url": "http://"}, "advertise_url"),
        ({"proposer_lease": 0}, "proposer_lease"),
        ({"proposer_lease": float("nan")}, "proposer_lease"),
    ],
)
def test_the_app_refuses_a_bad_address_or_lease_naming_it(options: dict, field: str) -> None:
    from abo.service.app import create_app

    with pytest.raises(abo.AboError, match=field):
        create_app("sqlite://", **options)


def test_abo_serve_refuses_a_bad_advertised_address_before_serving() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "abo.cli.main", "serve", "--storage", "sqlite://",
         "--advertise-url", "nowhere"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1 and "advertise_url" in done.stderr


def test_the_default_address_is_the_bound_one_or_the_machine_name() -> None:
    import socket

    from abo.cli.serve_command import default_address

    assert default_address("127.0.0.1", 8801) == "http://127.0.0.1:8801"
    assert default_address("::1", 8801) == "http://[::1]:8801"
    assert default_address("0.0.0.0", 8801) == f"http://{socket.getfqdn()}:8801"
