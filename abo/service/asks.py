"""Asks off the request threads: one proposal round per study serves every waiting asker.

A proposal can take seconds (a GP acquisition optimised per point). Run in FastAPI's shared
threadpool (40 threads), 64 waiting asks filled it, and health checks, heartbeats and tells
queued behind them for seconds. Here an ask waits as a future, not a thread: each study has a
line of waiting asks, drained by a small executor of its own (``threads``, one round per study
at a time). A round takes the asks waiting (up to ``max_batch`` trials), makes one
``Study.ask_batch`` call for all of them and hands each asker its share; a retried ask with the
same ``client_id`` first gets back the running trials it already holds (Vizier semantics).
Beyond ``max_waiting`` waiting asks a new one is refused at once (``AsksBackedUp``: 503 with
a Retry-After estimated from the recent rounds) instead of hanging.

Fair between studies: after each round a study's line queues again behind the other studies'
lines, so a study whose proposals are slow (a large space) never holds a thread for more than
one round while others wait; and once the limit is reached, an ask is still accepted for a
study holding less than its share of it (``max_waiting`` over the studies with asks), so one
study's backlog cannot turn every other study's asks away.

A round that serves several askers at once is hurried: its clients' workers are idle while it
runs. Unless an asker gave a ``pace``, such a round proposes with the pace
``BUSY_ROUND_SECONDS / points``, so the default strategy picks the member that keeps it (as
``optimize`` does for its idle workers). A round for one asker keeps no pace: the same seed
and order of tells give the same points.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from abo.core.exceptions import AboError
from abo.core.trial import Trial
from abo.service.errors import AsksBackedUp
from abo.study.study import Study

BUSY_ROUND_SECONDS = 1.0
"""What a round serving several waiting askers aims at (the pace it proposes with)."""


def check_ask_info(info: Mapping[str, Any] | None) -> dict[str, Any]:
    """A caller's ``info`` for new trials, checked at the boundary (before the ask joins a
    round shared with others): a dict with string keys. It can never reach abo's own record,
    which each trial keeps apart as its ``proposal``."""
    if info is not None and not isinstance(info, Mapping):
        raise AboError(f"info: expected a dict, got {type(info).__name__}", field="info")
    return {str(k): v for k, v in (info or {}).items()}


@dataclass
class AskWant:
    """One waiting ask: what it wants, and the future its trials are set on."""

    count: int
    n_workers: int | None = None
    client_id: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    pace: float | None = None
    future: Future[list[Trial]] = field(default_factory=Future)


@dataclass
class _Line:
    study: Study
    wants: deque[AskWant] = field(default_factory=deque)
    busy: bool = False


class AskLines:
    """Waiting asks per study, served in shared proposal rounds on a private executor.

    Args:
        max_waiting: asks that may wait for a round (all studies together) before a new one
            is refused with ``AsksBackedUp``.
        max_batch: most trials one round proposes (an ask is never split across rounds).
        threads: rounds running at once (for different studies).
        guard: entered around each round's ``ask_batch`` (a replica's proposer lease).
        observe: told each round's seconds and the trials it started (``/metrics``).
    """

    def __init__(
        self,
        max_waiting: int,
        max_batch: int,
        threads: int = 4,
        guard: Callable[[Study], AbstractContextManager[None]] | None = None,
        observe: Callable[[float, int], None] | None = None,
    ) -> None:
        self.max_waiting = max_waiting
        self.guard = guard or (lambda _study: nullcontext())  # around each round's proposals
        self.observe = observe or (lambda _seconds, _trials: None)
        self.max_batch = max_batch
        self.rounds = 0
        self.running = 0  # rounds proposing now
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="abo-ask")
        self._lock = threading.Lock()
        self._lines: dict[Study, _Line] = {}
        self._waiting = 0
        self._round_seconds = 1.0  # a running mean of recent rounds, for Retry-After

    @property
    def waiting(self) -> int:
        """Asks accepted and not yet taken into a round."""
        return self._waiting

    def retry_after(self) -> int:
        """Seconds a refused asker should wait: the rounds ahead of it, at the recent pace."""
        rounds_ahead = self._waiting // max(1, self.max_batch) + 1
        return max(1, min(120, math.ceil(self._round_seconds * rounds_ahead)))

    def _full(self, line: _Line | None) -> bool:
        """Whether a new ask for ``line``'s study must be refused: the limit is reached and
        that study holds at least its fair share of it (so a study with many waiting asks
        cannot lock the others out; the total never exceeds twice the limit)."""
        if self._waiting < self.max_waiting:
            return False
        mine = len(line.wants) if line is not None else 0
        active = len(self._lines) + (line is None)
        fair = self.max_waiting // max(1, active)
        return mine >= fair or self._waiting >= 2 * self.max_waiting

    def submit(self, study: Study, want: AskWant) -> Future[list[Trial]]:
        """Queue ``want`` for ``study``'s next round; its future gets the trials."""
        with self._lock:
            line = self._lines.get(study)
            if self._full(line):
                raise AsksBackedUp(self._waiting, self.max_waiting, self.retry_after())
            if line is None:
                line = self._lines[study] = _Line(study)
            line.wants.append(want)
            self._waiting += 1
            if not line.busy:
                line.busy = True
                self._pool.submit(self._drain, line)
        return want.future

    def close(self) -> None:
        """Stop taking rounds (waiting asks are left unanswered); for shutdown."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _take(self, line: _Line) -> list[AskWant]:
        """The next round's asks (FIFO, at most ``max_batch`` trials; always at least one)."""
        batch: list[AskWant] = []
        total = 0
        while line.wants:
            want = line.wants[0]
            if want.future.cancelled():  # its client went away before its round
                line.wants.popleft()
                self._waiting -= 1
                continue
            if batch and total + want.count > self.max_batch:
                break
            batch.append(line.wants.popleft())
            self._waiting -= 1
            total += want.count
        return batch

    def _drain(self, line: _Line) -> None:
        """One round for ``line``; if more asks wait on it, the line queues again behind the
        other studies' lines (round robin: a study whose rounds are slow holds at most one
        thread, and only for one round at a time)."""
        with self._lock:
            batch = self._take(line)
            if not batch:
                line.busy = False
                self._lines.pop(line.study, None)
                return
        start = time.monotonic()
        try:
            shares = self._round(line.study, batch)
        except BaseException as exc:  # noqa: BLE001 - every asker of the round gets it
            for want in batch:
                _settle(want.future, exception=exc)
        else:
            for want, trials in zip(batch, shares, strict=True):
                _settle(want.future, result=trials)
        self._round_seconds = 0.7 * self._round_seconds + 0.3 * (time.monotonic() - start)
        try:
            self._pool.submit(self._drain, line)
        except RuntimeError:  # shut down: the waiting asks are left unanswered
            pass

    def _round(self, study: Study, batch: list[AskWant]) -> list[list[Trial]]:
        """One ``ask_batch`` for every ask of ``batch``; each ask's trials, in order."""
        held: dict[str, list[Trial]] = {}
        if any(w.client_id is not None for w in batch):
            for t in study.pending:
                cid = t.info.get("client_id")
                if isinstance(cid, str):
                    held.setdefault(cid, []).append(t)
        extras: list[dict[str, Any]] = []
        plans: list[tuple[list[Trial], int, int]] = []  # (held trials, first new, how many)
        first_of: dict[str, int] = {}  # client_id -> its first ask in this round
        for k, want in enumerate(batch):
            cid = want.client_id
            if cid is not None and cid in first_of:  # a retry beside its original: same answer
                plans.append(([], -1 - first_of[cid], 0))
                continue
            mine = held.get(cid, [])[: want.count] if cid is not None else []
            need = want.count - len(mine)
            extra = {**want.info, "client_id": cid} if cid is not None else dict(want.info)
            plans.append((mine, len(extras), need))
            extras += [extra] * need
            if cid is not None:
                first_of[cid] = k
        started: list[Trial] = []
        if extras:
            workers = [w.n_workers for w in batch if w.n_workers is not None]
            n_workers = max(workers, default=None)
            paces = [w.pace for w in batch if w.pace is not None]  # the most hurried asker's
            askers = sum(1 for _, first, need in plans if first >= 0 and need > 0)
            if not paces and askers > 1:  # several askers' workers idle: hurry
                paces = [BUSY_ROUND_SECONDS / len(extras)]
            began = time.monotonic()
            with self._lock:
                self.running += 1
            try:
                with self.guard(study):  # this replica's proposer lease (abo.service.proposers)
                    started = study.ask_batch(
                        len(extras), n_workers=n_workers, info=extras,
                        pace=min(paces, default=None),
                    )  # fmt: skip
            finally:
                with self._lock:
                    self.running -= 1
            self.rounds += 1
            self.observe(time.monotonic() - began, len(started))
            if len(started) != len(extras):  # pragma: no cover - ask_batch starts exactly n
                raise AboError(f"ask: expected {len(extras)} trials, got {len(started)}")
        shares: list[list[Trial]] = []
        for want, (mine, first, need) in zip(batch, plans, strict=True):
            if first < 0:
                shares.append(shares[-1 - first][: want.count])
            else:
                shares.append(mine + started[first : first + need])
        return shares


def _settle(
    future: Future[list[Trial]],
    result: list[Trial] | None = None,
    exception: BaseException | None = None,
) -> None:
    """Set a waiting ask's outcome unless its client already went away (cancelled)."""
    try:
        if exception is not None:
            future.set_exception(exception)
        else:
            future.set_result(result or [])
    except InvalidStateError:
        pass
