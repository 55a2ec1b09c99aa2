"""The README's first Python example runs as written, and again: the second run continues the
study. (tests/test_docs.py runs every other block of the README and the docs.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from doc_blocks import blocks_run_by

import abo


def test_readme_python_example_runs_twice_without_duplicates(tmp_path: Path) -> None:
    blocks = blocks_run_by("tests/test_readme.py")
    assert len(blocks) == 1 and blocks[0].path.name == "README.md", [b.id for b in blocks]
    script = tmp_path / "example.py"
    script.write_text(blocks[0].code)
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
