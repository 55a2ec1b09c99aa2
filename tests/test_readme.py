"""The README's Python example runs as written, and again: the second run continues the study."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import abo

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs_twice_without_duplicates(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python example"
    script = tmp_path / "example.py"
    script.write_text(blocks[0])
    per_run = 8 + 4 + 4  # asked (the first gets the enqueued point), batched, optimized
    for run in (1, 2):
        out = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=240
        )
        assert out.returncode == 0, out.stderr
        n, best, *_ = out.stdout.split(maxsplit=2)
        assert int(n) == 1 + run * per_run  # the added result is recorded once
        assert float(best) < 0.8
    trials = abo.load_study("tune", storage=f"sqlite:///{tmp_path / 'tune.db'}").trials
    enqueued = {"lr": 1e-3, "momentum": 0.9, "layers": 2, "optimizer": "adam"}
    added = {"lr": 1e-2, "momentum": 0.5, "layers": 4, "optimizer": "sgd"}
    assert [t.params for t in trials].count(enqueued) == 1
    assert [t.params for t in trials].count(added) == 1
    assert all(t.state is abo.TrialState.DONE for t in trials)


def test_the_other_python_examples_run_as_plain_files_and_again(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)[1:]
    assert blocks, "README has only the first example"
    for i, block in enumerate(blocks):
        script = tmp_path / f"example{i}.py"
        script.write_text(block)
        outputs = []
        for _ in (1, 2):
            out = subprocess.run([sys.executable, str(script)], cwd=tmp_path,
                                 capture_output=True, text=True, timeout=240)  # fmt: skip
            assert out.returncode == 0, out.stderr
            outputs.append(out.stdout)
        assert outputs[0] == outputs[1]  # seeded, in memory: the same run again
