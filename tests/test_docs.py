"""The project's documents stand on their own: nothing tracked points outside the repository,
and every Python block of README.md and docs/*.md runs as written (tests/doc_blocks.py says how
a block is marked when it does not)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from doc_blocks import MARKERS, SERVICE_URL, Block, python_blocks
from service.conftest import Server

import abo
from abo.storage import open_storage
from abo.trial import TrialState

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


RUNNABLE = [b for b in python_blocks() if b.marker in (None, "output-varies")]


def test_every_python_block_is_run_or_says_why_not() -> None:
    found = python_blocks()
    assert RUNNABLE and len(found) > len(RUNNABLE), "the documents lost their blocks"
    for block in found:
        assert block.marker in (None, *MARKERS), (
            f"{block.id}: unknown marker {block.marker!r} (known: {', '.join(MARKERS)})"
        )
        if block.marker in ("no-run", "output-varies"):
            assert block.text, f"{block.id}: <!-- {block.marker}: ... --> needs a reason"
        if block.marker == "tested-by":
            test = ROOT / block.text
            assert test.is_file(), f"{block.id}: {block.text} does not exist"
            assert "blocks_run_by(" in test.read_text(encoding="utf-8"), (
                f"{block.id}: {block.text} does not run the blocks marked for it"
            )


def _run(script: Path, cwd: Path) -> str:
    out = subprocess.run(
        [sys.executable, str(script)], cwd=cwd, capture_output=True, text=True, timeout=240
    )
    assert out.returncode == 0, out.stderr[-4000:]
    return out.stdout


def _assert_nothing_twice(storage: str) -> None:
    """No study of ``storage`` holds the same parameters twice among its done trials (a retry
    of a lost trial repeats them by design): a block run again must not duplicate data."""
    for record in open_storage(storage).list_studies():
        trials = abo.load_study(record.name, storage=storage).trials
        seen = Counter(
            tuple(sorted(t.params.items()))
            for t in trials
            if t.state is TrialState.DONE and t.retry_of is None
        )
        twice = [dict(p) for p, n in seen.items() if n > 1]
        assert not twice, f"{storage}, study {record.name}: recorded twice: {twice}"


@pytest.mark.slow
@pytest.mark.parametrize("block", RUNNABLE, ids=lambda b: b.id)
def test_python_block_runs_twice_as_a_plain_file(block: Block, tmp_path: Path) -> None:
    """Each block runs, then runs again in the same folder (a reader runs an example twice):
    both exit 0, neither duplicates stored data, and an in-memory block prints the same."""
    code, server = block.code, None
    if block.needs_service:
        server = Server(f"sqlite:///{tmp_path / 'service.db'}", tmp_path / "server.log").start()
        code = code.replace(SERVICE_URL, server.url)
    script, cwd = tmp_path / "block.py", tmp_path / "cwd"
    script.write_text(code, encoding="utf-8")
    cwd.mkdir()
    try:
        outputs = [_run(script, cwd), _run(script, cwd)]
    finally:
        if server is not None:
            server.stop()
    storages = [f"sqlite:///{db}" for db in sorted(cwd.rglob("*.db"))]
    storages += [server.storage] if server is not None else []
    for storage in storages:
        _assert_nothing_twice(storage)
    if not storages and block.marker != "output-varies":
        assert outputs[0] == outputs[1]  # seeded, in memory: the same run again
