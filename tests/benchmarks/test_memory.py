"""The memory benchmark on a small study: a live server's /proc numbers and the timed asks."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# benchmarks/ lives at the repository root and is not part of the installed package.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.__main__ import main  # noqa: E402
from benchmarks.memory import MIB, measure, proc_status, table  # noqa: E402


def test_proc_status_reads_this_process() -> None:
    status = proc_status(os.getpid())
    assert 0 < status["VmRSS"] <= status["VmHWM"]
    with pytest.raises(FileNotFoundError):
        proc_status(2**22 + 7)  # above the kernel's pid_max: never a live process


@pytest.mark.slow  # starts a real server (torch import) and fits: ~30 s on 2 busy cores
def test_small_study_memory_and_asks() -> None:
    m = measure(60, dim=3, asks=6, strategy="thompson", max_exact=1000)
    assert len(m.ask_seconds) == 6 and all(s > 0 for s in m.ask_seconds)
    assert m.first_asks_seconds > 0 and m.add_seconds > 0
    # a Python process with torch and uvicorn loaded is tens of MiB at least
    assert m.baseline_rss > 20 * MIB
    assert m.peak_rss >= max(m.baseline_rss, m.data_rss, m.asks_rss)
    assert m.ratio >= 1.0
    # 60 observations, then 6 tells: the third starts a background refit (every 5 % of the
    # data), whose fit runs in a child process of the server
    assert m.child_peak_rss > 5 * MIB
    assert not Path(f"/proc/{m.pid}").exists()  # the server was stopped
    lines = table(m).splitlines()
    assert len(lines) == 3 and lines[2].startswith("| 60 | 3 | thompson |")


def test_cli_rejects_non_positive_sizes() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["memory", "--observations", "0"])
    assert exc.value.code == 2
