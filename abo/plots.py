"""Plots of a study: best-so-far convergence (against trials and against wall-clock time)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from abo.trial import Trial, TrialState  # noqa: E402


def best_so_far(trials: Sequence[Trial], direction: str) -> list[tuple[int, float, float]]:
    """``(trial number in completion order, seconds since start, best value)`` per done trial."""
    done = sorted(
        (t for t in trials if t.state is TrialState.DONE and t.value is not None),
        key=lambda t: (t.finished_at or 0.0, t.id),
    )
    if not done:
        return []
    t0 = min(t.created_at for t in trials)
    better = min if direction == "minimize" else max
    out: list[tuple[int, float, float]] = []
    best = done[0].value
    for i, t in enumerate(done, start=1):
        assert t.value is not None and best is not None
        best = better(best, t.value)
        out.append((i, (t.finished_at or t0) - t0, best))
    return out


def convergence(trials: Sequence[Trial], direction: str, out: str | Path, title: str = "") -> Path:
    """Write a PNG of best-so-far against completed trials and against time; return its path."""
    curve = best_so_far(trials, direction)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    if curve:
        n, secs, best = zip(*curve, strict=True)
        ax1.step(n, best, where="post")
        ax2.step(secs, best, where="post")
    ax1.set_xlabel("completed trials")
    ax2.set_xlabel("elapsed seconds")
    for ax in (ax1, ax2):
        ax.set_ylabel("best value so far")
        ax.grid(alpha=0.3)
    fig.suptitle(title or "convergence")
    fig.tight_layout()
    path = Path(out)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
