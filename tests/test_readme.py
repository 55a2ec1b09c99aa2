"""The README's first Python example runs as written, and again: the second run continues the
study. Getting started (docs/getting-started.md) shows the same example, which must stay the
same code. (tests/test_docs.py runs every other block of the README and the docs.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from doc_blocks import blocks_run_by

import abo


@pytest.mark.slow
def test_readme_python_example_runs_twice_without_duplicates(tmp_path: Path) -> None:
    marked = blocks_run_by("tests/test_readme.py")
    readme = [b for b in marked if b.path.name == "README.md"]
    assert len(readme) == 1, [b.id for b in marked]
    copies = [b.id for b in marked if b.code != readme[0].code]
    assert not copies, f"not the README's example, which is all this test runs: {copies}"
    assert any(b.path.name == "getting-started.md" for b in marked), [b.id for b in marked]
    script = tmp_path / "example.py"
    script.write_text(readme[0].code)
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
