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

Problems of several objectives (``benchmarks/mo_problems.py``) get the methods that support
their number of objectives (``MethodSpec.objectives``):

* each ``abo.strategies(objectives=m)`` name, driven asynchronously (a strategy that gains
  support for several objectives joins these cells by itself);
* ``sync-qlognehvi``: abo's ``qlognehvi`` asked for ``q = k`` points with ``ask_batch`` only
  when all ``k`` workers are free. ``qlognehvi`` has no joint option: the batch is built
  sequentially greedily, each point maximising qLogNEHVI with the earlier ones of the batch
  as ``X_pending`` (BoTorch's ``optimize_acqf(sequential=True)`` practice for qNEHVI);
* ``optuna-gp`` / ``optuna-tpe``: the same samplers as above on an Optuna study of several
  objectives (``GPSampler`` then uses qLogEHVI over the running trials);
  ``optuna-nsga2``: ``NSGAIISampler`` (population: ``benchmarks/mo_methods.py``);
* ``auto+ref``: the default strategy on a study that declares the problem's reference point
  (``reference_point=``), beside ``auto``'s own rule, to show what declaring it is worth.

Constrained and crashing problems (``benchmarks/constrained_problems.py``) get abo's studies
with outcome constraints (``benchmarks/constrained_methods.py``), Optuna's samplers with
``constraints_func`` and failures told as ``FAIL``, and ``auto+worst``: the default strategy
with ``failure_model="worst"``, abo's earlier rule of counting a failure as the worst value.
``auto+cube`` is the default strategy searching the whole cube at any width
(``trust_region="never"``): what ``auto`` was before it used a trust region in wide spaces.

The peers (``ax``, ``smac``, ``syne-botorch``, ``syne-bore``, ``hebo``:
``benchmarks/peer_methods.py``) run on problems of one objective, only when named.

Example:
    >>> spec = method_spec("sync-qlognei")
    >>> spec.synchronous, spec.workers(8), method_spec("seq-logei").workers(8)
    (True, 8, 1)
    >>> sorted(method_spec("optuna-gp").objectives), sorted(method_spec("qlognehvi").objectives)
    ([1, 2, 3, 4], [2, 3, 4])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.constrained_methods import AboConstrainedMethod, OptunaConstrainedMethod
from benchmarks.constrained_problems import ConstrainedProblem
from benchmarks.mo_methods import AboMOMethod, OptunaMOMethod
from benchmarks.mo_problems import MOProblem
from benchmarks.peer_methods import PEERS, CubePeer
from benchmarks.problems import Problem
from benchmarks.simulator import AboMethod, Method, OptunaMethod
from benchmarks.suites import AnyProblem, NoisyProblem

BASELINES = ("seq-logei", "sync-qlognei", "sync-ts", "optuna-gp", "optuna-tpe")
MO_BASELINES = ("sync-qlognehvi", "optuna-gp", "optuna-tpe", "optuna-nsga2")
MAX_OBJECTIVES = 4  # abo's studies take 2 to 4 objectives
SINGLE = frozenset({1})
SEVERAL = frozenset(range(2, MAX_OBJECTIVES + 1))
ANY = SINGLE | SEVERAL
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
    objectives: frozenset[int] = SINGLE  # the numbers of objectives it can optimise
    peer: bool = False  # another library's optimiser: run only when named, told the budget

    def workers(self, k: int) -> int:
        """Workers this method actually uses in a cell with ``k`` workers."""
        return 1 if self.sequential else k


def accepted_options(strategy: str, options: dict[str, Any]) -> dict[str, Any]:
    """The subset of ``options`` that ``strategy`` takes (``random`` takes none, for one)."""
    from abo.acquisitions.registry import make_strategy
    from abo.core.exceptions import AboError

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
    failure_model: str = "auto",
) -> Callable[..., Method]:
    def build(problem: AnyProblem, seed: int, k: int, n0: int, options: dict[str, Any]) -> Method:
        if isinstance(problem, ConstrainedProblem):
            kept = {**accepted_options(strategy, options), **(fixed or {})}
            return AboConstrainedMethod(  # type: ignore[return-value]
                problem, seed, k, n0, strategy, kept, failure_model
            )
        if isinstance(problem, MOProblem):
            kept = {**accepted_options(strategy, options), **(fixed or {})}
            return AboMOMethod(problem, seed, k, n0, strategy, kept, refit)  # type: ignore[return-value]
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


def _abo_declared(strategy: str) -> Callable[..., Method]:
    """``strategy`` on a study of several objectives that declares the problem's reference
    point (``reference_point=``), as a user who knows it would."""

    def build(problem: AnyProblem, seed: int, k: int, n0: int, options: dict[str, Any]) -> Method:
        if not isinstance(problem, MOProblem):
            raise ValueError(f"{strategy}+ref: a method for problems of several objectives")
        kept = accepted_options(strategy, options)
        return AboMOMethod(problem, seed, k, n0, strategy, kept, declare_reference=True)  # type: ignore[return-value]

    return build


def _optuna(sampler: str) -> Callable[..., Method]:
    def build(problem: AnyProblem, seed: int, k: int, n0: int, options: dict[str, Any]) -> Method:
        if isinstance(problem, MOProblem):
            return OptunaMOMethod(problem, seed, k, n0, sampler)  # type: ignore[return-value]
        if isinstance(problem, ConstrainedProblem):
            return OptunaConstrainedMethod(problem, seed, k, n0, sampler)  # type: ignore[return-value]
        return OptunaMethod(problem, seed, k, n0, sampler)  # type: ignore[arg-type]

    return build


def _peer(name: str) -> Callable[..., Method]:
    """A peer on the problem's unit cube (``benchmarks/peer_methods.py``)."""

    def build(problem: AnyProblem, seed: int, k: int, n0: int, options: dict[str, Any]) -> Method:
        if not isinstance(problem, Problem | NoisyProblem):
            raise ValueError(f"{name}: peers run on problems of one objective, unconstrained")
        return CubePeer(name, problem.dim, seed, k, budget=options.get("budget"))

    return build


def strategy_objectives(name: str) -> frozenset[int]:
    """The numbers of objectives abo's strategy ``name`` is listed for."""
    import abo

    return frozenset(m for m in range(1, MAX_OBJECTIVES + 1) if name in abo.strategies(m))


def all_methods() -> dict[str, MethodSpec]:
    """Name -> spec for every abo strategy and every baseline."""
    import abo

    names = {n: None for m in range(1, MAX_OBJECTIVES + 1) for n in abo.strategies(objectives=m)}
    specs = {
        name: MethodSpec(name, _abo(name), objectives=strategy_objectives(name)) for name in names
    }
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
    specs["sync-qlognehvi"] = MethodSpec(
        "sync-qlognehvi", _abo("qlognehvi"), synchronous=True, objectives=SEVERAL
    )
    specs["auto+ref"] = MethodSpec("auto+ref", _abo_declared("auto"), objectives=SEVERAL)
    specs["auto+worst"] = MethodSpec("auto+worst", _abo("auto", failure_model="worst"))
    specs["auto+cube"] = MethodSpec(  # the default before its trust region in wide spaces
        "auto+cube", _abo("auto", fixed={"trust_region": "never"})
    )
    specs["optuna-gp"] = MethodSpec("optuna-gp", _optuna("gp"), objectives=ANY)
    specs["optuna-tpe"] = MethodSpec("optuna-tpe", _optuna("tpe"), objectives=ANY)
    specs["optuna-cmaes"] = MethodSpec("optuna-cmaes", _optuna("cmaes"), objectives=SINGLE)
    specs["optuna-nsga2"] = MethodSpec("optuna-nsga2", _optuna("nsga2"), objectives=SEVERAL)
    for name in PEERS:
        specs[name] = MethodSpec(name, _peer(name), peer=True)
    return specs


def method_spec(name: str) -> MethodSpec:
    """The spec called ``name`` (``ValueError`` listing the known names otherwise)."""
    specs = all_methods()
    if name not in specs:
        raise ValueError(f"method: unknown {name!r}; choose one of {', '.join(specs)}")
    return specs[name]
