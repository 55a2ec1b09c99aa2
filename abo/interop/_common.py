"""What export and import share: Optuna itself (optional), and the distribution of each abo
parameter type in both directions."""

from __future__ import annotations

from typing import Any

from abo.core.exceptions import AboError
from abo.core.space import Categorical, Float, Int, Parameter


def optuna_module() -> Any:
    """The ``optuna`` module, quiet below warnings (``ImportError`` saying how to get it)."""
    try:
        import optuna
    except ImportError:
        raise ImportError(
            "Optuna interop: needs optuna (pip install optuna); abo itself does not"
        ) from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def distribution(param: Parameter) -> Any:
    """The Optuna distribution of an abo parameter (its condition is not part of it)."""
    d = optuna_module().distributions
    if isinstance(param, Categorical):
        return d.CategoricalDistribution(list(param.choices))
    if isinstance(param, Int):
        return d.IntDistribution(param.low, param.high, log=param.log, step=param.step)
    return d.FloatDistribution(param.low, param.high, log=param.log, step=param.step)


def parameter(name: str, dist: Any) -> Parameter:
    """The abo parameter of an Optuna distribution (``AboError`` naming the parameter when abo
    has no parameter like it, such as a range of one value or a choice of ``None``)."""
    d = optuna_module().distributions
    try:
        if isinstance(dist, d.CategoricalDistribution):
            return Categorical(list(dist.choices))
        if isinstance(dist, d.IntDistribution):
            return Int(dist.low, dist.high, log=dist.log, step=dist.step)
        if isinstance(dist, d.FloatDistribution):
            return Float(dist.low, dist.high, log=dist.log, step=dist.step)
    except AboError as exc:
        raise AboError(f"{name}: Optuna's {dist} has no abo parameter: {exc}", field=name) from None
    raise AboError(f"{name}: Optuna distribution {type(dist).__name__} has no abo parameter",
                   field=name)  # fmt: skip
