"""The ``abo`` command line (typer): ``abo demo`` and friends.

Exit codes: 0 done, 1 an abo error (the message says which field and why), 2 usage.

Only typer and rich are imported up front: each command imports what it needs (torch, Dask,
FastAPI, matplotlib) when it runs, so ``abo --help`` and the commands that only read a study
start in a fraction of a second.
"""

from __future__ import annotations

import inspect
import shlex
import sys
import time
from contextlib import nullcontext
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from typer.core import TyperCommand, TyperGroup

from abo.exceptions import AboError, DuplicatedStudyError, StudyNotFoundError
from abo.progress import Progress
from abo.service.analysis_commands import register as _register_analysis
from abo.service.commands import make_console, print_error, storage_label
from abo.service.commands import register as _register_service
from abo.service.exchange import register as _register_exchange
from abo.service.plot_command import register as _register_plot


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


def _fail(exc: object) -> typer.Exit:
    print_error(exc)
    return typer.Exit(1)


def _command(*words: str | Path) -> str:
    """A command line to print for the user to copy (each word shell-quoted)."""
    return " ".join(shlex.quote(str(w)) for w in words)


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
    import functools

    from abo import signals

    signals.defer()  # a Ctrl-C or SIGTERM while starting up stops cleanly once the loop runs

    import abo
    from abo.demo import PARAMS, slow_hartmann6
    from abo.executors import DaskExecutor
    from abo.plots import convergence
    from abo.spec import DEFAULT_STRATEGY

    console = make_console()
    where = storage_label(storage)
    try:
        space = abo.Space({name: abo.Float(0.0, 1.0) for name in PARAMS})
        if resume is not None:
            try:
                study = abo.load_study(resume, storage=storage)
            except StudyNotFoundError as exc:
                raise StudyNotFoundError(f"{exc}; looked in {where}") from None
        else:
            name = "demo-" + datetime.now().strftime("%Y%m%d-%H%M%S-%f")
            study = abo.create_study(
                space,
                name=name,
                storage=storage,
                strategy=strategy or DEFAULT_STRATEGY,
                seed=seed,
                noise="deterministic",
            )
        console.print(
            f"study [bold]{escape(study.name)}[/bold] in {escape(where)}: {trials} trials of "
            f"Hartmann-6 on {workers} Dask workers ({study.strategy})",
            markup=True,  # the one line with markup (the names in it escaped)
            highlight=False,
        )
        objective = functools.partial(
            slow_hartmann6, min_seconds=min_seconds, max_seconds=max_seconds
        )
        progress = Progress(
            trials, study.direction, workers=workers, objectives=study.spec.objectives
        )
        with DaskExecutor(n_workers=workers) as executor:
            progress.start = time.time()
            with Live(
                progress, console=console, refresh_per_second=4, transient=not console.is_terminal
            ):
                result = study.optimize(
                    objective,
                    n_trials=trials,
                    n_workers=workers,
                    executor=executor,
                    callback=progress.update,
                    verbosity=0,  # this command's own panel
                )
    except AboError as exc:
        raise _fail(exc) from None
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
        "resume with: " + _command("abo", "demo", "--resume", study.name, "--storage", where),
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

    from abo import signals

    signals.defer()  # a SIGTERM while starting up stops cleanly once the loop runs

    from abo import budget
    from abo.config import build_executor, build_objective, load_spec, open_study
    from abo.exceptions import FailureRateExceeded

    console = make_console()
    if quiet:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    file = study_file.absolute()
    storage: str | None = None
    try:
        spec = load_spec(study_file, {"n_trials": n_trials, "max_trials": max_trials})
        trial_timeout = spec.study.get("trial_timeout")
        lookahead = spec.study.get("lookahead", "auto")
        name = resume or spec.study.get("name") or ""
        storage = spec.study.get("storage")
        study = open_study(spec, resume, keep_stored_options)

        def finished() -> int:
            return budget.finished(study.trials, study.spec.max_retries)

        done_before = finished()
        remaining = budget.trials_to_add(study, spec.n_trials, spec.max_trials)
        total = f"/{spec.max_trials}" if spec.max_trials is not None else ""
        console.print(
            f"study [bold]{escape(study.name)}[/bold] in {escape(storage_label(storage))}: "
            f"{done_before}{total} finished, {remaining} to go ({study.strategy}, "
            f"{spec.executor['kind']} executor)",
            markup=True,  # the one line with markup (the names in it escaped)
            highlight=False,
        )
        if remaining <= 0:
            done = f"the budget is already done (max_trials = {spec.max_trials})"
            console.print(done, highlight=False)
            return
        objective = build_objective(spec)
        executor = build_executor(spec)
        progress = Progress(remaining, study.direction, executor.n_workers, study.spec.objectives)
        try:
            callback = progress.update if not quiet else _log_trial
            with (
                Live(
                    progress,
                    console=console,
                    refresh_per_second=4,
                    transient=not console.is_terminal,
                )
                if not quiet
                else nullcontext()
            ):
                result = study.optimize(
                    objective,
                    n_trials=remaining,
                    executor=executor,
                    callback=callback,
                    trial_timeout=trial_timeout,
                    grace=grace,
                    lookahead=lookahead,
                    verbosity=0,  # this command's own panel (or lines, with --quiet)
                )
        finally:
            executor.close()
        done_after = finished()
    except FailureRateExceeded as exc:
        print_error(exc, label="stopped")
        raise typer.Exit(3) from None
    except DuplicatedStudyError:
        raise _fail(
            f"name: a study called {name!r} exists already in {storage_label(storage)}; "
            f"continue it with: {_command('abo', 'run', file, '--resume', name)} "
            "(or give the new study another name in the file)"
        ) from None
    except StudyNotFoundError as exc:
        if resume is None:
            raise _fail(exc) from None
        raise _fail(
            f"{exc} (in {storage_label(storage)}); start it with: {_command('abo', 'run', file)}"
        ) from None
    except AboError as exc:
        raise _fail(exc) from None
    console.print(result.summary(), highlight=False)
    best = result.best
    if best is not None and best.value is not None:
        console.print(
            f"best value {best.value:.6g} at trial {best.id}: {best.params}",
            markup=False,
            highlight=False,
        )
    lines = [f"results in: {storage_label(storage)}"]
    if storage is not None:
        lines.append("see them with: " + _command("abo", "trials", file))
        if result.front is not None:
            lines.append("the Pareto front: " + _command("abo", "best", file))
    if done_after < done_before + remaining and storage is not None:
        lines.append("resume with: " + _command("abo", "run", file, "--resume", study.name))
    for line in lines:
        console.print(line, markup=False, highlight=False)


def _log_trial(study: object, trial: object) -> None:
    t = trial  # an abo.Trial
    value = t.value if t.value is not None else t.reason  # type: ignore[attr-defined]
    err.print(f"trial {t.id} {t.state}: {value}", markup=False, highlight=False)  # type: ignore[attr-defined]


@app.command("strategies")
def list_strategies() -> None:
    """List the strategy names with a one-line description each."""
    from abo.registry import strategies

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
