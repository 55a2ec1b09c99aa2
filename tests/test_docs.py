"""The project's documents stand on their own: nothing tracked points outside the repository,
and every Python block of README.md and docs/**/*.md runs as written (tests/doc_blocks.py says
how a block is marked when it does not)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from collections import Counter
from dataclasses import fields
from pathlib import Path

import pytest
from doc_blocks import MARKERS, SERVICE_URL, Block, blocks, python_blocks
from service.conftest import Server

import abo
from abo.cli import config
from abo.core.trial import TrialState
from abo.storage import open_storage

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


RUNNABLE = [b for b in python_blocks() if b.marker is None]


def test_every_python_block_is_run_or_says_why_not() -> None:
    found = python_blocks()
    assert RUNNABLE and len(found) > len(RUNNABLE), "the documents lost their blocks"
    for block in found:
        compile(block.code, block.id, "exec")  # a block that is not run is still Python
        assert block.marker in (None, *MARKERS), (
            f"{block.id}: unknown marker {block.marker!r} (known: {', '.join(MARKERS)})"
        )
        if block.marker == "no-run":
            assert block.text, f"{block.id}: <!-- {block.marker}: ... --> needs a reason"
        if block.marker == "tested-by":
            test = ROOT / block.text
            assert test.is_file(), f"{block.id}: {block.text} does not exist"
            assert "blocks_run_by(" in test.read_text(encoding="utf-8"), (
                f"{block.id}: {block.text} does not run the blocks marked for it"
            )


def _run(script: Path, cwd: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(script)], cwd=cwd, capture_output=True, text=True, timeout=240
    )
    assert out.returncode == 0, out.stderr[-4000:]


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
    both exit 0 and neither duplicates stored data.

    A block that uses no service and leaves its folder empty runs once: its second run would
    start from the same state. (That a seeded study proposes the same in another process is
    tests/benchmarks/test_fingerprint.py's: a subprocess against committed proposals.)"""
    code, server = block.code, None
    if block.needs_service:
        server = Server(f"sqlite:///{tmp_path / 'service.db'}", tmp_path / "server.log").start()
        code = code.replace(SERVICE_URL, server.url)
    script, cwd = tmp_path / "block.py", tmp_path / "cwd"
    script.write_text(code, encoding="utf-8")
    cwd.mkdir()
    try:
        _run(script, cwd)
        if server is not None or any(cwd.iterdir()):
            _run(script, cwd)
    finally:
        if server is not None:
            server.stop()
    storages = [f"sqlite:///{db}" for db in sorted(cwd.rglob("*.db"))]
    storages += [server.storage] if server is not None else []
    for storage in storages:
        _assert_nothing_twice(storage)


# -- docs/study-file.md: the reference of abo run's TOML file ---------------------------------
STUDY_FILE = ROOT / "docs" / "study-file.md"
# what abo.cli.config.load_spec reads (any other key is an error there)
OBJECTIVE_KEYS = set(config.OBJECTIVE_KEYS)
EXECUTOR_KEYS = {key for keys in config.EXECUTOR_KEYS.values() for key in keys}
MINIMAL = {
    "study": {"n_trials": 4},
    "space": {"x": {"type": "float", "low": 0, "high": 1}},
    "objective": {"command": "{python} {here}/f.py {x}"},
}


def _section(title: str) -> str:
    text = STUDY_FILE.read_text(encoding="utf-8")
    return text.split(f"\n{title}\n", 1)[1].split("\n## ", 1)[0]


def _keys_in_tables(section: str) -> set[str]:
    """The backticked names in the first column of a section's tables."""
    cells = re.findall(r"^\| ([^|]+) \|", section, flags=re.M)
    return {key for cell in cells for key in re.findall(r"`(\w+)`", cell)}


def test_the_study_file_reference_lists_every_key_abo_reads() -> None:
    from abo.cli.config import EXECUTOR_KINDS, RUN_KEYS
    from abo.core.space import _KEYS
    from abo.core.stopping import RULES
    from abo.spec.study_spec import CREATE_OPTIONS

    study = _section("## `[study]`").split("\n### ", 1)[0]
    assert _keys_in_tables(study) == {*RUN_KEYS, *CREATE_OPTIONS}
    assert _keys_in_tables(_section("## `[space]`")) == {k for ks in _KEYS.values() for k in ks}
    assert _keys_in_tables(_section("## `[objective]`")) == OBJECTIVE_KEYS
    executor = _section("## `[executor]`")
    assert _keys_in_tables(executor) == EXECUTOR_KEYS
    assert all(f'`"{kind}"`' in executor for kind in EXECUTOR_KINDS)
    stopping = _section("### `stopping`")
    settings = {f.name for rule in RULES.values() for f in fields(rule) if f.name != "rule"}
    assert set(re.findall(r"^\| `\w+` \| `(\w+)` \|", stopping, flags=re.M)) == settings
    assert _keys_in_tables(_section("### `fidelity`")) == {"parameter", "target", "cost"}
    for placeholder in ("{here}", "{python}"):
        assert f"`{placeholder}`" in _section("## `[objective]`")


def _merged(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = _merged(out[key], value) if both else value
    return out


def _toml(data: dict) -> str:
    """``data`` as TOML (tables of scalars, arrays and inline tables: what the blocks hold)."""

    def value(v: object) -> str:
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + " }"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return json.dumps(v)

    lines = []
    for table, body in data.items():
        lines.append(f"[{table}]")
        lines += [f"{k} = {value(v)}" for k, v in body.items()]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "block",
    [b for b in blocks(STUDY_FILE) if b.lang == "toml"],
    ids=lambda b: b.id,
)
def test_each_toml_block_of_the_reference_is_a_valid_study_file(
    block: Block, tmp_path: Path
) -> None:
    """Each TOML block (a complete file, or a table completed by a minimal file) loads as
    ``abo run`` loads it, and its study options make a study."""
    from abo.cli.config import RUN_KEYS, build_objective, load_spec

    data = _merged(MINIMAL, tomllib.loads(block.code))
    path = tmp_path / "study.toml"
    path.write_text(_toml(data), encoding="utf-8")
    spec = load_spec(path)
    options = {k: v for k, v in spec.study.items() if k not in RUN_KEYS}
    abo.create_study(spec.space, **options)  # every option checked, in memory
    objective = build_objective(spec)
    assert "{here}" not in " ".join(objective.argv) and "{python}" not in " ".join(objective.argv)
    assert objective.argv[0] == sys.executable
    assert any(arg.startswith(str(tmp_path)) for arg in objective.argv)
