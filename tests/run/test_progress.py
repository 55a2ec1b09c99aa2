"""``study.optimize``'s progress panel: on a terminal by default, silent in a pipe, and the
``verbosity`` knob (a real pseudo-terminal, not a mocked ``isatty``)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

import abo
from abo.executors import ThreadExecutor

SCRIPT = """
import sys, abo
from abo.executors import ThreadExecutor
study = abo.create_study({"x": abo.Float(0, 1)}, strategy="random", seed=0)
options = {} if len(sys.argv) < 2 else {"verbosity": int(sys.argv[1])}
with ThreadExecutor(2) as ex:
    study.optimize(lambda p: p["x"] ** 2, n_trials=6, executor=ex, **options)
print("finished", len(study))
"""


def _run(tmp_path: Path, args: list[str], terminal: bool) -> tuple[str, str]:
    """The script's standard output and error, its stderr a pseudo-terminal or a pipe."""
    script = tmp_path / "go.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "COLUMNS": "120"}
    if not terminal:
        done = subprocess.run([sys.executable, str(script), *args], capture_output=True,
                              text=True, timeout=120, env=env)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout, done.stderr
    main, secondary = pty.openpty()
    proc = subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.PIPE,
                            stderr=secondary, text=True, env=env)  # fmt: skip
    os.close(secondary)
    chunks = []
    while True:
        try:
            data = os.read(main, 4096)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    out, _ = proc.communicate(timeout=120)
    os.close(main)
    assert proc.returncode == 0
    return out, b"".join(chunks).decode(errors="replace")


@pytest.mark.slow
def test_on_a_terminal_optimize_shows_the_live_panel(tmp_path: Path) -> None:
    out, err = _run(tmp_path, [], terminal=True)
    assert "finished 6" in out
    assert "completed 6/6" in err and "best so far" in err


@pytest.mark.slow
def test_in_a_pipe_it_is_silent_unless_asked(tmp_path: Path) -> None:
    out, err = _run(tmp_path, [], terminal=False)
    assert "finished 6" in out and "completed" not in err
    _, err = _run(tmp_path, ["2"], terminal=False)  # the panel and a line per trial
    assert "completed 6/6" in err and err.count(" done value ") == 6
    _, err = _run(tmp_path, ["0"], terminal=True)  # silent on a terminal too
    assert "completed" not in err


def test_a_bad_verbosity_names_the_field() -> None:
    study = abo.create_study({"x": abo.Float(0, 1)}, strategy="random", seed=0)
    with ThreadExecutor(1) as ex, pytest.raises(abo.AboError) as err:
        study.optimize(lambda p: p["x"], n_trials=1, executor=ex, verbosity="loud")
    assert err.value.field == "verbosity" and len(study) == 0


def test_the_panel_fits_80_columns_line_by_line() -> None:
    """A long best value used to widen a grid column shared with the counts: at 80 columns
    the panel wrapped mid-line."""
    import io

    from rich.console import Console

    from abo.run.progress import Progress

    progress = Progress(total=1000, direction="minimize", workers=32)
    progress.done, progress.failed, progress.stopped, progress.lost = 900, 50, 50, 3
    progress.running, progress.busy = 32, 1e6
    progress.best, progress.best_id = -1234.56789012, 987
    progress.sources = {"design": 8, "model": 960, "fallback": 30, "enqueued": 2}
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(progress)
    lines = out.getvalue().splitlines()
    assert lines == [
        "completed 1000/1000  running 32  stopped 50  failed 50  lost 3  "
        + lines[0].rsplit("  ", 1)[-1],
        "best so far -1234.57 (trial 987)  utilization ≥" + lines[1].rsplit("≥", 1)[-1],
        "proposed by: design 8, model 960, fallback 30, enqueued 2",
    ]
    assert all(len(line) <= 80 for line in lines) and lines[0].endswith(" s")
