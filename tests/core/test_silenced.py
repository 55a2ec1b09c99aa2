"""Silencing warnings on one thread never changes what another thread sees, and abo leaves
``warnings.filters`` exactly as it found them: the checks in ``filters_alone.py``, run in a
Python process of their own.

They compare the process-wide ``warnings.filters`` before and after, so in the suite's worker
processes, threads that earlier tests left running (a Dask client closing, a refit finishing,
a library imported from another thread) can change the list meanwhile and fail them for
nothing abo did; a fresh interpreter has none.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.mark.slow  # a fresh interpreter importing torch, BoTorch and scikit-learn
def test_warning_filters_in_a_process_of_their_own() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
         str(HERE / "filters_alone.py")],
        cwd=HERE.parents[1], capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout and "error" not in proc.stdout
