"""Ask/tell optimisers of constrained and crashing problems, as the harness drives them.

The counterparts of ``AboMethod`` and ``OptunaMethod`` (``benchmarks/simulator.py``) for a
``ConstrainedProblem``: an outcome is ``None`` (the evaluation failed) or the objective and the
constraint values (``<= 0`` holds).

* ``AboConstrainedMethod``: an in-memory abo study with outcomes ``f`` (minimised) and one
  constraint ``c_i <= 0`` per constraint; a failed evaluation is told with ``study.fail`` (a
  failed initial-design point is enqueued, asked and failed, so it is a failed trial like any
  other). ``failure_model`` is the study's option: ``"auto"`` (the default: a GP classifier of
  failures) or ``"worst"`` (abo's earlier rule: a failure counts as the worst value seen).
* ``OptunaConstrainedMethod``: an Optuna study whose sampler gets ``constraints_func`` (the
  constraint values, ``<= 0`` feasible, Optuna's convention); a failed evaluation is told as
  ``TrialState.FAIL``. The free initial design is added with the constraint values in the
  system attribute Optuna's samplers read (``after_trial`` is not called for added trials).
  Optuna 5 deprecates ``constraints_func`` in favour of ``Trial.set_constraint`` (removal
  planned for Optuna 7); it is kept here because it is the interface the samplers have had
  since Optuna 3 (TPE) and 4.2 (GPSampler), and it feeds the same constrained acquisitions.

Example:
    >>> from benchmarks.constrained_problems import get_constrained_problem
    >>> p = get_constrained_problem("branin-crash")
    >>> m = OptunaConstrainedMethod(p, seed=0, k=2, n_initial=4, sampler="tpe")
    >>> m.add(np.array([0.35, 0.5]), None)
    >>> handle, x = m.ask(); m.tell(handle, p(x)); len(m.study.trials)
    2
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.constrained_problems import ConstrainedProblem, Outcome

FAILED = "failed: inside the problem's crash region"


class AboConstrainedMethod:
    """An in-memory abo study with constraints and failures, driven by ask/tell."""

    def __init__(
        self,
        problem: ConstrainedProblem,
        seed: int,
        k: int,
        n_initial: int,
        strategy: str = "auto",
        strategy_options: dict[str, Any] | None = None,
        failure_model: str = "auto",
    ) -> None:
        import abo

        self._names = [f"x{i}" for i in range(problem.dim)]
        self._constraints = list(problem.constraint_names)
        space = abo.Space({name: abo.Float(0.0, 1.0) for name in self._names})
        self._k = k
        self.study = abo.create_study(
            space,
            storage=None,
            outcomes={"f": "minimize", **{c: "<= 0" for c in self._constraints}},
            strategy=strategy,
            seed=seed,
            n_initial=n_initial,
            noise="deterministic",
            strategy_options=strategy_options,
            failure_model=failure_model,
        )

    def _values(self, outcome: tuple[float, np.ndarray]) -> dict[str, float]:
        value, c = outcome
        return {"f": float(value), **dict(zip(self._constraints, map(float, c), strict=True))}

    def add(self, x: np.ndarray, outcome: Outcome) -> None:
        params = dict(zip(self._names, map(float, x), strict=True))
        if outcome is not None:
            self.study.add(params, self._values(outcome))
            return
        self.study.enqueue(params)
        self.study.fail(self.study.ask(n_workers=self._k).id, FAILED)

    def ask(self) -> tuple[Any, np.ndarray]:
        trial = self.study.ask(n_workers=self._k)
        return trial.id, np.array([trial.params[name] for name in self._names])

    def tell(self, handle: Any, outcome: Outcome) -> None:
        if outcome is None:
            self.study.fail(handle, FAILED)
        else:
            self.study.tell(handle, self._values(outcome))


class OptunaConstrainedMethod:
    """An Optuna study with ``constraints_func``; asked trials stay RUNNING until told."""

    KEY = "constraints"  # the user attribute constraints_func reads

    def __init__(
        self, problem: ConstrainedProblem, seed: int, k: int, n_initial: int, sampler: str
    ) -> None:
        import optuna
        from optuna.study._constrained_optimization import _CONSTRAINTS_KEY

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._system_key = _CONSTRAINTS_KEY
        constrained = bool(problem.constraint_names)
        func = self._constraints if constrained else None
        made: optuna.samplers.BaseSampler
        if sampler == "gp":
            made = optuna.samplers.GPSampler(
                seed=seed, n_startup_trials=n_initial, constraints_func=func
            )
        elif sampler == "tpe":
            made = optuna.samplers.TPESampler(
                seed=seed,
                constant_liar=True,
                multivariate=True,
                n_startup_trials=n_initial,
                constraints_func=func,
            )
        else:
            raise ValueError(f"sampler: unknown Optuna sampler {sampler!r}")
        self._optuna = optuna
        self._constrained = constrained
        self._names = [f"x{i}" for i in range(problem.dim)]
        self._dists: dict[str, Any] = {
            n: optuna.distributions.FloatDistribution(0.0, 1.0) for n in self._names
        }
        self.study = optuna.create_study(direction="minimize", sampler=made)

    @classmethod
    def _constraints(cls, trial: Any) -> list[float]:
        return list(trial.user_attrs[cls.KEY])

    def add(self, x: np.ndarray, outcome: Outcome) -> None:
        params = dict(zip(self._names, map(float, x), strict=True))
        State = self._optuna.trial.TrialState
        if outcome is None:
            trial = self._optuna.trial.create_trial(
                params=params, distributions=self._dists, state=State.FAIL
            )
        else:
            c = [float(v) for v in outcome[1]]
            trial = self._optuna.trial.create_trial(
                params=params,
                distributions=self._dists,
                value=float(outcome[0]),
                user_attrs={self.KEY: c},
                system_attrs={self._system_key: tuple(c)} if self._constrained else {},
            )
        self.study.add_trial(trial)

    def ask(self) -> tuple[Any, np.ndarray]:
        trial = self.study.ask(self._dists)
        return trial, np.array([trial.params[name] for name in self._names])

    def tell(self, handle: Any, outcome: Outcome) -> None:
        if outcome is None:
            self.study.tell(handle, state=self._optuna.trial.TrialState.FAIL)
            return
        handle.set_user_attr(self.KEY, [float(v) for v in outcome[1]])
        self.study.tell(handle, float(outcome[0]))
