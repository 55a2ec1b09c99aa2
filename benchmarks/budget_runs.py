"""Running and reading the grids of ``benchmarks/fidelity.py`` and ``benchmarks/curves.py``:
one JSON line per run, keyed by ``(method, problem, k, budget, seed)``, so a results file can
be resumed (runs already in it are skipped) and files merged by concatenation."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

Cell = tuple[str, str, int, Any, int]  # method, problem, k, budget, seed


def key(run: dict[str, Any]) -> Cell:
    """What identifies a run across files."""
    return (run["method"], run["problem"], run["k"], run["budget"], run["seed"])


def read(paths: Sequence[str | Path]) -> list[dict[str, Any]]:
    """Every run in the JSON-lines files ``paths``, gzipped when they end in ``.gz`` (later
    duplicates of a key dropped)."""
    runs: dict[Cell, dict[str, Any]] = {}
    for path in paths:
        if Path(path).exists():
            raw = Path(path).read_bytes()
            text = (gzip.decompress(raw) if str(path).endswith(".gz") else raw).decode()
            for line in text.splitlines():
                if line.strip():
                    record = json.loads(line)
                    runs.setdefault(key(record), record)
    return list(runs.values())


def grid(methods: Sequence[str], known: Sequence[str], problems: Sequence[str],
         budgets: Mapping[str, Any], ks: Sequence[int], seeds: int) -> list[Cell]:  # fmt: skip
    """Every run of a grid, seed-major (a run cut short has every method on early seeds);
    ``ValueError`` naming an unknown method or problem."""
    for m in methods:
        if m not in known:
            raise ValueError(f"method: unknown {m!r}; choose one of {', '.join(known)}")
    for p in problems:
        if p not in budgets:
            raise ValueError(f"problem: unknown {p!r}; choose one of {', '.join(budgets)}")
    return [(m, p, k, budgets[p], seed) for seed in range(seeds) for p in problems for k in ks
            for m in methods]  # fmt: skip


def run(todo: Sequence[Cell], out: str | Path, execute: Callable[[Cell], dict[str, Any]],
        processes: int = 1, say: Callable[[str], None] = print) -> int:  # fmt: skip
    """Run the cells not yet in ``out`` with ``execute`` (a module-level function, for the
    process pool), appending a line per run; how many ran."""
    done = {key(r) for r in read([out])}
    left = [c for c in todo if c not in done]
    say(f"{len(left)} runs to do ({len(todo) - len(left)} already in {out})")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    if processes <= 1:
        _record((execute(c) for c in left), out, len(left), say)
    else:  # shut down before returning: a pool left to the interpreter's exit can fail there
        with ProcessPoolExecutor(max_workers=processes) as pool:
            futures = as_completed([pool.submit(execute, c) for c in left])
            _record((f.result() for f in futures), out, len(left), say)
    return len(left)


def _record(results: Iterable[dict[str, Any]], out: str | Path, n: int,
            say: Callable[[str], None]) -> None:  # fmt: skip
    """Append each run's record to ``out`` as it comes, and say so."""
    for i, record in enumerate(results, 1):
        with open(out, "a") as f:
            f.write(json.dumps(record) + "\n")
        said = f"{record['method']} {record['problem']} k={record['k']} seed={record['seed']}"
        say(f"[{i}/{n}] {said}: final regret {record['regret'][-1]}, "
            f"{record['wall_seconds']:.0f} s")  # fmt: skip
