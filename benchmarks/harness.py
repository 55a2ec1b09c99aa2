"""Run a grid of simulated asynchronous (or synchronous-batch) runs and store them as JSON lines.

The event loop follows ``benchmarks/simulator.py`` exactly (same Latin-hypercube design, same
duration stream, ties finish together, one proposal per free worker) and reuses its pieces; it
adds what that simulator does not do: synchronous batches (``q = k`` points only when every
worker is free), noisy problems (regret on the true function at the best observed point),
worker utilisation and the duplicate rate.

One JSON line per run holds the cell (method, problem, k, durations, budget, seed), its curves
(completion times and best-so-far regret after each completion) and its summary metrics, so a
results file can be resumed (runs already in it are skipped) and files merged by concatenation.

On a problem of several objectives (``benchmarks/mo_problems.py``) the same loop records,
instead of regret, the hypervolume gap of the observed points' Pareto front after each
completion: the record's ``metric`` names the curve (``"hypervolume_gap"``; records without
``metric`` are regret curves), ``hypervolume`` is the final front's raw hypervolume, ``front``
the observed Pareto front's values and ``inside`` how many evaluations beat the problem's
reference point in every objective.

On a constrained or crashing problem (``benchmarks/constrained_problems.py``) the regret curve
is that of the best *feasible* point, ``null`` until one is feasible; ``first_feasible`` is the
completion (1-based, the free design included) that brought the first feasible point
(``null``: none), ``failures`` how many of the method's own evaluations failed (the shared
design's failures not counted), ``wasted`` their share of its evaluations and
``wasted_time`` their share of its busy time (a failure costs its full duration).

Example:
    >>> from benchmarks.suites import get_problem
    >>> run = simulate_run(get_problem("branin"), "random", k=2, budget=8, seed=0)
    >>> len(run["regret"]), run["times"][0], run["duplicate_rate"]
    (8, 0.0, 0.0)
    >>> run = simulate_run(get_problem("branincurrin"), "random", k=2, budget=8, seed=0)
    >>> run["metric"], len(run["hypervolume_gap"]), run["hypervolume_gap"][-1] >= 0
    ('hypervolume_gap', 8, True)
"""

from __future__ import annotations

import heapq
import json
import logging
import os
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np

from abo.spec.study_spec import default_n_initial
from benchmarks.constrained_problems import ConstrainedProblem
from benchmarks.methods import method_spec
from benchmarks.mo_problems import MOProblem, hypervolume
from benchmarks.simulator import initial_design, sample_durations
from benchmarks.suites import AnyProblem, NoisyProblem, Suite, get_problem, observe

DUPLICATE_TOL = 1e-3
KEY_FIELDS = ("method", "problem", "k", "durations", "budget", "seed")
GAP = "hypervolume_gap"


def metric_name(run: Mapping[str, Any]) -> str:
    """The key of a run's curve: ``"regret"`` or ``"hypervolume_gap"`` (older runs: regret)."""
    return str(run.get("metric", "regret"))


def num_objectives(problem: str) -> int:
    """How many objectives the problem called ``problem`` has."""
    return int(getattr(get_problem(problem), "num_objectives", 1))


def run_key(run: dict[str, Any]) -> tuple[Any, ...]:
    """What identifies a run across files (for resuming and merging)."""
    return tuple(run[f] for f in KEY_FIELDS)


def simulate_run(
    problem: AnyProblem,
    method: str,
    k: int,
    budget: int,
    seed: int,
    durations: str = "halfnormal",
    strategy_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One run of ``method`` with ``k`` workers until ``budget`` results: a JSON-able record.

    ``k`` is the cell's worker count; a sequential method uses one worker of it (``workers``).
    """
    spec = method_spec(method)
    workers = spec.workers(k)
    n0 = default_n_initial(problem.dim)  # abo's default design, shared by every method
    if k < 1 or not n0 <= budget:
        raise ValueError(f"k/budget: need k >= 1 and budget >= {n0}, got k={k}, budget={budget}")
    taus = sample_durations(durations, budget, np.random.default_rng([seed, 2]))
    noise = np.random.default_rng([seed, 3])
    options = dict(strategy_options or {})
    if spec.peer:  # a peer is told the budget, as its user would (SMAC sizes its design by it)
        options = {"budget": budget}
    t_start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # experimental-feature and numerical chatter
        logging.getLogger("optuna").setLevel(logging.WARNING)
        opt = spec.build(problem, seed, workers, n0, options)
        make: Any = _Loop
        if isinstance(problem, MOProblem):
            make = _MOLoop
        elif isinstance(problem, ConstrainedProblem):
            make = _ConstrainedLoop
        loop = make(problem, opt, workers, budget, taus, noise, spec.synchronous)
        loop.run(initial_design(problem.dim, n0, seed))
    busy = float(np.sum(taus[n0:budget]))
    makespan = loop.clock
    inference = inference_regret(problem, loop.X, loop.Y) if loop.noisy else None
    curve: dict[str, Any] = {"regret": [_g(r) for r in loop.regrets]}
    if isinstance(problem, MOProblem):
        curve = {
            "metric": GAP,
            "num_objectives": problem.num_objectives,
            GAP: [float(f"{g:.6g}") for g in loop.regrets],
            "hypervolume": float(f"{problem.max_hv - loop.raw_gap:.8g}"),
            **loop.summary(),
        }
    if isinstance(loop, _ConstrainedLoop):
        curve.update(loop.summary(busy))
    return {
        "method": method,
        "problem": problem.name,
        "k": k,
        "workers": workers,
        "durations": durations,
        "budget": budget,
        "seed": seed,
        "n_initial": n0,
        "synchronous": spec.synchronous,
        "sequential": spec.sequential,
        "strategy_options": options,
        "times": [round(t, 6) for t in loop.times],
        **curve,
        "inference_regret": None if inference is None else float(f"{inference:.6g}"),
        "utilization": busy / (workers * makespan) if makespan > 0 else 1.0,
        "duplicate_rate": loop.duplicates / max(1, len(loop.proposal_seconds)),
        "proposal_seconds": [round(s, 5) for s in loop.proposal_seconds],
        "wall_seconds": round(time.perf_counter() - t_start, 3),
    }


def _g(value: float | None) -> float | None:
    """``value`` to 6 significant digits (``None``, no feasible point yet, kept)."""
    return None if value is None else float(f"{value:.6g}")


def inference_regret(problem: AnyProblem, X: list[np.ndarray], Y: list[float]) -> float:
    """Regret (true function) of the evaluated point with the best posterior mean.

    For noisy problems this is what a user would pick from noisy data: one GP (abo's
    surrogate, noise learned) fitted on every evaluation, the same for all methods.
    """
    import torch

    from abo.model.surrogate import fit_gp

    Xt = torch.tensor(np.array(X), dtype=torch.double)
    U = -torch.tensor(Y, dtype=torch.double).reshape(-1, 1)  # utilities: larger is better
    model = fit_gp(Xt, U, noise="auto").model
    with torch.no_grad():
        mean = model.posterior(Xt.unsqueeze(-2)).mean.reshape(-1)
    x = X[int(mean.argmax())]
    return max(float(problem.true(x)) - problem.optimum, 0.0)  # type: ignore[union-attr]


class _Loop:
    """The discrete-event loop; ``clock`` jumps from completion to completion."""

    def __init__(
        self,
        problem: AnyProblem,
        opt: Any,
        k: int,
        budget: int,
        taus: np.ndarray,
        noise: np.random.Generator,
        synchronous: bool,
    ) -> None:
        self.problem, self.opt, self.k, self.budget = problem, opt, k, budget
        self.taus, self.noise, self.synchronous = taus, noise, synchronous
        self.clock = 0.0
        self.events: list[tuple[float, int, Any, float, float, np.ndarray]] = []
        self.seen: list[np.ndarray] = []  # evaluated and busy points
        self.times: list[float] = []
        self.regrets: list[float] = []
        self.proposal_seconds: list[float] = []
        self.duplicates = 0
        self.submitted = 0
        self._best_y = np.inf
        self._best_true = np.inf
        self.noisy = isinstance(problem, NoisyProblem)
        self.X: list[np.ndarray] = []  # every evaluated point and its observed value
        self.Y: list[Any] = []

    def _observe(self, x: np.ndarray) -> tuple[Any, Any]:
        return observe(self.problem, x, self.noise)

    def _record(self, y: float, true: float) -> None:
        if y < self._best_y:  # regret of the best *observed* point, on the true function
            self._best_y, self._best_true = y, true
        self.times.append(self.clock)
        self.regrets.append(max(self._best_true - self.problem.optimum, 0.0))

    def _push(self, handle: Any, x: np.ndarray, seconds: float) -> None:
        if self.seen and np.min(np.linalg.norm(np.array(self.seen) - x, axis=1)) < DUPLICATE_TOL:
            self.duplicates += 1
        self.seen.append(x)
        self.proposal_seconds.append(seconds)
        y, true = self._observe(x)
        finish = self.clock + float(self.taus[self.submitted])
        heapq.heappush(self.events, (finish, self.submitted, handle, y, true, x))
        self.submitted += 1

    def _fill(self) -> None:
        free = min(self.k - len(self.events), self.budget - self.submitted)
        if free <= 0 or (self.synchronous and self.events):
            return
        if self.synchronous:
            t0 = time.perf_counter()
            batch = self.opt.ask_batch(free)
            seconds = (time.perf_counter() - t0) / len(batch)
            for handle, x in batch:
                self._push(handle, x, seconds)
            return
        for _ in range(free):
            t0 = time.perf_counter()
            handle, x = self.opt.ask()
            self._push(handle, x, time.perf_counter() - t0)

    def run(self, design: np.ndarray) -> None:
        for x in design:
            y, true = self._observe(x)
            self.opt.add(x, y)
            self.seen.append(x)
            self.X.append(x)
            self.Y.append(y)
            self._record(y, true)
        self.submitted = completed = len(design)
        self._fill()
        while completed < self.budget:
            self.clock = self.events[0][0]
            while self.events and self.events[0][0] == self.clock:  # ties finish together
                _, _, handle, y, true, x = heapq.heappop(self.events)
                self.opt.tell(handle, y)
                self.X.append(x)
                self.Y.append(y)
                completed += 1
                self._record(y, true)
            self._fill()


class _MOLoop(_Loop):
    """The same loop on a problem of several objectives: ``regrets`` holds hypervolume gaps.

    After every completion: ``max_hv`` less the hypervolume (w.r.t. the problem's reference
    point) of the Pareto front of every value observed so far (noiseless, so observed = true).
    """

    problem: MOProblem

    def __init__(self, problem: MOProblem, *args: Any) -> None:
        super().__init__(problem, *args)
        self.raw_gap = problem.max_hv  # the last gap, unclipped (negative: max_hv beaten)
        self._values: list[np.ndarray] = []

    def _observe(self, x: np.ndarray) -> tuple[Any, Any]:
        values = self.problem(x)
        return values, values

    def _record(self, y: Any, true: Any) -> None:
        self._values.append(np.asarray(true, dtype=float))
        if np.all(self._values[-1] < self.problem.ref_point) or len(self._values) == 1:
            hv = hypervolume(np.array(self._values), self.problem.ref_point)
            self.raw_gap = self.problem.max_hv - hv
        self.times.append(self.clock)
        self.regrets.append(max(self.raw_gap, 0.0))

    def summary(self) -> dict[str, Any]:
        """The observed Pareto front's values and how many evaluations beat the reference point
        in every objective (only those count toward the hypervolume)."""
        import torch

        from abo.core.pareto import pareto_mask

        Y = np.array(self._values)
        front = Y[pareto_mask(-torch.as_tensor(Y)).numpy()]
        inside = int(np.all(Y < self.problem.ref_point, axis=1).sum())
        return {"front": [[float(f"{v:.5g}") for v in row] for row in front], "inside": inside}


class _ConstrainedLoop(_Loop):
    """The same loop on a constrained or crashing problem: the best *feasible* point's regret.

    ``regrets`` holds ``None`` until a feasible point is evaluated; failed evaluations of the
    method's own proposals are counted, with the durations they cost.
    """

    problem: ConstrainedProblem

    def __init__(self, problem: ConstrainedProblem, *args: Any) -> None:
        super().__init__(problem, *args)
        self.first_feasible: int | None = None
        self.failures = 0
        self.failed_time = 0.0
        self.n_design = 0
        self._last: Any = None  # the outcome ``_observe`` returned last

    def run(self, design: np.ndarray) -> None:
        self.n_design = len(design)
        super().run(design)

    def _observe(self, x: np.ndarray) -> tuple[Any, Any]:
        self._last = self.problem(x)
        return self._last, self._last

    def _push(self, handle: Any, x: np.ndarray, seconds: float) -> None:
        tau = float(self.taus[self.submitted])
        super()._push(handle, x, seconds)  # observes ``x`` once
        if self._last is None:
            self.failures += 1
            self.failed_time += tau

    def _record(self, y: Any, true: Any) -> None:
        if self.problem.feasible(y) and y[0] < self._best_y:
            self._best_y = y[0]
        self.times.append(self.clock)
        found = np.isfinite(self._best_y)
        if found and self.first_feasible is None:
            self.first_feasible = len(self.times)
        self.regrets.append(self.problem.regret(self._best_y) if found else None)  # type: ignore[arg-type]

    def summary(self, busy: float) -> dict[str, Any]:
        """First feasible completion, failures of the method's evaluations and their cost."""
        own = max(1, self.submitted - self.n_design)
        return {
            "first_feasible": self.first_feasible,
            "failures": self.failures,
            "wasted": round(self.failures / own, 4),
            "wasted_time": round(self.failed_time / busy, 4) if busy > 0 else 0.0,
        }


# -- grids, files, processes ----------------------------------------------------------------
Cell = tuple[str, str, int, str, int, int]  # method, problem, k, durations, budget, seed


def suite_cells(
    suite: Suite,
    methods: Sequence[str] | None = None,
    problems: Sequence[str] | None = None,
    ks: Sequence[int] | None = None,
    seeds: int | None = None,
) -> list[Cell]:
    """Every run of ``suite`` (restricted by the arguments); sequential methods run once at k=1.

    Each problem gets the named methods that support its number of objectives (a method of
    one objective is not run on a problem of several, nor the reverse); naming a method that
    fits none of the problems is an error.
    """
    from benchmarks.methods import all_methods

    specs = all_methods()
    # variants (+full, +ref, ...) and peers (other libraries, extra installs): by name only
    default = [name for name, spec in specs.items() if "+" not in name and not spec.peer]
    names = list(methods or suite.methods or default)
    for name in names:
        method_spec(name)
    for problem in problems or ():
        if problem not in suite.budgets:
            raise ValueError(f"problem: {problem!r} is not in suite {suite.name!r}")
    chosen = list(problems or suite.budgets)
    fits = {p: [n for n in names if num_objectives(p) in specs[n].objectives] for p in chosen}
    unused = [n for n in names if not any(n in fit for fit in fits.values())]
    if unused and (methods or suite.methods):
        raise ValueError(f"method: {', '.join(unused)} fit(s) none of the problems {chosen}")
    cells: list[Cell] = []
    # seed-major, so a run cut short still has every method on its first seeds
    for seed in range(suite.seeds if seeds is None else seeds):
        for problem in chosen:
            for durations in suite.durations:
                for method in fits[problem]:
                    for k in sorted({specs[method].workers(k) for k in (ks or suite.ks)}):
                        cells.append((method, problem, k, durations, suite.budgets[problem], seed))
    return cells


def read_runs(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """Every run in the JSON-lines files ``paths`` (later duplicates of a key dropped)."""
    runs: dict[tuple[Any, ...], dict[str, Any]] = {}
    for path in paths:
        if not Path(path).exists():
            continue
        for line in Path(path).read_text().splitlines():
            if line.strip():
                run = json.loads(line)
                runs.setdefault(run_key(run), run)
    return list(runs.values())


def _init_worker() -> None:
    import torch

    torch.set_num_threads(1)  # one core per run; runs parallelise across processes


def _execute(cell: Cell, options: dict[str, Any]) -> dict[str, Any]:
    method, problem, k, durations, budget, seed = cell
    return simulate_run(get_problem(problem), method, k, budget, seed, durations, options)


def shard(cells: Sequence[Cell], spec: str | None) -> list[Cell]:
    """Cells ``i, i+n, i+2n, ...`` for ``spec = "i/n"`` (all for ``None``)."""
    if spec is None:
        return list(cells)
    try:
        i, n = (int(p) for p in spec.split("/"))
    except ValueError:
        raise ValueError(f"shard: expected 'i/n' such as '0/4', got {spec!r}") from None
    if not 0 <= i < n:
        raise ValueError(f"shard: expected 0 <= i < n, got {spec!r}")
    return list(cells)[i::n]


def run_cells(
    cells: Sequence[Cell],
    out: str | Path,
    strategy_options: dict[str, Any] | None = None,
    processes: int = 1,
    progress: Callable[[str], None] | None = None,
) -> int:
    """Run the ``cells`` not yet in ``out``, appending one line per finished run; how many ran."""
    done = {run_key(r) for r in read_runs([out])}
    todo = [c for c in cells if c not in done]
    options = dict(strategy_options or {})
    say = progress or (lambda _msg: None)
    say(f"{len(todo)} runs to do ({len(cells) - len(todo)} already in {out})")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    for i, run in enumerate(_results(todo, options, processes), 1):
        with open(out, "a") as f:
            f.write(json.dumps(run) + "\n")
        final = run[metric_name(run)][-1]
        said = "none feasible" if final is None else f"{final:.3g}"
        say(
            f"[{i}/{len(todo)}] {run['method']} {run['problem']} k={run['k']} seed={run['seed']}: "
            f"final {metric_name(run)} {said}, {run['wall_seconds']:.1f} s"
        )
    return len(todo)


def _results(
    todo: Sequence[Cell], options: dict[str, Any], processes: int
) -> Iterator[dict[str, Any]]:
    if processes <= 1:
        _init_worker()
        for cell in todo:
            yield _execute(cell, options)
        return
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with ProcessPoolExecutor(max_workers=processes, initializer=_init_worker) as pool:
        futures = [pool.submit(_execute, cell, options) for cell in todo]
        for future in as_completed(futures):
            yield future.result()
