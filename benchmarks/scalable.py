"""Which surrogate above a thousand observations: exact GP, a subset, or a variational GP.

On Hartmann-6 data shaped like a long BO campaign (half the points from the best tenth of a
uniform sample, so they crowd the good regions as a study's do; half uniform), each surrogate
is fitted and then used as an ask would use it. Per surrogate and size it reports:

* ``fit s``: fitting the hyperparameters from the prior's mode (the background refit's work);
* ``ask s``: what every ask pays on top: build the model on the current data with fixed
  hyperparameters and predict mean and variance at 2,048 points (one acquisition sweep);
* ``RMSE good``: the posterior mean's error on held-out points from the good regions (where
  proposals land), in units of the data's standard deviation;
* ``NLPD good``: their negative log predictive density (calibration, lower is better);
* ``regret of mean max``: the true regret of the posterior mean's best point among 4,096
  Sobol points and the data (what the model would recommend).

    python -m benchmarks.scalable --sizes 1000 2000 5000 --seeds 3

``exact`` is skipped above ``--max-exact-n`` (its fit alone takes minutes there).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskVariationalGP
from botorch.models.transforms import Normalize, Standardize
from botorch.test_functions import Hartmann
from gpytorch.mlls import VariationalELBO
from torch import Tensor
from torch.quasirandom import SobolEngine

from abo.model.surrogate import condition, export_hypers, fit_gp, subset

DIM = 6
PROBLEM = Hartmann(dim=DIM)
OPTIMUM = -3.32237  # Hartmann-6's minimum
UNIT = torch.stack([torch.zeros(DIM), torch.ones(DIM)])


def campaign(n: int, seed: int) -> tuple[Tensor, Tensor]:
    """``n`` points like a BO campaign's and their utilities (``-f``)."""
    gen = torch.Generator().manual_seed(seed)
    pool = torch.rand(10 * n, DIM, generator=gen, dtype=torch.double)
    good = pool[torch.argsort(PROBLEM(pool))[: n // 2]]
    spread = torch.rand(n - n // 2, DIM, generator=gen, dtype=torch.double)
    X = torch.cat([good, spread])
    return X, -PROBLEM(X).unsqueeze(-1)


@dataclass
class Scores:
    fit: float
    ask: float
    rmse: float
    nlpd: float
    regret: float


FIELDS = ("fit", "ask", "rmse", "nlpd", "regret")


def _predict(model, X: Tensor) -> tuple[Tensor, Tensor]:
    """Marginal mean and variance at ``X`` (as ``b x 1 x d``: an acquisition's batches)."""
    with torch.no_grad():
        post = model.posterior(X.unsqueeze(-2))
        return post.mean.reshape(-1), post.variance.reshape(-1).clamp_min(1e-12)


def score(model, X: Tensor, Y: Tensor, test: tuple[Tensor, Tensor], seed: int) -> tuple:
    X_test, Y_test = test
    mean, var = _predict(model, X_test)
    y = Y_test.squeeze(-1)
    scale = float(Y.std())
    rmse = float(((mean - y) ** 2).mean().sqrt()) / scale
    noise = float(model.likelihood.noise.mean()) * float(Y.var())  # standardised → raw
    total = var + noise
    nlpd = float((0.5 * torch.log(2 * math.pi * total) + 0.5 * (mean - y) ** 2 / total).mean())
    candidates = torch.cat(
        [SobolEngine(DIM, scramble=True, seed=seed).draw(4096, dtype=torch.double), X]
    )
    best = candidates[_predict(model, candidates)[0].argmax()]
    regret = float(PROBLEM(best.unsqueeze(0))) - OPTIMUM
    return rmse, nlpd, regret


def exact_like(keep: Callable[[Tensor, Tensor], Tensor]) -> Callable:
    """A fit + ask pair for an exact GP on the observations ``keep`` selects."""

    def run(X: Tensor, Y: Tensor) -> tuple[object, float, float]:
        idx = keep(X, Y)
        t0 = time.perf_counter()
        fitted = fit_gp(X[idx], Y[idx])
        fit_s = time.perf_counter() - t0
        hypers = export_hypers(fitted.model)
        t0 = time.perf_counter()
        model = condition(X[idx], Y[idx], "auto", hypers).model
        sweep = torch.rand(2048, DIM, generator=torch.Generator().manual_seed(1), dtype=X.dtype)
        _predict(model, sweep)
        return model, fit_s, time.perf_counter() - t0

    return run


def variational(m: int) -> Callable:
    """A fit + ask pair for BoTorch's ``SingleTaskVariationalGP`` with ``m`` inducing points."""

    def run(X: Tensor, Y: Tensor) -> tuple[object, float, float]:
        t0 = time.perf_counter()
        model = SingleTaskVariationalGP(
            X,
            Y,
            inducing_points=m,
            outcome_transform=Standardize(m=1),
            input_transform=Normalize(
                d=DIM, bounds=torch.stack([torch.zeros(DIM), torch.ones(DIM)]).to(X)
            ),
        )
        mll = VariationalELBO(model.likelihood, model.model, num_data=X.shape[0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit_gpytorch_mll(mll)  # BoTorch's choice: L-BFGS-B, or Adam for large n
        model.eval()
        fit_s = time.perf_counter() - t0
        t0 = time.perf_counter()  # an ask: predict with the fitted inducing posterior
        sweep = torch.rand(2048, DIM, generator=torch.Generator().manual_seed(1), dtype=X.dtype)
        _predict(model, sweep)
        return model, fit_s, time.perf_counter() - t0

    return run


def surrogates(max_exact: int) -> dict[str, Callable]:
    return {
        "exact": exact_like(lambda X, Y: torch.arange(X.shape[0])),
        "subset-500": exact_like(lambda X, Y: subset(X, Y, 500, seed=X.shape[0])),
        "subset-1000": exact_like(lambda X, Y: subset(X, Y, 1000, seed=X.shape[0])),
        "random-1000": exact_like(
            lambda X, Y: (
                torch.sort(
                    torch.randperm(X.shape[0], generator=torch.Generator().manual_seed(0))[:1000]
                ).values
            )
        ),
        "svgp-256": variational(256),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 5000])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--max-exact-n", type=int, default=2000)
    parser.add_argument("--only", nargs="+", default=None, help="surrogates to run")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")  # BoTorch's notes on transforms with minibatches
    from benchmarks.gp_vs_optuna import machine

    print(
        f"Hartmann-6 campaign-shaped data, {args.seeds} seeds; medians over seeds. "
        "fit: hyperparameters from the prior's mode; ask: model on the data with fixed "
        "hyperparameters + mean/variance at 2,048 points; RMSE in data standard deviations."
    )
    print()
    print("| n | surrogate | fit s | ask s | RMSE good | NLPD good | log10 regret of mean max |")
    print("|---|---|---|---|---|---|---|")
    for n in args.sizes:
        for name, run in surrogates(args.max_exact_n).items():
            if args.only and name not in args.only:
                continue
            if name == "exact" and n > args.max_exact_n:
                print(f"| {n} | {name} | skipped | | | | |", flush=True)
                continue
            rows = []
            for seed in range(args.seeds):
                X, Y = campaign(n, seed)
                test = campaign(2000, 1000 + seed)
                test = (test[0][:1000], test[1][:1000])  # the good half
                model, fit_s, ask_s = run(X, Y)
                rows.append(Scores(fit_s, ask_s, *score(model, X, Y, test, seed)))
            med = {
                k: statistics.median(getattr(r, k) for r in rows) for k in Scores.__annotations__
            }
            print(
                f"| {n} | {name} | {med['fit']:.1f} | {med['ask']:.3f} | {med['rmse']:.3f} | "
                f"{med['nlpd']:.2f} | {math.log10(max(med['regret'], 1e-12)):.2f} |",
                flush=True,
            )
    print()
    print(f"Machine: {machine()}.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
