"""The best value of a study against the evaluation time spent: the cost curve and its PNG
(coloured by fidelity in a study with one)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from abo.analysis.plot_base import Counts, literal_text  # noqa: E402
from abo.core.outcomes import Constraint, feasible  # noqa: E402
from abo.core.trial import Trial, TrialState  # noqa: E402


def evaluation_seconds(trial: Trial) -> float | None:
    """What a finished trial's evaluation took: the loop's ``eval_seconds``, else creation to
    end (``None`` while running or without times)."""
    seconds = trial.info.get("eval_seconds", trial.duration)
    if isinstance(seconds, int | float) and math.isfinite(seconds) and seconds >= 0:
        return float(seconds)
    return None


@literal_text
def cost_curve(
    trials: Sequence[Trial],
    direction: str,
    constraints: Sequence[Constraint] = (),
    counts: Counts | None = None,
) -> list[tuple[float, float | None, Trial]]:
    """``(evaluation seconds spent, best value so far, trial)`` after each finished trial in
    completion order: every done, stopped and failed trial adds its evaluation time (the
    cost); the best counts feasible done trials accepted by ``counts`` (``None`` before one)."""
    finished = sorted(
        (
            t
            for t in trials
            if t.state in (TrialState.DONE, TrialState.STOPPED, TrialState.FAILED)
            and evaluation_seconds(t) is not None
        ),
        key=lambda t: (t.finished_at or 0.0, t.id),
    )
    better = min if direction == "minimize" else max
    spent, best = 0.0, None
    out: list[tuple[float, float | None, Trial]] = []
    for t in finished:
        spent += evaluation_seconds(t) or 0.0
        ok = t.state is TrialState.DONE and t.value is not None
        if ok and feasible(t.values, constraints) and (counts is None or counts(t)):
            assert t.value is not None
            best = t.value if best is None else better(best, t.value)
        out.append((spent, best, t))
    return out


@literal_text
def cost(
    trials: Sequence[Trial],
    direction: str,
    out: str | Path,
    title: str = "",
    constraints: Sequence[Constraint] = (),
    fidelity: str | None = None,
    counts: Counts | None = None,
) -> Path:
    """Write a PNG of the best value against the evaluation time spent (every finished
    trial's, stopped and failed ones included), with each done trial's value at the time
    spent when it finished; in a study with a ``fidelity`` (a parameter name) the points are
    coloured by it and the best counts the trials ``counts`` accepts (its target)."""
    curve = cost_curve(trials, direction, constraints, counts)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    steps = [(x, b) for x, b, _ in curve if b is not None]
    if steps:
        xs, bests = zip(*steps, strict=True)
        ax.step(xs, bests, where="post", color="black", linewidth=1.6, label="best result so far")
    done = [(x, t) for x, _, t in curve if t.state is TrialState.DONE and t.value is not None]
    if done:
        at = [x for x, _ in done]
        ys = [float(t.value) for _, t in done if t.value is not None]
        if fidelity is not None:
            raw = [t.params.get(fidelity) for _, t in done]
            levels = sorted({str(v) for v in raw}, key=lambda v: _order(v, raw))
            cmap = matplotlib.colormaps["viridis"]
            shade = {v: cmap(i / max(1, len(levels) - 1)) for i, v in enumerate(levels)}
            for level in levels:
                picked = [(x, y) for (x, y, v) in zip(at, ys, raw, strict=True) if str(v) == level]
                px, py = zip(*picked, strict=True)
                ax.scatter(px, py, s=14, color=shade[level], label=f"{fidelity} = {level}",
                           zorder=3)  # fmt: skip
        else:
            ax.scatter(at, ys, s=12, color="tab:blue", alpha=0.6, label="done trials", zorder=3)
    values = [float(t.value) for _, t in done if t.value is not None]
    if values and min(values) > 0 and max(values) / min(values) > 100:
        ax.set_yscale("log")
    ax.set_xlabel("evaluation seconds spent (all finished trials)")
    ax.set_ylabel(f"value ({'lower' if direction == 'minimize' else 'higher'} is better)")
    ax.grid(alpha=0.3)
    if curve:
        ax.legend(loc="best", fontsize=8)
    ax.set_title(title or "best value against cost")
    fig.tight_layout()
    path = Path(out)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _order(level: str, raw: Sequence[object]) -> tuple[float, str]:
    """Numeric fidelities in numeric order, others as they first appear."""
    try:
        return (float(level), level)
    except ValueError:
        return (float([str(v) for v in raw].index(level)), level)
