"""``abo studies``, ``abo trials``, ``abo best`` and ``abo delete``: each reads a storage or a
running service (``abo.cli.sources``) and prints a table, JSON or CSV; none imports torch or
FastAPI, so they start in a fraction of a second."""

from __future__ import annotations

import sys
import warnings
from typing import TYPE_CHECKING, Annotated, Any

import typer

from abo.cli.console import (
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
    print_error,
)
from abo.cli.sources import _Source, _target
from abo.core.exceptions import AboError, AboWarning

if TYPE_CHECKING:
    from abo.core.trial import Trial


def _trial_row(t: Trial, multi: bool = False, spec: Any = None) -> dict[str, Any]:
    """A trial as a table row; of a study of several objectives (``multi``), its values by
    objective and no ``value`` column (such a trial has no single value); of a study with
    outcome constraints (``spec``), whether a done trial was feasible."""
    from abo.core.outcomes import feasible
    from abo.core.trial import TrialState

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
    from abo.core.trial import TrialState

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
    from abo.core.trial import TrialState

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
    its ``source`` (``abo.analysis.summary.proposal_source``) before its strategy."""
    from abo.analysis.summary import proposal_source

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
    from abo.core.trial import TrialState

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
    from abo.cli.run_folders import remove_run_folders, run_folders

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
