"""Running a grid of budgeted runs (``benchmarks/budget_runs.py``): each run's record appended
as it ends, what is in the file already skipped, and a pool of processes that exits cleanly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import os, sys
from benchmarks import budget_runs

def execute(cell):
    method, problem, k, budget, seed = cell
    return {"method": method, "problem": problem, "k": k, "budget": budget, "seed": seed,
            "regret": [float(seed)], "wall_seconds": 0.0, "pid": os.getpid()}

if __name__ == "__main__":
    todo = budget_runs.grid(["m"], ["m"], ["p", "q"], {"p": 10, "q": 20}, [4], 3)
    print("parent", os.getpid())
    print(budget_runs.run(todo, sys.argv[1], execute, processes=int(sys.argv[2])))
"""


def _run(tmp_path: Path, out: Path, processes: int) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "grid.py"
    script.write_text(SCRIPT)
    return subprocess.run([sys.executable, str(script), str(out), str(processes)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": ""})  # fmt: skip


def test_a_pool_of_processes_runs_every_cell_once_and_exits_cleanly(tmp_path: Path) -> None:
    out = tmp_path / "runs.jsonl"
    first = _run(tmp_path, out, processes=2)
    assert first.returncode == 0 and first.stderr == "", first.stderr
    assert "6 runs to do (0 already" in first.stdout and "[6/6]" in first.stdout
    records = [json.loads(line) for line in out.read_text().splitlines()]
    cells = {(r["problem"], r["seed"]) for r in records}
    assert len(records) == 6 and cells == {(p, s) for p in "pq" for s in range(3)}
    assert {r["budget"] for r in records if r["problem"] == "q"} == {20}
    assert _parent(first.stdout) not in {r["pid"] for r in records}  # the pool's processes ran
    again = _run(tmp_path, out, processes=2)  # everything is in the file: nothing runs
    assert again.returncode == 0 and again.stderr == ""
    assert "0 runs to do (6 already" in again.stdout
    assert len(out.read_text().splitlines()) == 6


def test_one_process_runs_the_cells_in_order(tmp_path: Path) -> None:
    out = tmp_path / "runs.jsonl"
    done = _run(tmp_path, out, processes=1)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["seed"], r["problem"]) for r in records] == [(s, p) for s in range(3) for p in "pq"]
    assert {r["pid"] for r in records} == {_parent(done.stdout)}


def _parent(stdout: str) -> int:
    return int(next(line for line in stdout.splitlines() if line.startswith("parent")).split()[1])
