"""Running ``abo`` commands in the test's own process (typer's ``CliRunner``).

For the quick commands after a run (listing, plotting, refusals): a subprocess each would
spend most of its time loading torch again. The runs themselves go through the entry point.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from typer.testing import CliRunner

from abo.cli.main import app


def abo_here(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``abo ARGS`` run by the CLI's own code in this process from ``cwd``, without COLUMNS
    (as in a batch job's log), with its exit code, stdout and stderr as a subprocess's."""
    before = Path.cwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(app, list(args), env={"COLUMNS": None})
    finally:
        os.chdir(before)
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)
