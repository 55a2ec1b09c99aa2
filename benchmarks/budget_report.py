"""Reports of runs measured against a budget that is not a number of evaluations: the cost of a
multi-fidelity run (``benchmarks/fidelity.py``, ``spent``) and the steps of a learning-curve
run (``benchmarks/curves.py``, ``steps``).

Per problem and worker count: the median log10 regret (quartiles in brackets) at a quarter, a
half and all of the budget, each method marked **best** (lowest median) or *tied* (not
significantly worse: Wilcoxon signed-rank tests paired by seed, Holm-corrected, as in the other
reports); a PNG of the median curves with their quartile bands; and, when ``reference`` is
given, how much of the budget each method needed to reach the reference method's final regret
in the same seed (the median over seeds; ``-`` where it never did in half the seeds or more).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.report import log_regret, mark_best

FRACTIONS = (0.25, 0.5, 1.0)


def regret_at(run: Mapping[str, Any], x_key: str, at: float) -> float | None:
    """The run's regret once it had used ``at`` of its budget (``None``: no result yet)."""
    i = int(np.searchsorted(np.asarray(run[x_key]), at, side="right")) - 1
    return None if i < 0 else run["regret"][i]


def needed(run: Mapping[str, Any], x_key: str, target: float | None) -> float | None:
    """The share of the budget ``run`` used before its regret was at most ``target``."""
    if target is None:
        return None
    for x, r in zip(run[x_key], run["regret"], strict=True):
        if r is not None and r <= target * (1 + 1e-9):
            return float(x) / float(run["budget"])
    return None


def against_time(runs: Sequence[Mapping[str, Any]], reference: str) -> list[dict[str, Any]]:
    """The runs measured against simulated time (``times``) instead of their budget: each
    run's budget becomes the median time at which ``reference``'s runs of its cell ended, so a
    quarter of the budget is a quarter of the time the reference took. Cells without the
    reference are left out (there is no time to measure them against)."""
    ends: dict[tuple[str, int], list[float]] = {}
    for run in runs:
        if run["method"] == reference and run.get("times"):
            ends.setdefault((run["problem"], run["k"]), []).append(float(run["times"][-1]))
    return [
        {**run, "budget": float(np.median(ends[(run["problem"], run["k"])]))}
        for run in runs
        if (run["problem"], run["k"]) in ends and run.get("times")
    ]


def _cells(runs: Sequence[Mapping[str, Any]]) -> dict[tuple[str, int], dict[str, list[Any]]]:
    out: dict[tuple[str, int], dict[str, list[Any]]] = {}
    for run in runs:
        out.setdefault((run["problem"], run["k"]), {}).setdefault(run["method"], []).append(run)
    return out


def _fmt(values: Sequence[float]) -> str:
    q = np.percentile(values, [25, 50, 75])
    shown = ["inf" if v >= 90 else f"{v:.2f}" for v in q]
    return f"{shown[1]} [{shown[0]}, {shown[2]}]"


def share_text(runs: Sequence[Mapping[str, Any]], x_key: str, finals: Mapping[int, float]) -> str:
    """The median share of the budget ``runs`` needed to reach their seed's ``finals`` regret,
    or ``-`` when fewer than half of them got there."""
    shares = [needed(r, x_key, finals.get(r["seed"])) for r in runs]
    got = [s for s in shares if s is not None]
    if len(got) * 2 <= len(shares):
        return "-"
    return f"{np.median([s if s is not None else np.inf for s in shares]):.2f}"


def cell_table(
    members: Mapping[str, list[Mapping[str, Any]]], x_key: str, reference: str | None
) -> list[str]:
    """Markdown rows for one problem and worker count (see the module)."""
    methods = sorted(members)
    header = ["method", "seeds"] + [f"log10 regret at {f:g} of the budget" for f in FRACTIONS]
    if reference:
        header.append(f"budget to reach {reference}'s final regret")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    marks = {}
    for f in FRACTIONS:
        values = {
            m: {r["seed"]: log_regret(regret_at(r, x_key, f * r["budget"])) for r in members[m]}
            for m in methods
        }
        marks[f] = (values, mark_best(values))
    finals = {r["seed"]: r["regret"][-1] for r in members.get(reference or "", [])}
    for m in methods:
        row = [m, str(len(members[m]))]
        for f in FRACTIONS:
            values, mark = marks[f]
            text = _fmt(list(values[m].values()))
            row.append({"best": f"**{text}**", "tied": f"*{text}*"}.get(mark.get(m, ""), text))
        if reference:
            row.append(share_text(members[m], x_key, finals))
        lines.append("| " + " | ".join(row) + " |")
    return lines


def _median_text(value: float) -> str:
    return "-12" if value <= -12 else ("inf" if value >= 90 else f"{value:.2f}")


def summary_table(runs: Sequence[Mapping[str, Any]], x_key: str, reference: str,
                  columns: Sequence[str], label: str = "problem, k") -> str:  # fmt: skip
    """One row per problem and worker count: each of ``columns``' median log10 regret at a
    quarter / a half / all of the budget (**bold**: the best median of every method in the
    cell; ↓: significantly worse than it, as in ``cell_table``), each but ``reference`` with
    the share of the budget it needed to reach ``reference``'s final regret (``-``: not in half
    the seeds); and the best of the other methods at the end. The results page's table."""
    others_head = "best other method at the end"
    lines = [f"| {label} | " + " | ".join(f"`{c}`" for c in columns) + f" | {others_head} |",
             "|---|" + "---|" * (len(columns) + 1)]  # fmt: skip
    for (problem, k), members in sorted(_cells(runs).items()):
        medians: dict[float, dict[str, float]] = {}
        marks: dict[float, dict[str, str]] = {}
        for f in FRACTIONS:
            values = {m: {r["seed"]: log_regret(regret_at(r, x_key, f * r["budget"]))
                          for r in rs} for m, rs in members.items()}  # fmt: skip
            medians[f] = {m: float(np.median(list(v.values()))) for m, v in values.items()}
            marks[f] = mark_best(values)
        finals = {r["seed"]: r["regret"][-1] for r in members.get(reference, [])}
        row = [f"{problem}, {k}"]
        for m in columns:
            if m not in members:
                row.append("")
                continue
            parts = []
            for f in FRACTIONS:
                text = _median_text(medians[f][m])
                mark = marks[f].get(m, "")
                parts.append(f"**{text}**" if mark == "best" else text + ("↓" if not mark else ""))
            cell = " / ".join(parts)
            if m != reference:
                cell += " · " + share_text(members[m], x_key, finals)
            row.append(cell)
        rest = {m: v for m, v in medians[1.0].items() if m not in columns}
        best = min(rest, key=lambda m: (rest[m], m)) if rest else None
        row.append(f"`{best}` {_median_text(rest[best])}" if best else "")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def plot_cell(members: Mapping[str, list[Mapping[str, Any]]], x_key: str, xlabel: str,
              title: str, path: Path) -> None:  # fmt: skip
    """Median log10 regret against the budget used, with quartile bands, per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    colours = matplotlib.colormaps["tab10"]
    for i, m in enumerate(sorted(members)):
        budget = float(members[m][0]["budget"])
        grid = np.linspace(0.02, 1.0, 60) * budget
        curves = np.array([[log_regret(regret_at(r, x_key, g)) for g in grid] for r in members[m]])
        curves = np.where(curves >= 90, np.nan, curves)
        with warnings.catch_warnings():  # no result yet at the start: an all-NaN column
            warnings.simplefilter("ignore", RuntimeWarning)
            lo, mid, hi = (np.nanpercentile(curves, q, axis=0) for q in (25, 50, 75))
        ax.plot(grid, mid, label=m, color=colours(i % 10))
        ax.fill_between(grid, lo, hi, color=colours(i % 10), alpha=0.15)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("log10 regret (median, quartiles)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write(runs: Sequence[Mapping[str, Any]], x_key: str, xlabel: str, out: str | Path,
          title: str, reference: str | None = None) -> str:  # fmt: skip
    """Write ``report.md`` and one PNG per problem and worker count into ``out``; return the
    Markdown."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    text = [f"# {title}", ""]
    for (problem, k), members in sorted(_cells(runs).items()):
        png = f"{problem}-k{k}.png"
        plot_cell(members, x_key, xlabel, f"{problem}, k = {k}", folder / png)
        text += [f"## {problem}, k = {k}", "", *cell_table(members, x_key, reference), "",
                 f"![{problem}, k = {k}]({png})", ""]  # fmt: skip
    report = "\n".join(text)
    (folder / "report.md").write_text(report)
    return report
