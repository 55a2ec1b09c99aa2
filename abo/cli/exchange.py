"""``abo export`` and ``abo import``: a study to and from Optuna's storage (``abo.interop``)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from abo.cli.commands import (
    DEFAULT_STORAGE,
    StorageOpt,
    StudyArg,
    TokenOpt,
    UrlOpt,
    _run,
    _target,
    print_error,
    storage_label,
)


class Tool(StrEnum):
    optuna = "optuna"


OptunaStorage = Annotated[
    str,
    typer.Option(
        "--optuna-storage",
        help="The Optuna storage URL (sqlite:///optuna.db, postgresql://...).",
        show_default=False,
    ),
]


def export(
    study: StudyArg,
    optuna_storage: OptunaStorage,
    to: Annotated[Tool, typer.Option("--to", help="The tool whose storage to write.")] = (
        Tool.optuna
    ),
    name: Annotated[
        str | None, typer.Option(help="The Optuna study's name (default: the abo study's).")
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace an Optuna study of that name.")
    ] = False,
    storage: StorageOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
) -> None:
    """Write a study's finished trials into Optuna's storage (optuna-dashboard and Optuna's
    plots then open it): parameters, values, states, reports, times, worker and lineage."""
    from abo.interop import to_optuna

    source, found_name = _target(study, storage, url, token)
    found = _run(lambda: source.study(found_name))
    done = _run(lambda: to_optuna(found, optuna_storage, name, overwrite=overwrite))
    typer.echo(
        f"exported {found_name!r} from {source.label} to the Optuna study {done.name!r} in "
        f"{optuna_storage}: {done.complete} complete, {done.failed} failed, {done.pruned} "
        f"pruned ({done.skipped} running or lost not written)"
    )


def import_(
    optuna_study: Annotated[str, typer.Argument(help="The Optuna study's name.")],
    optuna_storage: OptunaStorage,
    source: Annotated[Tool, typer.Option("--from", help="The tool whose storage to read.")] = (
        Tool.optuna
    ),
    name: Annotated[
        str | None, typer.Option(help="The abo study's name (default: the Optuna study's).")
    ] = None,
    strategy: Annotated[str | None, typer.Option(help="A new study's strategy.")] = None,
    seed: Annotated[int | None, typer.Option(help="A new study's seed.")] = None,
    partial: Annotated[
        bool,
        typer.Option(
            "--partial",
            help="Import the complete trials that fit when some cannot be placed (they are "
            "named on stderr); without it such an import fails and writes nothing.",
        ),
    ] = False,
    storage: StorageOpt = None,
) -> None:
    """Create (or continue) an abo study from an Optuna study's complete trials, as known
    results (importing again adds nothing twice). The Optuna storage is only read; a
    define-by-run study's parameters that only some trials have become conditional."""
    import warnings

    from abo.core.exceptions import AboWarning
    from abo.interop import from_optuna

    where = storage or DEFAULT_STORAGE
    options = {k: v for k, v in {"strategy": strategy, "seed": seed}.items() if v is not None}
    with warnings.catch_warnings():  # the skipped trials are printed below, once
        warnings.simplefilter("ignore", AboWarning)
        done = _run(
            lambda: from_optuna(
                optuna_study, optuna_storage, where, name, partial=partial, **options
            )
        )
    typer.echo(
        f"imported {done.added} complete trials of the Optuna study {optuna_study!r} into "
        f"{done.study.name!r} in {storage_label(where)} ({done.already} already there, "
        f"{done.not_complete} not complete"
        + (f", {len(done.skipped)} complete trials skipped)" if done.skipped else ")")
    )
    for s in done.skipped:
        print_error(f"trial {s.number}: {s.reason}", label="skipped")


def register(app: typer.Typer) -> None:
    """Add ``export`` and ``import`` to the ``abo`` typer app."""
    app.command("export")(export)
    app.command("import")(import_)
