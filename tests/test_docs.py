"""The project's documents stand on their own: nothing tracked points outside the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# built from parts so that this file does not match itself; the absolute forms are this
# checkout's own path and its sibling folder, wherever the checkout lies
OUTSIDE = [
    "../" + "shared",
    str(ROOT.parent / "shared"),
    str(ROOT) + "/",
    *(name + ".md" for name in ("BENCHMARKS", "ALGORITHMS", "RELIABILITY", "HPC", "STYLE")),
]
PATTERN = re.compile("|".join(re.escape(s) for s in OUTSIDE))


def _tracked() -> list[Path]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"not a git checkout ({exc})")
    return [ROOT / name for name in out.decode().split("\0") if name]


def test_no_tracked_file_refers_to_documents_outside_the_project() -> None:
    offenders: dict[str, list[str]] = {}
    for path in _tracked():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary files (PNGs, the SQLite fixture) and files deleted in the tree
        lines = enumerate(text.splitlines(), start=1)
        hits = [f"{n}: {line.strip()}" for n, line in lines if PATTERN.search(line)]
        if hits:
            offenders[str(path.relative_to(ROOT))] = hits
    assert not offenders, offenders


def test_the_benchmark_protocol_is_stated_in_the_docs() -> None:
    text = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    section = text.split("\n## Protocol\n", 1)[1].split("\n## ", 1)[0]
    for fact in ("n0 = 2d", "Latin-hypercube", "common random", "T = N/k", "Wilcoxon", "Holm"):
        assert fact.lower() in section.lower(), fact
