"""``abo --help`` and every ``abo COMMAND --help`` on an 80-column terminal: whole sentences
(no line cut where the docstring's source happened to break) and flags shown as flags."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from abo.cli.main import app, reflow

COMMANDS = [i.name or i.callback.__name__ for i in app.registered_commands if i.callback]
WIDTH = 80


def _help(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": str(WIDTH)})
    assert result.exit_code == 0, result.output
    return result.stdout


def _cut_lines(lines: list[str], width: int) -> list[str]:
    """Lines of wrapped prose that end although the next line's first word would have fit:
    a break the source put there, not the terminal."""
    cut = []
    for line, after in zip(lines, lines[1:], strict=False):
        if line.strip() and after.strip():
            word = after.split()[0]
            if len(line.rstrip()) + 1 + len(word) <= width:
                cut.append(line)
    return cut


def _prose(text: str) -> list[str]:
    """The description above the panels (without its leading space)."""
    head = text.split("╭", 1)[0].splitlines()
    return [line[1:] for line in head if not line.strip().startswith("Usage:")]


def _command_rows(text: str) -> list[list[str]]:
    """Each command's description in the Commands panel, as its wrapped lines."""
    panel = text.split("Commands ", 1)[1].split("╰", 1)[0]
    out: list[list[str]] = []
    for line in panel.splitlines()[1:]:
        row = line.strip().strip("│")
        if row[:13].strip():  # a command's name: its description starts here
            out.append([])
        out[-1].append(row[13:])
    return out


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_at_80_columns_keeps_sentences_whole_and_shows_flags_as_flags(command: str) -> None:
    text = _help(*([command] if command else []))
    assert "<bool>" not in text, text
    assert re.search(r"--help\s+Show this message", text), text
    width = WIDTH - 2  # the text's own margin
    assert not _cut_lines(_prose(text), width), text
    if not command:
        for lines in _command_rows(text):
            assert not _cut_lines(lines, WIDTH - 2 - 13 - 2), text


def test_reflow_joins_lines_within_paragraphs_only() -> None:
    doc = """First line
    goes on.

    Second
    paragraph.
    """
    assert reflow(doc) == "First line goes on.\n\nSecond paragraph."
