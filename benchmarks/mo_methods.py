"""Ask/tell optimisers of several objectives, as the harness drives them (all minimised).

The multi-objective counterparts of ``AboMethod`` and ``OptunaMethod`` in
``benchmarks/simulator.py``: the same unit cube and parameter names, a vector of values per
point instead of one number.

* ``AboMOMethod``: an in-memory abo study with outcomes ``f1 .. fm`` (all ``"minimize"``),
  ``noise="deterministic"``, asked with ``study.ask(n_workers=k)`` (or ``ask_batch``). The
  study's own reference point is used (the rule of ``abo.core.pareto``: beyond the worst values of
  the initial design), as a user would get it; the problem's reference point is only for
  scoring. ``declare_reference=True`` (the ``auto+ref`` method) declares the problem's
  reference point instead, as a user who knows it would (``reference_point=``).
* ``OptunaMOMethod``: an Optuna study with ``directions = ["minimize"] * m``; asked trials stay
  RUNNING until told, so samplers that look at running trials (``GPSampler``'s qLogEHVI,
  ``TPESampler(constant_liar=True)``) see them. ``nsga2`` is ``NSGAIISampler(seed=seed,
  population_size=max(8, n0))`` with the shared initial design recorded as its generation 0:
  at these budgets (40-60 evaluations) Optuna's default population of 50 would spend nearly
  the whole budget on a random first generation; counting the design as generation 0 (topped
  up with random points to 8 on 2-D BraninCurrin, where n0 = 4) lets 3 to 4 generations of
  offspring follow. It is the classic evolutionary baseline, not expected to win at such
  budgets.

Example:
    >>> from benchmarks.mo_problems import get_mo_problem
    >>> p = get_mo_problem("branincurrin")
    >>> m = OptunaMOMethod(p, seed=0, k=2, n_initial=4, sampler="tpe")
    >>> m.add(np.array([0.5, 0.5]), p(np.array([0.5, 0.5])))
    >>> handle, x = m.ask(); m.tell(handle, p(x)); len(m.study.trials)
    2
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.mo_problems import MOProblem

NSGA2_MIN_POPULATION = 8


def outcome_names(m: int) -> list[str]:
    """The outcome names of an ``m``-objective problem: ``f1 .. fm``."""
    return [f"f{i + 1}" for i in range(m)]


class AboMOMethod:
    """An in-memory abo study of several objectives driven by ask/tell (and ``ask_batch``)."""

    def __init__(
        self,
        problem: MOProblem,
        seed: int,
        k: int,
        n_initial: int,
        strategy: str = "auto",
        strategy_options: dict[str, Any] | None = None,
        refit: str = "sync",
        declare_reference: bool = False,
    ) -> None:
        import abo

        self._names = [f"x{i}" for i in range(problem.dim)]
        self._outcomes = outcome_names(problem.num_objectives)
        space = abo.Space({name: abo.Float(0.0, 1.0) for name in self._names})
        self._k = k
        self.study = abo.create_study(
            space,
            storage=None,
            outcomes={name: "minimize" for name in self._outcomes},
            strategy=strategy,
            seed=seed,
            n_initial=n_initial,
            noise="deterministic",
            strategy_options=strategy_options,
            refit=refit,
            # what a user who knows the problem's reference point declares (``auto+ref``)
            reference_point=(
                dict(zip(self._outcomes, map(float, problem.ref_point), strict=True))
                if declare_reference
                else None
            ),
        )

    def _values(self, y: np.ndarray) -> dict[str, float]:
        return dict(zip(self._outcomes, map(float, y), strict=True))

    def _point(self, trial: Any) -> np.ndarray:
        return np.array([trial.params[name] for name in self._names])

    def add(self, x: np.ndarray, y: np.ndarray) -> None:
        self.study.add(dict(zip(self._names, map(float, x), strict=True)), self._values(y))

    def ask(self) -> tuple[Any, np.ndarray]:
        trial = self.study.ask(n_workers=self._k)
        return trial.id, self._point(trial)

    def ask_batch(self, n: int) -> list[tuple[Any, np.ndarray]]:
        return [(t.id, self._point(t)) for t in self.study.ask_batch(n, n_workers=self._k)]

    def tell(self, handle: Any, y: np.ndarray) -> None:
        self.study.tell(handle, self._values(y))


class OptunaMOMethod:
    """An Optuna study of several objectives; asked trials stay RUNNING until told."""

    def __init__(self, problem: MOProblem, seed: int, k: int, n_initial: int, sampler: str) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._attrs: dict[str, Any] = {}
        made: optuna.samplers.BaseSampler
        if sampler == "gp":
            made = optuna.samplers.GPSampler(seed=seed, n_startup_trials=n_initial)
        elif sampler == "tpe":
            made = optuna.samplers.TPESampler(
                seed=seed, constant_liar=True, multivariate=True, n_startup_trials=n_initial
            )
        elif sampler == "nsga2":
            population = max(NSGA2_MIN_POPULATION, n_initial)
            made = optuna.samplers.NSGAIISampler(seed=seed, population_size=population)
            # the shared design is the first generation (the key is Optuna's own)
            self._attrs = {optuna.samplers.NSGAIISampler._get_generation_key(): 0}
        else:
            raise ValueError(f"sampler: unknown Optuna sampler {sampler!r}")
        self._optuna = optuna
        self._names = [f"x{i}" for i in range(problem.dim)]
        self._dists = {n: optuna.distributions.FloatDistribution(0.0, 1.0) for n in self._names}
        directions = ["minimize"] * problem.num_objectives
        self.study = optuna.create_study(directions=directions, sampler=made)

    def add(self, x: np.ndarray, y: np.ndarray) -> None:
        params = dict(zip(self._names, map(float, x), strict=True))
        trial = self._optuna.trial.create_trial(
            params=params,
            distributions=self._dists,
            values=[float(v) for v in y],
            system_attrs=dict(self._attrs),
        )
        self.study.add_trial(trial)

    def ask(self) -> tuple[Any, np.ndarray]:
        trial = self.study.ask(self._dists)
        return trial, np.array([trial.params[name] for name in self._names])

    def tell(self, handle: Any, y: np.ndarray) -> None:
        self.study.tell(handle, [float(v) for v in y])
