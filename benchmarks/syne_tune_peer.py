"""Syne Tune's model-based searchers as a peer: ``BOTorch`` (a GP) and ``BORE`` (a classifier).

Driven through Syne Tune's own ``AskTellScheduler`` around the baseline scheduler, with the
benchmark methods' interface (``benchmarks/peers.py``): ``ask()`` returns ``(handle,
configuration)`` and may be called again before earlier trials are told; ``tell(handle,
value)`` reports a loss, in any order.

* ``BOTorch`` (``BoTorchSearcher``): 3 random configurations, then a GP with expected
  improvement; every configuration it suggested and not yet told is *pending*, and it
  fantasises over them (its default), so asynchronous asks do not repeat themselves. One
  repair: its observations are kept in trial order (``_in_trial_order``: Syne Tune 0.16
  mismatches losses and configurations when trials finish out of order).
* ``BORE``: 6 random configurations, then a classifier (XGBoost) of "among the best quarter"
  maximised by random search; it knows nothing of pending trials: two asks between tells
  differ only through its random candidates.

Syne Tune has no conditional spaces: the adapter uses the flat space (every parameter in every
configuration) and drops the inactive ones from what it returns, as for Ax. Categorical
choices travel as string labels, ints as ``randint``/``lograndint`` and log floats as
``loguniform``. ``pip install syne-tune`` (the ``peers`` extra); imported when an adapter is
made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from benchmarks.peers import Param, _bounds, _check, _decode, _finite, _labels, _quiet, encode

SEARCHERS = ("botorch", "bore")
METRIC = "loss"


def config_space(params: Sequence[Param]) -> dict[str, Any]:
    """The flat Syne Tune configuration space of ``params``."""
    from syne_tune import config_space as cs

    space: dict[str, Any] = {}
    for p in params:
        if p.kind == "cat":
            space[p.name] = cs.choice(list(_labels(p)))
        elif p.kind == "int":
            low, high = (int(b) for b in _bounds(p))
            space[p.name] = (cs.lograndint if p.log else cs.randint)(low, high)
        else:
            space[p.name] = (cs.loguniform if p.log else cs.uniform)(*_bounds(p))
    return space


class SyneTuneMethod:
    """One of Syne Tune's single-objective searchers (``SEARCHERS``), minimising the loss.

    ``seed`` seeds the scheduler and its searcher, and NumPy's global generator: the searchers
    draw their random configurations with ``Domain.sample()``, which uses it (BORE with the
    same ``random_seed`` otherwise began differently in every process). ``k`` is not used (the
    searcher counts its pending trials itself)."""

    def __init__(
        self, params: Sequence[Param], seed: int, k: int, searcher: str = "botorch"
    ) -> None:
        if searcher not in SEARCHERS:
            raise ValueError(f"searcher: {searcher!r} is not one of {', '.join(SEARCHERS)}")
        _check(params)
        self.params = tuple(params)
        self.k = k
        with _quiet():
            import numpy as np
            from syne_tune.optimizer import baselines
            from syne_tune.optimizer.schedulers.ask_tell_scheduler import AskTellScheduler

            np.random.seed(seed)
            kind = baselines.BOTorch if searcher == "botorch" else baselines.BORE
            base = kind(
                config_space(self.params), metric=METRIC, do_minimize=True, random_seed=seed
            )
            self.scheduler = AskTellScheduler(base_scheduler=base)

    def ask(self) -> tuple[Any, dict[str, Any]]:
        """One new trial (pending in the searcher until told) and its active configuration."""
        with _quiet():
            trial = self.scheduler.ask()
        return trial, _decode(self.params, trial.config)

    def tell(self, handle: Any, value: float) -> None:
        """Complete trial ``handle`` with ``loss = value`` (finite: see ``peers._finite``)."""
        loss = _finite(value)
        with _quiet():
            self.scheduler.tell(handle, {METRIC: loss})
        _in_trial_order(self.scheduler.base_scheduler.searcher)

    def add(self, config: Mapping[str, Any], value: float) -> None:
        """A result the searcher did not suggest (a shared initial design): registered as a
        trial of its own, as ``ask`` registers one, and completed."""
        import datetime

        from syne_tune.backend.trial_status import Trial

        loss = _finite(value)
        raw = encode(self.params, config, flat=True)
        with _quiet():
            searcher = self.scheduler.base_scheduler.searcher
            trial = Trial(self.scheduler.trial_counter, raw, datetime.datetime.now())
            self.scheduler.trial_counter += 1
            if hasattr(searcher, "trial_configs"):  # BoTorchSearcher numbers its own trials
                searcher.trial_configs[trial.trial_id] = raw
            self.scheduler.tell(trial, {METRIC: loss})
        _in_trial_order(searcher)


def _in_trial_order(searcher: Any) -> None:
    """Keep ``BoTorchSearcher``'s observations in trial order, the order its inputs are in.

    Syne Tune 0.16 pairs the configurations of its finished trials, listed in the order they
    were *suggested*, with ``trial_observations.values()``, in the order they *finished*: once
    trials finish out of order (asynchronous workers, always), its GP learns each loss at
    another trial's configuration. On ``enet-diabetes`` at k = 4 that left it worse than random
    search (normalised score -2.4, 3 seeds). Sorting the observations by trial id restores the
    pairing its code assumes; nothing else of the searcher changes."""
    observations = getattr(searcher, "trial_observations", None)
    if isinstance(observations, dict):
        searcher.trial_observations = dict(sorted(observations.items()))
