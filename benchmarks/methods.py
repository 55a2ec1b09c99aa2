"""Every method the harness can run: abo's strategies and the baselines users would pick.

* each ``abo.strategies()`` name, driven asynchronously (one proposal per free worker, the
  others busy);
* ``seq-logei``: sequential BO with LogEI on one worker (abo's kriging believer with nothing
  busy is exactly analytic LogEI) — the "n evaluations in sequence" reference;
* ``sync-qlognei``: synchronous batches, ``q = k`` points (qLogNEI optimised jointly over the
  batch) proposed only when all ``k`` workers are free; ``sync-ts``: the same with ``k``
  Thompson paths (synchronous Thompson sampling, synTS);
* ``optuna-gp`` / ``optuna-tpe``: Optuna's ``GPSampler`` (conditions on running trials) and
  ``TPESampler(constant_liar=True, multivariate=True)``, asked whenever a worker is free with
  the running trials left RUNNING in the Optuna study;
* ``<strategy>+full`` / ``<strategy>+bg`` for ``playbook``, ``thompson`` and ``aegis``: the
  strategy with a full multi-start refit before every ask (``refit="full"``), or with the
  service's background refits (``refit="background"``), to check that cheap refits cost no
  regret.

Example:
    >>> spec = method_spec("sync-qlognei")
    >>> spec.synchronous, spec.workers(8), method_spec("seq-logei").workers(8)
    (True, 8, 1)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.simulator import AboMethod, Method, OptunaMethod
from benchmarks.suites import AnyProblem, NoisyProblem

BASELINES = ("seq-logei", "sync-qlognei", "sync-ts", "optuna-gp", "optuna-tpe")
REFIT_VARIANTS = ("playbook", "thompson", "aegis")  # each also as +full and +bg
POWER_VARIANTS = (
    "auto",
    "qlognei",
    "believer",
    "thompson",
)  # each also as +power (output_transform)


class AboBatchMethod(AboMethod):
    """An abo study that can also be asked for a whole synchronous batch."""

    def ask_batch(self, n: int) -> list[tuple[Any, np.ndarray]]:
        trials = self.study.ask_batch(n, n_workers=self._k)
        return [(t.id, np.array([t.params[name] for name in self._names])) for t in trials]


@dataclass(frozen=True)
class MethodSpec:
    """How to build a method and how the simulator must drive it."""

    name: str
    build: Callable[[AnyProblem, int, int, int, dict[str, Any]], Method]
    synchronous: bool = False
    sequential: bool = False

    def workers(self, k: int) -> int:
        """Workers this method actually uses in a cell with ``k`` workers."""
        return 1 if self.sequential else k


def accepted_options(strategy: str, options: dict[str, Any]) -> dict[str, Any]:
    """The subset of ``options`` that ``strategy`` takes (``random`` takes none, for one)."""
    from abo.exceptions import AboError
    from abo.registry import make_strategy

    kept = {}
    for key, value in options.items():
        try:
            make_strategy(strategy, **{key: value})
        except AboError:
            continue
        kept[key] = value
    return kept


def _noise(problem: AnyProblem) -> str:
    return "auto" if isinstance(problem, NoisyProblem) else "deterministic"


def _abo(
    strategy: str,
    cls: type[AboMethod] = AboMethod,
    refit: str = "sync",
    fixed: dict[str, Any] | None = None,
    output_transform: str = "none",
) -> Callable[..., Method]:
    def build(problem: AnyProblem, seed: int, k: int, n0: int, options: dict[str, Any]) -> Method:
        return cls(
            problem,  # type: ignore[arg-type] - only .dim is used
            seed,
            k,
            n0,
            strategy=strategy,
            noise=_noise(problem),
            strategy_options={**accepted_options(strategy, options), **(fixed or {})},
            refit=refit,
            output_transform=output_transform,
        )

    return build


def _optuna(sampler: str) -> Callable[..., Method]:
    def build(problem: AnyProblem, seed: int, k: int, n0: int, options: dict[str, Any]) -> Method:
        return OptunaMethod(problem, seed, k, n0, sampler)  # type: ignore[arg-type]

    return build


def all_methods() -> dict[str, MethodSpec]:
    """Name -> spec for every abo strategy and every baseline."""
    import abo

    specs = {name: MethodSpec(name, _abo(name)) for name in abo.strategies(objectives=1)}
    specs["seq-logei"] = MethodSpec("seq-logei", _abo("believer"), sequential=True)
    specs["sync-qlognei"] = MethodSpec(
        "sync-qlognei", _abo("qlognei", AboBatchMethod, fixed={"joint": True}), synchronous=True
    )
    specs["sync-ts"] = MethodSpec("sync-ts", _abo("thompson", AboBatchMethod), synchronous=True)
    for name in REFIT_VARIANTS:
        specs[f"{name}+full"] = MethodSpec(f"{name}+full", _abo(name, refit="full"))
        specs[f"{name}+bg"] = MethodSpec(f"{name}+bg", _abo(name, refit="background"))
    for name in POWER_VARIANTS:
        specs[f"{name}+power"] = MethodSpec(f"{name}+power", _abo(name, output_transform="power"))
    specs["optuna-gp"] = MethodSpec("optuna-gp", _optuna("gp"))
    specs["optuna-tpe"] = MethodSpec("optuna-tpe", _optuna("tpe"))
    return specs


def method_spec(name: str) -> MethodSpec:
    """The spec called ``name`` (``ValueError`` listing the known names otherwise)."""
    specs = all_methods()
    if name not in specs:
        raise ValueError(f"method: unknown {name!r}; choose one of {', '.join(specs)}")
    return specs[name]
