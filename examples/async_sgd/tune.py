"""Tune the asynchronous SGD trainer from Python on a local Dask cluster.

    python examples/async_sgd/tune.py --trials 30 --workers 2

``train`` runs inside Dask worker processes, which do not have this folder on their path: the
trainer module is therefore pickled by value (``cloudpickle.register_pickle_by_value``), so the
workers need only torch and scikit-learn, not this file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cloudpickle

import abo
from abo.executors import DaskExecutor

sys.path.insert(0, str(Path(__file__).resolve().parent))
import trainer  # noqa: E402

SPACE = abo.Space(
    {
        "lr": abo.Float(1e-3, 1.0, log=True),
        "momentum": abo.Float(0.0, 0.95),
        "batch_size": abo.Int(8, 256, log=True),
        "workers": abo.Int(1, 16),
        "dc_lambda": abo.Float(1e-2, 100.0, log=True),
        "accumulate": abo.Int(1, 8),
        "variant": abo.Categorical(list(trainer.VARIANTS)),
    }
)


class Objective:
    """``train`` with a fixed epoch budget: a picklable callable for the Dask workers.

    A diverged run raises, so abo marks its trial ``failed`` (its model places a failed trial at
    the worst loss observed so far). With ``diverged_value`` the run is told as that (bad,
    finite) value instead, with ``{"diverged": reason}`` in its metadata: a fixed penalty the
    user chooses rather than one that moves with the data.
    """

    def __init__(self, epochs: int, diverged_value: float | None = None) -> None:
        self.epochs = epochs
        self.diverged_value = diverged_value

    def __call__(self, params: dict, trial: abo.TrialHandle | None = None) -> dict:
        """One run; with the trial's handle (``optimize`` gives it), the validation loss of
        every epoch is reported, and the run ends when the study's stopping rule says so."""
        report = trial.report if trial is not None else None
        try:
            return trainer.train({**params, "epochs": self.epochs}, report)
        except trainer.Diverged as exc:
            if self.diverged_value is None:
                raise
            return {"value": self.diverged_value, "diverged": str(exc)}


def stopping(rule: str, epochs: int) -> dict | None:
    """The study's stopping option: ASHA's rungs at epochs 1, 3, 9, ... below the last epoch
    (a run that reaches it is done, not judged), or the median rule after the first epoch."""
    if rule == "asha":
        return {"rule": "asha", "min_step": 1, "reduction_factor": 3, "max_step": epochs}
    if rule == "median":
        return {"rule": "median", "warmup_steps": 1, "min_trials": 5}
    return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--workers", type=int, default=2, help="Dask worker processes")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument(
        "--strategy", default="qlognei", choices=sorted(abo.strategies(objectives=1))
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--stopping",
        default="asha",
        choices=["asha", "median", "none"],
        help="end hopeless runs early from their per-epoch validation loss (default asha)",
    )
    parser.add_argument("--storage", default=None, help="e.g. sqlite:///async_sgd.db")
    parser.add_argument(
        "--diverged-value",
        type=float,
        default=None,
        help="tell diverged runs as this loss (e.g. 10) instead of failing them",
    )
    args = parser.parse_args(argv)

    cloudpickle.register_pickle_by_value(trainer)  # the workers cannot import it by name
    study = abo.create_study(
        SPACE,
        storage=args.storage,
        direction="minimize",
        strategy=args.strategy,
        seed=args.seed,
        stopping=stopping(args.stopping, args.epochs),
    )
    with DaskExecutor(n_workers=args.workers) as executor:
        result = study.optimize(
            Objective(args.epochs, args.diverged_value), n_trials=args.trials, executor=executor
        )
    print(result.summary())
    best = study.best
    if best is not None:
        accuracy = best.user.get("accuracy", float("nan"))  # none when only penalties
        print(f"best validation loss {best.value:.4f}, accuracy {accuracy:.3f}")
        print(f"best configuration: {best.params}")


if __name__ == "__main__":
    main()
