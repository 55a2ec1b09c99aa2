"""The fenced code blocks of README.md and docs/**/*.md (the pages of the documentation site,
in subfolders too), with the marker a block may carry.

A marker is an HTML comment on the line just before a block's opening fence (invisible once
the Markdown is rendered). It says how tests/test_docs.py treats a Python block:

* no marker: the block runs as a plain file in a fresh folder, and again in the same folder
  when it left something there or uses a service (a second run of a block that left nothing
  would start from the same state);
* ``<!-- no-run: REASON -->``: it is not run, and REASON (required) says why (it needs a
  SLURM cluster, it is a fragment of a larger program, ...);
* ``<!-- tested-by: tests/FILE.py -->``: that test file runs it (with checks of its own);

A block that uses ``http://127.0.0.1:8765`` (the address of ``abo serve``) runs against a
real ``abo serve`` on a free port of 127.0.0.1 instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
PYTHON = ("python", "py", "python3")
MARKERS = ("no-run", "tested-by")
SERVICE_URL = "http://127.0.0.1:8765"

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
_MARKER = re.compile(r"^\s*<!--\s*(?P<name>[\w-]+)\s*(?::\s*(?P<text>.*?))?\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it starts, its language, its code and its marker (if any)."""

    path: Path
    line: int  # of the opening fence, counting from 1
    lang: str
    code: str
    marker: str | None = None
    text: str = ""  # what follows the marker's colon

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def is_python(self) -> bool:
        return self.lang.lower() in PYTHON

    @property
    def needs_service(self) -> bool:
        return SERVICE_URL in self.code


def blocks(path: Path) -> list[Block]:
    """Every fenced block of one Markdown file, in order (the code dedented by its fence's
    indentation, as a block inside a list item is written)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        code = "".join(line[indent:] + "\n" for line in lines[i + 1 : end])
        before = lines[i - 1] if i > 0 else ""
        marker = _MARKER.match(before)
        out.append(
            Block(
                path=path,
                line=i + 1,
                lang=opening["lang"],
                code=code,
                marker=marker["name"] if marker else None,
                text=(marker["text"] or "").strip() if marker else "",
            )
        )
        i = end + 1
    return out


def python_blocks() -> list[Block]:
    """Every Python block of README.md and docs/**/*.md."""
    return [b for path in DOCUMENTS for b in blocks(path) if b.is_python]


def blocks_run_by(test_file: str) -> list[Block]:
    """The blocks marked ``tested-by`` the given test file (``tests/NAME.py``)."""
    return [b for b in python_blocks() if b.marker == "tested-by" and b.text == test_file]
