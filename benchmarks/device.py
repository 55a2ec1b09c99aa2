"""The GP on an accelerator: abo's default study on a CUDA device against the same machine's
CPU, as observations grow (issue: long campaigns).

One in-memory study per device grows to each size in ``--sizes`` with noise-free Hartmann-6
results at scrambled Sobol points (``study.add``); at each size it asks 8 points one at a
time without telling them (so each later ask sees the earlier ones busy), then tells them.
The first ask of a size refits the GP (the data grew past the refit step) and says how long
the fit took; the other seven condition the fitted hyperparameters on the data, as most asks
of a long campaign do. Per size and device: the first ask's seconds and its fit's, the later
asks' median and 95th percentile, the GP's points (all of them on CUDA up to its
``max_exact``, a 500-point subset on the CPU), and what the fitted GP knows: the regret of
the point its posterior mean ranks best among 20,000 random ones and the observed ones, and
Spearman's rank correlation of its mean with the truth on held-out points of the best tenth.

python -m benchmarks.device --out results.json            # both devices (CUDA if present)
python -m benchmarks.device --devices cpu --sizes 1000 2000
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from botorch.test_functions import Hartmann
from torch.quasirandom import SobolEngine

import abo

NAMES = [f"x{i}" for i in range(6)]
BUSY = 8
HARTMANN = Hartmann(dim=6)
OPTIMUM = -3.32237


def _truth(X: torch.Tensor) -> torch.Tensor:
    return HARTMANN(X.to(torch.double).cpu())


def _spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    ra = a.argsort().argsort().double()
    rb = b.argsort().argsort().double()
    return float(torch.corrcoef(torch.stack([ra, rb]))[0, 1])


def _model_quality(study: abo.Study, X_seen: torch.Tensor) -> dict[str, float]:
    """Regret of the posterior mean's best point, and its rank correlation with the truth on
    held-out points of the best tenth (utilities: larger is better, any monotone warping)."""
    latest = study._models._latest  # the GP the last refit made (abo.model.refit)
    if latest is None:
        return {}
    model = latest.fitted.model
    device = next(model.parameters()).device
    g = torch.Generator().manual_seed(1)
    cand = torch.cat([torch.rand(20_000, 6, generator=g, dtype=torch.double), X_seen])
    held = torch.rand(50_000, 6, generator=g, dtype=torch.double)
    f_held = _truth(held)
    good = held[f_held <= f_held.quantile(0.1)]
    with torch.no_grad():
        means = [model.posterior(c.to(device)).mean.reshape(-1).cpu() for c in cand.split(4096)]
        mean = torch.cat(means)
        good_mean = model.posterior(good.to(device)).mean.reshape(-1).cpu()
    best = cand[mean.argmax()].unsqueeze(0)
    return {
        "regret_of_mean_best": float(_truth(best)[0] - OPTIMUM),
        "spearman_best_tenth": _spearman(good_mean, -_truth(good)),
    }


def _checkpoint(study: abo.Study, X_seen: torch.Tensor) -> dict[str, Any]:
    """Ask ``BUSY`` points one at a time, time them, then tell them."""
    times, trials = [], []
    for _ in range(BUSY):
        t0 = time.perf_counter()
        trials.append(study.ask())
        times.append(time.perf_counter() - t0)
        if len(trials) == 1:
            quality = _model_quality(study, X_seen)
    first = trials[0].proposal
    later = sorted(times[1:])
    out = {
        "first_ask_s": round(times[0], 3),
        "fit_s": round(first.fit_seconds or 0.0, 3),
        "later_ask_p50_s": round(statistics.median(later), 3),
        "later_ask_p95_s": round(later[min(len(later) - 1, int(0.95 * len(later)))], 3),
        "gp_points": first.gp_points,
        "strategy": first.arm or first.strategy,
        "device": first.details.get("device", "cpu"),
        **{k: round(v, 4) for k, v in quality.items()},
    }
    for trial in trials:
        x = torch.tensor([[trial.params[n] for n in NAMES]], dtype=torch.double)
        study.tell(trial.id, float(_truth(x)[0]))
    return out


def run(device: str, sizes: list[int], out: Path | None, results: dict[str, Any]) -> None:
    """Grow one study on ``device`` through ``sizes``, a checkpoint at each."""
    study = abo.create_study(
        abo.Space({n: abo.Float(0.0, 1.0) for n in NAMES}), seed=0, device=device, n_initial=12
    )
    sobol = SobolEngine(6, scramble=True, seed=0)
    X_seen = torch.zeros(0, 6, dtype=torch.double)
    rows = results.setdefault(device, [])
    for n in sizes:
        grow = n - len(study.trials)
        t0 = time.perf_counter()
        X = sobol.draw(grow, dtype=torch.double)
        for x, f in zip(X.tolist(), _truth(X).tolist(), strict=True):
            study.add(dict(zip(NAMES, x, strict=True)), f)
        X_seen = torch.cat([X_seen, X])
        add_s = time.perf_counter() - t0
        try:
            row = {"n": n, "add_s": round(add_s, 1), **_checkpoint(study, X_seen)}
        except Exception as exc:  # a size the device cannot hold: say so, keep the others
            row = {"n": n, "error": f"{type(exc).__name__}: {exc}"[:500]}
        rows.append(row)
        print(json.dumps({"device": device, **row}), flush=True)
        if out is not None:
            out.write_text(json.dumps(results, indent=1))
        if "error" in row:
            break


def table(results: dict[str, Any]) -> str:
    """The results as a Markdown table, one row per (size, device)."""
    head = (
        "| observations | device | GP points | first ask (s) | its fit (s) "
        "| later asks p50 / p95 (s) | regret of the mean's best | Spearman, best tenth |\n"
        "|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    rows = [(r["n"], d, r) for d, rs in results.items() if d != "machine" for r in rs]
    for n, device, r in sorted(rows, key=lambda x: (x[0], x[1])):
        if "error" in r:
            lines.append(f"| {n:,} | {device} | – | {r['error'][:60]} | | | | |")
            continue
        lines.append(
            f"| {n:,} | {r['device']} | {r['gp_points']:,} | {r['first_ask_s']} | {r['fit_s']} "
            f"| {r['later_ask_p50_s']} / {r['later_ask_p95_s']} "
            f"| {r.get('regret_of_mean_best', '–')} | {r.get('spearman_best_tenth', '–')} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--devices", nargs="+", default=None, help="default: cpu, then cuda (if any)"
    )
    parser.add_argument("--sizes", nargs="+", type=int, default=[1000, 5000, 10000, 20000])
    parser.add_argument("--out", type=Path, default=None, help="results JSON, rewritten as it goes")
    args = parser.parse_args(argv)
    devices = args.devices or (["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
    results: dict[str, Any] = {
        "machine": {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "cpu_threads": torch.get_num_threads(),
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "platform": platform.platform(),
        }
    }
    for device in devices:
        run(device, sorted(args.sizes), args.out, results)
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
