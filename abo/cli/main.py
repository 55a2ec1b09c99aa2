"""The ``abo`` command line (typer): ``abo demo`` and friends.

Exit codes: 0 done, 1 an abo error (the message says which field and why), 2 usage.

Only typer and rich are imported up front: each command imports what it needs (torch, Dask,
FastAPI, matplotlib) when it runs, so ``abo --help`` and the commands that only read a study
start in a fraction of a second.
"""

from __future__ import annotations

import inspect
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from typer.core import TyperCommand, TyperGroup

from abo.cli.analysis_commands import register as _register_analysis
from abo.cli.commands import make_console, storage_label
from abo.cli.commands import register as _register_service
from abo.cli.exchange import register as _register_exchange
from abo.cli.plot_command import register as _register_plot
from abo.cli.run import RunPlace, command_line, fail, print_run_summary, run_failure, run_study
from abo.core.exceptions import AboError, StudyNotFoundError
from abo.run.progress import Progress


def _flags_as_flags(params: list[Any]) -> list[Any]:
    """``params`` with each on/off flag (``--version``, ``--yes``, ``--help``) shown as a flag:
    typer's help would print its type, ``--version <bool>``, as if it took a value."""
    for param in params:
        if getattr(param, "is_flag", False):
            param.metavar = ""
    return params


class _Group(TyperGroup):
    """The ``abo`` group, its flags shown as flags."""

    def get_params(self, ctx: Any) -> Any:
        return _flags_as_flags(super().get_params(ctx))


class _Command(TyperCommand):
    """An ``abo`` command, its flags shown as flags."""

    def get_params(self, ctx: Any) -> Any:
        return _flags_as_flags(super().get_params(ctx))


app = typer.Typer(
    name="abo",
    help="Asynchronous Bayesian optimization: no idle workers while the model thinks.",
    no_args_is_help=True,
    add_completion=False,
    cls=_Group,
)
err = make_console(stderr=True)


def _version(value: bool) -> None:
    if value:
        from abo import __version__

        typer.echo(f"abo {__version__}")
        raise typer.Exit()


@app.callback()
def _setup(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print abo's version and exit."
        ),
    ] = False,
) -> None:
    """Asynchronous Bayesian optimization."""


@app.command()
def demo(
    trials: Annotated[int, typer.Option(help="How many trials to finish.")] = 40,
    workers: Annotated[int, typer.Option(help="Dask worker processes.")] = 4,
    storage: Annotated[str, typer.Option(help="Storage URL.")] = "sqlite:///abo.db",
    resume: Annotated[
        str | None, typer.Option(help="Continue this study instead of starting a new one.")
    ] = None,
    strategy: Annotated[
        str | None, typer.Option(help="Strategy name (see abo strategies); default: abo's.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Random seed of a new study.")] = 0,
    min_seconds: Annotated[float, typer.Option(help="Shortest evaluation.")] = 0.2,
    max_seconds: Annotated[float, typer.Option(help="Longest evaluation.")] = 1.5,
) -> None:
    """Optimise Hartmann-6 (evaluations of 0.2-1.5 s) on a local Dask cluster with SQLite."""
    from abo.run import signals

    signals.defer()  # a Ctrl-C or SIGTERM while starting up stops cleanly once the loop runs

    console = make_console()
    where = storage_label(storage)
    try:
        study = _open_demo_study(resume, storage, where, strategy, seed)
        console.print(
            f"study [bold]{escape(study.name)}[/bold] in {escape(where)}: {trials} trials of "
            f"Hartmann-6 on {workers} Dask workers ({study.strategy})",
            markup=True,  # the one line with markup (the names in it escaped)
            highlight=False,
        )
        result = _optimize_demo(console, study, trials, workers, (min_seconds, max_seconds))
    except AboError as exc:
        raise fail(exc) from None
    _print_demo_summary(console, study, result, storage)


def _open_demo_study(
    resume: str | None, storage: str, where: str, strategy: str | None, seed: int
) -> Any:
    """The demo's study: the one ``resume`` names, or a new one named after the time."""
    from abo.cli.demo import PARAMS
    from abo.core.space import Float, Space
    from abo.spec.study_spec import DEFAULT_STRATEGY
    from abo.study.study import create_study, load_study

    space = Space({name: Float(0.0, 1.0) for name in PARAMS})
    if resume is not None:
        try:
            return load_study(resume, storage=storage)
        except StudyNotFoundError as exc:
            raise StudyNotFoundError(f"{exc}; looked in {where}") from None
    name = "demo-" + datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    return create_study(
        space,
        name=name,
        storage=storage,
        strategy=strategy or DEFAULT_STRATEGY,
        seed=seed,
        noise="deterministic",
    )


def _optimize_demo(
    console: Any, study: Any, trials: int, workers: int, seconds: tuple[float, float]
) -> Any:
    """Run ``trials`` slow Hartmann-6 evaluations (``seconds``: shortest and longest) on a
    local Dask cluster, with the live panel."""
    import functools

    from abo.cli.demo import slow_hartmann6
    from abo.executors import DaskExecutor

    objective = functools.partial(slow_hartmann6, min_seconds=seconds[0], max_seconds=seconds[1])
    progress = Progress(trials, study.direction, workers=workers, objectives=study.spec.objectives)
    with DaskExecutor(n_workers=workers) as executor:
        progress.start = time.time()
        with Live(
            progress, console=console, refresh_per_second=4, transient=not console.is_terminal
        ):
            return study.optimize(
                objective,
                n_trials=trials,
                n_workers=workers,
                executor=executor,
                callback=progress.update,
                verbosity=0,  # this command's own panel
            )


def _print_demo_summary(console: Any, study: Any, result: Any, storage: str) -> None:
    """The demo's summary and best point, its convergence plot, and how to resume it."""
    from abo.analysis.plots import convergence

    where = storage_label(storage)
    console.print(result.summary(), highlight=False)
    best = study.best
    if best is not None:
        console.print(
            f"best value {best.value:.6f} (Hartmann-6 minimum -3.32237) at trial {best.id}:",
            highlight=False,
        )
        for key, value in best.params.items():
            console.print(f"  {key} = {value:.6f}", highlight=False)
    plot = _plot_path(storage, study.name)
    convergence(study.trials, study.direction, plot, title=f"{study.name} (Hartmann-6)")
    for line in (
        f"results in: {where}",
        f"convergence plot: {plot}",
        "resume with: " + command_line("abo", "demo", "--resume", study.name, "--storage", where),
    ):
        console.print(line, markup=False, highlight=False)


def _plot_path(storage: str, name: str) -> Path:
    """``<name>-convergence.png`` beside the SQLite file, or in the current folder."""
    folder = Path.cwd()
    if storage.startswith("sqlite:///"):
        db = Path(storage[len("sqlite:///") :])
        folder = db.parent if str(db.parent) else Path.cwd()
    return (folder / f"{name}-convergence.png").absolute()


@app.command()
def run(
    study_file: Annotated[Path, typer.Argument(help="The study TOML file.")],
    resume: Annotated[
        str | None,
        typer.Option(help="Continue this study (it must exist, with the file's options)."),
    ] = None,
    n_trials: Annotated[
        int | None,
        typer.Option(help="Trials this run adds (instead of the file's n_trials)."),
    ] = None,
    max_trials: Annotated[
        int | None,
        typer.Option(help="The study's total of finished trials (instead of the file's)."),
    ] = None,
    keep_stored_options: Annotated[
        bool,
        typer.Option(
            help="With --resume: keep the study's stored options where the file's differ."
        ),
    ] = False,
    quiet: Annotated[bool, typer.Option(help="Log lines only, no live display.")] = False,
    grace: Annotated[
        float, typer.Option(help="Seconds to wait for running trials on stop.")
    ] = 30.0,
) -> None:
    """Run the study a TOML file describes (space, objective, budget, storage, executor).

    The budget: n_trials (trials each run adds) and/or max_trials (the study's total of
    finished trials: done, failed or stopped), from the file or the flags.

    The summary says where the results are; `abo trials FILE`, `abo best FILE` and
    `abo plot FILE` read them back through the same file.

    Exit codes: 0 the budget is done (or a clean stop), 1 an error, 3 the failure-rate guard
    stopped the study.
    """
    import logging

    from abo.run import signals

    signals.defer()  # a SIGTERM while starting up stops cleanly once the loop runs

    console = make_console()
    if quiet:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    place = RunPlace(study_file.absolute(), resume)
    overrides = {"n_trials": n_trials, "max_trials": max_trials}
    try:
        outcome = run_study(
            console, study_file, overrides, place, keep_stored_options, quiet, grace
        )
    except AboError as exc:
        raise run_failure(exc, place) from None
    if outcome is not None:
        print_run_summary(console, place, outcome)


@app.command("strategies")
def list_strategies() -> None:
    """List the strategy names with a one-line description each."""
    from abo.acquisitions.registry import strategies

    table = Table("strategy", "description")
    for name, text in strategies().items():
        table.add_row(name, text)
    make_console().print(table)


_register_service(app)
_register_plot(app)
_register_exchange(app)
_register_analysis(app)


def reflow(doc: str) -> str:
    """A docstring as help text: each paragraph on one line (rich wraps it to the terminal),
    paragraphs kept apart. Typer keeps a docstring's own line breaks in the command list and
    in later paragraphs, which cut sentences in the middle of an 80-column screen."""
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


for _info in app.registered_commands:
    _info.cls = _Command if _info.cls in (None, TyperCommand) else _info.cls
    if _info.help is None and _info.callback is not None and _info.callback.__doc__:
        _info.help = reflow(_info.callback.__doc__)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
