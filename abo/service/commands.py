"""``abo serve``, ``abo studies``, ``abo trials``, ``abo best`` and ``abo delete`` (``abo plot``
is ``abo.service.plot_command``, on the options and helpers defined here).

Each read command works on a storage (``--storage URL``) or on a running service
(``--url http://host:port``, with ``--token`` or ``ABO_TOKEN``), and prints a rich table, JSON
or CSV. Where a command takes a STUDY, a path ending in ``.toml`` is read as the study's file
(the one ``abo run`` ran): the ``[study]`` name and storage in it are used, so
``abo trials examples/quadratic/study.toml`` finds the study wherever its file put it.
Exit codes: 0 done, 1 an abo error (the message names the field), 2 usage.

The commands that only read import neither torch nor FastAPI: they read the storage directly
(or the service over HTTP), so they start in a fraction of a second.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from abo.exceptions import AboError, AboWarning, StorageError, StudyNotFoundError

if TYPE_CHECKING:
    from abo.space import Space
    from abo.storage import Storage, StudyRecord
    from abo.trial import Trial

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


class _StoredStudy:
    """A study read straight from its storage: what the read commands show, without building
    the study's strategy (so neither torch nor BoTorch is imported)."""

    def __init__(self, store: Storage, record: StudyRecord) -> None:
        self.store = store
        self.record = record

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def direction(self) -> str:
        return self.record.direction

    @property
    def space(self) -> Space:
        return self.record.space

    @property
    def trials(self) -> list[Trial]:
        return self.store.trials(self.record)

    @property
    def best(self) -> Trial | None:
        objectives = self.record.spec.objectives
        if len(objectives) != 1:
            names = ", ".join(o.name for o in objectives)
            raise AboError(
                f"best: this study has {len(objectives)} objectives ({names}); no single trial "
                "is best"
            )
        return _best(self.trials, self.record.spec)

    @property
    def spec(self) -> Any:
        return self.record.spec

    @property
    def best_trials(self) -> list[Trial]:
        from abo.summary import pareto_trials, results  # BoTorch's Pareto utilities

        spec = self.record.spec
        return pareto_trials(results(self.trials, spec), spec.objectives, spec.constraints)

    def reference_point(self) -> dict[str, float]:
        """The default reference point of the hypervolume in each objective's units, as
        ``abo.Study.reference_point`` gives it (``AboError`` before a result)."""
        from abo.summary import study_reference
        from abo.trial import TrialState

        spec = self.record.spec
        ref = study_reference(spec, self.store.trials(self.record, [TrialState.DONE]))
        if ref is None:
            raise AboError("reference_point: no trial is done yet", field="reference_point")
        return {o.name: o.sign * float(r) for o, r in zip(spec.objectives, ref, strict=True)}

    def hypervolume(self, reference_point: dict[str, float]) -> float:
        """The volume the feasible done trials dominate from ``reference_point``, as
        ``abo.Study.hypervolume`` measures it."""
        import torch

        from abo.pareto import hypervolume
        from abo.summary import in_completion_order, utilities
        from abo.trial import TrialState

        spec = self.record.spec
        objectives = spec.objectives
        ref = torch.tensor([o.sign * reference_point[o.name] for o in objectives],
                           dtype=torch.double)  # fmt: skip
        done = self.store.trials(self.record, [TrialState.DONE])
        told = in_completion_order(done, objectives, spec.constraints)
        return hypervolume(utilities(told, objectives), ref)

    def reports(self, trial_id: int | None = None) -> dict[int, list[Any]]:
        """Intermediate values by trial id (only ``trial_id``'s when given)."""
        return self.store.reports(self.record, None if trial_id is None else [trial_id])

    def __len__(self) -> int:
        return self.store.count(self.record)

    def delete(self) -> None:
        """Delete exactly this study (not one created again under its name meanwhile)."""
        self.store.delete_study(self.name, expected=self.record)


def _best(trials: list[Trial], spec: Any) -> Trial | None:
    from abo.summary import best_trial

    return best_trial(trials, spec)


def _trial_json(trial: Trial) -> dict[str, Any]:
    from abo.summary import trial_json

    return trial_json(trial)


def _summary(store: Storage, record: StudyRecord) -> dict[str, Any]:
    """A study's definition and trial counts, in the form the service's ``/studies`` lists."""
    from abo.summary import study_summary

    return study_summary(store, record)


@dataclass
class _Source:
    """A storage or a service, behind the few reads the commands need.

    ``origin`` says where the storage came from, for advice in errors: ``"default"``
    (nothing given: ``./abo.db``), ``"--storage"``, or the study file it was read from.
    """

    storage: str | None
    url: str | None
    token: str | None
    origin: str = "--storage"

    def __post_init__(self) -> None:
        if self.storage and self.url:
            raise typer.BadParameter("give --storage or --url, not both")
        if not self.url and not self.storage:
            self.storage, self.origin = DEFAULT_STORAGE, "default"

    @property
    def label(self) -> str:
        return self.url or storage_label(self.storage)

    def _client(self) -> Any:
        from abo.service.client import Client

        return Client(self.url or "", token=self.token or os.environ.get("ABO_TOKEN"), retries=2)

    def _advice(self) -> str:
        if self.origin == "default":
            return (
                f"looked in ./abo.db ({self.label}), the default storage: give --storage URL, "
                "or the study's TOML file instead of its name"
            )
        if self.origin == "--storage":
            return f"looked in {self.label}"
        return f"looked in {self.label}, the storage {self.origin} names"

    def _store(self) -> Storage:
        """The storage, refusing (and not creating) a SQLite file that does not exist."""
        from abo.storage import open_storage

        label = storage_label(self.storage)
        if label.startswith("sqlite:///") and not label.startswith("sqlite:///file:"):
            path = Path(label[len("sqlite:///") :].partition("?")[0])
            if not path.exists():
                if self.origin == "default":
                    raise StorageError(
                        f"storage: there is no abo.db in {path.parent} (the default storage); "
                        "give --storage URL, or the study's TOML file instead of its name"
                    )
                where = "" if self.origin == "--storage" else f" (the storage {self.origin} names)"
                raise StorageError(f"storage: {path} does not exist{where}")
        return open_storage(self.storage)

    def studies(self) -> list[dict[str, Any]]:
        if self.url:
            return self._client().studies()
        store = self._store()
        return [_summary(store, r) for r in store.list_studies()]

    def study(self, name: str) -> Any:
        """A ``_StoredStudy`` or a ``RemoteStudy``; a missing study's error says where abo
        looked and what to give instead."""
        if self.url:
            return self._client().load_study(name)
        store = self._store()
        try:
            return _StoredStudy(store, store.load_study(name))
        except StudyNotFoundError as exc:
            raise StudyNotFoundError(f"{exc}; {self._advice()}") from None

    def delete(self, study: Any) -> None:
        """Delete ``study`` (from ``self.study``) with its trials."""
        if self.url:
            self._client().delete_study(study.name)
        else:
            study.delete()


def _target(
    study: str, storage: str | None, url: str | None, token: str | None
) -> tuple[_Source, str]:
    """Where the STUDY argument points: a name with the options, or a study file."""
    if not study.lower().endswith(".toml"):
        return _Source(storage, url, token), study
    if storage or url:
        raise typer.BadParameter(
            "a study file names its own storage: give the file, or a name with --storage/--url",
            param_hint="STUDY",
        )
    from abo.config import locate_study

    name, where = _run(lambda: locate_study(study))
    return _Source(where, None, token, origin=study), name


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


def _trial_row(t: Trial, multi: bool = False, spec: Any = None) -> dict[str, Any]:
    """A trial as a table row; of a study of several objectives (``multi``), its values by
    objective and no ``value`` column (such a trial has no single value); of a study with
    outcome constraints (``spec``), whether a done trial was feasible."""
    from abo.outcomes import feasible
    from abo.trial import TrialState

    proposal = t.proposal
    values = {f"values.{k}": v for k, v in t.values.items()} if multi or len(t.values) > 1 else {}
    single = {} if multi else {"value": t.value}
    constrained = {}
    if spec is not None and spec.constraints:
        done = t.state is TrialState.DONE
        constrained = {
            "feasible": ("yes" if feasible(t.values, spec.outcomes) else "no") if done else ""
        }
    return {
        "id": t.id,
        "state": t.state.value,
        **single,
        **values,
        **constrained,
        "duration": t.duration,
        "strategy": proposal.strategy if proposal else "",
        "arm": proposal.arm or "" if proposal else "",
        **{f"params.{k}": v for k, v in t.params.items()},
    }


def serve(
    storage: Annotated[str, typer.Option(help="Storage URL (PostgreSQL for many hosts).")] = (
        DEFAULT_STORAGE
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
    body_timeout: Annotated[
        float | None,
        typer.Option(help="Seconds a request body may take to arrive (408 after; default 30)."),
    ] = None,
    max_waiting_asks: Annotated[
        int | None,
        typer.Option(help="Asks that may wait for proposals at once (503 busy after; 256)."),
    ] = None,
    forwarded_allow_ips: Annotated[
        str | None,
        typer.Option(
            help="Addresses of the reverse proxy whose X-Forwarded-For/-Proto to trust "
            "(comma-separated, or '*'). Default: none, so clients are known by the address "
            "their packets come from.",
        ),
    ] = None,
) -> None:
    """Serve the ask/tell API, its OpenAPI schema (/docs) and the dashboard (/).

    The token file is followed while serving: a token removed from it stops working at the
    next request (and its browser sessions end); SIGHUP reads the file at once."""
    from abo.service.auth import TokenSet, check_bind, read_tokens

    try:
        tokens = read_tokens(token_file)
        bind_host = check_bind(host, TokenSet(tokens))  # the address: no IPv6 brackets
    except AboError as exc:
        print_error(exc)
        raise typer.Exit(2) from None

    import uvicorn

    from abo.service.app import create_app

    options: dict[str, Any] = {"max_body_bytes": max_body_bytes}
    if body_timeout is not None:
        options["body_timeout"] = body_timeout
    if max_waiting_asks is not None:
        options["max_waiting_asks"] = max_waiting_asks
    if token_file is not None:  # followed while serving; ABO_TOKEN stays fixed
        options["token_file"] = token_file
    fixed = read_tokens(None) if token_file is not None else tokens
    app = _run(lambda: create_app(storage, token=fixed, **options))
    auth = f"{len(tokens)} token(s)" if tokens else "no auth (loopback only)"
    shown = f"[{bind_host}]" if ":" in bind_host else bind_host
    err.print(
        f"abo service on http://{shown}:{port} ({auth}) for {storage_label(storage)}; "
        "dashboard at /, API at /docs",
        highlight=False,
    )
    uvicorn.run(
        app,
        host=bind_host,
        port=port,
        log_level=log_level,
        proxy_headers=bool(forwarded_allow_ips),  # else uvicorn trusts 127.0.0.1's headers
        forwarded_allow_ips=forwarded_allow_ips or None,
    )


def studies(
    study_file: Annotated[
        str | None,
        typer.Argument(
            help="A study file (.toml): list the studies in the storage it names.",
            show_default=False,
        ),
    ] = None,
    storage: StorageOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
    format: FormatOpt = Format.table,
) -> None:
    """List the studies with their trial counts and best value."""
    if study_file is not None:
        if not study_file.lower().endswith(".toml"):
            raise typer.BadParameter(
                f"expected a study file ending in .toml, got {study_file!r}",
                param_hint="STUDY_FILE",
            )
        source, _ = _target(study_file, storage, url, token)
    else:
        source = _Source(storage, url, token)
    data = _run(source.studies)
    from abo.trial import TrialState

    rows = [
        {
            "name": s["name"],
            "strategy": s["strategy"],
            "direction": s["direction"],
            "trials": s["n_trials"],
            **{st.value: s["states"].get(st.value, 0) for st in TrialState},
            "best": (
                f"front of {s['front_size']}"
                if s.get("front_size") is not None
                else (s.get("best") or {}).get("value")
            ),
        }
        for s in data
    ]
    _emit(rows, format, f"studies in {source.label}", data)


def trials(
    study: StudyArg,
    storage: StorageOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
    state: Annotated[
        list[str] | None, typer.Option(help="Only trials in this state (repeatable).")
    ] = None,
    format: FormatOpt = Format.table,
) -> None:
    """List a study's trials: state, value, duration, why a trial failed, where its parameters
    came from (design, model, fallback, ...), strategy arm and parameters."""
    from abo.trial import TrialState

    wanted = set(state or [])
    bad = wanted - {s.value for s in TrialState}
    if bad:
        raise typer.BadParameter(f"unknown state {sorted(bad)[0]!r}", param_hint="--state")
    source, name = _target(study, storage, url, token)
    found = _run(lambda: source.study(name))
    listed = [t for t in _run(lambda: found.trials) if not wanted or t.state.value in wanted]
    multi = len(found.spec.objectives) > 1
    reports = _run(lambda: found.reports())
    rows = [_with_source(t, _trial_row(t, multi, found.spec)) for t in listed]
    data = [t.to_dict() for t in listed]
    if reports:  # trials that report: the last step each reached, and every report in JSON
        for k, (t, item) in enumerate(zip(listed, data, strict=True)):
            mine = reports.get(t.id, [])
            columns = list(rows[k].items())
            at = [c for c, _ in columns].index("duration")
            step = mine[-1].to_json()["step"] if mine else ""
            rows[k] = dict([*columns[:at], ("step", step), *columns[at:]])
            item["reports"] = [r.to_json() for r in mine]
    _emit(rows, format, f"trials of {name}", data)


def _with_source(t: Trial, row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with the trial's ``reason`` (why it failed or was lost) after its duration and
    its ``source`` (``abo.summary.proposal_source``) before its strategy."""
    from abo.summary import proposal_source

    out: dict[str, Any] = {}
    for key, value in row.items():
        if key == "strategy":
            out["source"] = proposal_source(t)
        out[key] = value
        if key == "duration":
            out["reason"] = t.reason or ""
    return out


def best(
    study: StudyArg,
    storage: StorageOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
    format: FormatOpt = Format.table,
) -> None:
    """Show the best done trial of a study; of a study of several objectives, its Pareto front
    (the done trials no other beats in every objective). Exit code 1 when none is done yet."""
    source, name = _target(study, storage, url, token)
    found = _run(lambda: source.study(name))
    if len(found.spec.objectives) > 1:
        front = _run(lambda: found.best_trials)
        if not front:
            print_error(f"name: study {name!r} has no done trial yet")
            raise typer.Exit(1)
        _front(found, name, front, format)
        return
    from abo.trial import TrialState

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AboWarning)  # said below, as the command's error
        trial = _run(lambda: found.best)
    if trial is None:
        done = sum(1 for t in _run(lambda: found.trials) if t.state is TrialState.DONE)
        if done and found.spec.constraints:
            rules = "; ".join(str(c) for c in found.spec.constraints)
            print_error(
                f"name: none of the {done} done trials of {name!r} is feasible yet ({rules})"
            )
        else:
            print_error(f"name: study {name!r} has no done trial yet")
        raise typer.Exit(1)
    _emit([_trial_row(trial, spec=found.spec)], format, f"best trial of {name}", trial.to_dict())


def _front(found: Any, name: str, front: list[Trial], format: Format) -> None:
    """Print the Pareto front with its hypervolume and the reference point it is measured
    from: a caption under the table, ``hypervolume`` and ``reference_point`` beside the
    ``front`` in JSON, and two more columns (the same on every row) in CSV."""
    given = found.spec.reference_point is not None
    ref = _run(found.reference_point)
    try:
        volume: float | None = found.hypervolume(ref)
    except AboError as exc:  # one too large for a float: the front is still worth showing
        print_error(exc, label="warning")
        volume = None
    rows = [_trial_row(t, multi=True, spec=found.spec) for t in front]
    if format is Format.json:
        data = {"front": [t.to_dict() for t in front], "hypervolume": volume,
                "reference_point": ref, "reference_point_given": given}  # fmt: skip
        _emit(rows, format, "", data)
        return
    if format is Format.csv:
        extra = {"hypervolume": volume, **{f"reference_point.{k}": v for k, v in ref.items()}}
        _emit([{**row, **extra} for row in rows], format, "")
        return
    point = ", ".join(f"{k}={_fmt(v)}" for k, v in ref.items())
    whose = "the study's" if given else "the default"
    shown = "too large for a float" if volume is None else _fmt(volume)
    caption = f"hypervolume {shown} from the reference point {point} ({whose})"
    _emit(rows, format, f"Pareto front of {name} ({len(front)} trials)", caption=caption)


def delete(
    study: StudyArg,
    storage: StorageOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Delete without asking (needed without a terminal).")
    ] = False,
) -> None:
    """Delete a study with all its trials, after asking (exit code 1 when nothing was deleted).

    The folders its command trials ran in (WORKDIR/STUDY/ of the objective's command) are
    removed with it, so a new study of the same name starts with none of the old one's.
    """
    source, name = _target(study, storage, url, token)
    found = _run(lambda: source.study(name))
    n = _run(lambda: len(found))
    file = study if study.lower().endswith(".toml") else None
    from abo.service.run_folders import remove_run_folders, run_folders

    folders = run_folders(name, _run(lambda: found.trials), file)
    what = f"study {name!r} with its {n} trial{'' if n == 1 else 's'}"
    if folders:
        what += f" and its run folder{'s' if len(folders) > 1 else ''} " + ", ".join(
            str(f) for f in folders
        )
    if not yes:
        if not sys.stdin.isatty():
            print_error(
                f"--yes: not given, and there is no terminal to ask on, so {what} was not "
                "deleted (pass --yes to delete it)"
            )
            raise typer.Exit(1)
        if not typer.confirm(f"Delete {what}?", default=False):
            err.print("nothing deleted", highlight=False)
            raise typer.Exit(1)
    _run(lambda: source.delete(found))
    for problem in remove_run_folders(folders):
        print_error(problem, label="warning")
    typer.echo(f"deleted {what} from {source.label}")


def register(app: typer.Typer) -> None:
    """Add the service and view commands to the ``abo`` typer app (``abo plot``:
    ``abo.service.plot_command``)."""
    app.command("serve")(serve)
    app.command("studies")(studies)
    app.command("trials")(trials)
    app.command("best")(best)
    app.command("delete")(delete)
