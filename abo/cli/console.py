"""What abo's commands share: the console (never wrapping in a log, never reading markup), errors
on stderr, storage labels, the STUDY/--storage/--url/--token/--format options, and the printing
of rows as a table, JSON or CSV."""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from abo.core.exceptions import AboError

DEFAULT_STORAGE = "sqlite:///abo.db"
NO_WRAP_WIDTH = 10_000  # "never wrap" for rich when the output is not a terminal


def make_console(stderr: bool = False, min_width: int | None = None) -> Console:
    """A console for abo's commands: the terminal's width on a terminal (at least
    ``min_width``); anywhere else (a pipe, a file, a batch job's log) lines are never wrapped,
    so a printed command, URL or parameter set stays whole on its line. Text is printed as
    written, never as rich markup: a parameter named ``[/x]`` or a failure reason holding
    ``[red]`` is data (it crashed ``abo trials`` with a MarkupError); a line that wants
    markup says ``print(..., markup=True)`` and escapes what it quotes."""
    console = Console(stderr=stderr, markup=False)
    if not console.is_terminal:
        return Console(stderr=stderr, soft_wrap=True, width=NO_WRAP_WIDTH, markup=False)
    if min_width is not None and console.width < min_width:
        return Console(stderr=stderr, width=min_width, markup=False)
    return console


err = make_console(stderr=True)


@contextmanager
def working(text: str) -> Iterator[Callable[[str], None]]:
    """A spinner and ``text`` on standard error while a slow step runs, where that is a
    terminal (nothing in a log); yields a function that says the next step instead."""
    console = make_console(stderr=True)
    if not console.is_terminal:
        yield lambda _: None
        return
    with console.status(f"{text}...") as status:
        yield lambda step: status.update(f"{step}...")


def print_error(message: object, label: str = "error") -> None:
    """``label: message`` on stderr, the label in red; the message is printed as is (an error
    naming ``[study]`` or ``[/x]`` is text, not rich markup)."""
    err.print(Text.assemble((f"{label}:", "red"), " ", str(message)), highlight=False)


def storage_label(storage: str | None) -> str:
    """A storage URL as abo's commands print it: SQLite paths absolute (so the line can be
    used from any folder), passwords hidden, ``None`` as in memory."""
    if storage is None or storage.strip() in ("sqlite://", "sqlite:///:memory:"):
        return "memory (nothing is kept after the process ends)"
    if storage.startswith("sqlite:///"):
        path, sep, query = storage[len("sqlite:///") :].partition("?")
        if path and not path.startswith("file:"):
            return f"sqlite:///{os.path.abspath(path)}{sep}{query}"
        return storage
    if "@" not in storage:
        return storage
    try:
        from sqlalchemy.engine import make_url

        return make_url(storage).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - only for printing
        return storage.split("://", 1)[0] + "://***"


class Format(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


STUDY_HELP = (
    "The study's name, or its study file: a path ending in .toml is read as the file "
    "`abo run` ran, and the \\[study] name and storage in it are used (no --storage then)."
)
StudyArg = Annotated[str, typer.Argument(help=STUDY_HELP, show_default=False)]
StorageOpt = Annotated[
    str | None, typer.Option("--storage", help=f"Storage URL (default {DEFAULT_STORAGE}).")
]
UrlOpt = Annotated[str | None, typer.Option("--url", help="URL of a running abo service.")]
TokenOpt = Annotated[
    str | None, typer.Option("--token", help="Bearer token of the service (or ABO_TOKEN).")
]
FormatOpt = Annotated[Format, typer.Option("--format", help="table, json or csv.")]


def _run(fn: Any) -> Any:
    """Call ``fn``, turning abo and connection errors into exit code 1 with the message."""
    httpx = sys.modules.get("httpx")  # only a command that used the client can raise its errors
    errors: tuple[type[Exception], ...] = (
        (AboError,) if httpx is None else (AboError, httpx.HTTPError)
    )
    try:
        return fn()
    except errors as exc:
        print_error(exc)
        raise typer.Exit(1) from None


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _emit(
    rows: list[dict[str, Any]], fmt: Format, title: str, data: Any = None, caption: str = ""
) -> None:
    """Print ``rows`` as a rich table (with ``caption`` under it) or CSV, or ``data`` (default
    ``rows``) as JSON."""
    if fmt is Format.json:
        typer.echo(json.dumps(rows if data is None else data, indent=2, default=str))
        return
    columns = list(dict.fromkeys(k for row in rows for k in row))
    if fmt is Format.csv:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        typer.echo(buf.getvalue(), nl=False)
        return
    table = Table(*columns, title=title, caption=caption or None)
    for row in rows:
        table.add_row(*[_fmt(row.get(c)) for c in columns])
    make_console(min_width=120).print(table)
