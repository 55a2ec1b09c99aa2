"""Real tuning tasks, Bayesmark-style: scikit-learn models on datasets that ship with it.

Each task tunes a model's real parameters (log-scaled floats, integers, categoricals, and
parameters that exist only for some choices, such as an SVM kernel's own) to minimise a
cross-validated loss on a fixed split (3 folds, shuffled with seed 0; every model's own
randomness fixed), evaluated live: nothing is tabulated. An evaluation takes 0.05-2 s of real
compute; the simulated workers' durations are half-normal of mean 1 (virtual seconds), as in
the other grids, so that ``k`` workers run asynchronously with the others busy.

Tasks (``TASKS``; loss in brackets):

* ``svm-cancer``: ``SVC`` on breast cancer (error rate), kernel in {rbf, poly, sigmoid}
  with ``gamma`` for all three, ``degree`` only for poly, ``coef0`` for poly and sigmoid;
* ``gbm-diabetes``: ``HistGradientBoostingRegressor`` on diabetes (MSE over the variance);
* ``rf-wine``: ``RandomForestClassifier`` on wine (log loss);
* ``mlp-digits``: ``MLPClassifier`` on digits (log loss), with ``momentum`` only for SGD;
* ``knn-diabetes``: ``KNeighborsRegressor`` on diabetes (MSE over the variance);
* ``enet-diabetes``: ``ElasticNet`` on diabetes's degree-2 polynomial features (MSE over the
  variance);
* ``logreg-digits``: ``LogisticRegression`` on digits (log loss), ``l1_ratio`` only for the
  elastic-net penalty.

Methods (``REAL_METHODS``): ``auto`` (abo's default, every option left alone), ``random``
(abo's random search), ``optuna-tpe`` (``TPESampler(multivariate, group, constant_liar)``,
define-by-run: only active parameters), ``optuna-gp`` and ``optuna-cmaes`` (``GPSampler``
and ``CmaEsSampler`` on the flat space: every parameter suggested, the inactive ones
ignored), and, when installed (``pip install -e .[peers]``), ``ax`` and ``smac``
(``benchmarks/peers.py``: Ax's ``Client`` with its default generation strategy, pending
trials RUNNING; SMAC's ``HyperparameterOptimizationFacade`` told the budget as ``n_trials``),
``syne-botorch`` and ``syne-bore`` (``benchmarks/syne_tune_peer.py``: Syne Tune's ``BOTorch``
and ``BORE`` searchers through its ``AskTellScheduler``), and ``hebo`` (HEBO in its own
environment, ``benchmarks/hebo_peer.py``).
Each uses its own default initial design (abo: twice the parameters; Optuna: 10; Ax: the
centre and 4 Sobol points; SMAC: a quarter of ``n_trials``, 12; Syne Tune: 3 random points
for ``BOTorch``, 6 for ``BORE``; HEBO: the parameters plus one, Sobol).
``VARIANTS`` run only when named: ``qlognei+power`` and ``believer+power`` (each of
``auto``'s two members alone, with the default's output transform), ``auto-raw`` (the
default without that transform) and ``auto+search`` (the default with a larger acquisition
search: 1,024 raw samples and 20 restarts, as Ax's) and ``auto+rbf`` (the default with
BoTorch's RBF kernel, Ax's, in place of Matern-5/2) and ``auto+warp`` (every input warped by
a learned Kumaraswamy CDF, HEBO's input warping), the candidates a change to the default is
measured by.

A run records after each completion the evaluations completed and the best loss so far
(``regret`` in the results files, for the shared report code: the loss itself, as the true
optimum is unknown), and the seconds of each ask. ``benchmarks/real_report.py`` turns runs into
Bayesmark's normalised score per task (0 is random search's median final loss, 1 the best
loss any method found) with the grids' significance marks.

    python -m benchmarks real-tasks run --out real.jsonl --k 4 --seeds 3 --processes 2
"""

from __future__ import annotations

import heapq
import logging
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import budget_runs, real_report
from benchmarks.peers import Param, is_active

BUDGET = 50
FOLDS = 3


@dataclass(frozen=True)
class Task:
    """A model to tune on a dataset: its parameters and its cross-validated loss."""

    name: str
    params: tuple[Param, ...]
    loss: Callable[[dict[str, Any]], float]


def _f(name: str, low: float, high: float, log: bool = False, **when: Any) -> Param:
    return Param(name, "float", low, high, log, when=_when(when))


def _i(name: str, low: int, high: int, log: bool = False, **when: Any) -> Param:
    return Param(name, "int", low, high, log, when=_when(when))


def _c(name: str, choices: Sequence[Any], **when: Any) -> Param:
    return Param(name, "cat", choices=tuple(choices), when=_when(when))


def _when(when: Mapping[str, Any]) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    return tuple(
        (parent, tuple(v) if isinstance(v, list | tuple) else (v,)) for parent, v in when.items()
    )


@cache
def _data(name: str) -> tuple[np.ndarray, np.ndarray]:
    from sklearn import datasets

    loaders = {"cancer": datasets.load_breast_cancer, "wine": datasets.load_wine,
               "digits": datasets.load_digits, "diabetes": datasets.load_diabetes}  # fmt: skip
    X, y = loaders[name](return_X_y=True)
    return np.asarray(X, dtype=float), np.asarray(y)


def _cv(model: Any, data: str, scoring: str) -> float:
    """The mean cross-validated loss of ``model`` (a pipeline) on ``data``'s fixed folds."""
    from sklearn.model_selection import KFold, StratifiedKFold, cross_val_score

    X, y = _data(data)
    regression = data == "diabetes"
    folds = (KFold if regression else StratifiedKFold)(FOLDS, shuffle=True, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings are part of the landscape
        scores = cross_val_score(model, X, y, cv=folds, scoring=scoring, error_score=np.nan)
    if regression:  # neg MSE -> MSE over the target's variance (1 = predicting the mean)
        return float(-np.mean(scores) / np.var(y))
    if scoring == "accuracy":
        return float(1.0 - np.mean(scores))
    return float(-np.mean(scores))  # neg log loss -> log loss


def _loss(value: float, worst: float) -> float:
    """A failed fit (NaN: a diverged model) counts as the task's worst plausible loss."""
    return worst if not np.isfinite(value) else min(float(value), worst)


def _scaled(model: Any) -> Any:
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), model)


def svm_cancer(p: dict[str, Any]) -> float:
    from sklearn.svm import SVC

    model = SVC(C=p["C"], kernel=p["kernel"], gamma=p["gamma"], degree=p.get("degree", 3),
                coef0=p.get("coef0", 0.0), max_iter=50_000)  # fmt: skip
    return _loss(_cv(_scaled(model), "cancer", "accuracy"), 1.0)


def gbm_diabetes(p: dict[str, Any]) -> float:
    from sklearn.ensemble import HistGradientBoostingRegressor

    model = HistGradientBoostingRegressor(
        learning_rate=p["learning_rate"], max_iter=p["max_iter"],
        max_leaf_nodes=p["max_leaf_nodes"], min_samples_leaf=p["min_samples_leaf"],
        l2_regularization=p["l2_regularization"], random_state=0,
    )  # fmt: skip
    return _loss(_cv(model, "diabetes", "neg_mean_squared_error"), 2.0)


def rf_wine(p: dict[str, Any]) -> float:
    from sklearn.ensemble import RandomForestClassifier

    model = RandomForestClassifier(
        n_estimators=p["n_estimators"], max_depth=p["max_depth"],
        max_features=p["max_features"], min_samples_split=p["min_samples_split"],
        criterion=p["criterion"], random_state=0,
    )  # fmt: skip
    return _loss(_cv(model, "wine", "neg_log_loss"), 3.0)


def mlp_digits(p: dict[str, Any]) -> float:
    from sklearn.neural_network import MLPClassifier

    model = MLPClassifier(
        hidden_layer_sizes=(p["width"],), alpha=p["alpha"], solver=p["solver"],
        learning_rate_init=p["learning_rate_init"], batch_size=p["batch_size"],
        momentum=p.get("momentum", 0.9), max_iter=30, random_state=0,
    )  # fmt: skip
    return _loss(_cv(_scaled(model), "digits", "neg_log_loss"), 3.0)


def knn_diabetes(p: dict[str, Any]) -> float:
    from sklearn.neighbors import KNeighborsRegressor

    model = KNeighborsRegressor(n_neighbors=p["n_neighbors"], weights=p["weights"], p=p["p"])
    return _loss(_cv(_scaled(model), "diabetes", "neg_mean_squared_error"), 2.0)


def enet_diabetes(p: dict[str, Any]) -> float:
    from sklearn.linear_model import ElasticNet
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import PolynomialFeatures, StandardScaler

    model = make_pipeline(
        PolynomialFeatures(2, include_bias=False), StandardScaler(),
        ElasticNet(alpha=p["alpha"], l1_ratio=p["l1_ratio"], max_iter=5_000, random_state=0),
    )  # fmt: skip
    return _loss(_cv(model, "diabetes", "neg_mean_squared_error"), 2.0)


def logreg_digits(p: dict[str, Any]) -> float:
    from sklearn.linear_model import LogisticRegression

    ratio = p.get("l1_ratio", 0.0 if p["penalty"] == "l2" else 1.0)
    model = LogisticRegression(C=p["C"], l1_ratio=ratio, solver="saga", max_iter=100,
                               tol=p["tol"])  # fmt: skip
    return _loss(_cv(_scaled(model), "digits", "neg_log_loss"), 3.0)


TASKS: dict[str, Task] = {
    t.name: t
    for t in (
        Task("svm-cancer", (
            _f("C", 1e-3, 1e3, log=True), _c("kernel", ["rbf", "poly", "sigmoid"]),
            _f("gamma", 1e-4, 1.0, log=True),
            _i("degree", 2, 5, kernel="poly"),
            _f("coef0", 0.0, 1.0, kernel=["poly", "sigmoid"]),
        ), svm_cancer),
        Task("gbm-diabetes", (
            _f("learning_rate", 1e-3, 1.0, log=True), _i("max_iter", 10, 300, log=True),
            _i("max_leaf_nodes", 4, 64, log=True), _i("min_samples_leaf", 2, 100, log=True),
            _f("l2_regularization", 1e-6, 10.0, log=True),
        ), gbm_diabetes),
        Task("rf-wine", (
            _i("n_estimators", 10, 200, log=True), _i("max_depth", 1, 20),
            _f("max_features", 0.05, 1.0), _i("min_samples_split", 2, 20),
            _c("criterion", ["gini", "entropy", "log_loss"]),
        ), rf_wine),
        Task("mlp-digits", (
            _i("width", 8, 256, log=True), _f("alpha", 1e-6, 1.0, log=True),
            _c("solver", ["adam", "sgd"]), _f("learning_rate_init", 1e-4, 0.3, log=True),
            _i("batch_size", 16, 256, log=True), _f("momentum", 0.5, 0.99, solver="sgd"),
        ), mlp_digits),
        Task("knn-diabetes", (
            _i("n_neighbors", 1, 80, log=True), _c("weights", ["uniform", "distance"]),
            _f("p", 1.0, 3.0),
        ), knn_diabetes),
        Task("enet-diabetes", (
            _f("alpha", 1e-5, 10.0, log=True), _f("l1_ratio", 0.0, 1.0),
        ), enet_diabetes),
        Task("logreg-digits", (
            _f("C", 1e-4, 1e2, log=True), _c("penalty", ["l2", "elasticnet"]),
            _f("l1_ratio", 0.0, 1.0, penalty="elasticnet"), _f("tol", 1e-5, 1e-1, log=True),
        ), logreg_digits),
    )
}  # fmt: skip


def active(params: Sequence[Param], config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` without the parameters its choices switch off (in ``params``' order)."""
    out: dict[str, Any] = {}
    for p in params:
        if is_active(p, out):
            out[p.name] = config[p.name]
    return out


# -- methods ---------------------------------------------------------------------------------
class Abo:
    """abo's study on the task's conditional space, every option at its default."""

    def __init__(
        self, task: Task, seed: int, k: int, strategy: str = "auto", **options: Any
    ) -> None:
        import abo

        space: dict[str, Any] = {}
        for p in task.params:
            when = {"when": {parent: list(v) for parent, v in p.when}} if p.when else {}
            if p.kind == "float":
                space[p.name] = abo.Float(p.low, p.high, log=p.log, **when)
            elif p.kind == "int":
                space[p.name] = abo.Int(int(p.low or 0), int(p.high or 0), log=p.log, **when)
            else:
                space[p.name] = abo.Categorical(list(p.choices), **when)
        self.study = abo.create_study(space, strategy=strategy, seed=seed, **options)
        self.k = k

    def ask(self) -> tuple[Any, dict[str, Any]]:
        trial = self.study.ask(n_workers=self.k)
        return trial.id, dict(trial.params)

    def tell(self, handle: Any, value: float) -> None:
        self.study.tell(handle, value)


class _Swapped(Abo):
    """The default with one piece of ``abo.model.surrogate`` swapped (``_swapped``) for the
    length of each ask and tell only (the benchmark asks without a pace, so every fit runs
    synchronously inside them), so other runs in the same process keep the default's."""

    def _swapped(self) -> Any:
        raise NotImplementedError

    def ask(self) -> tuple[Any, dict[str, Any]]:
        with self._swapped():
            return super().ask()

    def tell(self, handle: Any, value: float) -> None:
        with self._swapped():
            super().tell(handle, value)


class AboRBF(_Swapped):
    """The default with BoTorch's RBF kernel (Ax's) in place of abo's Matern-5/2, same
    lengthscale prior and floor."""

    def _swapped(self) -> Any:
        from unittest import mock

        from gpytorch.kernels import RBFKernel

        import abo.model.surrogate as surrogate

        def rbf(nu: float | None = None, **kwargs: Any) -> RBFKernel:
            return RBFKernel(**kwargs)

        return mock.patch.object(surrogate, "MaternKernel", rbf)


class AboWarp(_Swapped):
    """The default with every input warped by a learned Kumaraswamy CDF after the unit
    ``Normalize`` (BoTorch's ``Warp``, with its documented log-normal priors on the two
    concentrations; HEBO's input warping), for non-stationary losses: a learning rate whose
    loss changes fast at one end of its range and slowly at the other."""

    def _indices(self, d: int) -> list[int]:
        """The coordinates to warp in a GP of ``d`` inputs (none: a plain ``Normalize``)."""
        return list(range(d))

    def _swapped(self) -> Any:
        from unittest import mock

        from botorch.models.transforms.input import ChainedInputTransform, Normalize, Warp
        from gpytorch.priors import LogNormalPrior

        import abo.model.surrogate as surrogate

        def warped(d: int, bounds: Any) -> Any:
            indices = self._indices(d)
            if not indices:
                return Normalize(d=d, bounds=bounds)
            prior = (0.0, 0.75**0.5)
            return ChainedInputTransform(
                normalize=Normalize(d=d, bounds=bounds),
                warp=Warp(d=d, indices=indices, bounds=bounds,
                          concentration1_prior=LogNormalPrior(*prior),
                          concentration0_prior=LogNormalPrior(*prior)),
            )  # fmt: skip

        return mock.patch.object(surrogate, "Normalize", warped)


class AboWarpFloats(AboWarp):
    """``AboWarp`` on the real-valued parameters' coordinates only: integers (rounded after
    the search) and categoricals (one-hot) keep their plain encoding (HEBO warps its numeric
    parameters and one-hot encodes its categorical ones)."""

    def _indices(self, d: int) -> list[int]:
        import abo

        space = self.study.spec.space
        if d != space.dim:  # another GP (a region's, a fidelity's): plain
            return []
        return [space._slices[name].start for name, p in space.items()
                if isinstance(p, abo.Float)]  # fmt: skip


class Optuna:
    """An Optuna sampler: define-by-run (TPE: only the active parameters) or on the flat
    space (GP, CMA-ES: every parameter suggested, the inactive ones dropped before the
    evaluation); asked trials stay RUNNING until told, so the sampler sees them."""

    def __init__(self, task: Task, seed: int, sampler: str) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        samplers = {
            "tpe": lambda: optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True,
                                                      constant_liar=True),
            "gp": lambda: optuna.samplers.GPSampler(seed=seed),
            "cmaes": lambda: optuna.samplers.CmaEsSampler(
                seed=seed, warn_independent_sampling=False),
        }  # fmt: skip
        self.flat = sampler != "tpe"
        self.task = task
        self.study = optuna.create_study(direction="minimize", sampler=samplers[sampler]())

    def _suggest(self, trial: Any, p: Param) -> Any:
        if p.kind == "float":
            return trial.suggest_float(p.name, p.low, p.high, log=p.log)
        if p.kind == "int":
            return trial.suggest_int(p.name, int(p.low or 0), int(p.high or 0), log=p.log)
        return trial.suggest_categorical(p.name, list(p.choices))

    def ask(self) -> tuple[Any, dict[str, Any]]:
        trial = self.study.ask()
        if self.flat:
            full = {p.name: self._suggest(trial, p) for p in self.task.params}
            return trial, active(self.task.params, full)
        config: dict[str, Any] = {}
        for p in self.task.params:
            if is_active(p, config):
                config[p.name] = self._suggest(trial, p)
        return trial, config

    def tell(self, handle: Any, value: float) -> None:
        self.study.tell(handle, value)


def _peer(kind: str) -> Callable[[Task, int, int], Any]:
    def make(task: Task, seed: int, k: int) -> Any:
        from benchmarks.peer_methods import make_peer

        # told the budget, as a user sets SMAC's n_trials: a design of 12 of 50
        return make_peer(kind, task.params, seed, k, budget=BUDGET)

    return make


METHODS: dict[str, Callable[[Task, int, int], Any]] = {
    "auto": lambda task, seed, k: Abo(task, seed, k),
    "random": lambda task, seed, k: Abo(task, seed, k, strategy="random"),
    "optuna-tpe": lambda task, seed, k: Optuna(task, seed, "tpe"),
    "optuna-gp": lambda task, seed, k: Optuna(task, seed, "gp"),
    "optuna-cmaes": lambda task, seed, k: Optuna(task, seed, "cmaes"),
    "ax": _peer("ax"),
    "smac": _peer("smac"),
    "hebo": _peer("hebo"),
    "syne-botorch": _peer("syne-botorch"),
    "syne-bore": _peer("syne-bore"),
}
REAL_METHODS = tuple(METHODS)
VARIANTS: dict[str, Callable[[Task, int, int], Any]] = {
    # candidates for the default, each one change away from it (not run unless named)
    "qlognei+power": lambda task, seed, k: Abo(task, seed, k, "qlognei", output_transform="power"),
    "believer+power": lambda task, seed, k: Abo(
        task, seed, k, "believer", output_transform="power"
    ),
    "auto-raw": lambda task, seed, k: Abo(task, seed, k, output_transform="none"),
    "auto+search": lambda task, seed, k: Abo(  # Ax's acquisition search: 1,024 raw, 20 starts
        task, seed, k, strategy_options={"raw_samples": 1024, "num_restarts": 20}
    ),
    "auto+rbf": lambda task, seed, k: AboRBF(task, seed, k),  # Ax's kernel (BoTorch's RBF)
    "auto+warp": lambda task, seed, k: AboWarp(task, seed, k),  # HEBO's input warping
    "auto+warp-floats": lambda task, seed, k: AboWarpFloats(task, seed, k),  # of floats only
}
METHODS.update(VARIANTS)


def simulate(method: str, task_name: str, k: int, budget: int, seed: int) -> dict[str, Any]:
    """One run: ``method`` on the task with ``k`` simulated workers for ``budget`` evaluations."""
    task = TASKS[task_name]
    rng = np.random.default_rng([seed, 5])
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.getLogger("optuna").setLevel(logging.WARNING)
        opt = METHODS[method](task, seed, k)
        events: list[tuple[float, int, Any, float]] = []
        clock, best, submitted = 0.0, np.inf, 0
        times: list[float] = []
        bests: list[float] = []
        asks: list[float] = []
        evals: list[float] = []
        while True:
            while len(events) < k and submitted < budget:
                t0 = time.perf_counter()
                handle, params = opt.ask()
                asks.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                value = task.loss(active(task.params, params))
                evals.append(time.perf_counter() - t0)
                seconds = abs(rng.normal(0.0, np.sqrt(np.pi / 2)))
                heapq.heappush(events, (clock + seconds, submitted, handle, value))
                submitted += 1
            if not events:
                break
            clock, _, handle, value = heapq.heappop(events)
            opt.tell(handle, value)
            best = min(best, value)
            times.append(round(clock, 6))
            bests.append(float(f"{best:.6g}"))
        if hasattr(opt, "close"):  # a peer in a child process (HEBO)
            opt.close()
    return {
        "method": method, "problem": task_name, "k": k, "budget": budget, "seed": seed,
        "times": times, "evals": list(range(1, len(times) + 1)), "regret": bests,
        "ask_seconds": [round(a, 5) for a in asks], "eval_seconds": [round(e, 4) for e in evals],
        "wall_seconds": round(time.perf_counter() - started, 3),
    }  # fmt: skip


def score_table(runs: Sequence[Mapping[str, Any]]) -> str:
    """The suite's tables (``benchmarks/real_report.py``), methods in ``REAL_METHODS``' order:
    one per worker count, and beside it, where some method ran fewer seeds of a task than the
    others, the same table on the seeds every method ran of every task (the results page's)."""
    parts = []
    for k in sorted({r["k"] for r in runs}):
        mine = [r for r in runs if r["k"] == k]
        parts.append(f"k = {k}:\n\n{real_report.score_table(mine, REAL_METHODS)}")
        ran: dict[tuple[str, str], set[int]] = {}
        for r in mine:
            ran.setdefault((r["method"], r["problem"]), set()).add(int(r["seed"]))
        common = set.intersection(*ran.values())
        if common and any(seeds != common for seeds in ran.values()):
            shared = [r for r in mine if int(r["seed"]) in common]
            seeds = ", ".join(str(s) for s in sorted(common))
            parts.append(f"k = {k}, seeds {seeds} alone (those every method ran of every task):"
                         f"\n\n{real_report.score_table(shared, REAL_METHODS)}")  # fmt: skip
    return "\n\n".join(parts)


Cell = tuple[str, str, int, int, int]  # method, task, k, budget, seed


def cells(
    methods: Sequence[str] | None = None, problems: Sequence[str] | None = None,
    ks: Sequence[int] = (4, 16), seeds: int = 10,
) -> list[Cell]:  # fmt: skip
    """Every run of the grid (``budget_runs.grid``)."""
    chosen = list(problems or TASKS)
    return budget_runs.grid(list(methods or REAL_METHODS), tuple(METHODS), chosen,
                            {t: BUDGET for t in TASKS}, ks, seeds)  # fmt: skip


def _execute(cell: Cell) -> dict[str, Any]:
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(1)  # one BLAS thread per run, as torch: runs in parallel share the cores
    method, task, k, budget, seed = cell
    return simulate(method, task, k, budget, seed)


def run(todo: Sequence[Cell], out: str | Path, processes: int = 1,
        say: Callable[[str], None] = print) -> int:  # fmt: skip
    """Run the cells not yet in ``out``, appending a line per run; how many ran."""
    return budget_runs.run(todo, out, _execute, processes, say)


read = budget_runs.read
