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
