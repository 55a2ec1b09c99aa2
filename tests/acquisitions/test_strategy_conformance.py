"""What every asynchronous strategy must do, run through ``abo.create_study``."""

from __future__ import annotations

import functools
import math
import time
from decimal import Decimal

import pytest
import torch
from botorch.test_functions import Branin

import abo
from abo.core.trial import TrialState

STRATEGIES = [
    "playbook", "lp", "thompson", "aegis", "aegis-rs", "believer", "ucb", "portfolio", "auto",
    "trust_region",
]  # fmt: skip
CHEAP = {"raw_samples": 32, "num_restarts": 2}
ARMS = {
    "aegis": {"exploit", "thompson", "pareto"},
    "aegis-rs": {"exploit", "thompson", "random"},
    "portfolio": {"believer", "qlognei", "thompson", "playbook", "aegis"},
    "auto": {"believer", "qlognei"},
    "trust_region": {"believer", "qlognei"},
}
MIXED = abo.Space(
    {
        "lr": abo.Float(1e-5, 1e-1, log=True),
        "layers": abo.Int(1, 6),
        "opt": abo.Categorical(["sgd", "adam", "rmsprop"]),
        "momentum": abo.Float(0.0, 0.99),
    }
)


def _mixed_loss(p: dict) -> float:
    opt = {"sgd": 0.3, "adam": 0.0, "rmsprop": 0.1}[p["opt"]]
    return (
        (math.log10(p["lr"]) + 3) ** 2 + abs(p["layers"] - 3) / 5 + opt + (p["momentum"] - 0.9) ** 2
    )


def test_every_strategy_is_listed_and_unknown_names_list_them() -> None:
    listed = abo.strategies()
    assert set(STRATEGIES) <= set(listed)
    assert all(listed[name] for name in STRATEGIES)  # a one-line description each
    with pytest.raises(abo.UnknownStrategyError) as err:
        abo.create_study(MIXED, strategy="hedge")
    assert all(name in str(err.value) for name in STRATEGIES)


def _run_mixed(name: str, seed: int, steps: int = 6) -> list[abo.Trial]:
    study = abo.create_study(MIXED, strategy=name, seed=seed, n_initial=4, strategy_options=CHEAP)
    pending = study.ask_batch(3, n_workers=3)
    for _ in range(steps):  # one result in, one new trial out, three always running
        trial = pending.pop(0)
        study.tell(trial.id, _mixed_loss(trial.params))
        pending.append(study.ask(n_workers=3))
    return study.trials


def _same_params(a: dict, b: dict) -> bool:
    return all(
        a[k] == pytest.approx(b[k], rel=1e-6) if isinstance(a[k], float) else a[k] == b[k]
        for k in a
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", STRATEGIES)
def test_mixed_space_bounds_seeds_and_info(name: str) -> None:
    trials = _run_mixed(name, seed=5)
    modelled = [
        t for t in trials if (t.proposal.strategy if t.proposal else None) not in ("sobol", None)
    ]
    assert len(modelled) >= 4
    for t in trials:
        assert MIXED.validate(t.params) == t.params  # within bounds, valid types and choices
        assert isinstance(t.params["layers"], int) and t.params["opt"] in ("sgd", "adam", "rmsprop")
    for t in modelled:
        assert t.proposal.strategy == name, t.proposal  # no fallback to random points
        assert t.proposal.seconds >= 0
        assert not t.proposal.deduplicated
        if name in ARMS:
            assert t.proposal.arm in ARMS[name]
    again = _run_mixed(name, seed=5)
    assert all(_same_params(a.params, b.params) for a, b in zip(trials, again, strict=True))
    other = _run_mixed(name, seed=6, steps=2)  # the first model proposal is enough to differ
    assert not _same_params(other[4].params, trials[4].params)


CUBE = abo.Space({"x": abo.Float(0, 1), "y": abo.Float(0, 1), "z": abo.Float(0, 1)})


def _bowl(p: dict) -> float:
    return (p["x"] - 0.3) ** 2 + (p["y"] - 0.6) ** 2 + 0.5 * (p["z"] - 0.5) ** 2


@pytest.mark.slow
@pytest.mark.parametrize("name", STRATEGIES)
def test_no_duplicate_of_a_busy_or_evaluated_point(name: str) -> None:
    study = abo.create_study(
        CUBE, strategy=name, seed=0, n_initial=10, noise="deterministic", strategy_options=CHEAP
    )
    pending = study.ask_batch(10, n_workers=9)
    for trial in pending[:2]:
        study.tell(trial.id, _bowl(trial.params))
    pending = pending[2:]  # eight busy points from here on
    # ucb ignores busy points by design, so it gets a new model (a result) before every ask
    # (its repeats are replaced by posterior samples and must be rare); the others take four
    # points per call, each seeing the eight busy ones and the earlier three
    per_call = 1 if name == "ucb" else 4
    proposed: list[abo.Trial] = []
    while len(proposed) < 40:
        new = study.ask_batch(per_call, n_workers=8 + per_call)
        proposed += new
        pending += new
        for trial in pending[:per_call]:
            study.tell(trial.id, _bowl(trial.params))
        pending = pending[per_call:]
    assert all(t.proposal.strategy == name for t in proposed)
    assert not any(t.proposal.deduplicated for t in proposed)  # the study never had to
    assert sum(t.proposal.details.get("replaced") == "duplicate" for t in proposed) <= 10
    X = CUBE.to_unit_batch([t.params for t in study.trials if t.state is not TrialState.LOST])
    assert torch.pdist(X).min() > 1e-6


# -- correctness: Branin with four simulated asynchronous workers --------------------------------
BRANIN = Branin()
UNIT2 = abo.Space({"u": abo.Float(0, 1), "v": abo.Float(0, 1)})
BUDGET = {"raw_samples": 128, "num_restarts": 2}


def _branin(p: dict) -> float:
    lo, hi = BRANIN.bounds
    x = lo + (hi - lo) * torch.tensor([p["u"], p["v"]], dtype=torch.double)
    return float(BRANIN(x.unsqueeze(0)))


def simple_regret(name: str, seed: int, n_evals: int = 24, workers: int = 4) -> float:
    """Run ``n_evals`` evaluations with ``workers`` in flight; durations are half-normal (mean 1).

    The next completion is the running trial with the earliest finish time; its worker is
    handed a new trial at once.
    """
    options = BUDGET if name != "random" else {}
    study = abo.create_study(
        UNIT2, strategy=name, seed=seed, noise="deterministic", strategy_options=options
    )
    gen = torch.Generator().manual_seed(1000 + seed)

    def duration() -> float:
        return abs(torch.randn(1, generator=gen, dtype=torch.double).item()) * math.sqrt(
            math.pi / 2
        )

    running = {t.id: (duration(), t) for t in study.ask_batch(workers, n_workers=workers)}
    submitted, done = workers, 0
    while done < n_evals:
        trial_id = min(running, key=lambda i: running[i][0])
        clock, trial = running.pop(trial_id)
        study.tell(trial_id, _branin(trial.params))
        done += 1
        if submitted < n_evals:
            new = study.ask(n_workers=workers)
            running[new.id] = (clock + duration(), new)
            submitted += 1
    assert study.best is not None
    return study.best.value - BRANIN.optimal_value


@functools.cache
def _random_median(seeds: tuple[int, ...]) -> float:
    return torch.tensor([simple_regret("random", s) for s in seeds]).median().item()


@pytest.mark.slow
@pytest.mark.parametrize("name", STRATEGIES)  # auto: qlognei here (4 workers), not believer
def test_beats_random_search_on_branin(name: str) -> None:
    seeds = (0, 1, 2)  # deterministic; at 24 evaluations ucb, the weakest, halves random's regret
    # (the same regrets with 256 raw samples and 4 restarts as with BUDGET's 128 and 2)
    t0 = time.perf_counter()
    regrets = [simple_regret(name, s) for s in seeds]
    median = torch.tensor(regrets).median().item()
    baseline = _random_median(seeds)
    print(
        f"{name}: median simple regret {median:.4g} vs random {baseline:.4g} "
        f"({time.perf_counter() - t0:.0f} s)"
    )
    assert median < baseline, (name, regrets, baseline)


# -- stepped parameters: every strategy proposes only grid values ---------------------------------
STEPPED = abo.Space(
    {
        "x": abo.Float(0.0, 1.0, step=0.1),
        "w": abo.Float(-2.5, 2.5, step=0.25),
        "n": abo.Int(0, 100, step=5),
        "lr": abo.Float(1e-4, 1e-1, log=True),
    }
)
GRIDS = {"x": ("0.0", "0.1"), "w": ("-2.5", "0.25"), "n": ("0", "5")}


def _stepped_loss(p: dict) -> float:
    return (p["x"] - 0.37) ** 2 + (p["w"] - 0.6) ** 2 + (p["n"] - 42) ** 2 / 1e4 + p["lr"]


def _on_grid(value: float, low: str, step: str) -> bool:
    """``value`` is exactly ``low + k * step`` as a decimal (float noise would fail this)."""
    return (Decimal(repr(value)) - Decimal(low)) % Decimal(step) == 0


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(abo.strategies(objectives=1)))
def test_every_strategy_proposes_only_grid_values(name: str) -> None:
    options = CHEAP if name != "random" else {}
    study = abo.create_study(STEPPED, strategy=name, seed=1, n_initial=4, strategy_options=options)
    pending = study.ask_batch(3, n_workers=3)
    for _ in range(5):
        trial = pending.pop(0)
        study.tell(trial.id, _stepped_loss(trial.params))
        pending += study.ask_batch(1 if name == "ucb" else 2, n_workers=4)
    modelled = [t for t in study.trials if (t.proposal.strategy if t.proposal else None) == name]
    assert len(modelled) >= 4  # past the four Sobol points, all from the strategy
    for t in study.trials:
        assert STEPPED.validate(t.params) == t.params
        assert type(t.params["n"]) is int
        for param, (low, step) in GRIDS.items():
            assert _on_grid(t.params[param], low, step), (param, t.params[param], t.info)
