"""Every storage backend in turn: in memory, a SQLite file, PostgreSQL (``backend``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from abo import Float, Int, Space
from abo.core.outcomes import Objective
from abo.spec.study_spec import StudySpec
from abo.storage import MemoryStorage, SQLStorage, Storage, StudyRecord

SPACE = Space({"x": Float(0.0, 1.0), "n": Int(1, 9)})


class Clock:
    """A clock the test moves by hand (leases and timestamps without sleeping)."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Backend:
    """A storage, and how to open a second handle on the same data (another process)."""

    name: str
    store: Storage
    clock: Clock
    opener: Callable[[], Storage]
    opened: list[Storage] = field(default_factory=list)

    def reopen(self) -> Storage:
        other = self.opener()
        self.opened.append(other)
        return other


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path) -> Iterator[Backend]:
    clock = Clock()
    if request.param == "memory":
        store: Storage = MemoryStorage(clock=clock)
        b = Backend("memory", store, clock, lambda: store)
    else:
        url = (
            f"sqlite:///{tmp_path / 'abo.db'}"
            if request.param == "sqlite"
            else request.getfixturevalue("pg_url")
        )
        b = Backend(
            request.param, SQLStorage(url, clock=clock), clock, lambda: SQLStorage(url, clock=clock)
        )
    yield b
    for s in [b.store, *b.opened]:
        s.dispose()


def record(name: str = "s", direction: str = "minimize", **options: object) -> StudyRecord:
    spec = StudySpec(
        space=SPACE,
        outcomes=(Objective("value", direction),),
        strategy="random",
        seed=1,
        **options,  # type: ignore[arg-type]
    )
    return StudyRecord(name=name, spec=spec)


def points(k: int, offset: int = 0) -> list[dict]:
    return [{"x": (i + offset) / 100, "n": 1 + (i + offset) % 9} for i in range(k)]


def v(x: float) -> dict[str, float]:
    """One objective's values."""
    return {"value": x}
