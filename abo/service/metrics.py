"""What one ``abo serve`` process counts, served as ``GET /metrics`` in Prometheus' text format.

Each replica is its own scrape target (sum over replicas in Prometheus). Counters and
histograms live in this process and start at zero when it starts; gauges (asks waiting,
leases held, studies cached) are read from the service's state when scraped. Labels are
bounded: routes are the API's path templates (``/api/v1/studies/{name}/ask``), never study
names or trial ids, so a service with many studies keeps a small series count.

Example:
    >>> m = Metrics()
    >>> m.round_done(0.3, 4)
    >>> "abo_trials_proposed_total 4" in m.render([])
    True
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections.abc import Iterable, Sequence

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
ROUND_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0)
TELL_OUTCOMES = {"tell": "done", "fail": "failed", "lose": "lost"}  # route's last part -> state

Labels = tuple[str, ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    parts = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if value != int(value) else str(int(value))


class Counter:
    """A monotone count per label set (``inc``)."""

    def __init__(self, name: str, help_: str, labels: Sequence[str] = ()) -> None:
        self.name, self.help, self.labels = name, help_, tuple(labels)
        self._values: dict[Labels, float] = {} if labels else {(): 0.0}
        self._lock = threading.Lock()

    def inc(self, *values: str, by: float = 1.0) -> None:
        with self._lock:
            self._values[values] = self._values.get(values, 0.0) + by

    def lines(self) -> list[str]:
        with self._lock:
            items = sorted(self._values.items())
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} counter"]
        out += [f"{self.name}{_labels(self.labels, k)} {_number(v)}" for k, v in items]
        return out


class Histogram:
    """Observations per label set in cumulative buckets, with their sum and count."""

    def __init__(
        self, name: str, help_: str, buckets: Sequence[float], labels: Sequence[str] = ()
    ) -> None:
        self.name, self.help, self.labels = name, help_, tuple(labels)
        self.buckets = tuple(sorted(buckets))
        self._data: dict[Labels, tuple[list[int], list[float]]] = {}
        self._lock = threading.Lock()

    def observe(self, value: float, *values: str) -> None:
        with self._lock:
            counts, total = self._data.setdefault(values, ([0] * (len(self.buckets) + 1), [0.0]))
            counts[bisect.bisect_left(self.buckets, value)] += 1
            total[0] += value

    def lines(self) -> list[str]:
        with self._lock:
            items = sorted((k, (list(c), t[0])) for k, (c, t) in self._data.items())
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        for key, (counts, total) in items:
            running = 0
            for bound, n in zip((*self.buckets, math.inf), counts, strict=True):
                running += n
                le = _labels(self.labels, key, f'le="{_number(bound)}"')
                out.append(f"{self.name}_bucket{le} {running}")
            out.append(f"{self.name}_sum{_labels(self.labels, key)} {_number(total)}")
            out.append(f"{self.name}_count{_labels(self.labels, key)} {running}")
        return out


class Gauge:
    """A value read when scraped (``render`` gets them from the service's state)."""

    def __init__(
        self, name: str, help_: str, value: float, labels: dict[str, str] | None = None
    ) -> None:
        self.name, self.help, self.value = name, help_, float(value)
        self.label_values = dict(labels or {})

    def lines(self) -> list[str]:
        labels = _labels(list(self.label_values), list(self.label_values.values()))
        return [
            f"# HELP {self.name} {self.help}",
            f"# TYPE {self.name} gauge",
            f"{self.name}{labels} {_number(self.value)}",
        ]


class Metrics:
    """The counters and histograms of one service process (thread-safe)."""

    def __init__(self) -> None:
        self.started = time.time()
        self.requests = Counter(
            "abo_requests_total", "HTTP requests answered.", ("method", "route", "status")
        )
        self.request_seconds = Histogram(
            "abo_request_seconds", "Seconds from a request's arrival to its answer.",
            REQUEST_BUCKETS, ("route",),
        )  # fmt: skip
        self.round_seconds = Histogram(
            "abo_proposal_round_seconds",
            "Seconds a proposal round took (its asks waited for it together).",
            ROUND_BUCKETS,
        )
        self.proposed = Counter("abo_trials_proposed_total", "Trials started by proposal rounds.")
        self.tells = Counter(
            "abo_tells_total", "Trials finished through the API, by outcome.", ("outcome",)
        )
        self.storage_errors = Counter(
            "abo_storage_errors_total", "Requests the storage failed (503 storage_unavailable)."
        )
        self.forwarded = Counter(
            "abo_asks_forwarded_total", "Asks sent on to the replica proposing for their study."
        )
        self.refused = Counter(
            "abo_asks_refused_total", "Asks answered 503 busy (too many waiting)."
        )

    def round_done(self, seconds: float, trials: int) -> None:
        """One proposal round of ``seconds`` that started ``trials`` trials."""
        self.round_seconds.observe(seconds)
        self.proposed.inc(by=trials)

    def answered(self, method: str, route: str, status: int, seconds: float) -> None:
        """A request answered: counted by route template and status; a 2xx tell, fail or
        lose counts as a trial finished."""
        self.requests.inc(method, route, str(status))
        self.request_seconds.observe(seconds, route)
        if method == "POST" and 200 <= status < 300:
            outcome = TELL_OUTCOMES.get(route.rsplit("/", 1)[-1])
            if outcome is not None and "/trials/" in route:
                self.tells.inc(outcome)

    def render(self, gauges: Iterable[Gauge]) -> str:
        """Every metric in Prometheus' text exposition format (version 0.0.4)."""
        lines: list[str] = []
        for gauge in gauges:
            lines += gauge.lines()
        uptime = Gauge("abo_process_start_time_seconds", "Unix time this process started.",
                       self.started)  # fmt: skip
        lines += uptime.lines()
        for metric in (
            self.requests, self.request_seconds, self.round_seconds, self.proposed,
            self.tells, self.storage_errors, self.forwarded, self.refused,
        ):  # fmt: skip
            lines += metric.lines()
        return "\n".join(lines) + "\n"


__all__ = ["CONTENT_TYPE", "Counter", "Gauge", "Histogram", "Metrics"]
