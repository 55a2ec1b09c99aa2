"""Turn JSON-lines results into Markdown tables and PNG regret plots.

Per problem, duration distribution and worker count ``k``: the median and interquartile range
of log10 simple regret (on problems of several objectives: of the hypervolume gap, the
run's ``metric``) at the final budget and at simulated time ``T = N/k``; the best method
(lowest median) and every method statistically tied with it — a Wilcoxon signed-rank test
paired by seed (the seed fixes the initial design and the durations for every method), p-values
Holm-corrected over the comparisons with the best — are marked. Sequential runs (one worker)
appear in every ``k`` table as the "n evaluations in sequence" reference.

On constrained and crashing problems the regret is that of the best feasible point, infinite
(``inf``, ranked as the worst) while a run has none; their tables add the share of runs with a
feasible point at ``t = N/k`` and at ``N``, and the share of the method's evaluations that
failed (``wasted``).

Example:
    >>> mark_best({"a": {0: 1.0, 1: 1.1}, "b": {0: 1.0, 1: 1.1}})
    {'a': 'best', 'b': 'tied'}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import wilcoxon

from benchmarks.harness import metric_name as metric
from benchmarks.harness import read_runs

REGRET_FLOOR = 1e-12  # log10 of an exact hit would be -inf
ALPHA = 0.05
BAR = "optuna-gp"  # Optuna's GPSampler: the baseline abo has to beat
LABELS = {"regret": "log10 regret", "hypervolume_gap": "log10 hypervolume gap"}
"""Table and axis label of each metric (a run's ``metric``; runs without one: regret)."""
DESCRIPTIONS = {
    "regret": "log10 simple regret (best observed point, on constrained problems the best "
    "feasible one, true function)",
    "hypervolume_gap": "log10 hypervolume gap (the known front's hypervolume less that of "
    "the observed points' Pareto front, both w.r.t. the problem's reference point)",
}


INFEASIBLE = 99.0
"""log10 regret of a run without a feasible point yet: shown as ``inf``, ranked as the worst."""


def log_regret(value: float | None) -> float:
    """log10 of ``value`` (floored at ``REGRET_FLOOR``); ``INFEASIBLE`` for ``None``."""
    if value is None:
        return INFEASIBLE
    return float(np.log10(max(value, REGRET_FLOOR)))


def curve(run: Mapping[str, Any]) -> list[float]:
    """A run's best-so-far curve (regret or hypervolume gap), one value per completion."""
    return list(run[metric(run)])


def regret_at_time(run: Mapping[str, Any], t: float) -> float | None:
    """Best-so-far regret (or the run's metric) among the evaluations completed by time ``t``
    (``None``: no feasible point by then)."""
    i = int(np.searchsorted(np.asarray(run["times"]), t, side="right")) - 1
    value = curve(run)[max(i, 0)]
    return None if value is None else float(value)


def _holm(pvalues: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values (monotone, capped at 1)."""
    m = len(pvalues)
    order = np.argsort(pvalues)
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted.tolist()


def _pvalue(a: np.ndarray, b: np.ndarray) -> float:
    diff = a - b
    if np.allclose(diff, 0.0):
        return 1.0  # identical results: nothing to tell them apart
    return float(wilcoxon(a, b, zero_method="zsplit").pvalue)


def mark_best(values: Mapping[str, Mapping[int, float]], alpha: float = ALPHA) -> dict[str, str]:
    """``"best"`` for the lowest median, ``"tied"`` for those not significantly worse, else ``""``.

    Args:
        values: method -> seed -> log10 regret (lower is better).
        alpha: family-wise error rate of the Holm-corrected Wilcoxon signed-rank tests.
    """
    if not values:
        return {}
    medians = {m: float(np.median(list(v.values()))) for m, v in values.items()}
    best = min(medians, key=lambda m: (medians[m], m))
    others = [m for m in values if m != best]
    pvalues = []
    for other in others:
        seeds = sorted(set(values[best]) & set(values[other]))
        if len(seeds) < 2:
            pvalues.append(1.0)  # too few paired seeds to tell: tied
            continue
        a = np.array([values[best][s] for s in seeds])
        b = np.array([values[other][s] for s in seeds])
        pvalues.append(_pvalue(a, b))
    marks = {best: "best"}
    for other, p in zip(others, _holm(pvalues), strict=True):
        marks[other] = "tied" if p >= alpha else ""
    return marks


def versus(
    values: Mapping[str, Mapping[int, float]], bar: str = BAR, alpha: float = ALPHA
) -> dict[str, str]:
    """Each method against ``bar``: ``"better"``, ``"worse"`` or ``"same"`` (not significant).

    Wilcoxon signed-rank tests paired by seed, Holm-corrected over the methods compared.
    """
    if bar not in values:
        return {m: "" for m in values}
    others = [m for m in values if m != bar]
    pvalues, signs = [], []
    for other in others:
        seeds = sorted(set(values[bar]) & set(values[other]))
        a = np.array([values[other][s] for s in seeds])
        b = np.array([values[bar][s] for s in seeds])
        pvalues.append(_pvalue(a, b) if len(seeds) >= 2 else 1.0)
        signs.append(float(np.median(a - b)) if seeds else 0.0)
    out = {bar: "(bar)"}
    for other, p, sign in zip(others, _holm(pvalues), signs, strict=True):
        out[other] = "same" if p >= alpha else ("better" if sign < 0 else "worse")
    return out


def _sequential(run: Mapping[str, Any]) -> bool:
    return bool(run.get("sequential", run["method"] == "seq-logei"))


def _cells(runs: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str, int, int], list[Any]]:
    """``(problem, durations, k, budget) -> runs``; sequential runs are copied into every k."""
    cells: dict[tuple[str, str, int, int], list[Any]] = {}
    for run in runs:
        if not _sequential(run):
            key = (run["problem"], run["durations"], run["k"], run["budget"])
            cells.setdefault(key, []).append(run)
    for run in runs:
        if _sequential(run):
            where = (run["problem"], run["durations"], run["budget"])
            keys = [key for key in cells if (key[0], key[1], key[3]) == where]
            for key in keys or [(*where[:2], run["k"], run["budget"])]:
                cells.setdefault(key, []).append(run)
    return dict(sorted(cells.items()))


def _quartiles(values: np.ndarray, axis: int | None = None) -> np.ndarray:
    """The 25th, 50th and 75th percentiles; observed values only (``nearest``) when some are
    ``INFEASIBLE``, which an interpolation would turn into numbers no run reached."""
    if np.any(values >= INFEASIBLE):
        return np.percentile(values, [25, 50, 75], axis=axis, method="nearest")
    return np.percentile(values, [25, 50, 75], axis=axis)


def _fmt(values: Iterable[float]) -> str:
    q1, med, q3 = _quartiles(np.asarray(list(values)))
    say = lambda v: "inf" if v >= INFEASIBLE else f"{v:.2f}"  # noqa: E731
    return f"{say(med)} [{say(q1)}, {say(q3)}]"


def _feasible_by(run: Mapping[str, Any], n: float) -> bool:
    first = run.get("first_feasible")
    return first is not None and first <= n


def cell_table(members: Sequence[Mapping[str, Any]], k: int, budget: int, bar: str = BAR) -> str:
    """The Markdown table of one (problem, durations, k) cell; ``vs`` columns test ``bar``."""
    by_method: dict[str, list[Mapping[str, Any]]] = {}
    for run in members:
        by_method.setdefault(run["method"], []).append(run)
    horizon = budget / k
    label = LABELS.get(metric(members[0]), f"log10 {metric(members[0])}")
    final = {m: {r["seed"]: log_regret(curve(r)[-1]) for r in rs} for m, rs in by_method.items()}
    timed = {
        m: {r["seed"]: log_regret(regret_at_time(r, horizon)) for r in rs}
        for m, rs in by_method.items()
    }
    mark_final, mark_time = mark_best(final), mark_best(timed)
    vs_final, vs_time = versus(final, bar), versus(timed, bar)
    noisy = any(r.get("inference_regret") is not None for r in members)
    extra_head = " log10 inference regret at N |" if noisy else ""
    constrained = any("first_feasible" in r for r in members)
    if constrained:
        extra_head += " feasible at t = N/k | feasible at N | wasted |"
    lines = [
        f"| method | workers | seeds | {label} at N = {budget} | | vs {bar} | "
        f"{label} at t = N/k = {horizon:g} | | vs {bar} | utilization | duplicates "
        f"| median s / proposal | p95 s / proposal |{extra_head}",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
        + ("---|" if noisy else "")
        + ("---|---|---|" if constrained else ""),
    ]
    order = sorted(by_method, key=lambda m: np.median(list(final[m].values())))
    for method in order:
        rs = by_method[method]
        secs = [s for r in rs for s in r["proposal_seconds"]]
        inference = [
            log_regret(r["inference_regret"]) for r in rs if r.get("inference_regret") is not None
        ]
        extra = f" {_fmt(inference) if inference else '-'} |" if noisy else ""
        if constrained:
            by_time = np.mean([regret_at_time(r, horizon) is not None for r in rs])
            by_n = np.mean([_feasible_by(r, budget) for r in rs])
            wasted = np.mean([r.get("wasted", 0.0) for r in rs])
            extra += f" {by_time:.2f} | {by_n:.2f} | {wasted:.3f} |"
        lines.append(
            f"| {method} | {rs[0]['workers']} | {len(rs)} | {_fmt(final[method].values())} | "
            f"{mark_final[method]} | {vs_final[method]} | {_fmt(timed[method].values())} | "
            f"{mark_time[method]} | {vs_time[method]} | "
            f"{np.mean([r['utilization'] for r in rs]):.2f} | "
            f"{np.mean([r['duplicate_rate'] for r in rs]):.3f} | "
            f"{np.median(secs) if secs else 0.0:.3f} | "
            f"{np.percentile(secs, 95) if secs else 0.0:.3f} |{extra}"
        )
    return "\n".join(lines)


def _band(curves: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Quartiles over runs; ``INFEASIBLE`` ones become ``inf``, which the plot leaves out."""
    q = _quartiles(curves, axis=0)
    low, mid, high = np.where(q >= INFEASIBLE, np.inf, q)
    return low, mid, high


def plot_cell(members: Sequence[Mapping[str, Any]], k: int, budget: int, path: Path) -> None:
    """Regret against evaluations and against simulated time: median with quartile bands."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_method: dict[str, list[Mapping[str, Any]]] = {}
    for run in members:
        by_method.setdefault(run["method"], []).append(run)
    grid = np.linspace(0.0, 1.2 * budget / k, 120)
    fig, (ax_n, ax_t) = plt.subplots(1, 2, figsize=(12, 4.5))
    # tab20's pairs of near colours only where ten distinct ones do not suffice
    cmap = plt.get_cmap("tab10" if len(by_method) <= 10 else "tab20")
    for i, (method, rs) in enumerate(sorted(by_method.items())):
        color = cmap(i % cmap.N)
        evals = np.array([[log_regret(v) for v in curve(r)] for r in rs])
        q1, med, q3 = _band(evals)
        n = np.arange(1, evals.shape[1] + 1)
        ax_n.plot(n, med, color=color, label=method)
        ax_n.fill_between(n, q1, q3, color=color, alpha=0.15)
        if rs[0]["workers"] == 1 and k > 1:
            continue  # the sequential reference: against evaluations only
        timed = np.array([[log_regret(regret_at_time(r, t)) for t in grid] for r in rs])
        q1, med, q3 = _band(timed)
        ax_t.plot(grid, med, color=color, label=method)
        ax_t.fill_between(grid, q1, q3, color=color, alpha=0.15)
    ylabel = {"regret": "log10 simple regret"}.get(metric(members[0]), LABELS["hypervolume_gap"])
    ax_n.set(xlabel="completed evaluations", ylabel=ylabel)
    ax_t.set(xlabel="simulated time (mean duration 1)", ylabel=ylabel)
    ax_t.axvline(budget / k, color="grey", lw=0.8, ls="--")
    ax_n.legend(fontsize=7, ncol=2)
    problem = members[0]["problem"]
    fig.suptitle(f"{problem}, k = {k}, {members[0]['durations']} durations: median and IQR")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _has_every_seed(members: Sequence[Mapping[str, Any]], seeds: int | None) -> bool:
    """Whether each method among a cell's runs has every seed ``0..seeds-1``."""
    by_method: dict[str, set[int]] = {}
    for run in members:
        by_method.setdefault(run["method"], set()).add(run["seed"])
    return all(got >= set(range(seeds or 0)) for got in by_method.values())


def write_report(
    paths: Sequence[str | Path],
    out: str | Path,
    title: str = "Benchmark results",
    seeds: int | None = None,
    bar: str = BAR,
    methods: Sequence[str] | None = None,
    problems: Sequence[str] | None = None,
    complete: bool = False,
) -> str:
    """Write ``report.md`` and one PNG per cell into ``out``; return the Markdown.

    ``bar``: the method every other one is tested against (Optuna's GPSampler by default).

    ``seeds``: only seeds ``0..seeds-1`` (so a run cut short reports the seeds it finished for
    every method, not a different set per method).

    ``methods``, ``problems``: only these (``None``: every one in the files).

    ``complete``: only the cells in which every method has every one of the ``seeds`` (a
    suite still running reports the cells it finished, not a cell with one seed of a method).
    """
    if complete and seeds is None:
        raise ValueError("complete: needs seeds (the seeds 0..seeds-1 every method must have)")
    runs = [
        r
        for r in read_runs(paths)
        if (seeds is None or r["seed"] < seeds)
        and (methods is None or r["method"] in methods)
        and (problems is None or r["problem"] in problems)
    ]
    if not runs:
        raise ValueError(f"results: no runs in {', '.join(map(str, paths))}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    metrics = sorted({metric(r) for r in runs}, key=lambda m: (m != "regret", m))
    described = " and ".join(DESCRIPTIONS.get(m, m) for m in metrics)
    parts = [
        f"# {title}",
        "",
        f"Median [IQR] over seeds of {described}. "
        "`best`: lowest median; `tied`: not significantly worse than the best (Wilcoxon "
        f"signed-rank paired by seed, Holm-corrected, alpha = {ALPHA}). `vs {bar}`: the same "
        f"test of each method against `{bar}` (`better`/`worse`/`same`).",
    ]
    cells = _cells(runs)
    if complete:
        cells = {key: members for key, members in cells.items() if _has_every_seed(members, seeds)}
        if not cells:
            raise ValueError(f"complete: no cell has every method on seeds 0-{seeds - 1}")
    for (problem, durations, k, budget), members in cells.items():
        png = f"{problem}-{durations}-k{k}.png"
        plot_cell(members, k, budget, out / png)
        parts += [
            "",
            f"## {problem}, k = {k}, {durations} durations, N = {budget}",
            "",
            cell_table(members, k, budget, bar),
            "",
            f"![{problem} k={k}]({png})",
        ]
    text = "\n".join(parts) + "\n"
    (out / "report.md").write_text(text)
    return text
