"""The live progress panel of a running optimisation: ``abo run``'s, ``abo demo``'s, and
``study.optimize``'s when it runs in a terminal (``verbosity``).

Completed, running, stopped, failed and lost trials, elapsed time, the best value so far (of
several objectives: the size of the Pareto front so far), a lower bound of worker utilization
and where the finished trials' parameters came from (the model, the design, fallbacks:
``abo.analysis.summary.proposal_source``), in lines that fit 80 columns, refreshed by
``rich.live.Live`` as results arrive (``update`` is the loop's callback).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console, Group
from rich.text import Text

from abo.core.exceptions import AboError

VERBOSITY = ("auto", 0, 1, 2)
"""``study.optimize(..., verbosity=)``: ``"auto"`` (the default: 1 when standard error is a
terminal, else 0), 0 (silent), 1 (the live panel), 2 (the panel and a line per finished
trial)."""


class Progress:
    """A live panel: completed / running / failed, best so far (of several objectives: the
    size of the Pareto front so far), elapsed."""

    def __init__(self, total: int, direction: str, workers: int = 0, objectives: Any = ()) -> None:
        self.total = total
        self.direction = direction
        self.workers = workers
        self.busy = 0.0
        self.done = self.failed = self.lost = self.running = self.stopped = 0
        self.best: float | None = None
        self.best_id: int | None = None
        self.objectives = tuple(objectives) if direction == "multi" else ()
        self.front: list[tuple[float, ...]] = []  # utilities of the front so far
        self.sources: dict[str, int] = {}  # where the finished trials' parameters came from
        self.start = time.time()

    def _join_front(self, values: Any) -> None:
        """Add a done trial's values to the front so far (``abo.core.pareto``'s rule over the front
        and the new point: each update costs the front's size, not the study's)."""
        import torch

        from abo.core.pareto import pareto_mask

        try:
            u = [o.sign * float(values[o.name]) for o in self.objectives]
        except (KeyError, TypeError, ValueError):
            return
        U = torch.tensor([*self.front, u], dtype=torch.double)
        self.front = [tuple(row) for row in U[pareto_mask(U)].tolist()]

    def update(self, study: object, trial: object) -> None:
        from abo.analysis.summary import proposal_source  # not at import: the CLI starts fast
        from abo.core.trial import TrialState

        state = trial.state  # type: ignore[attr-defined]
        source = proposal_source(trial)  # type: ignore[arg-type]
        self.sources[source] = self.sources.get(source, 0) + 1
        self.busy += float(trial.info.get("eval_seconds", 0.0))  # type: ignore[attr-defined]
        if state is TrialState.DONE:
            self.done += 1
            if self.objectives:
                self._join_front(trial.values)  # type: ignore[attr-defined]
            value = trial.value  # type: ignore[attr-defined]
            better = value is not None and (
                self.best is None
                or (value < self.best if self.direction == "minimize" else value > self.best)
            )
            if better:
                self.best, self.best_id = value, trial.id  # type: ignore[attr-defined]
        elif state is TrialState.FAILED:
            self.failed += 1
        elif state is TrialState.STOPPED:
            self.stopped += 1
        elif state is TrialState.LOST:
            self.lost += 1
        self.running = len(study.pending)  # type: ignore[attr-defined]

    def lines(self) -> list[str]:
        """The panel's lines, each within 80 columns for any realistic count (a grid shared
        its column widths between rows, so a long best value pushed the counts past 80)."""
        elapsed = max(1e-9, time.time() - self.start)
        counts = [
            f"completed {self.done + self.failed + self.stopped}/{self.total}",
            f"running {self.running}",
            *([f"stopped {self.stopped}"] if self.stopped else []),
            f"failed {self.failed}",
            f"lost {self.lost}",
            f"{elapsed:.1f} s",
        ]
        if self.objectives:
            n = len(self.front)
            best = f"so far: Pareto front {n} trial{'s' if n != 1 else ''}"
        else:
            value = "—" if self.best is None else f"{self.best:.6g} (trial {self.best_id})"
            best = f"best so far {value}"
        if self.workers:
            best += f"  utilization ≥{self.busy / (self.workers * elapsed):.2f}"
        out = ["  ".join(counts), best]
        if self.sources:
            from abo.analysis.summary import sources_line

            out.append(sources_line(self.sources))
        return out

    def __rich__(self) -> Group:
        styles = ("bold", "green", "")
        return Group(
            *[
                Text(line, style=style, no_wrap=True, overflow="ellipsis")
                for line, style in zip(self.lines(), styles, strict=False)
            ]
        )


def resolve(verbosity: Any) -> int:
    """``verbosity`` as 0, 1 or 2 (``"auto"``: 1 on a terminal); ``AboError`` otherwise."""
    if verbosity == "auto" or verbosity is None:
        return 1 if sys.stderr.isatty() else 0
    if isinstance(verbosity, bool) or verbosity not in (0, 1, 2):
        raise AboError(
            f"verbosity: expected 'auto', 0 (silent), 1 (a progress panel) or 2 (the panel "
            f"and a line per trial), got {verbosity!r}",
            field="verbosity",
        )
    return int(verbosity)


@contextmanager
def shown(
    level: int, total: int, study: Any, workers: int | None
) -> Iterator[Callable[[Any, Any], None] | None]:
    """While the block runs, the live panel on standard error (``level`` 1 or 2); yields its
    callback for each finished trial (``None`` at level 0: nothing is shown)."""
    if level <= 0:
        yield None
        return
    from rich.live import Live

    console = Console(stderr=True)
    progress = Progress(total, study.direction, workers or 0, study.spec.objectives)

    def update(s: Any, trial: Any) -> None:
        progress.update(s, trial)
        if level >= 2:
            value = "" if trial.value is None else f" value {trial.value:.6g}"
            console.print(f"trial {trial.id} {trial.state.value}{value}", highlight=False)

    with Live(progress, console=console, refresh_per_second=4, transient=False):
        yield update
