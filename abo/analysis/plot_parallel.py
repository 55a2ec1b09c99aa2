"""Parallel coordinates of a study: each done trial a line through its parameters and value,
with end labels placed so they never collide."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.cm  # noqa: E402
import matplotlib.colors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.text  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.backend_bases import RendererBase  # noqa: E402
from matplotlib.colors import Colormap, Normalize  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from abo.analysis.plot_base import literal_text  # noqa: E402
from abo.core.trial import Trial, TrialState  # noqa: E402

END_LABEL = "end-label"
"""``gid`` of the low/high labels at the ends of the parallel-coordinate axes."""
_ROW_POINTS = 11.0  # the second row of end labels sits this much further out
_BOX = {"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85}


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


def _position(space_json: dict, name: str, value: object) -> float:
    """Where ``value`` of parameter ``name`` sits on its axis, 0 (low) to 1 (high)."""
    p = space_json[name]
    if value is None:  # a conditional parameter inactive in this trial: a gap in its line
        return math.nan
    if p["type"] == "categorical":
        choices = p["choices"]
        return (choices.index(value) + 0.5) / len(choices) if value in choices else 0.5
    lo, hi = float(p["low"]), float(p["high"])
    f = math.log if p.get("log") else float
    return (f(float(value)) - f(lo)) / (f(hi) - f(lo))  # type: ignore[arg-type]


def _value_of(t: Trial) -> float:
    assert t.value is not None  # only done trials with a value are drawn
    return t.value


def _draw_lines(
    ax: Axes, done: Sequence[Trial], space_json: dict, direction: str
) -> tuple[float, float, Colormap, Normalize]:
    """One line per done trial, the best drawn last; return the value range, colours, scale."""
    names = list(space_json)
    values = [float(_value_of(t)) for t in done]
    vlo, vhi = (min(values), max(values)) if values else (0.0, 1.0)
    span = vhi - vlo or 1.0
    # dark is better: the best value takes the dark end of viridis whatever the direction
    cmap = plt.get_cmap("viridis" if direction == "minimize" else "viridis_r")
    norm = matplotlib.colors.Normalize(vlo, vlo + span)
    ranked = sorted(done, key=_value_of, reverse=direction == "minimize")  # best last
    for t in ranked:
        scaled = (float(_value_of(t)) - vlo) / span
        good = 1.0 - scaled if direction == "minimize" else scaled
        ys = [_position(space_json, n, t.params.get(n)) for n in names] + [scaled]
        ax.plot(range(len(ys)), ys, color=cmap(norm(_value_of(t))), alpha=0.8, lw=1 + good)
    return vlo, vhi, cmap, norm


def _draw_axes(
    ax: Axes, columns: Sequence[str], space_json: dict, vlo: float, vhi: float
) -> list[matplotlib.text.Text]:
    """The vertical axes, categorical choices beside theirs; return the low/high end labels."""
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
                    i + 0.04, _position(space_json, n, c), _clip(str(c)), fontsize=size,
                    va="center", bbox=_BOX, zorder=4,
                )  # fmt: skip
            continue
        offset = 4.0 + _ROW_POINTS * (i % 2)  # neighbours in alternate rows
        for y, label, sign, va in ((0.0, p["low"], -1, "top"), (1.0, p["high"], 1, "bottom")):
            ends.append(
                ax.annotate(
                    _fmt(label), (i, y), xytext=(0, sign * offset), textcoords="offset points",
                    ha="center", va=va, fontsize=8, bbox=_BOX, zorder=4, gid=END_LABEL,
                    annotation_clip=False,
                )
            )  # fmt: skip
    return ends


def _frame(ax: Axes, space_json: dict, columns: Sequence[str]) -> None:
    """Name the axes below both rows of end labels and hide the box around the plot."""
    names = list(space_json)
    ticks = [f"{n}\n(log)" if space_json[n].get("log") else n for n in names] + ["value"]
    ax.set_xticks(range(len(columns)), [_clip(t, 20) for t in ticks], fontsize=9)
    ax.tick_params(axis="x", length=0, pad=8.0 + _ROW_POINTS + 12.0)  # below both label rows
    ax.set_yticks([])
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlim(-0.3, len(columns) - 0.6)
    for side in ("top", "bottom", "left", "right"):
        ax.spines[side].set_visible(False)


def _make_room(fig: Figure, ax: Axes, ends: Sequence[matplotlib.text.Text]) -> None:
    """Widen the figure while end labels collide, then slant parameter names that still do."""
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
    columns = list(space_json) + ["value"]
    fig, ax = plt.subplots(figsize=(max(7.0, 1.5 * len(columns) + 2.0), 5.0))
    vlo, vhi, cmap, norm = _draw_lines(ax, done, space_json, direction)
    ends = _draw_axes(ax, columns, space_json, vlo, vhi)
    _frame(ax, space_json, columns)
    bar = fig.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, pad=0.02)
    better = "lower" if direction == "minimize" else "higher"
    bar.set_label(f"objective value ({direction}: {better} and darker is better)")
    ax.set_title(f"{title or 'parameters against value'} ({len(done)} done trials)", pad=28)
    _make_room(fig, ax, ends)
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
