"""The refit child process: fits like ``fit_gp`` here, survives its own death, reports errors."""

from __future__ import annotations

import os
import signal

import pytest
import torch

from abo.core.exceptions import SurrogateFitError
from abo.model.fitproc import CHILD_NICENESS, FitProcess
from abo.model.surrogate import export_hypers, fit_gp

pytestmark = pytest.mark.slow


def _data(n: int = 25) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(n)
    X = torch.rand(n, 3, generator=gen, dtype=torch.double)
    return X, torch.sin(5 * X).sum(-1, keepdim=True)


def test_a_fit_in_the_child_equals_the_same_fit_here_and_a_dead_child_is_replaced() -> None:
    X, Y = _data()
    proc = FitProcess()
    try:
        hypers, warm = proc.fit(X, Y, "auto", None, full=True, seed=7)
        assert hypers == export_hypers(fit_gp(X, Y, "auto", full=True, seed=7).model)
        assert warm is False  # a cold start has no warm start to win
        first = proc.pid
        assert first is not None and first != os.getpid()
        os.kill(first, signal.SIGKILL)
        with pytest.raises(SurrogateFitError, match="refit process"):
            proc.fit(X, Y, "auto", hypers, full=False, seed=7)
        again, warm = proc.fit(X, Y, "auto", hypers, full=False, seed=7)  # a fresh child
        assert proc.pid not in (None, first) and warm is True and again.keys() == hypers.keys()
    finally:
        proc.close()
    assert proc.pid is None


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="no process priorities here")
def test_the_child_runs_at_a_lower_cpu_priority_than_its_parent() -> None:
    """Refits are background work: on a busy machine asks and evaluations come first."""
    proc = FitProcess()
    try:
        hypers, _ = proc.fit(*_data(), "auto", None, full=False, seed=0)  # started and serving
        assert proc.pid is not None and hypers
        mine = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, proc.pid) == min(19, mine + CHILD_NICENESS)
    finally:
        proc.close()


def test_a_failed_fit_is_reported_with_its_reason_and_the_child_lives_on() -> None:
    X, Y = _data()
    proc = FitProcess()
    try:
        with pytest.raises(SurrogateFitError, match="noise"):
            proc.fit(X, Y, "loud", None, full=False, seed=0)
        pid = proc.pid
        hypers, _ = proc.fit(X, Y, "deterministic", None, full=False, seed=0)
        assert proc.pid == pid and hypers  # the same child served the next fit
    finally:
        proc.close()


def test_a_child_whose_parent_left_mid_fit_exits_quietly() -> None:
    """The parent's end of the reply pipe closes while a fit runs (the parent exited): the child
    drops the reply and exits 0, without a BrokenPipeError traceback on stderr."""
    import pickle
    import subprocess
    import sys

    X = torch.rand(30, 2, dtype=torch.double, generator=torch.Generator().manual_seed(0))
    Y = X.sum(-1, keepdim=True)
    request = {"X": X, "Y": Y, "noise": "auto", "hypers": None, "full": True, "seed": 0,
               "threads": 1}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-c", "from abo.model.fitproc import main; main()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # nobody will read the reply
    pickle.dump(request, proc.stdin)
    proc.stdin.close()
    assert proc.wait(timeout=120) == 0
    err = proc.stderr.read().decode()
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
