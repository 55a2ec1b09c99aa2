"""``abo importance`` (``abo.analysis.gp``); the analysis kinds of ``abo plot`` draw through
``abo.analysis.gp_plots.draw``."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from abo.cli.commands import (
    Format,
    FormatOpt,
    StorageOpt,
    StudyArg,
    TokenOpt,
    UrlOpt,
    _run,
    _target,
    make_console,
    working,
)


def importance(
    study: StudyArg,
    objective: Annotated[
        str | None, typer.Option(help="The objective analysed, in a study of several.")
    ] = None,
    storage: StorageOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
    format: FormatOpt = Format.table,
) -> None:
    """Which parameters matter: the GP's Sobol indices (first-order and total), its
    lengthscales, and the model-free eta^2 of the observed values, most important first."""
    source, name = _target(study, storage, url, token)
    found = _run(lambda: source.study(name))
    trials = _run(lambda: found.trials)
    with working("loading the model's libraries") as say:
        from abo.analysis.gp import importance as measure

        ranked = _run(lambda: measure(found.spec, trials, objective, progress=say))
    rows = [i.to_json() for i in ranked]
    if format is Format.json:
        typer.echo(json.dumps(rows, indent=2))
        return
    if format is Format.csv:
        typer.echo("name,sobol,total,lengthscale,eta2")
        for r in rows:
            typer.echo(f"{r['name']},{r['sobol']},{r['total']},{r['lengthscale']},{r['eta2']}")
        return
    from rich.table import Table

    table = Table("parameter", "total Sobol", "first-order", "lengthscale", "eta² (data)",
                  title=f"importance in {name} ({len(trials)} trials)")  # fmt: skip
    for r in rows:
        table.add_row(r["name"], f"{r['total']:.3f}", f"{r['sobol']:.3f}",
                      f"{r['lengthscale']:.3g}", f"{r['eta2']:.3f}")  # fmt: skip
    make_console().print(table)


def register(app: typer.Typer) -> None:
    app.command("importance")(importance)
