"""Plots of a study: best-so-far convergence (against trials and against wall-clock time)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.patches  # noqa: E402
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


def lanes(trials: Sequence[Trial]) -> dict[str, list[tuple[Trial, float, float]]]:
    """Finished trials per worker: ``worker -> [(trial, start, end)]`` in start order.

    Times come from ``trial.info`` (``worker``, ``started``, ``finished``, written by the
    optimisation loop) and fall back to ``created_at`` / ``finished_at`` on a lane
    ``"unknown"`` for trials told by hand.
    """
    out: dict[str, list[tuple[Trial, float, float]]] = {}
    for t in trials:
        start = t.info.get("started", t.created_at)
        end = t.info.get("finished", t.finished_at)
        if not isinstance(start, int | float) or not isinstance(end, int | float):
            continue  # still running: no bar yet
        worker = str(t.info.get("worker", "unknown"))
        out.setdefault(worker, []).append((t, float(start), float(end)))
    for bars in out.values():
        bars.sort(key=lambda b: (b[1], b[0].id))
    return dict(sorted(out.items()))


_COLOURS = {
    TrialState.DONE: "tab:blue",
    TrialState.FAILED: "tab:red",
    TrialState.LOST: "tab:orange",
    TrialState.RUNNING: "tab:gray",
}


def timeline(trials: Sequence[Trial], out: str | Path, title: str = "") -> Path:
    """Write a PNG with one lane per worker and one bar per trial; gaps are idle workers."""
    data = lanes(trials)
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.45 * max(1, len(data))))
    t0 = min((s for bars in data.values() for _, s, _ in bars), default=0.0)
    busy = 0.0
    for row, (_worker, bars) in enumerate(data.items()):
        ax.broken_barh(
            [(s - t0, max(e - s, 1e-3)) for _, s, e in bars],
            (row - 0.4, 0.8),
            facecolors=[_COLOURS[t.state] for t, _, _ in bars],
            edgecolor="white",
            linewidth=0.5,
        )
        busy += sum(e - s for _, s, e in bars)
    end = max((e for bars in data.values() for _, _, e in bars), default=t0)
    total = len(data) * (end - t0)
    ax.set_yticks(range(len(data)), list(data) or ["(no finished trials)"])
    states = {t.state for bars in data.values() for t, _, _ in bars}
    handles = [
        matplotlib.patches.Patch(color=c, label=s.value) for s, c in _COLOURS.items() if s in states
    ]
    if handles:
        ax.legend(handles=handles, loc="upper right", fontsize=8)
    ax.set_xlabel("seconds since the first evaluation started")
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)
    use = f" — workers busy {busy / total:.0%} of the time" if total > 0 else ""
    ax.set_title((title or "timeline") + use)
    fig.tight_layout()
    path = Path(out)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def parallel(
    trials: Sequence[Trial], space_json: dict, direction: str, out: str | Path, title: str = ""
) -> Path:
    """Write a PNG of parallel coordinates: each done trial a line through its parameters and
    value, each axis scaled to its parameter's range (log, integer and categorical aware)."""
    import math

    done = [t for t in trials if t.state is TrialState.DONE and t.value is not None]
    names = list(space_json)
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * (len(names) + 1)), 4.5))

    def position(name: str, value: object) -> float:
        p = space_json[name]
        if p["type"] == "categorical":
            choices = p["choices"]
            return (choices.index(value) + 0.5) / len(choices) if value in choices else 0.5
        lo, hi = float(p["low"]), float(p["high"])
        if p["type"] == "int":
            lo, hi = lo - 0.5, hi + 0.5
        f = math.log if p.get("log") else float
        return (f(float(value)) - f(lo)) / (f(hi) - f(lo))  # type: ignore[arg-type]

    values = [float(t.value) for t in done]  # type: ignore[arg-type]
    vlo, vhi = (min(values), max(values)) if values else (0.0, 1.0)
    span = vhi - vlo or 1.0
    ranked = sorted(done, key=lambda t: t.value, reverse=direction == "minimize")  # best last
    cmap = plt.get_cmap("viridis_r")  # dark is good
    for t in ranked:
        norm = (t.value - vlo) / span
        good = 1.0 - norm if direction == "minimize" else norm
        ys = [position(n, t.params.get(n)) for n in names] + [norm]
        ax.plot(range(len(ys)), ys, color=cmap(good), alpha=0.8, lw=1 + good)
    for i, n in enumerate(names + ["value"]):
        ax.axvline(i, color="black", lw=0.8)
        if n == "value":
            ax.text(i, -0.04, f"{vlo:.3g}", ha="center", va="top", fontsize=8)
            ax.text(i, 1.04, f"{vhi:.3g}", ha="center", va="bottom", fontsize=8)
        elif space_json[n]["type"] == "categorical":
            for c in space_json[n]["choices"]:
                ax.text(i + 0.03, position(n, c), str(c), fontsize=8, va="center")
        else:
            ax.text(i, -0.04, f"{space_json[n]['low']:.3g}", ha="center", va="top", fontsize=8)
            ax.text(i, 1.04, f"{space_json[n]['high']:.3g}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(names) + 1), names + ["value"])
    ax.set_yticks([])
    ax.set_ylim(-0.12, 1.12)
    ax.set_title(f"{title or 'parameters against value'} ({len(done)} done trials; dark is better)")
    fig.tight_layout()
    path = Path(out)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
