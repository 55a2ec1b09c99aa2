"""``abo serve``, ``abo studies``, ``abo trials``, ``abo best`` and ``abo delete`` (``abo plot``
is ``abo.cli.plot_command``, on the options and helpers re-exported here).

Each read command works on a storage (``--storage URL``) or on a running service
(``--url http://host:port``, with ``--token`` or ``ABO_TOKEN``), and prints a rich table, JSON
or CSV. Where a command takes a STUDY, a path ending in ``.toml`` is read as the study's file
(the one ``abo run`` ran): the ``[study]`` name and storage in it are used, so
``abo trials examples/quadratic/study.toml`` finds the study wherever its file put it.
Exit codes: 0 done, 1 an abo error (the message names the field), 2 usage.

The commands that only read import neither torch nor FastAPI: they read the storage directly
(or the service over HTTP), so they start in a fraction of a second.

The pieces live by concern: the console, options and printing in ``abo.cli.console``, where
a study is read in ``abo.cli.sources``, the read commands in ``abo.cli.read_commands``
and ``abo serve`` in ``abo.cli.serve_command``; this module registers them and keeps every
name the other commands import from it.
"""

from __future__ import annotations

import typer

from abo.cli.console import (
    DEFAULT_STORAGE,
    NO_WRAP_WIDTH,
    STUDY_HELP,
    Format,
    FormatOpt,
    StorageOpt,
    StudyArg,
    TokenOpt,
    UrlOpt,
    _emit,
    _fmt,
    _run,
    err,
    make_console,
    print_error,
    storage_label,
    working,
)
from abo.cli.read_commands import (
    _front,
    _trial_row,
    _with_source,
    best,
    delete,
    studies,
    trials,
)
from abo.cli.serve_command import serve
from abo.cli.sources import _best, _Source, _StoredStudy, _summary, _target, _trial_json


def register(app: typer.Typer) -> None:
    """Add the service and view commands to the ``abo`` typer app (``abo plot``:
    ``abo.cli.plot_command``)."""
    app.command("serve")(serve)
    app.command("studies")(studies)
    app.command("trials")(trials)
    app.command("best")(best)
    app.command("delete")(delete)


__all__ = [
    "DEFAULT_STORAGE",
    "NO_WRAP_WIDTH",
    "STUDY_HELP",
    "Format",
    "FormatOpt",
    "StorageOpt",
    "StudyArg",
    "TokenOpt",
    "UrlOpt",
    "_Source",
    "_StoredStudy",
    "_best",
    "_emit",
    "_fmt",
    "_front",
    "_run",
    "_summary",
    "_target",
    "_trial_json",
    "_trial_row",
    "_with_source",
    "best",
    "delete",
    "err",
    "make_console",
    "print_error",
    "register",
    "serve",
    "storage_label",
    "studies",
    "trials",
    "working",
]
