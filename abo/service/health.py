"""What ``/readyz`` knows beyond its probe: how the service's recent storage writes went.

A probe write can succeed while the real ones fail: on a full disk the probe's one page may
still fit where a trial's rows do not (348 of 400 asks were 503 while ``/readyz`` said ready).
So every write a request makes is recorded here, and the service is not ready while most of
its recent writes failed.

Example:
    >>> health = WriteHealth(clock=lambda: 0.0)
    >>> for _ in range(3):
    ...     health.failed("storage: database or disk is full")
    >>> health.problem()
    'storage: 3 of the last 3 writes failed within 60 s (the latest: database or disk is full)'
    >>> for _ in range(4):
    ...     health.succeeded()
    >>> health.problem() is None
    True
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

RECENT_WRITES = 20
"""How many of the latest writes readiness looks at."""
WINDOW_SECONDS = 60.0
"""How long a write's outcome counts (older ones are forgotten)."""
MIN_FAILURES = 3
"""Fewer failed writes than this never make the service unready (one bad request is not an
outage)."""


class WriteHealth:
    """The outcomes of the latest ``size`` writes within ``window`` seconds; unready while at
    least ``min_failures`` of them, and at least half, failed. Thread-safe."""

    def __init__(
        self,
        size: int = RECENT_WRITES,
        window: float = WINDOW_SECONDS,
        min_failures: int = MIN_FAILURES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.window = window
        self.min_failures = min_failures
        self._clock = clock
        self._outcomes: deque[tuple[float, str | None]] = deque(maxlen=size)
        self._lock = threading.Lock()

    def succeeded(self) -> None:
        """Record a write that was committed."""
        with self._lock:
            self._outcomes.append((self._clock(), None))

    def failed(self, why: str) -> None:
        """Record a write the storage refused (``why``: the storage's message)."""
        with self._lock:
            self._outcomes.append((self._clock(), why or "storage error"))

    def problem(self) -> str | None:
        """Why the service is not ready, or ``None`` when its recent writes went well."""
        with self._lock:
            horizon = self._clock() - self.window
            while self._outcomes and self._outcomes[0][0] < horizon:
                self._outcomes.popleft()
            errors = [why for _, why in self._outcomes if why is not None]
            total = len(self._outcomes)
        if len(errors) < self.min_failures or 2 * len(errors) < total:
            return None
        latest = errors[-1].removeprefix("storage: ")
        return (
            f"storage: {len(errors)} of the last {total} writes failed within "
            f"{self.window:g} s (the latest: {latest})"
        )
