"""Silencing warnings on one thread never changes what another thread sees, and abo leaves
``warnings.filters`` exactly as it found them: the checks in ``filters_alone.py``, run in a
Python process of their own.

They compare the process-wide ``warnings.filters`` before and after, so in the suite's worker
processes, threads that earlier tests left running (a Dask client closing, a refit finishing,
a library imported from another thread) can change the list meanwhile and fail them for
nothing abo did; a fresh interpreter has none. Checks that compare no process-wide list run in
the suite's own processes (the BoTorch note when every point is infeasible: test_quiet.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


# The child loads no pytest plugin but the timeout (hypothesis, schemathesis and the rest add
# seconds of imports and nothing these checks use), and runs OpenMP and OpenBLAS on one thread:
# scikit-learn's cross-validation, on two threads, spins against abo's fit process on a busy
# 2-core machine (about half the child's CPU time); no check counts threads.
CHILD_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "OMP_NUM_THREADS": "1"}


@pytest.mark.slow  # a fresh interpreter importing torch, BoTorch and scikit-learn
def test_warning_filters_in_a_process_of_their_own() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "pytest_timeout",
         "-o", "addopts=", str(HERE / "filters_alone.py")],
        cwd=HERE.parents[1], capture_output=True, text=True, timeout=280,
        env={**os.environ, **CHILD_ENV},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout and "error" not in proc.stdout
