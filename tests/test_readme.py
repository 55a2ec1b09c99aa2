"""The README's Python example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python example"
    script = tmp_path / "example.py"
    script.write_text(blocks[0])
    out = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=240
    )
    assert out.returncode == 0, out.stderr
    n, best, *_ = out.stdout.split(maxsplit=2)
    assert int(n) == 1 + 12 + 4  # added, asked (the first gets the enqueued point), batched
    assert float(best) < 0.8
    assert (tmp_path / "tune.db").exists()
