"""Asynchronous SGD on scikit-learn's digits: threads push stale gradients to shared weights.

Each of ``workers`` threads repeatedly snapshots the shared weights (and the shared version
counter), computes a minibatch gradient on that snapshot with no lock held, and pushes it. By
the time it pushes, other workers may have applied updates: the staleness ``tau`` of a push is
the number of updates applied to the shared weights between its snapshot and its push, counted
exactly by the version counter, never simulated. Variants:

* ``asgd``: apply the stale gradient as it is;
* ``dc-asgd``: delay compensation (Zheng et al. 2017), ``g + lambda * g * g * (w_now - w_stale)``;
* ``staleness-lr``: scale the gradient by ``1 / (1 + tau)`` (a staleness-dependent step size).

``accumulate = m`` sums ``m`` pushes before one update is applied (their mean); momentum acts on
the applied update. The budget is fixed in epochs: ``epochs`` passes over the training split,
cut into minibatches that the workers take from one queue, so every setting sees the same data.

Run ``python trainer.py --help``; the last stdout line is JSON
``{"value": val_loss, "accuracy": ..., "mean_staleness": ...}``. With ``--report`` it also
prints ``abo:report <epoch> <val_loss>`` after every epoch (abo's report lines: a study with a
stopping rule may end the run early, by SIGTERM). From Python, ``train(params, report)`` calls
``report(epoch, val_loss)`` after every epoch and stops when it returns ``True``. The
validation loss of an epoch is measured on a snapshot of the weights once that epoch's
gradients are pushed, while the workers go on: reporting never pauses training.

A run that diverges (non-finite weights, or a validation loss above ``DIVERGED_LOSS`` = 10
nats where guessing uniformly scores ln 10 = 2.3) prints the reason on stderr and exits with
code 2. From Python: ``train(params)`` returns that dict or raises ``Diverged``.

Seeded (``seed``: initial weights and minibatch order; the train/validation split is fixed), but
the thread interleaving is the operating system's: two runs with the same seed see different
staleness and so end with slightly different numbers.
"""

from __future__ import annotations

import argparse
import json
import math
import queue
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

import torch
from torch import Tensor

VARIANTS = ("asgd", "dc-asgd", "staleness-lr")
SPLIT_SEED = 0  # the held-out split never changes between trials
VALIDATION_FRACTION = 0.2
HIDDEN = 64
EXIT_DIVERGED = 2
DIVERGED_LOSS = 10.0  # nats; a blown-up run ends far above the 2.3 of a uniform guess


class Diverged(RuntimeError):
    """The run blew up (non-finite weights, loss above ``DIVERGED_LOSS``): the params caused it."""


@dataclass(frozen=True)
class Config:
    """One training run's settings (see the module docstring)."""

    lr: float = 0.05
    momentum: float = 0.9
    batch_size: int = 32
    workers: int = 4
    dc_lambda: float = 0.0
    accumulate: int = 1
    variant: str = "asgd"
    epochs: int = 20
    seed: int = 0

    def __post_init__(self) -> None:
        checks = {
            "lr": (0 < self.lr < math.inf, "a positive finite number"),
            "momentum": (0.0 <= self.momentum < 1.0, "in [0, 1)"),
            "batch_size": (self.batch_size >= 1, "at least 1"),
            "workers": (self.workers >= 1, "at least 1"),
            "dc_lambda": (0 <= self.dc_lambda < math.inf, "a finite number >= 0"),
            "accumulate": (self.accumulate >= 1, "at least 1"),
            "variant": (self.variant in VARIANTS, f"one of {', '.join(VARIANTS)}"),
            "epochs": (self.epochs >= 1, "at least 1"),
        }
        for name, (ok, wanted) in checks.items():
            if not ok:
                raise ValueError(f"{name}: expected {wanted}, got {getattr(self, name)!r}")

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Config:
        """A config from a dict (unknown keys are an error, missing ones take the defaults)."""
        known = {f.name: f.type for f in fields(cls)}
        unknown = sorted(set(params) - set(known))
        if unknown:
            raise ValueError(f"{unknown[0]}: unknown parameter (known: {', '.join(known)})")
        casts = {"float": float, "int": int, "str": str}
        return cls(**{k: casts[str(known[k])](v) for k, v in params.items()})


# -- data and model ----------------------------------------------------------------------------
def load_data() -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Digits (8x8 images, 10 classes) scaled to [0, 1]: a fixed stratified train/val split."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X_tr, X_va, y_tr, y_va = train_test_split(
        X / 16.0, y, test_size=VALIDATION_FRACTION, stratify=y, random_state=SPLIT_SEED
    )
    f32, i64 = torch.float32, torch.long
    return (
        torch.tensor(X_tr, dtype=f32),
        torch.tensor(y_tr, dtype=i64),
        torch.tensor(X_va, dtype=f32),
        torch.tensor(y_va, dtype=i64),
    )


class MLP:
    """A 64-``HIDDEN``-10 tanh MLP whose parameters live in one flat vector (easy to share)."""

    def __init__(self, n_in: int, n_hidden: int, n_out: int) -> None:
        self.shapes = [(n_hidden, n_in), (n_hidden,), (n_out, n_hidden), (n_out,)]
        self.size = sum(math.prod(s) for s in self.shapes)

    def init(self) -> Tensor:
        """PyTorch's default ``nn.Linear`` initialisation, flattened (uses the global seed)."""
        layers = [
            torch.nn.Linear(self.shapes[0][1], self.shapes[0][0]),
            torch.nn.Linear(self.shapes[2][1], self.shapes[2][0]),
        ]
        return torch.cat([p.detach().reshape(-1) for layer in layers for p in layer.parameters()])

    def logits(self, w: Tensor, X: Tensor) -> Tensor:
        """``n x 10`` logits of ``X`` (``n x 64``) under the flat weights ``w``."""
        parts, start = [], 0
        for shape in self.shapes:
            n = math.prod(shape)
            parts.append(w[start : start + n].view(shape))
            start += n
        W1, b1, W2, b2 = parts
        return torch.tanh(X @ W1.T + b1) @ W2.T + b2


# -- the shared parameters ---------------------------------------------------------------------
class ParameterServer:
    """Shared weights, momentum and version counter; pushes are applied one at a time.

    The lock covers only the O(parameters) snapshot copy and apply, never a gradient
    computation, so a worker never waits for another worker's minibatch.
    """

    def __init__(self, w0: Tensor, cfg: Config) -> None:
        self.cfg = cfg
        self.w = w0.clone()
        self.velocity = torch.zeros_like(w0)
        self.buffer = torch.zeros_like(w0)
        self.buffered = 0
        self.version = 0  # updates applied to w so far
        self.staleness: list[int] = []
        self.diverged = False
        self.stopped = False  # the caller ended the run early (a stopping rule)
        self._lock = threading.Lock()
        self._pushed = threading.Condition(self._lock)

    def snapshot(self) -> tuple[Tensor, int]:
        """A private copy of the current weights and their version."""
        with self._lock:
            return self.w.clone(), self.version

    def push(self, grad: Tensor, w_stale: Tensor, version: int) -> int:
        """Add a gradient computed at ``w_stale`` (version ``version``); return its staleness."""
        cfg = self.cfg
        with self._lock:
            tau = self.version - version
            self.staleness.append(tau)
            if cfg.variant == "dc-asgd":
                grad = grad + cfg.dc_lambda * grad * grad * (self.w - w_stale)
            elif cfg.variant == "staleness-lr":
                grad = grad / (1 + tau)
            self.buffer += grad
            self.buffered += 1
            if self.buffered >= cfg.accumulate:
                self._apply()
            self._pushed.notify_all()
            return tau

    def wait_for(self, pushes: int, workers: list[threading.Thread]) -> None:
        """Block until ``pushes`` gradients were pushed (or the run diverged, or every worker
        ended)."""
        with self._pushed:
            while len(self.staleness) < pushes and not self.diverged:
                if not any(t.is_alive() for t in workers):
                    return
                self._pushed.wait(timeout=0.1)

    def flush(self) -> None:
        """Apply what is left in the accumulation buffer at the end of the budget."""
        with self._lock:
            if self.buffered:
                self._apply()

    def _apply(self) -> None:
        step = self.buffer / self.buffered
        self.velocity.mul_(self.cfg.momentum).add_(step)
        self.w.sub_(self.cfg.lr * self.velocity)
        self.buffer.zero_()
        self.buffered = 0
        self.version += 1
        if not bool(torch.isfinite(self.w).all()):
            self.diverged = True


# -- training ----------------------------------------------------------------------------------
def _batches(n: int, cfg: Config, generator: torch.Generator) -> queue.SimpleQueue[Tensor]:
    """``epochs`` shuffled passes over ``n`` examples, as one queue of index minibatches."""
    out: queue.SimpleQueue[Tensor] = queue.SimpleQueue()
    for _ in range(cfg.epochs):
        for idx in torch.randperm(n, generator=generator).split(cfg.batch_size):
            out.put(idx)
    return out


def _worker(
    server: ParameterServer, model: MLP, X: Tensor, y: Tensor, batches: queue.SimpleQueue[Tensor]
) -> None:
    """Snapshot → gradient on a minibatch (no lock) → push, until the queue is empty."""
    while not (server.diverged or server.stopped):
        try:
            idx = batches.get_nowait()
        except queue.Empty:
            return
        w_stale, version = server.snapshot()
        w = w_stale.detach().requires_grad_(True)
        loss = torch.nn.functional.cross_entropy(model.logits(w, X[idx]), y[idx])
        (grad,) = torch.autograd.grad(loss, w)
        server.push(grad, w_stale.detach(), version)


def _validate(model: MLP, w: Tensor, X: Tensor, y: Tensor) -> tuple[float, float]:
    """Validation loss and accuracy of the weights ``w``."""
    with torch.no_grad():
        logits = model.logits(w, X)
        loss = float(torch.nn.functional.cross_entropy(logits, y))
        accuracy = float((logits.argmax(dim=1) == y).float().mean())
    return loss, accuracy


def train(
    params: Mapping[str, Any], report: Callable[[int, float], bool] | None = None
) -> dict[str, Any]:
    """Train once; ``{"value": validation loss, "accuracy", "mean_staleness", ...}``.

    ``params`` holds any of ``lr, momentum, batch_size, workers, dc_lambda, accumulate,
    variant, epochs, seed`` (the rest take ``Config``'s defaults). ``report(epoch, val_loss)``
    is called after every epoch, the last one included; when it returns ``True`` the workers
    stop and the result says ``stopped_at`` (its ``value`` is that epoch's loss).

    Raises:
        Diverged: the weights became non-finite or the validation loss ended above
            ``DIVERGED_LOSS``.
        ValueError: a parameter is unknown or out of range.
    """
    cfg = Config.from_params(params)
    start = time.time()
    X_tr, y_tr, X_va, y_va = load_data()
    torch.manual_seed(cfg.seed)
    model = MLP(X_tr.shape[1], HIDDEN, 10)
    server = ParameterServer(model.init(), cfg)
    batches = _batches(len(X_tr), cfg, torch.Generator().manual_seed(cfg.seed))
    threads = [
        threading.Thread(target=_worker, args=(server, model, X_tr, y_tr, batches), daemon=True)
        for _ in range(cfg.workers)
    ]
    for t in threads:
        t.start()
    stopped_at = None
    if report is not None:
        per_epoch = math.ceil(len(X_tr) / cfg.batch_size)
        for epoch in range(1, cfg.epochs):  # the last epoch is reported after the join
            server.wait_for(epoch * per_epoch, threads)
            if server.diverged:
                break
            loss, _ = _validate(model, server.snapshot()[0], X_va, y_va)
            if math.isfinite(loss) and report(epoch, loss):
                server.stopped, stopped_at = True, epoch
                break
    for t in threads:
        t.join()
    server.flush()
    val_loss, accuracy = _validate(model, server.w, X_va, y_va)
    if stopped_at is None and report is not None and math.isfinite(val_loss):
        report(cfg.epochs, val_loss)
    if server.diverged or not val_loss <= DIVERGED_LOSS:  # NaN compares False
        raise Diverged(
            f"diverged after {server.version} updates (lr={cfg.lr:g}, momentum={cfg.momentum:g},"
            f" variant={cfg.variant}): validation loss {val_loss}"
        )
    tau = torch.tensor(server.staleness, dtype=torch.float64)
    out = {
        "value": val_loss,
        "accuracy": accuracy,
        "mean_staleness": float(tau.mean()),
        "max_staleness": int(tau.max()),
        "updates": server.version,
        "gradients": len(server.staleness),
        "epochs_run": stopped_at or cfg.epochs,
        "seconds": time.time() - start,
    }
    if stopped_at is not None:
        out["stopped_at"] = stopped_at
    return out


def _parser() -> argparse.ArgumentParser:
    d = Config()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lr", type=float, default=d.lr, help="learning rate")
    p.add_argument("--momentum", type=float, default=d.momentum, help="momentum on the update")
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="minibatch size")
    p.add_argument("--workers", type=int, default=d.workers, help="asynchronous worker threads")
    p.add_argument("--dc-lambda", type=float, default=d.dc_lambda, help="DC-ASGD lambda")
    p.add_argument("--accumulate", type=int, default=d.accumulate, help="pushes per update")
    p.add_argument("--variant", choices=VARIANTS, default=d.variant)
    p.add_argument("--epochs", type=int, default=d.epochs, help="passes over the training set")
    p.add_argument("--seed", type=int, default=d.seed, help="initial weights, minibatch order")
    p.add_argument(
        "--report",
        action="store_true",
        help="print 'abo:report <epoch> <val_loss>' after every epoch (abo's report lines)",
    )
    return p


def _print_report(epoch: int, loss: float) -> bool:
    print(f"abo:report {epoch} {loss!r}", flush=True)
    return False  # abo stops a command by SIGTERM, not by an answer


def main(argv: list[str] | None = None) -> int:
    """The command line: the result as the last stdout line; exit 2 when the run diverged."""
    args = vars(_parser().parse_args(argv))
    reporting = args.pop("report")
    torch.set_num_threads(1)  # the parallelism is the workers', not torch's intra-op threads
    try:
        result = train(args, _print_report if reporting else None)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Diverged as exc:
        print(exc, file=sys.stderr)  # "diverged after ..."
        return EXIT_DIVERGED
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
