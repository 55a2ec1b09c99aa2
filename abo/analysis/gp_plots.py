"""Plots of ``abo.analysis.gp``: parameter importance, slices, the posterior mean's contour and the
GP's leave-one-out cross-validation (``abo plot --kind importance|slice|contour|cv``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from abo.analysis import gp as analysis  # noqa: E402
from abo.analysis.plots import literal_text  # noqa: E402
from abo.core.exceptions import AboError  # noqa: E402
from abo.core.space import Categorical  # noqa: E402
from abo.core.trial import Trial  # noqa: E402
from abo.spec.study_spec import StudySpec  # noqa: E402


def _save(fig: Any, out: str | Path) -> Path:
    fig.tight_layout()
    path = Path(out)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


@literal_text
def importance(spec: StudySpec, trials: Sequence[Trial], out: str | Path, title: str = "",
               objective: str | None = None,
               progress: analysis.Progress | None = None) -> Path:  # fmt: skip
    """Horizontal bars of each parameter's total and first-order Sobol index (the GP's), the
    model-free eta^2 as a tick, and the lengthscale written beside."""
    ranked = analysis.importance(spec, trials, objective, progress=progress)
    fig, ax = plt.subplots(figsize=(8, 1.8 + 0.45 * len(ranked)))
    rows = list(range(len(ranked)))
    ax.barh(rows, [i.total for i in ranked], color="tab:blue", alpha=0.35, label="total Sobol")
    ax.barh(rows, [i.sobol for i in ranked], color="tab:blue", height=0.45,
            label="first-order Sobol")  # fmt: skip
    ax.scatter([i.eta2 for i in ranked], rows, marker="|", s=300, color="tab:orange",
               label="eta² of the data (model-free)", zorder=3)  # fmt: skip
    for r, i in zip(rows, ranked, strict=True):
        ax.text(1.01, r, f"lengthscale {i.lengthscale:.3g}", va="center", fontsize=8)
    ax.set_yticks(rows, [i.name for i in ranked])
    ax.invert_yaxis()
    ax.set_xlim(0, 1.3)
    ax.set_xlabel("share of the variance")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25 - 0.6 / len(ranked)), ncol=3,
              fontsize=8, frameon=False)  # fmt: skip
    ax.set_title(title or "parameter importance")
    return _save(fig, out)


@literal_text
def slices(spec: StudySpec, trials: Sequence[Trial], out: str | Path, title: str = "",
           objective: str | None = None,
           progress: analysis.Progress | None = None) -> Path:  # fmt: skip
    """One panel per parameter: each analysed trial's value against that parameter, coloured
    by completion order (log scale for log-scaled parameters)."""
    done, _, y = analysis.observations(spec, trials, objective)
    names = list(spec.space)
    cols = min(3, len(names))
    n_rows = -(-len(names) // cols)
    fig, axes = plt.subplots(n_rows, cols, figsize=(4 * cols, 3 * n_rows), squeeze=False)
    order = sorted(range(len(done)), key=lambda k: (done[k].finished_at or 0.0, done[k].id))
    rank = {k: r for r, k in enumerate(order)}
    for ax, name in zip(axes.flat, names, strict=False):
        param = spec.space[name]
        have = [k for k, t in enumerate(done) if name in t.params]  # active in (conditional)
        xs = [done[k].params[name] for k in have]
        if isinstance(param, Categorical):
            xs = [param.choices.index(x) for x in xs]
            ax.set_xticks(range(len(param.choices)), [str(c) for c in param.choices])
        elif param.log:
            ax.set_xscale("log")
        ys = [float(y[k]) for k in have]
        ax.scatter(xs, ys, c=[rank[k] for k in have], cmap="viridis", s=14)
        ax.set_xlabel(name)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    fig.suptitle(title or "slices (colour: completion order)")
    return _save(fig, out)


@literal_text
def contour(spec: StudySpec, trials: Sequence[Trial], out: str | Path, x: str, y: str,
            title: str = "", objective: str | None = None,
            progress: analysis.Progress | None = None) -> Path:  # fmt: skip
    """Filled contours of the posterior mean over ``x`` and ``y`` with the trials in which both
    are active on it."""
    c = analysis.contour(spec, trials, x, y, objective, progress=progress)
    fig, ax = plt.subplots(figsize=(6.5, 5))
    filled = ax.contourf(c.x, c.y, c.z, levels=20, cmap="viridis")
    fig.colorbar(filled, ax=ax, label="posterior mean")
    ax.scatter([p[0] for p in c.points], [p[1] for p in c.points], c="white", edgecolors="black",
               s=18, label="trials")  # fmt: skip
    for name, setter in ((x, ax.set_xscale), (y, ax.set_yscale)):
        if getattr(spec.space[name], "log", False):
            setter("log")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    held = ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in c.fixed.items())  # fmt: skip
    where = "the best trial" if c.held_is_best else f"trial {c.held}, the best with both active"
    ax.set_title((title or "posterior mean") + (f"\n(others at {where}: {held})"
                                                 if held else ""), fontsize=9)  # fmt: skip
    ax.legend(loc="upper right", fontsize=8)
    return _save(fig, out)


@literal_text
def cross_validation(spec: StudySpec, trials: Sequence[Trial], out: str | Path, title: str = "",
                     objective: str | None = None,
                     progress: analysis.Progress | None = None) -> Path:  # fmt: skip
    """Leave-one-out predictions against the observed values, with two-std error bars, and
    the diagonal where they agree."""
    preds = analysis.cross_validation(spec, trials, objective, progress=progress)
    fig, ax = plt.subplots(figsize=(5.5, 5))
    observed = [p.observed for p in preds]
    ax.errorbar(observed, [p.predicted for p in preds], yerr=[2 * p.std for p in preds],
                fmt="o", ms=3, alpha=0.7, elinewidth=0.8)  # fmt: skip
    lo, hi = min(observed), max(observed)
    ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.8)
    inside = sum(abs(p.observed - p.predicted) <= 2 * p.std for p in preds) / len(preds)
    ax.set_xlabel("observed")
    ax.set_ylabel("predicted (leave one out, ±2 std)")
    ax.set_title((title or "cross-validation") + f" — {inside:.0%} within 2 std", fontsize=10)
    ax.grid(alpha=0.3)
    return _save(fig, out)


def draw(kind: str, spec: StudySpec, trials: Sequence[Trial], path: Path, name: str,
         params: str | None, objective: str | None,
         progress: analysis.Progress | None = None) -> Path:  # fmt: skip
    """Write the PNG of an analysis ``kind`` (``importance``, ``slice``, ``contour``, ``cv``);
    ``AboError`` naming the field, and no file, where it does not apply."""
    if kind == "contour":
        numeric = analysis.numeric(spec)
        if len(numeric) < 2:
            raise AboError(f"kind: a contour plots two numeric parameters; {name!r} has "
                           f"{len(numeric)} ({', '.join(numeric) or 'none'})",
                           field="kind")  # fmt: skip
        pair = [p.strip() for p in (params or "").split(",") if p.strip()]
        if len(pair) != 2:
            raise AboError(f"params: a contour needs two parameters, --params X,Y: two of the "
                           f"numeric parameters ({', '.join(numeric)}); got {params!r}",
                           field="params")  # fmt: skip
        for p in pair:
            if p not in numeric:
                what = "is categorical" if p in spec.space else "is not a parameter"
                raise AboError(f"params: {p!r} {what}; --params takes two of the numeric "
                               f"parameters ({', '.join(numeric)})", field="params")  # fmt: skip
        return contour(spec, trials, path, pair[0], pair[1], name, objective, progress)
    plot = {"importance": importance, "slice": slices, "cv": cross_validation}[kind]
    return plot(spec, trials, path, name, objective, progress)
