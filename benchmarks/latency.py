"""How long ``Study.ask()`` takes as the data grow: median and 95th percentile per strategy.

Hartmann-6 (6-D) results are added with ``study.add``; 8 trials are left running (busy); then
each timed ``ask()`` follows a completion (the previous timed trial is told), as in an
asynchronous loop, so every ask has one more observation. With ``--refit sync`` (the study
default) every ask refits the hyperparameters first; with ``--refit background`` (the HTTP
service's policy) an ask conditions the latest hyperparameters on the data while a refit runs
in a background thread of the same process (competing for the same cores, as in a service).
Each (strategy, size) runs in its own process under a time cap; when the cap is hit, that size
is reported with the asks it finished (or skipped) and larger sizes for that strategy are skipped.

Three names are not strategies: ``default`` is a study created with no strategy, refit or
thread option at all (what a user gets); ``constrained`` is the same with two outcome
constraints (``spread <= 0.3``, ``total >= 2.4``) and evaluations that fail on a fifth of the
cube (``x0 > 0.8``: about 20 % of the data are failed trials, which train the failure
classifier); ``optuna-gp`` is Optuna's ``GPSampler`` given the same data, the same busy trials
(asked, never told) and the same timed ask-then-tell cycle. Torch
runs with abo's own thread choice unless ``--threads`` sets one for every cell.

    python -m benchmarks latency --sizes 50 200 500 --strategies qlognei thompson
    python -m benchmarks latency --sizes 1000 5000 --refit background --strategies thompson
    python -m benchmarks latency --sizes 1000 10000 --strategies default optuna-gp --refit default
    python -m benchmarks latency --sizes 500 --strategies default constrained --refit background
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
from typing import Any

import numpy as np

BUSY = 8


OPTUNA = "optuna-gp"
DEFAULT = "default"  # create_study with no strategy, refit or thread option
CONSTRAINED = "constrained"  # the default strategy with two outcome constraints and failures


def constraint_values(x: np.ndarray, value: float) -> dict[str, float]:
    """The outcomes of the ``constrained`` study: Hartmann-6's value and two constraints that
    cut the cube (``spread <= 0.3`` holds on about half of it, ``total >= 2.4`` on about
    three quarters)."""
    return {"value": value, "spread": float(np.std(x)), "total": float(np.sum(x))}


def crashes(x: np.ndarray) -> bool:
    """Where the ``constrained`` study's evaluations fail: ``x0 > 0.8``, a fifth of the cube."""
    return bool(x[0] > 0.8)


def _measure(
    strategy: str,
    n: int,
    repeats: int,
    seed: int,
    cap: float,
    queue: Any,
    options: dict,
    threads: int | None = None,
    busy: int = BUSY,
) -> None:
    """Worker process: put each timed ask's seconds on ``queue``, then ``None``."""
    import warnings

    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    warnings.simplefilter("ignore")
    if strategy == OPTUNA:
        _measure_optuna(n, repeats, seed, cap, queue, busy)
        return
    import abo
    from benchmarks.suites import get_problem

    problem = get_problem("hartmann6")
    names = [f"x{i}" for i in range(problem.dim)]
    space = abo.Space({name: abo.Float(0.0, 1.0) for name in names})
    rng = np.random.default_rng(seed)
    if strategy == CONSTRAINED:  # the default strategy, two constraints, a failing fifth
        outcomes = {"value": "minimize", "spread": "<= 0.3", "total": ">= 2.4"}
        study = abo.create_study(space, outcomes=outcomes, seed=seed, n_initial=1, **options)

        def result(x: np.ndarray) -> Any:
            return None if crashes(x) else constraint_values(x, problem(x))

    else:
        if strategy == DEFAULT:
            study = abo.create_study(space, seed=seed, n_initial=1)
        else:
            study = abo.create_study(space, strategy=strategy, seed=seed, n_initial=1, **options)

        def result(x: np.ndarray) -> Any:
            return problem(x)

    for x in rng.random((n, problem.dim)):
        params = dict(zip(names, map(float, x), strict=True))
        outcome = result(x)
        if outcome is None:  # a failed trial: queued, asked, failed
            study.enqueue(params)
            study.fail(study.ask().id, "diverged")
        else:
            study.add(params, outcome)
    timed_asks(study, repeats, cap, queue, result, names, busy)


def timed_asks(
    study: Any,
    repeats: int,
    cap: float,
    queue: Any,
    value: Any,
    names: list[str],
    busy: int = BUSY,
) -> None:
    """Ask for ``busy`` points left running (the model is fitted there, untimed), say
    ``"ready"``, then put the seconds of each of ``repeats`` asks on ``queue``, each followed
    by the tell of ``value(x)`` for its point (``None``: the evaluation failed, and the trial
    is failed), until ``cap`` seconds have passed; ``None`` at the end."""
    import numpy as np

    for _ in range(busy):
        study.ask(n_workers=busy + 1)
    queue.put("ready")
    started = time.perf_counter()
    for _ in range(repeats):
        t0 = time.perf_counter()
        trial = study.ask(n_workers=busy + 1)
        queue.put(time.perf_counter() - t0)
        x = np.array([trial.params[name] for name in names])
        outcome = value(x)
        if outcome is None:  # the evaluation failed
            study.fail(trial.id, "diverged")
        else:
            study.tell(trial.id, outcome)  # one more completion before the next ask
        if time.perf_counter() - started > cap:
            break
    queue.put(None)


def _measure_optuna(
    n: int, repeats: int, seed: int, cap: float, queue: Any, busy: int = BUSY
) -> None:
    """``_measure`` for Optuna's ``GPSampler``: the same data, busy trials and timed cycle."""
    import numpy as np
    import optuna

    from benchmarks.suites import get_problem

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    problem = get_problem("hartmann6")
    names = [f"x{i}" for i in range(problem.dim)]
    dists = {name: optuna.distributions.FloatDistribution(0.0, 1.0) for name in names}
    sampler = optuna.samplers.GPSampler(seed=seed, n_startup_trials=1)
    study = optuna.create_study(sampler=sampler, direction="minimize")
    rng = np.random.default_rng(seed)
    study.add_trials(
        [
            optuna.trial.create_trial(
                params=dict(zip(names, map(float, x), strict=True)),
                distributions=dists,
                value=float(problem(x)),
            )
            for x in rng.random((n, problem.dim))
        ]
    )
    for _ in range(busy):
        study.ask(dists)  # running, never told: busy points for the sampler
    queue.put("ready")
    started = time.perf_counter()
    for _ in range(repeats):
        t0 = time.perf_counter()
        trial = study.ask(dists)  # the fixed distributions make the sampler propose here
        queue.put(time.perf_counter() - t0)
        study.tell(trial, float(problem(np.array([trial.params[name] for name in names]))))
        if time.perf_counter() - started > cap:
            break
    queue.put(None)


def measure(
    strategy: str,
    n: int,
    repeats: int,
    seed: int,
    cap: float,
    options: dict | None = None,
    setup: float = 60.0,
    threads: int | None = None,
    busy: int = BUSY,
) -> tuple[list[float], bool]:
    """Seconds of each timed ask, and whether the cap cut the measurement short.

    ``options`` go to ``create_study`` (``refit``, ``max_staleness``); ``setup`` seconds are
    allowed for spawning, adding the data and the first fit, before the ``cap`` starts;
    ``threads`` sets torch's threads in the measuring process (``None``: abo's choice);
    ``busy`` trials are left running (the benchmark's ``BUSY``; fewer make a quick check).
    """
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    args = (strategy, n, repeats, seed, cap, queue, dict(options or {}), threads, busy)
    proc = ctx.Process(target=_measure, args=args)
    proc.start()
    times: list[float] = []
    deadline = time.monotonic() + cap + setup
    finished = False
    while time.monotonic() < deadline:
        try:
            item = queue.get(timeout=max(0.1, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001 - queue.Empty: the cap ran out
            break
        if item == "ready":
            deadline = time.monotonic() + cap
        elif item is None:
            finished = True
            break
        else:
            times.append(item)
    if proc.is_alive():
        proc.terminate()
    proc.join()
    return times, not finished or len(times) < repeats


def main(args: argparse.Namespace) -> int:
    """Print a Markdown table of ask latency per strategy and size."""
    import abo
    from abo.acquisitions.registry import check_strategy
    from benchmarks.gp_vs_optuna import machine

    strategies = args.strategies or list(abo.strategies(objectives=1))
    for name in strategies:
        if name not in (DEFAULT, OPTUNA, CONSTRAINED):
            check_strategy(name)
    options: dict[str, Any] = {}
    if args.refit != "default":
        options = {"refit": args.refit, "max_staleness": args.max_staleness}
    if args.max_exact is not None:
        options["max_exact"] = args.max_exact
    policy = {
        "default": "the study's default",
        "sync": "refits when the data grew 5 %, past 40 observations",
        "full": "a full refit before every ask",
    }.get(args.refit, f"background refits, max_staleness {args.max_staleness or 'default'}")
    threads = "abo's choice" if args.threads is None else str(args.threads)
    print(
        f"`Study.ask()` seconds, Hartmann-6, {BUSY} busy trials, one completion before "
        f"each ask; refit={args.refit} ({policy}); max_exact "
        f"{args.max_exact or 'default'}; {args.repeats} asks per cell, cap "
        f"{args.cap:g} s of asking per cell (setup: adding the data and the first fit, "
        f"{args.setup:g} s); torch threads: {threads}."
    )
    print()
    print("| strategy | " + " | ".join(f"n = {n}" for n in args.sizes) + " |")
    print("|---|" + "---|" * len(args.sizes))
    for name in strategies:
        cells, capped = [], False
        for n in args.sizes:
            if capped:
                cells.append("skipped")
                continue
            times, capped = measure(
                name, n, args.repeats, args.seed, args.cap, dict(options), args.setup, args.threads
            )
            if not times:
                cells.append(f"over {args.cap:g} s")
                continue
            med, p95 = np.median(times), np.percentile(times, 95)
            note = f" ({len(times)} asks, capped)" if capped else ""
            cells.append(f"{med:.3f} / {p95:.3f}{note}")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    print()
    print("Cells: median / 95th percentile seconds per ask.")
    print(f"Machine: {machine()}.")
    return 0
