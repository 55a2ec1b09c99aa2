"""Proposal fingerprints: SHA-256 digests of every strategy's proposals on a fixed script.

A refactor must not change what abo proposes. This module runs one fixed, seeded, in-memory
script of asks and tells (a known result added, a design batch, a failure, batches asked with
points still busy, then asks one at a time) for every registered strategy on each kind of
study it accepts, records every trial's parameters exactly (floats as ``float.hex``) with the
proposal's strategy and arm, and digests them: one digest per (strategy, kind) and one over
all. ``benchmarks/fingerprint.json`` is the committed baseline.

python -m benchmarks.fingerprint                  # print the digests (JSON)
python -m benchmarks.fingerprint --check          # exit 1 naming each (strategy, kind) changed
python -m benchmarks.fingerprint --write          # a new baseline, after a deliberate change
python -m benchmarks.fingerprint --check --only random/mixed qlognei/mixed

The digests depend on the numerical libraries (their versions, the CPU's instruction set), so
the baseline records them and ``--check`` says when they differ from this machine's.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import abo

BASELINE = Path(__file__).resolve().with_name("fingerprint.json")
SEED = 7
N_INITIAL = 4
CHEAP = {"raw_samples": 32, "num_restarts": 2}  # a short acquisition search: the run is short


def _mixed_loss(p: Mapping[str, Any]) -> float:
    """A smooth loss of a mixed space, with a categorical offset."""
    opt = {"sgd": 0.3, "adam": 0.0, "rmsprop": 0.1}[p["opt"]]
    return (
        (math.log10(p["lr"]) + 3) ** 2 + abs(p["layers"] - 3) / 5 + opt + (p["momentum"] - 0.9) ** 2
    )


def _conditional_loss(p: Mapping[str, Any]) -> float:
    """A loss whose terms depend on which conditional parameters are active."""
    inner = (p["momentum"] - 0.9) ** 2 if p["optimizer"] == "sgd" else (p["beta"] - 0.95) ** 2
    return (math.log10(p["lr"]) + 2.5) ** 2 + inner + p["layers"] / 10


def _bowl(p: Mapping[str, Any], x: float = 0.3, y: float = 0.6) -> float:
    """A quadratic bowl on the cube with its minimum at (``x``, ``y``, 0.5)."""
    return (p["x"] - x) ** 2 + (p["y"] - y) ** 2 + 0.5 * (p["z"] - 0.5) ** 2


def _two(p: Mapping[str, Any]) -> dict[str, float]:
    """Two objectives whose minima differ, so the front is a curve."""
    return {"error": _bowl(p), "cost": _bowl(p, 0.8, 0.1)}


def _constrained(p: Mapping[str, Any]) -> dict[str, float]:
    """An objective and an outcome constraint (``memory <= 0.6``) that cuts its minimum off."""
    return {"loss": _bowl(p), "memory": p["x"] + 0.5 * p["y"]}


def _fidelity_loss(p: Mapping[str, Any]) -> float:
    """A bowl whose value at fewer epochs is biased upwards."""
    return p["x"] ** 2 + (p["y"] - 0.4) ** 2 + 1.0 / p["epochs"]


CUBE = abo.Space({"x": abo.Float(0, 1), "y": abo.Float(0, 1), "z": abo.Float(0, 1)})


@dataclass(frozen=True)
class Kind:
    """A kind of study: its space, outcomes and options, its values, and who accepts it."""

    name: str
    space: abo.Space
    value: Callable[[Mapping[str, Any]], Any]
    objectives: int = 1
    constraints: bool = False
    fidelity: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)

    def fits(self, strategy: str) -> bool:
        """Whether ``strategy`` proposes for this kind of study (per its registration)."""
        from abo.acquisitions.base import REGISTRY

        entry = REGISTRY[strategy]
        if not entry.fits(self.objectives) or (self.fidelity and not entry.fidelity):
            return False
        return not self.constraints or entry.fits_constraints(self.objectives)


KINDS = (
    Kind(
        "mixed",
        abo.Space(
            {
                "lr": abo.Float(1e-5, 1e-1, log=True),
                "layers": abo.Int(1, 6),
                "opt": abo.Categorical(["sgd", "adam", "rmsprop"]),
                "momentum": abo.Float(0.0, 0.99),
            }
        ),
        _mixed_loss,
    ),
    Kind(
        "conditional",
        abo.Space(
            {
                "optimizer": abo.Categorical(["sgd", "adam"]),
                "lr": abo.Float(1e-4, 1e-1, log=True),
                "momentum": abo.Float(0.0, 0.99, when={"optimizer": "sgd"}),
                "beta": abo.Float(0.5, 0.999, when={"optimizer": "adam"}),
                "layers": abo.Int(1, 4),
            }
        ),
        _conditional_loss,
    ),
    Kind(
        "two-objectives",
        CUBE,
        _two,
        objectives=2,
        options={"outcomes": {"error": "minimize", "cost": "minimize"}},
    ),
    Kind(
        "constraint",
        CUBE,
        _constrained,
        constraints=True,
        options={"outcomes": {"loss": "minimize", "memory": "<= 0.6"}},
    ),
    Kind(
        "fidelity",
        abo.Space({"x": abo.Float(0, 1), "y": abo.Float(0, 1), "epochs": abo.Int(1, 27)}),
        _fidelity_loss,
        fidelity=True,
        # an explicit cost: the default is learned from evaluation times, which vary per run
        options={"fidelity": {"parameter": "epochs", "cost": {"fixed": 1, "per_unit": 1}}},
    ),
)
KINDS_BY_NAME = {k.name: k for k in KINDS}


def cells(only: Sequence[str] = ()) -> list[tuple[str, str]]:
    """Every (strategy, kind) pair the registry accepts, or those of ``only`` (``name/kind``)."""
    pairs = [(s, k.name) for s in abo.strategies() for k in KINDS if k.fits(s)]
    if not only:
        return pairs
    unknown = sorted(set(only) - {f"{s}/{k}" for s, k in pairs})
    if unknown:
        raise SystemExit(f"--only: not a (strategy/kind) pair of this registry: {unknown}")
    return [(s, k) for s, k in pairs if f"{s}/{k}" in only]


def _options(strategy: str) -> dict[str, Any] | None:
    """The cheap acquisition budget, for the strategies that take one."""
    from abo.acquisitions.base import REGISTRY

    accepted = inspect.signature(REGISTRY[strategy].factory).parameters
    return {k: v for k, v in CHEAP.items() if k in accepted} or None


def _canonical(value: Any) -> Any:
    """A parameter value as exact JSON: floats as ``float.hex`` (bit-exact), others as they are."""
    if isinstance(value, float):
        return float.hex(value)
    return value


def _record(trial: abo.Trial) -> dict[str, Any]:
    """What a trial's proposal decided: its exact parameters and how they were chosen."""
    p = trial.proposal
    return {
        "id": trial.id,
        "params": {k: _canonical(v) for k, v in sorted(trial.params.items())},
        "strategy": p.strategy if p else None,
        "arm": p.arm if p else None,
        "deduplicated": p.deduplicated if p else None,
        "fallback": p.fallback if p else None,
    }


def script(strategy: str, kind: Kind) -> list[dict[str, Any]]:
    """Run the fixed script of asks and tells in memory (``play``); every trial's record, in
    id order."""
    return [_record(t) for t in sorted(play(strategy, kind).trials, key=lambda t: t.id)]


def play(strategy: str, kind: Kind, **options: Any) -> abo.Study:
    """The fixed script of asks and tells, in memory; the study it leaves.

    A known result is added and a design batch asked (three told, one failed); then a batch
    of two (the second sees the first busy), then three single asks, each after one result
    with one point still busy. ``options``: more study options (``device="cuda"``, say).
    """
    study = abo.create_study(
        kind.space, strategy=strategy, seed=SEED, n_initial=N_INITIAL, refit="sync",
        strategy_options=_options(strategy), **kind.options, **options,
    )  # fmt: skip
    known = kind.space.validate(_first_point(kind))
    study.add(known, kind.value(known))
    batch = study.ask_batch(N_INITIAL, n_workers=N_INITIAL)
    for trial in (batch[0], batch[1], batch[3]):
        study.tell(trial.id, kind.value(trial.params))
    study.fail(batch[2].id, "diverged")
    pending = study.ask_batch(2, n_workers=3)
    for _ in range(3):
        trial = pending.pop(0)
        study.tell(trial.id, kind.value(trial.params))
        pending.append(study.ask(n_workers=3))
    return study


def _first_point(kind: Kind) -> dict[str, Any]:
    """A fixed, valid point of ``kind``'s space: the added known result."""
    points: dict[str, dict[str, Any]] = {
        "mixed": {"lr": 1e-3, "layers": 2, "opt": "adam", "momentum": 0.5},
        "conditional": {"optimizer": "sgd", "lr": 1e-2, "momentum": 0.8, "layers": 2},
        "fidelity": {"x": 0.5, "y": 0.5, "epochs": 27},
    }
    return points.get(kind.name, {"x": 0.5, "y": 0.5, "z": 0.5})


def digest(records: Sequence[Mapping[str, Any]]) -> str:
    """The SHA-256 of ``records`` as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(list(records), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def overall(digests: Mapping[str, str]) -> str:
    """One digest over every (strategy, kind) digest."""
    return digest([{"cell": k, "digest": digests[k]} for k in sorted(digests)])


def environment() -> dict[str, str]:
    """What the digests depend on besides abo: the numerical libraries and the CPU's kernels."""
    import botorch
    import gpytorch
    import numpy
    import scipy
    import torch

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "botorch": botorch.__version__,
        "gpytorch": gpytorch.__version__,
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu_features": cpu_features(),
        "machine": platform.machine(),
    }


SIMD_PREFIXES = ("avx", "amx", "fma", "sse4")


def cpu_features() -> str:
    """The CPU's vector-instruction flags (Linux's ``/proc/cpuinfo``; empty elsewhere): BLAS
    picks its kernels by them, and two machines that torch calls alike (``AVX512``) gave
    different digests from the same libraries when their flags differed."""
    try:
        with open("/proc/cpuinfo") as info:
            line = next((ln for ln in info if ln.startswith("flags")), "")
    except OSError:
        return ""
    flags = line.partition(":")[2].split()
    return " ".join(sorted(f for f in flags if f.startswith(SIMD_PREFIXES)))


def fingerprint(
    pairs: Sequence[tuple[str, str]], progress: Callable[[str], None] | None = None
) -> dict[str, str]:
    """``strategy/kind`` -> digest of its script's records, for each pair."""
    out: dict[str, str] = {}
    for strategy, kind in pairs:
        start = time.perf_counter()
        out[f"{strategy}/{kind}"] = digest(script(strategy, KINDS_BY_NAME[kind]))
        if progress:
            progress(f"{strategy}/{kind}: {time.perf_counter() - start:.1f} s")
    return out


def differences(
    digests: Mapping[str, str], baseline: Mapping[str, Any], complete: bool
) -> list[str]:
    """Each ``strategy/kind`` whose digest is not the baseline's, with why; ``complete``: the
    run covered every pair, so baseline pairs it did not produce are named too."""
    stored = baseline.get("digests", {})
    lines = [
        f"{cell}: {'not in the baseline' if cell not in stored else 'proposals changed'}"
        for cell in sorted(digests)
        if stored.get(cell) != digests[cell]
    ]
    if complete:
        lines += [
            f"{cell}: in the baseline, not run" for cell in sorted(set(stored) - set(digests))
        ]
    return lines


def _check(digests: dict[str, str], path: Path, complete: bool) -> int:
    """Compare with the baseline at ``path``: 0 when every digest matches, else 1 naming each."""
    baseline = json.loads(path.read_text())
    changed = differences(digests, baseline, complete)
    env = environment()
    drift = {k: (baseline.get("environment", {}).get(k), v) for k, v in env.items()}
    drift = {k: ab for k, ab in drift.items() if ab[0] != ab[1]}
    if changed and drift:
        print(f"note: the baseline was made with other libraries or CPU: {drift}", file=sys.stderr)
    for line in changed:
        print(f"fingerprint differs: {line}", file=sys.stderr)
    if not changed:
        print(f"fingerprint: {len(digests)} (strategy, kind) digests match {path.name}")
    return 1 if changed else 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.fingerprint", description=__doc__.split("\n\n")[0]
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if any digest differs")
    mode.add_argument("--write", action="store_true", help="write the baseline file")
    parser.add_argument("--baseline", type=Path, default=BASELINE, help="the baseline file")
    parser.add_argument(
        "--only", nargs="+", default=(), metavar="STRATEGY/KIND", help="run only these pairs"
    )
    parser.add_argument("--quiet", action="store_true", help="no per-pair timings on stderr")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: print, check or write the digests."""
    args = _parser().parse_args(argv)
    os.environ["ABO_TORCH_THREADS"] = "1"  # abo's default, pinned: threads could reorder sums
    pairs = cells(args.only)
    log = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    digests = fingerprint(pairs, log)
    if args.check:
        return _check(digests, args.baseline, complete=not args.only)
    result = {"overall": overall(digests), "digests": digests, "environment": environment()}
    text = json.dumps(result, indent=2, sort_keys=True) + "\n"
    if args.write:
        if args.only:
            raise SystemExit("--write: a baseline covers every pair; leave out --only")
        args.baseline.write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
