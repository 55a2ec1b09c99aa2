"""A tell that returned survives SIGKILL of the process that made it."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

import abo
from abo import Float, Space, TrialState

ROOT = Path(__file__).resolve().parents[1]

# Tells values forever, printing "id value" only after tell returned (the acknowledgement).
TELLER = """
import sys
import abo

study = abo.load_study("durable", storage=sys.argv[1])
print("ready", flush=True)
while True:
    t = study.ask()
    value = t.id * 0.5 + 0.25
    study.tell(t.id, value)
    print(t.id, value, flush=True)
"""


def kill_mid_loop(tmp_path: Path, url: str, acks: int) -> dict[int, float]:
    """Run the teller, SIGKILL it after ``acks`` acknowledgements, return what it printed."""
    abo.create_study(
        Space({"x": Float(0.0, 1.0)}), name="durable", storage=url, strategy="random", seed=0
    )
    script = tmp_path / "teller.py"
    script.write_text(TELLER)
    proc = subprocess.Popen(
        [sys.executable, str(script), url],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
        lines = [proc.stdout.readline() for _ in range(acks)]
        proc.send_signal(signal.SIGKILL)  # mid-loop: no atexit, no flush, no rollback
        proc.wait(timeout=30)
        lines += proc.stdout.read().splitlines()  # anything printed before the kill landed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    acked = {}
    for line in lines:
        if line.strip():
            tid, value = line.split()
            acked[int(tid)] = float(value)
    return acked


@pytest.mark.slow
def test_acknowledged_tells_survive_sigkill(tmp_path: Path, storage_url: str) -> None:
    acked = kill_mid_loop(tmp_path, storage_url, acks=25)
    assert len(acked) >= 25
    study = abo.load_study("durable", storage=storage_url)  # a fresh connection
    by_id = {t.id: t for t in study.trials}
    for tid, value in acked.items():
        assert by_id[tid].state is TrialState.DONE
        assert by_id[tid].value == value
    # nothing beyond the acknowledged ones but at most the one trial in flight at the kill
    assert len(by_id) - len(acked) <= 1
    assert [t.id for t in study.trials] == list(range(1, len(by_id) + 1))
