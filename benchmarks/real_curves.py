"""Real learning curves: scikit-learn and torch trainers on bundled data, tabulated once.

Each trainer reports a validation loss after every step (an epoch, or ten boosting rounds) on a
fixed split of a dataset that ships with scikit-learn (a quarter held out, seed 0; inputs
standardised on the training part). ``write_table`` trains it at ``n`` scrambled Sobol points
of its parameter space (seed 0, every model's own randomness fixed) and writes the curves to
``benchmarks/data/curves-<name>.json.gz``; ``problem`` turns a table into a ``CurveProblem``
whose points take the curve of the nearest tabulated configuration, so a run of the stopping
benchmark costs seconds. A run that diverges (a non-finite loss, or one above ``DIVERGED``)
ends at the step before; a diverged run fails there.

Trainers (``TRAINERS``), the loss each reports, and the curve shapes that make stopping hard:

* ``linear-digits``: ``SGDClassifier`` (logistic loss, elastic net, inverse-scaling steps) by
  epoch on digits, validation log loss: large steps start fast and end noisy or diverge.
* ``linear-diabetes``: ``SGDRegressor`` by epoch on diabetes, validation MSE over the
  variance: steps near the stability limit fall fastest, then oscillate or diverge.
* ``gbm-cancer``: ``GradientBoostingClassifier`` on breast cancer, validation log loss after
  every 10 of 200 rounds: a large learning rate is best early and overfits later (its curve
  rises), a small one is slow and ends best, so curves cross.
* ``mlp-digits``: scikit-learn's ``MLPClassifier`` (Adam) by epoch on digits, validation log
  loss: wide nets with large steps lead early and overfit.
* ``torch-mlp-digits``: a two-layer torch MLP trained with SGD and momentum by epoch on digits,
  validation cross-entropy: high momentum and steps diverge, small steps start slow.

With the tabulated asynchronous SGD example (``curves.py``'s ``sgd``) these are the real-curve
suite. Example:

    python -m benchmarks curves table --problems gbm-cancer
"""

from __future__ import annotations

import gzip
import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).parent / "data"
DIVERGED = 10.0  # a loss above this (or not finite) is a diverged run
STEPS = 20  # every trainer reports 20 times


Report = Callable[[int, float], bool]  # (step, loss) -> whether to stop the run there


@dataclass(frozen=True)
class Trainer:
    """A trainer: its parameters (name: kind, low, high, log scale) and ``train``, which
    returns the validation loss after each step (fewer when it diverged or ``report``, called
    after every step, asked it to stop)."""

    name: str
    space: Mapping[str, tuple[str, float, float, bool]]
    train: Callable[[dict[str, Any], Report | None], list[float]]


@cache
def _split(dataset: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A fixed split of a bundled dataset, inputs standardised on the training part (a
    regression target too)."""
    from sklearn import datasets
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    loader = {"digits": datasets.load_digits, "diabetes": datasets.load_diabetes,
              "cancer": datasets.load_breast_cancer}[dataset]  # fmt: skip
    X, y = loader(return_X_y=True)
    Xa, Xb, ya, yb = train_test_split(X, y, test_size=0.25, random_state=0)
    scaler = StandardScaler().fit(Xa)
    Xa, Xb = scaler.transform(Xa), scaler.transform(Xb)
    if dataset == "diabetes":
        mu, sd = ya.mean(), ya.std()
        ya, yb = (ya - mu) / sd, (yb - mu) / sd
    return Xa, Xb, ya, yb


def _log_loss(model: Any, X: np.ndarray, y: np.ndarray) -> float:
    from sklearn.metrics import log_loss

    proba = model.predict_proba(X)
    if not np.all(np.isfinite(proba)):
        return math.inf
    return float(log_loss(y, proba, labels=model.classes_))


def _epochs(step: Callable[[], float], report: Report | None) -> list[float]:
    """Call ``step`` (one epoch, returning the validation loss) up to ``STEPS`` times, stopping
    at the first diverged value (which is not kept) or where ``report`` says stop."""
    out: list[float] = []
    for t in range(1, STEPS + 1):
        value = step()
        if not math.isfinite(value) or value > DIVERGED:
            break
        out.append(value)
        if report is not None and report(t, value):
            break
    return out


def _linear_digits(p: dict[str, Any], report: Report | None = None) -> list[float]:
    from sklearn.linear_model import SGDClassifier

    Xa, Xb, ya, yb = _split("digits")
    model = SGDClassifier(loss="log_loss", penalty="elasticnet", alpha=p["alpha"],
                          l1_ratio=p["l1_ratio"], learning_rate="invscaling", eta0=p["eta0"],
                          power_t=p["power_t"], random_state=0)  # fmt: skip
    classes = np.unique(ya)

    def step() -> float:
        model.partial_fit(Xa, ya, classes=classes)
        return _log_loss(model, Xb, yb)

    return _epochs(step, report)


def _linear_diabetes(p: dict[str, Any], report: Report | None = None) -> list[float]:
    from sklearn.linear_model import SGDRegressor

    Xa, Xb, ya, yb = _split("diabetes")
    model = SGDRegressor(penalty="elasticnet", alpha=p["alpha"], l1_ratio=p["l1_ratio"],
                         learning_rate="invscaling", eta0=p["eta0"], power_t=p["power_t"],
                         random_state=0)  # fmt: skip

    def step() -> float:
        with np.errstate(all="ignore"):
            model.partial_fit(Xa, ya)
            pred = model.predict(Xb)
        return float(np.mean((pred - yb) ** 2)) if np.all(np.isfinite(pred)) else math.inf

    return _epochs(step, report)


def _gbm_cancer(p: dict[str, Any], report: Report | None = None) -> list[float]:
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.metrics import log_loss

    Xa, Xb, ya, yb = _split("cancer")
    model = GradientBoostingClassifier(
        n_estimators=10 * STEPS, learning_rate=p["learning_rate"], max_depth=p["max_depth"],
        subsample=p["subsample"], min_samples_leaf=p["min_samples_leaf"],
        max_features=p["max_features"], random_state=0,
    ).fit(Xa, ya)  # fmt: skip
    staged = list(model.staged_predict_proba(Xb))
    values = iter(float(log_loss(yb, staged[10 * (s + 1) - 1], labels=[0, 1]))
                  for s in range(STEPS))  # fmt: skip
    return _epochs(lambda: next(values), report)  # cut where the loss passes DIVERGED


def _mlp_digits(p: dict[str, Any], report: Report | None = None) -> list[float]:
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier

    Xa, Xb, ya, yb = _split("digits")
    model = MLPClassifier(hidden_layer_sizes=(p["width"],), alpha=p["alpha"],
                          learning_rate_init=p["learning_rate"], batch_size=p["batch_size"],
                          random_state=0)  # fmt: skip
    classes = np.unique(ya)

    def step() -> float:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.partial_fit(Xa, ya, classes=classes)
        return _log_loss(model, Xb, yb)

    return _epochs(step, report)


def _torch_mlp_digits(p: dict[str, Any], report: Report | None = None) -> list[float]:
    import torch

    Xa, Xb, ya, yb = _split("digits")
    torch.manual_seed(0)
    xa, xb = torch.tensor(Xa, dtype=torch.float32), torch.tensor(Xb, dtype=torch.float32)
    ta, tb = torch.tensor(ya), torch.tensor(yb)
    width = int(p["width"])
    net = torch.nn.Sequential(torch.nn.Linear(64, width), torch.nn.ReLU(),
                              torch.nn.Linear(width, 10))  # fmt: skip
    opt = torch.optim.SGD(net.parameters(), lr=p["lr"], momentum=p["momentum"],
                          weight_decay=p["weight_decay"])  # fmt: skip
    batch = int(p["batch_size"])
    gen = torch.Generator().manual_seed(0)
    loss = torch.nn.functional.cross_entropy

    def step() -> float:
        order = torch.randperm(len(xa), generator=gen)
        for i in range(0, len(xa), batch):
            idx = order[i : i + batch]
            opt.zero_grad()
            loss(net(xa[idx]), ta[idx]).backward()
            opt.step()
        with torch.no_grad():
            return float(loss(net(xb), tb))

    return _epochs(step, report)


_LINEAR = {"alpha": ("float", 1e-6, 1e-1, True), "l1_ratio": ("float", 0.0, 1.0, False),
           "eta0": ("float", 1e-4, 1.0, True), "power_t": ("float", 0.05, 0.9, False)}  # fmt: skip
TRAINERS: dict[str, Trainer] = {
    "linear-digits": Trainer("linear-digits", _LINEAR, _linear_digits),
    "linear-diabetes": Trainer("linear-diabetes", _LINEAR, _linear_diabetes),
    "gbm-cancer": Trainer(
        "gbm-cancer",
        {
            "learning_rate": ("float", 5e-3, 1.0, True),
            "max_depth": ("int", 1, 6, False),
            "subsample": ("float", 0.3, 1.0, False),
            "min_samples_leaf": ("int", 1, 64, True),
            "max_features": ("float", 0.2, 1.0, False),
        },
        _gbm_cancer,
    ),  # fmt: skip
    "mlp-digits": Trainer(
        "mlp-digits",
        {
            "width": ("int", 8, 256, True),
            "alpha": ("float", 1e-6, 1e-1, True),
            "learning_rate": ("float", 1e-4, 1e-1, True),
            "batch_size": ("int", 16, 256, True),
        },
        _mlp_digits,
    ),  # fmt: skip
    "torch-mlp-digits": Trainer(
        "torch-mlp-digits",
        {
            "width": ("int", 8, 256, True),
            "lr": ("float", 1e-3, 3.0, True),
            "momentum": ("float", 0.0, 0.99, False),
            "weight_decay": ("float", 1e-6, 1e-1, True),
            "batch_size": ("int", 16, 256, True),
        },
        _torch_mlp_digits,
    ),  # fmt: skip
}


def params_at(trainer: Trainer, u: np.ndarray) -> dict[str, Any]:
    """The trainer's parameters at ``u`` in the unit cube (one column each, log where the
    parameter is log-scaled, integers rounded)."""
    return {
        name: from_unit(spec, v) for (name, spec), v in zip(trainer.space.items(), u, strict=True)
    }


def from_unit(spec: tuple[str, float, float, bool], v: float) -> int | float:
    """A numeric parameter's value at ``v`` in [0, 1]: ``spec`` is (kind, low, high, log)."""
    kind, low, high, log = spec
    z = math.exp(math.log(low) + v * (math.log(high) - math.log(low))) if log else (
        low + v * (high - low))  # fmt: skip
    return int(round(z)) if kind == "int" else float(z)


def table_path(name: str) -> Path:
    return DATA / f"curves-{name}.json.gz"


def write_table(name: str, n: int = 2048, say: Callable[[str], None] = print) -> Path:
    """Train ``name`` at ``n`` scrambled Sobol points (seed 0); write their curves, gzipped."""
    import torch
    from scipy.stats import qmc

    torch.set_num_threads(1)
    trainer = TRAINERS[name]
    points = qmc.Sobol(len(trainer.space), scramble=True, seed=0).random(n)
    rows, started = [], time.perf_counter()
    for i, u in enumerate(points):
        params = params_at(trainer, u)
        losses = trainer.train(params, None)
        rows.append({"u": [round(float(v), 6) for v in u], "params": params,
                     "losses": [float(f"{v:.6g}") for v in losses]})  # fmt: skip
        if (i + 1) % 256 == 0 or i + 1 == n:
            say(f"{name}: {i + 1}/{n} ({time.perf_counter() - started:.0f} s)")
    out = table_path(name)
    out.parent.mkdir(parents=True, exist_ok=True)
    body = json.dumps({"trainer": name, "steps": STEPS, "rows": rows}, separators=(",", ":"))
    with gzip.GzipFile(out, "wb", mtime=0) as f:  # mtime 0: the same table, the same bytes
        f.write(body.encode())
    return out


@cache
def read_table(name: str) -> tuple[np.ndarray, tuple[tuple[float, ...], ...]]:
    """A table's configurations (unit cube) and their curves."""
    with gzip.open(table_path(name), "rt") as f:
        data = json.load(f)
    U = np.array([r["u"] for r in data["rows"]])
    return U, tuple(tuple(r["losses"]) for r in data["rows"])


def problem(name: str) -> Any:
    """The tabulated trainer as a ``CurveProblem``: a point takes its nearest configuration's
    curve; the optimum is the best final loss of a run that reached the last step."""
    from benchmarks.curves import CurveProblem

    U, curves = read_table(name)
    full = [c[-1] for c in curves if len(c) == STEPS]

    def nearest(x: np.ndarray) -> tuple[float, ...]:
        return curves[int(np.argmin(np.linalg.norm(U - x, axis=1)))]

    def final(x: np.ndarray) -> float:
        curve = nearest(x)
        return curve[-1] if len(curve) == STEPS else math.inf

    return CurveProblem(name, U.shape[1], STEPS, float(min(full)),
                        lambda x, rng: list(nearest(x)), final)  # fmt: skip


def space(name: str) -> Any:
    """The trainer's parameters as an ``abo.Space`` (for running it live)."""
    import abo

    dims: dict[str, Any] = {}
    for key, (kind, low, high, log) in TRAINERS[name].space.items():
        made = abo.Int(int(low), int(high), log=log) if kind == "int" else abo.Float(
            low, high, log=log)  # fmt: skip
        dims[key] = made
    return abo.Space(dims)


class Live:
    """The trainer as an objective for ``optimize``: it reports the validation loss after
    every step (so a stopping rule may stop it) and returns the last; a run that diverges
    raises. A class at module level, so Dask's workers unpickle it by name."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, params: dict[str, Any], trial: Any) -> float:
        import torch

        torch.set_num_threads(1)
        losses = TRAINERS[self.name].train(dict(params), trial.report)
        if len(losses) < STEPS and not trial.should_stop:
            raise RuntimeError(f"{self.name} diverged at step {len(losses) + 1}")
        return losses[-1]
