"""Bayesian optimisation against random search on the asynchronous SGD trainer, equal budgets.

    python examples/async_sgd/compare.py --seeds 3 --trials 30 --workers 2

For every seed and method a fresh in-memory study runs ``--trials`` training runs, two at a time
on one shared local Dask cluster (the failure-rate guard is off: a comparison needs the full
budget). A method is an abo strategy (``qlognei``, ``random``, ...), optionally with ``+penalty``:
diverged runs are then told as ``--diverged-value`` instead of failed (abo's model places a
failed trial at the worst loss observed so far; the penalty is a fixed value instead), and
with ``+asha`` or ``+median``: the study stops hopeless runs from the validation loss every
run reports after each epoch (``tune.stopping``), and runs ``--stopping-trials`` trials, since
each costs fewer epochs. All methods of a seed start from the same ``--n-initial`` scrambled
Sobol points. Prints Markdown tables: the median over seeds of the best validation loss (and
the accuracy of that trial) after 10, 20, ... trials; the best loss of a full (done) run
against the training epochs spent, in the order runs finished; every trial pooled by variant;
and the best configuration found. Training runs are noisy (thread scheduling), so read
medians, not one seed.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import cloudpickle

import abo
from abo.core.trial import Trial, TrialState
from abo.executors import DaskExecutor

sys.path.insert(0, str(Path(__file__).resolve().parent))
import trainer  # noqa: E402
import tune  # noqa: E402
from tune import SPACE, Objective  # noqa: E402

FLAGS = ("penalty", "asha", "median")


@dataclass
class Run:
    """One study's outcome: its trials in id order, and the epochs each trained."""

    method: str
    seed: int
    trials: list[Trial]
    seconds: float
    epochs: dict[int, int]

    def best_after(self, n: int) -> Trial | None:
        good = [t for t in self.trials[:n] if trained(t)]
        return min(good, key=lambda t: t.value) if good else None

    def best_within(self, budget: int) -> float | None:
        """The best loss of a done run among those finished before ``budget`` epochs were
        spent (every run's epochs counted in the order they finished)."""
        spent, best = 0, None
        for t in sorted(self.trials, key=lambda t: (t.finished_at or 0.0, t.id)):
            spent += self.epochs.get(t.id, 0)
            if spent > budget:
                break
            if trained(t) and (best is None or t.value < best):
                best = t.value
        return best

    @property
    def spent(self) -> int:
        return sum(self.epochs.values())


def diverged(t: Trial) -> bool:
    """Failed by ``Diverged``, or told as the penalty value."""
    failed = t.state is TrialState.FAILED and (t.reason or "").startswith("Diverged")
    return failed or "diverged" in t.user


def trained(t: Trial) -> bool:
    """Done with a real validation loss (not a penalty)."""
    return t.state is TrialState.DONE and "diverged" not in t.user


def _median(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.4f}" if values else "-"


def table(runs: Sequence[Run], methods: Sequence[str], checkpoints: Sequence[int]) -> str:
    """Median over seeds of the best loss (accuracy of that trial) after each checkpoint."""
    head = ["method"] + [f"best loss @{n}" for n in checkpoints]
    head += [f"its accuracy @{checkpoints[-1]}", "diverged / run", "other failures"]
    head += ["seconds / run"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in methods:
        mine = [r for r in runs if r.method == m]
        cells = [m]
        for n in checkpoints:
            cells.append(_median([b.value for r in mine if (b := r.best_after(n))]))
        last = [b for r in mine if (b := r.best_after(checkpoints[-1]))]
        cells.append(_median([b.user["accuracy"] for b in last]))
        trials = [t for r in mine for t in r.trials]
        cells.append(f"{sum(map(diverged, trials)) / len(mine):.1f}")
        other = [t for t in trials if t.state is TrialState.FAILED and not diverged(t)]
        cells.append(str(len(other)))
        cells.append(f"{statistics.mean(r.seconds for r in mine):.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def epochs_table(runs: Sequence[Run], methods: Sequence[str], budgets: Sequence[int]) -> str:
    """Median over seeds of the best loss of a done run within each epoch budget."""
    head = ["method", "runs", "stopped / study", "epochs spent"]
    head += [f"best loss @{b} epochs" for b in budgets]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in methods:
        mine = [r for r in runs if r.method == m]
        stopped = sum(t.state is TrialState.STOPPED for r in mine for t in r.trials)
        cells = [m, str(len(mine[0].trials)), f"{stopped / len(mine):.1f}"]
        cells.append(f"{statistics.median(r.spent for r in mine):.0f}")
        for b in budgets:
            found = [v for r in mine if (v := r.best_within(b)) is not None]
            cells.append(_median(found) if len(found) == len(mine) else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def by_variant(trials: Sequence[Trial]) -> str:
    """Trials pooled by variant: how often it diverged, how well it did."""
    head = ["variant", "trials", "diverged", "median loss (trained)", "best loss"]
    head += ["its workers", "its mean staleness"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for v in trainer.VARIANTS:
        mine = [t for t in trials if t.params["variant"] == v]
        good = [t for t in mine if trained(t)]
        best = min(good, key=lambda t: t.value) if good else None
        cells = [v, str(len(mine)), str(sum(map(diverged, mine))), _median([t.value for t in good])]
        if best is None:
            cells += ["-", "-", "-"]
        else:
            cells += [f"{best.value:.4f}", str(best.params["workers"])]
            cells += [f"{best.user['mean_staleness']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2, help="training runs at a time")
    parser.add_argument("--methods", nargs="+", default=["qlognei", "qlognei+penalty", "random"])
    parser.add_argument("--diverged-value", type=float, default=trainer.DIVERGED_LOSS)
    parser.add_argument("--async-workers", type=int, default=4, help="for the last table")
    parser.add_argument("--n-initial", type=int, default=8, help="Sobol points before the model")
    parser.add_argument(
        "--stopping-trials",
        type=int,
        default=None,
        help="trials of a +asha or +median method (default: --trials)",
    )
    args = parser.parse_args(argv)
    known = set(abo.strategies(objectives=1))
    for method in args.methods:
        strategy, *flags = method.split("+")
        if strategy not in known or not set(flags) <= set(FLAGS):
            parser.error(
                f"--methods: unknown {method!r} (a strategy of {', '.join(sorted(known))}, "
                f"then +{', +'.join(FLAGS)})"
            )

    for module in (trainer, tune):  # Dask workers cannot import this folder's modules
        cloudpickle.register_pickle_by_value(module)
    runs: list[Run] = []
    start = time.time()
    with DaskExecutor(n_workers=args.workers) as executor:
        for seed in range(args.seeds):
            for method in args.methods:
                strategy, *flags = method.split("+")
                penalty = args.diverged_value if "penalty" in flags else None
                rule = next((f for f in flags if f != "penalty"), "none")
                study = abo.create_study(
                    SPACE,
                    strategy=strategy,
                    seed=seed,
                    n_initial=args.n_initial,
                    stopping=tune.stopping(rule, args.epochs),
                )
                n_trials = args.trials if rule == "none" else args.stopping_trials or args.trials
                t0 = time.time()
                result = study.optimize(
                    Objective(args.epochs, penalty),
                    n_trials=n_trials,
                    executor=executor,
                    guard=None,
                )
                if result.stopped:
                    sys.exit(f"stopped ({result.stopped}): no table from an incomplete comparison")
                reports = study.reports()  # every run reports each epoch it trained
                epochs = {t.id: int(reports[t.id][-1].step) if t.id in reports else 0
                          for t in study.trials}  # fmt: skip
                runs.append(Run(method, seed, study.trials, time.time() - t0, epochs))
                best = runs[-1].best_after(args.trials)
                print(
                    f"seed {seed} {method}: best loss {best.value if best else float('nan'):.4f}"
                    f" ({sum(map(diverged, study.trials))} diverged, {runs[-1].seconds:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
    checkpoints = sorted({*range(10, args.trials, 10), args.trials})
    print(
        f"{args.seeds} seeds x {args.trials} trials x {args.epochs} epochs, {args.workers} runs"
        f" at a time; {platform.platform()}, {platform.processor() or platform.machine()},"
        f" {os.cpu_count()} CPUs; {time.time() - start:.0f} s in all\n"
    )
    print(table(runs, args.methods, checkpoints))
    full = args.trials * args.epochs
    budgets = sorted({full // 4, full // 2, full})
    print("\nThe best loss of a full run against the training epochs spent:\n")
    print(epochs_table(runs, args.methods, budgets))
    trials = [t for r in runs for t in r.trials]
    print("\nEvery trial of every study, by variant:\n")
    print(by_variant(trials))
    print(f"\nOnly the trials with at least {args.async_workers} asynchronous workers:\n")
    print(by_variant([t for t in trials if t.params["workers"] >= args.async_workers]))
    overall = min(
        (b for r in runs if (b := r.best_after(args.trials))), key=lambda t: t.value, default=None
    )
    if overall is not None:
        run = next(r for r in runs if overall in r.trials)
        print(
            f"\nBest configuration ({run.method}, seed {run.seed}): validation loss "
            f"{overall.value:.4f}, accuracy {overall.user['accuracy']:.4f}, mean staleness "
            f"{overall.user['mean_staleness']:.2f} (max {overall.user['max_staleness']})"
        )
        print(f"`{overall.params}`")


if __name__ == "__main__":
    main()
