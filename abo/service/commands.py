"""``abo serve``, ``abo studies``, ``abo trials``, ``abo best`` and ``abo plot``.

Each read command works on a storage (``--storage URL``) or on a running service
(``--url http://host:port``, with ``--token`` or ``ABO_TOKEN``), and prints a rich table, JSON
or CSV. Exit codes: 0 done, 1 an abo error (the message names the field), 2 usage.
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from abo.exceptions import AboError
from abo.trial import Trial, TrialState

err = Console(stderr=True)


class Format(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


class Kind(StrEnum):
    convergence = "convergence"
    timeline = "timeline"
    parallel = "parallel"


StorageOpt = Annotated[
    str | None, typer.Option("--storage", help="Storage URL (default sqlite:///abo.db).")
]
UrlOpt = Annotated[str | None, typer.Option("--url", help="URL of a running abo service.")]
TokenOpt = Annotated[
    str | None, typer.Option("--token", help="Bearer token of the service (or ABO_TOKEN).")
]
FormatOpt = Annotated[Format, typer.Option("--format", help="table, json or csv.")]


@dataclass
class _Source:
    """A storage or a service, behind the few reads the commands need."""

    storage: str | None
    url: str | None
    token: str | None

    def __post_init__(self) -> None:
        if self.storage and self.url:
            raise typer.BadParameter("give --storage or --url, not both")
        if not self.url and not self.storage:
            self.storage = "sqlite:///abo.db"

    def _client(self) -> Any:
        from abo.service.client import Client

        return Client(self.url or "", token=self.token or os.environ.get("ABO_TOKEN"), retries=2)

    def studies(self) -> list[dict[str, Any]]:
        if self.url:
            return self._client().studies()
        from abo.service.app import study_summary
        from abo.storage import open_storage

        store = open_storage(self.storage)
        return [study_summary(store, r).model_dump() for r in store.list_studies()]

    def study(self, name: str) -> Any:
        if self.url:
            return self._client().load_study(name)
        import abo

        return abo.load_study(name, storage=self.storage)


def _run(fn: Any) -> Any:
    """Call ``fn``, turning abo and connection errors into exit code 1 with the message."""
    import httpx

    try:
        return fn()
    except (AboError, httpx.HTTPError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from None


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _emit(rows: list[dict[str, Any]], fmt: Format, title: str, data: Any = None) -> None:
    """Print ``rows`` as a rich table or CSV, or ``data`` (default ``rows``) as JSON."""
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
    table = Table(*columns, title=title)
    for row in rows:
        table.add_row(*[_fmt(row.get(c)) for c in columns])
    Console(width=max(120, Console().width)).print(table)


def _trial_row(t: Trial) -> dict[str, Any]:
    arm = t.info.get("arm")
    return {
        "id": t.id,
        "state": t.state.value,
        "value": t.value,
        "duration": t.duration,
        "strategy": t.info.get("strategy", ""),
        "arm": "" if arm is None else arm,
        **{f"params.{k}": v for k, v in t.params.items()},
    }


def serve(
    storage: Annotated[str, typer.Option(help="Storage URL (PostgreSQL for many hosts).")] = (
        "sqlite:///abo.db"
    ),
    host: Annotated[str, typer.Option(help="Address to bind (loopback unless told).")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(help="TCP port.")] = 8765,
    token_file: Annotated[
        Path | None, typer.Option(help="File of bearer tokens, one a line (or set ABO_TOKEN).")
    ] = None,
    max_body_bytes: Annotated[int, typer.Option(help="Larger request bodies get 413.")] = 1 << 20,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
) -> None:
    """Serve the ask/tell API, its OpenAPI schema (/docs) and the dashboard (/)."""
    import uvicorn

    from abo.service.app import create_app
    from abo.service.auth import TokenSet, check_bind, read_tokens

    try:
        tokens = read_tokens(token_file)
        check_bind(host, TokenSet(tokens))
    except AboError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    app = _run(lambda: create_app(storage, token=tokens, max_body_bytes=max_body_bytes))
    auth = f"{len(tokens)} token(s)" if tokens else "no auth (loopback only)"
    err.print(f"abo service on http://{host}:{port} ({auth}); dashboard at /, API at /docs")
    uvicorn.run(app, host=host, port=port, log_level=log_level)


def studies(
    storage: StorageOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
    format: FormatOpt = Format.table,
) -> None:
    """List the studies with their trial counts and best value."""
    data = _run(_Source(storage, url, token).studies)
    rows = [
        {
            "name": s["name"],
            "strategy": s["strategy"],
            "direction": s["direction"],
            "trials": s["n_trials"],
            **{st.value: s["states"].get(st.value, 0) for st in TrialState},
            "best": (s.get("best") or {}).get("value"),
        }
        for s in data
    ]
    _emit(rows, format, "studies", data)


def trials(
    name: Annotated[str, typer.Argument(help="The study.")],
    storage: StorageOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
    state: Annotated[
        list[str] | None, typer.Option(help="Only trials in this state (repeatable).")
    ] = None,
    format: FormatOpt = Format.table,
) -> None:
    """List a study's trials: state, value, duration, strategy arm and parameters."""
    study = _run(lambda: _Source(storage, url, token).study(name))
    wanted = set(state or [])
    bad = wanted - {s.value for s in TrialState}
    if bad:
        raise typer.BadParameter(f"unknown state {sorted(bad)[0]!r}", param_hint="--state")
    listed = [t for t in _run(lambda: study.trials) if not wanted or t.state.value in wanted]
    rows = [_trial_row(t) for t in listed]
    _emit(rows, format, f"trials of {name}", [t.to_dict() for t in listed])


def best(
    name: Annotated[str, typer.Argument(help="The study.")],
    storage: StorageOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
    format: FormatOpt = Format.table,
) -> None:
    """Show the best done trial of a study (exit code 1 when there is none yet)."""
    study = _run(lambda: _Source(storage, url, token).study(name))
    trial = _run(lambda: study.best)
    if trial is None:
        err.print(f"[red]error:[/red] name: study {name!r} has no done trial yet")
        raise typer.Exit(1)
    _emit([_trial_row(trial)], format, f"best trial of {name}", trial.to_dict())


def plot(
    name: Annotated[str, typer.Argument(help="The study.")],
    kind: Annotated[Kind, typer.Option(help="convergence, timeline or parallel.")] = (
        Kind.convergence
    ),
    out: Annotated[Path | None, typer.Option(help="PNG file (default NAME-KIND.png).")] = None,
    storage: StorageOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
) -> None:
    """Write a PNG: best-so-far convergence, per-worker timeline, or parallel coordinates."""
    from abo import plots

    study = _run(lambda: _Source(storage, url, token).study(name))
    listed = _run(lambda: study.trials)
    path = out or Path(f"{name}-{kind.value}.png")
    if path.suffix.lower() != ".png":
        raise typer.BadParameter(f"expected a .png file, got {str(path)!r}", param_hint="--out")
    if kind is Kind.convergence:
        plots.convergence(listed, study.direction, path, title=name)
    elif kind is Kind.timeline:
        plots.timeline(listed, path, title=name)
    else:
        plots.parallel(listed, study.space.to_json(), study.direction, path, title=name)
    typer.echo(str(path))


def register(app: typer.Typer) -> None:
    """Add the service and view commands to the ``abo`` typer app."""
    app.command("serve")(serve)
    app.command("studies")(studies)
    app.command("trials")(trials)
    app.command("best")(best)
    app.command("plot")(plot)
