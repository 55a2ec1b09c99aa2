"""Plots of a study: best-so-far convergence (against trials and wall-clock time), the
per-worker timeline, parallel coordinates of parameters against the value, the Pareto
front of a study of several objectives, the learning curves of trials that report, and the
best value against the evaluation time spent (coloured by fidelity in a study with one)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.colors  # noqa: E402
import matplotlib.patches  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from abo.analysis.plot_base import COLOURS as _COLOURS  # noqa: E402
from abo.analysis.plot_base import Counts, literal_text  # noqa: E402
from abo.analysis.plot_cost import cost, cost_curve, evaluation_seconds  # noqa: E402
from abo.analysis.plot_parallel import END_LABEL, parallel, parallel_figure  # noqa: E402
from abo.core.outcomes import Constraint, Objective, feasible  # noqa: E402
from abo.core.trial import Report, Trial, TrialState  # noqa: E402

__all__ = [
    "END_LABEL",
    "Counts",
    "best_so_far",
    "convergence",
    "cost",
    "cost_curve",
    "evaluation_seconds",
    "infeasible_points",
    "lanes",
    "learning_curves",
    "literal_text",
    "parallel",
    "parallel_figure",
    "pareto",
    "pareto_figure",
    "timeline",
]


def best_so_far(
    trials: Sequence[Trial],
    direction: str,
    constraints: Sequence[Constraint] = (),
    counts: Counts | None = None,
) -> list[tuple[int, float, float]]:
    """``(trial number in completion order, seconds since start, best value)`` per done trial
    from the first feasible one on (with ``constraints``, the best counts feasible trials
    only; with ``counts``, the trials it accepts; the numbering counts every done trial)."""
    done = sorted(
        (t for t in trials if t.state is TrialState.DONE and t.value is not None),
        key=lambda t: (t.finished_at or 0.0, t.id),
    )
    if not done:
        return []
    t0 = min(t.created_at for t in trials)
    better = min if direction == "minimize" else max
    out: list[tuple[int, float, float]] = []
    best: float | None = None
    for i, t in enumerate(done, start=1):
        assert t.value is not None
        if feasible(t.values, constraints) and (counts is None or counts(t)):
            best = t.value if best is None else better(best, t.value)
        if best is not None:
            out.append((i, (t.finished_at or t0) - t0, best))
    return out


def infeasible_points(
    trials: Sequence[Trial], constraints: Sequence[Constraint]
) -> list[tuple[int, float]]:
    """``(trial number in completion order, value)`` of the done trials that broke a
    constraint (none without constraints)."""
    if not constraints:
        return []
    done = sorted(
        (t for t in trials if t.state is TrialState.DONE and t.value is not None),
        key=lambda t: (t.finished_at or 0.0, t.id),
    )
    return [
        (i, float(t.value))
        for i, t in enumerate(done, start=1)
        if t.value is not None and not feasible(t.values, constraints)
    ]


@literal_text
def convergence(
    trials: Sequence[Trial],
    direction: str,
    out: str | Path,
    title: str = "",
    constraints: Sequence[Constraint] = (),
    counts: Counts | None = None,
) -> Path:
    """Write a PNG of best-so-far against completed trials and against time; return its path.
    With ``constraints`` the best is over feasible trials, and infeasible ones are crosses;
    with ``counts`` over the trials it accepts (a fidelity's target)."""
    curve = best_so_far(trials, direction, constraints, counts)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    if curve:
        n, secs, best = zip(*curve, strict=True)
        ax1.step(n, best, where="post", label="best feasible so far" if constraints else None)
        ax2.step(secs, best, where="post")
    bad = infeasible_points(trials, constraints)
    if bad:
        ax1.scatter(*zip(*bad, strict=True), marker="x", color="tab:red", label="infeasible")
    if constraints:
        ax1.legend(loc="best")
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


@literal_text
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


@literal_text
def pareto_figure(
    trials: Sequence[Trial], objectives: Sequence[Objective], title: str = ""
) -> Figure:
    """Done trials in objective space, coloured by completion order, the Pareto front ringed
    and (for two objectives) joined by its attainment line: one panel per pair of objectives
    (three panels for three objectives, six for four)."""
    from abo.analysis.summary import in_completion_order, pareto_trials

    if len(objectives) < 2:
        raise ValueError("pareto: the study has one objective; plot its convergence instead")
    done = in_completion_order(trials, objectives)
    front_ids = {t.id for t in pareto_trials(done, objectives)}
    pairs = [(a, b) for i, a in enumerate(objectives) for b in objectives[i + 1 :]]
    cols = min(3, len(pairs))
    rows = math.ceil(len(pairs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.4 * rows), squeeze=False)
    order = list(range(1, len(done) + 1))
    norm = matplotlib.colors.Normalize(1, max(2, len(done)))
    scatter = None
    for ax, (a, b) in zip(axes.flat, pairs, strict=False):
        xs = [t.values[a.name] for t in done]
        ys = [t.values[b.name] for t in done]
        scatter = ax.scatter(xs, ys, c=order, cmap="viridis", norm=norm, s=22, label="done")
        front = [t for t in done if t.id in front_ids]
        ax.scatter(
            [t.values[a.name] for t in front],
            [t.values[b.name] for t in front],
            s=80,
            facecolors="none",
            edgecolors="crimson",
            linewidths=1.5,
            label="Pareto front",
        )
        if len(objectives) == 2 and front:
            pts = sorted((t.values[a.name], t.values[b.name]) for t in front)
            if a.direction == "maximize":
                pts.reverse()
            ax.step(*zip(*pts, strict=True), where="post", color="crimson", alpha=0.6)
        ax.set_xlabel(f"{a.name} ({a.direction})")
        ax.set_ylabel(f"{b.name} ({b.direction})")
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=8)
    for ax in list(axes.flat)[len(pairs) :]:
        ax.set_visible(False)
    if scatter is not None:
        fig.colorbar(scatter, ax=list(axes.flat), label="completion order")
    fig.suptitle(title or "Pareto front")
    return fig


@literal_text
def pareto(
    trials: Sequence[Trial], objectives: Sequence[Objective], out: str | Path, title: str = ""
) -> Path:
    """Write ``pareto_figure`` as a PNG; return its path."""
    fig = pareto_figure(trials, objectives, title)
    path = Path(out)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


@literal_text
def learning_curves(
    trials: Sequence[Trial],
    reports: Mapping[int, Sequence[Report]],
    direction: str,
    out: str | Path,
    title: str = "",
) -> Path:
    """Write a PNG of every reported curve (value against step), coloured by the trial's
    state: done runs end at their last report, stopped ones with a cross where the study
    stopped them. The y axis is logarithmic when the values are positive and span more than
    two decades."""
    by_id = {t.id: t for t in trials}
    fig, ax = plt.subplots(figsize=(8, 4.5))
    values = [r.value for curve in reports.values() for r in curve]
    seen: set[TrialState] = set()
    for trial_id in sorted(reports):
        trial = by_id.get(trial_id)
        curve = reports[trial_id]
        if trial is None or not curve:
            continue
        colour = _COLOURS[trial.state]
        seen.add(trial.state)
        steps = [r.step for r in curve]
        ys = [r.value for r in curve]
        width = 1.4 if trial.state is TrialState.DONE else 0.9
        ax.plot(steps, ys, color=colour, linewidth=width, alpha=0.8)
        if trial.state is TrialState.STOPPED:
            ax.plot(steps[-1:], ys[-1:], marker="x", color=colour, markersize=6)
    if values and min(values) > 0 and max(values) / min(values) > 100:
        ax.set_yscale("log")
    handles = [
        matplotlib.patches.Patch(color=c, label=s.value) for s, c in _COLOURS.items() if s in seen
    ]
    if handles:
        ax.legend(handles=handles, loc="upper right", fontsize=8)
    ax.set_xlabel("step")
    ax.set_ylabel(f"reported value ({'lower' if direction == 'minimize' else 'higher'} is better)")
    ax.grid(alpha=0.3)
    n_stopped = sum(1 for i in reports if i in by_id and by_id[i].state is TrialState.STOPPED)
    suffix = f" — {len(reports)} trials, {n_stopped} stopped" if reports else " — no reports"
    ax.set_title((title or "learning curves") + suffix)
    fig.tight_layout()
    path = Path(out)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
