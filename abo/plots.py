"""Plots of a study: best-so-far convergence (against trials and wall-clock time), the
per-worker timeline, parallel coordinates of parameters against the value, the Pareto
front of a study of several objectives, the learning curves of trials that report, and the
best value against the evaluation time spent (coloured by fidelity in a study with one)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import ParamSpec, TypeVar

import matplotlib

matplotlib.use("Agg")
import matplotlib.cm  # noqa: E402
import matplotlib.colors  # noqa: E402
import matplotlib.patches  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.text  # noqa: E402
from matplotlib.backend_bases import RendererBase  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from abo.outcomes import Constraint, Objective, feasible  # noqa: E402
from abo.trial import Report, Trial, TrialState  # noqa: E402

_P = ParamSpec("_P")
_R = TypeVar("_R")


def literal_text(draw: Callable[_P, _R]) -> Callable[_P, _R]:
    """Draw with every label as literal text: a parameter or study name holding ``$...$`` is
    shown as written, never parsed as mathtext (``$\\nocmd{$`` made every plot of its study
    fail). Scoped to the call, so the user's own matplotlib settings are untouched."""

    @functools.wraps(draw)
    def literal(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with matplotlib.rc_context({"text.parse_math": False}):
            return draw(*args, **kwargs)

    return literal


Counts = Callable[[Trial], bool]
"""Which done trials are results (a study with a fidelity: those at its target)."""


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


_COLOURS = {
    TrialState.DONE: "tab:blue",
    TrialState.FAILED: "tab:red",
    TrialState.LOST: "tab:orange",
    TrialState.STOPPED: "tab:purple",
    TrialState.RUNNING: "tab:gray",
}


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


END_LABEL = "end-label"
"""``gid`` of the low/high labels at the ends of the parallel-coordinate axes."""
_ROW_POINTS = 11.0  # the second row of end labels sits this much further out


def _fmt(value: object) -> str:
    return f"{value:.3g}" if isinstance(value, int | float) else str(value)


def _clip(text: str, width: int = 16) -> str:
    """``text`` shortened in the middle (names often differ at their ends)."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]


def _overlaps(texts: Sequence[matplotlib.text.Text], renderer: RendererBase) -> bool:
    boxes = [t.get_window_extent(renderer) for t in texts if t.get_text()]
    return any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


@literal_text
def parallel_figure(
    trials: Sequence[Trial], space_json: dict, direction: str, title: str = ""
) -> Figure:
    """Parallel coordinates as a figure: each done trial a line through its parameters and
    value, coloured by the value (a colour bar says which colour is better).

    Every axis runs from its parameter's low (bottom) to its high (top), on a log scale for
    ``log`` parameters; categorical choices are spread evenly and named beside the axis. The
    low and high labels sit beyond the ends, neighbouring axes in alternate rows, so they never
    collide (the figure widens if long labels still would).
    """
    done = [t for t in trials if t.state is TrialState.DONE and t.value is not None]
    names = list(space_json)
    columns = names + ["value"]
    fig, ax = plt.subplots(figsize=(max(7.0, 1.5 * len(columns) + 2.0), 5.0))

    def position(name: str, value: object) -> float:
        p = space_json[name]
        if value is None:  # a conditional parameter inactive in this trial: a gap in its line
            return math.nan
        if p["type"] == "categorical":
            choices = p["choices"]
            return (choices.index(value) + 0.5) / len(choices) if value in choices else 0.5
        lo, hi = float(p["low"]), float(p["high"])
        f = math.log if p.get("log") else float
        return (f(float(value)) - f(lo)) / (f(hi) - f(lo))  # type: ignore[arg-type]

    def value_of(t: Trial) -> float:
        assert t.value is not None  # ``done`` holds only trials with a value
        return t.value

    values = [float(value_of(t)) for t in done]
    vlo, vhi = (min(values), max(values)) if values else (0.0, 1.0)
    span = vhi - vlo or 1.0
    # dark is better: the best value takes the dark end of viridis whatever the direction
    cmap = plt.get_cmap("viridis" if direction == "minimize" else "viridis_r")
    norm = matplotlib.colors.Normalize(vlo, vlo + span)
    ranked = sorted(done, key=value_of, reverse=direction == "minimize")  # best last
    for t in ranked:
        scaled = (float(value_of(t)) - vlo) / span
        good = 1.0 - scaled if direction == "minimize" else scaled
        ys = [position(n, t.params.get(n)) for n in names] + [scaled]
        ax.plot(range(len(ys)), ys, color=cmap(norm(value_of(t))), alpha=0.8, lw=1 + good)

    box = {"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85}
    ends: list[matplotlib.text.Text] = []
    for i, n in enumerate(columns):
        ax.axvline(i, color="black", lw=0.8, zorder=3)
        p = space_json.get(n, {"type": "value", "low": vlo, "high": vhi})
        if p["type"] == "categorical":
            choices = p["choices"]
            size = max(5.0, min(8.0, 200.0 / len(choices)))  # ~250 points of axis height
            every = max(1, math.ceil(len(choices) / 40))
            for c in choices[::every]:
                ax.text(
                    i + 0.04, position(n, c), _clip(str(c)), fontsize=size, va="center",
                    bbox=box, zorder=4,
                )  # fmt: skip
            continue
        offset = 4.0 + _ROW_POINTS * (i % 2)  # neighbours in alternate rows
        for y, label, sign, va in ((0.0, p["low"], -1, "top"), (1.0, p["high"], 1, "bottom")):
            ends.append(
                ax.annotate(
                    _fmt(label), (i, y), xytext=(0, sign * offset), textcoords="offset points",
                    ha="center", va=va, fontsize=8, bbox=box, zorder=4, gid=END_LABEL,
                    annotation_clip=False,
                )
            )  # fmt: skip
    ticks = [f"{n}\n(log)" if space_json[n].get("log") else n for n in names] + ["value"]
    ax.set_xticks(range(len(columns)), [_clip(t, 20) for t in ticks], fontsize=9)
    ax.tick_params(axis="x", length=0, pad=8.0 + _ROW_POINTS + 12.0)  # below both label rows
    ax.set_yticks([])
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlim(-0.3, len(columns) - 0.6)
    for side in ("top", "bottom", "left", "right"):
        ax.spines[side].set_visible(False)
    bar = fig.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, pad=0.02)
    better = "lower" if direction == "minimize" else "higher"
    bar.set_label(f"objective value ({direction}: {better} and darker is better)")
    ax.set_title(f"{title or 'parameters against value'} ({len(done)} done trials)", pad=28)
    fig.tight_layout()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    for _ in range(4):  # long labels that still collide: give every axis more room
        if not _overlaps(ends, renderer):
            break
        width, height = fig.get_size_inches()
        fig.set_size_inches(width * 1.4, height)
        fig.tight_layout()
    labels = ax.get_xticklabels()
    if _overlaps(labels, renderer):  # long parameter names: slant them
        for label in labels:
            label.set(rotation=25, ha="right", rotation_mode="anchor")
        fig.tight_layout()
    return fig


@literal_text
def parallel(
    trials: Sequence[Trial], space_json: dict, direction: str, out: str | Path, title: str = ""
) -> Path:
    """Write a PNG of parallel coordinates (see ``parallel_figure``); return its path."""
    fig = parallel_figure(trials, space_json, direction, title)
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
    from abo.summary import in_completion_order, pareto_trials

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
