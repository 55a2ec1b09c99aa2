"""Scores of the real-task suite (``benchmarks/real_tasks.py``), as Bayesmark reports them, with
the same significance marks as the synthetic grids (``benchmarks/report.py``).

Per (task, k), each method's runs give a final loss per seed. The *normalised score* of a run
is ``(zero - loss) / (zero - one)``: 0 at random search's median final loss, 1 at the best loss
any run of the cell found; a method's score is its mean over seeds. *Best or tied*: the lowest
median final loss, and every method not significantly worse than it (Wilcoxon signed-rank
paired by seed, Holm-corrected over the cell's methods, alpha 0.05). *Against a bar* (Ax by
default): the same test against the bar alone, per method.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from benchmarks.report import mark_best, versus

BAR = "ax"

Cells = dict[tuple[str, int], dict[str, dict[int, float]]]


def finals(runs: Sequence[Mapping[str, Any]]) -> Cells:
    """(task, k) -> method -> seed -> final loss."""
    cells: Cells = {}
    for r in runs:
        by_seed = cells.setdefault((r["problem"], r["k"]), {}).setdefault(r["method"], {})
        by_seed[int(r["seed"])] = float(r["regret"][-1])
    return cells


def normalised_scores(runs: Sequence[Mapping[str, Any]]) -> dict[tuple[str, int], dict[str, float]]:
    """Per (task, k): each method's mean normalised score over its seeds (Bayesmark's: 0 is
    random search's median final loss, 1 the best loss any run of the cell found)."""
    out: dict[tuple[str, int], dict[str, float]] = {}
    for cell, methods in finals(runs).items():
        if "random" not in methods:
            continue
        zero = float(np.median(list(methods["random"].values())))
        one = min(min(v.values()) for v in methods.values())
        span = zero - one
        out[cell] = {
            m: float(np.mean([(zero - v) / span if span > 0 else 0.0 for v in vs.values()]))
            for m, vs in methods.items()
        }
    return out


def score_table(
    runs: Sequence[Mapping[str, Any]], order: Sequence[str] = (), bar: str = BAR
) -> str:
    """Markdown: each method's normalised score per (task, k), **bold** where it is best or
    tied; then the mean score, the cells best or tied, the cells significantly better / worse
    than ``bar``, the seeds run and the median seconds per ask."""
    scores = normalised_scores(runs)
    cells = finals(runs)
    seen = {m for v in scores.values() for m in v}
    methods = [m for m in order if m in seen] + sorted(seen - set(order))
    lines = ["| task | k | " + " | ".join(methods) + " |", "|---|---|" + "---|" * len(methods)]
    tied = dict.fromkeys(methods, 0)
    against = {m: [0, 0] for m in methods}
    for cell, row in sorted(scores.items()):
        marks = mark_best(cells[cell])
        vs = versus(cells[cell], bar=bar)
        shown = []
        for m in methods:
            if m not in row:
                shown.append("-")
                continue
            good = marks.get(m) in ("best", "tied")
            tied[m] += good
            against[m][0] += vs.get(m) == "better"
            against[m][1] += vs.get(m) == "worse"
            shown.append(f"**{row[m]:.2f}**" if good else f"{row[m]:.2f}")
        lines.append(f"| {cell[0]} | {cell[1]} | " + " | ".join(shown) + " |")
    means = [np.mean([r[m] for r in scores.values() if m in r]) for m in methods]
    n_cells = {m: sum(m in r for r in scores.values()) for m in methods}
    seeds = {m: sorted({len(c[m]) for c in cells.values() if m in c}) for m in methods}
    asks = {m: [a for r in runs if r["method"] == m for a in r["ask_seconds"]] for m in methods}

    def row(label: str, values: Sequence[str]) -> str:
        return f"| {label} | | " + " | ".join(values) + " |"

    lines += [
        row("**mean score**", [f"**{v:.2f}**" for v in means]),
        row("best or tied (cells)", [f"{tied[m]} / {n_cells[m]}" for m in methods]),
        row(f"vs {bar}: better / worse", [
            "(bar)" if m == bar else f"{against[m][0]} / {against[m][1]}" for m in methods
        ]),
        row("seeds", ["-".join(str(s) for s in (seeds[m][0], seeds[m][-1])) if len(seeds[m]) > 1
                      else str(seeds[m][0]) for m in methods]),
        row("s / ask (median)", [f"{np.median(asks[m]):.3f}" for m in methods]),
    ]  # fmt: skip
    return "\n".join(lines)
