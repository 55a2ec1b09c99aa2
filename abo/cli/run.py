"""What ``abo run`` does, step by step: load the file, open (or resume) its study, run the
budget on the file's executor, and tell the summary or the error with the command that helps."""

from __future__ import annotations

import shlex
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.live import Live
from rich.markup import escape

from abo.cli.commands import make_console, print_error, storage_label
from abo.core.exceptions import AboError, DuplicatedStudyError, StudyNotFoundError
from abo.run.progress import Progress

_err = make_console(stderr=True)


def fail(exc: object) -> typer.Exit:
    """The exit of a command that failed with ``exc``, its message told (exit code 1)."""
    print_error(exc)
    return typer.Exit(1)


def command_line(*words: str | Path) -> str:
    """A command line to print for the user to copy (each word shell-quoted)."""
    return " ".join(shlex.quote(str(w)) for w in words)


@dataclass
class RunPlace:
    """Where an ``abo run`` works: the file, and the study's name and storage once read from
    it (its error messages and summary name them)."""

    file: Path
    resume: str | None
    name: str = ""
    storage: str | None = None


@dataclass
class RunOutcome:
    """What the summary of an ``abo run`` tells: the result, and the finished trials before
    and after the run against the trials it was to add."""

    result: Any
    study_name: str
    done_before: int
    remaining: int
    done_after: int


def run_study(
    console: Any,
    study_file: Path,
    overrides: dict[str, int | None],
    place: RunPlace,
    keep_stored_options: bool,
    quiet: bool,
    grace: float,
) -> RunOutcome | None:
    """Load the file, open (or resume) its study and run what is left of the budget; ``None``
    when nothing was left."""
    from abo.cli.config import load_spec, open_study
    from abo.run import budget

    spec = load_spec(study_file, overrides)
    place.name = place.resume or spec.study.get("name") or ""
    place.storage = spec.study.get("storage")
    study = open_study(spec, place.resume, keep_stored_options)
    done_before = budget.finished(study.trials, study.spec.max_retries)
    remaining = budget.trials_to_add(study, spec.n_trials, spec.max_trials)
    total = f"/{spec.max_trials}" if spec.max_trials is not None else ""
    console.print(
        f"study [bold]{escape(study.name)}[/bold] in {escape(storage_label(place.storage))}: "
        f"{done_before}{total} finished, {remaining} to go ({study.strategy}, "
        f"{spec.executor['kind']} executor)",
        markup=True,  # the one line with markup (the names in it escaped)
        highlight=False,
    )
    if remaining <= 0:
        done = f"the budget is already done (max_trials = {spec.max_trials})"
        console.print(done, highlight=False)
        return None
    result = _optimize(console, spec, study, remaining, quiet, grace)
    done_after = budget.finished(study.trials, study.spec.max_retries)
    return RunOutcome(result, study.name, done_before, remaining, done_after)


def _optimize(
    console: Any, spec: Any, study: Any, remaining: int, quiet: bool, grace: float
) -> Any:
    """Build the file's objective and executor and optimise, with the live panel (or log lines
    with ``quiet``); the executor is closed however the run ends."""
    from abo.cli.config import build_executor, build_objective

    objective = build_objective(spec)
    executor = build_executor(spec)
    progress = Progress(remaining, study.direction, executor.n_workers, study.spec.objectives)
    try:
        callback = progress.update if not quiet else _log_trial
        with (
            Live(progress, console=console, refresh_per_second=4, transient=not console.is_terminal)
            if not quiet
            else nullcontext()
        ):
            return study.optimize(
                objective,
                n_trials=remaining,
                executor=executor,
                callback=callback,
                trial_timeout=spec.study.get("trial_timeout"),
                grace=grace,
                lookahead=spec.study.get("lookahead", "auto"),
                verbosity=0,  # this command's own panel (or lines, with --quiet)
                proposals=spec.executor.get("proposals"),
            )
    finally:
        executor.close()


def run_failure(exc: AboError, place: RunPlace) -> typer.Exit:
    """The exit for an error of ``abo run``, its message told: 3 when the failure-rate guard
    stopped the study, 1 otherwise (with the command that fixes a name clash or a typo)."""
    from abo.core.exceptions import FailureRateExceeded

    where = storage_label(place.storage)
    if isinstance(exc, FailureRateExceeded):
        print_error(exc, label="stopped")
        return typer.Exit(3)
    if isinstance(exc, DuplicatedStudyError):
        return fail(
            f"name: a study called {place.name!r} exists already in {where}; "
            f"continue it with: {command_line('abo', 'run', place.file, '--resume', place.name)} "
            "(or give the new study another name in the file)"
        )
    if isinstance(exc, StudyNotFoundError) and place.resume is not None:
        return fail(f"{exc} (in {where}); start it with: {command_line('abo', 'run', place.file)}")
    return fail(exc)


def print_run_summary(console: Any, place: RunPlace, outcome: RunOutcome) -> None:
    """The run's summary, its best trial, where its results are and how to go on."""
    result, file, storage = outcome.result, place.file, place.storage
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
        lines.append("see them with: " + command_line("abo", "trials", file))
        if result.front is not None:
            lines.append("the Pareto front: " + command_line("abo", "best", file))
    if outcome.done_after < outcome.done_before + outcome.remaining and storage is not None:
        lines.append(
            "resume with: " + command_line("abo", "run", file, "--resume", outcome.study_name)
        )
    for line in lines:
        console.print(line, markup=False, highlight=False)


def _log_trial(study: object, trial: object) -> None:
    t = trial  # an abo.Trial
    value = t.value if t.value is not None else t.reason  # type: ignore[attr-defined]
    _err.print(f"trial {t.id} {t.state}: {value}", markup=False, highlight=False)  # type: ignore[attr-defined]
