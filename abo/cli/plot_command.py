"""``abo plot``: a study's PNGs (``abo.analysis.plots``, and the analyses of
``abo.analysis.gp_plots``).

A kind that does not apply to the study (a Pareto front of one objective, learning curves
without reports, anything of a study with nothing to draw yet) is refused with exit code 1 and
a message saying why, and no file is written.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from abo.cli.commands import (
    StorageOpt,
    StudyArg,
    TokenOpt,
    UrlOpt,
    _run,
    _target,
    print_error,
    working,
)


class Kind(StrEnum):
    convergence = "convergence"
    timeline = "timeline"
    parallel = "parallel"
    pareto = "pareto"
    curves = "curves"
    cost = "cost"
    importance = "importance"
    slice = "slice"
    contour = "contour"
    cv = "cv"


ANALYSES = (Kind.importance, Kind.slice, Kind.contour, Kind.cv)  # abo.analysis.gp_plots


def plot(
    study: StudyArg,
    kind: Annotated[
        Kind,
        typer.Option(
            help="convergence, timeline, parallel, pareto (several objectives), curves "
            "(the learning curves of trials that report), cost (the best value against the "
            "evaluation time spent, coloured by fidelity), importance, slice, contour (of the "
            "GP's posterior mean over --params X,Y) or cv (the GP's leave-one-out "
            "cross-validation)."
        ),
    ] = Kind.convergence,
    out: Annotated[Path | None, typer.Option(help="PNG file (default NAME-KIND.png).")] = None,
    params: Annotated[
        str | None, typer.Option(help="contour: the two numeric parameters, X,Y.")
    ] = None,
    objective: Annotated[
        str | None, typer.Option(help="The objective analysed, in a study of several.")
    ] = None,
    storage: StorageOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
) -> None:
    """Write a PNG: best-so-far convergence, per-worker timeline, parallel coordinates, the
    Pareto front of a study of several objectives, the learning curves of its reports, its
    best value against the evaluation time spent, or an analysis of what its GP learned.

    A kind that does not apply to the study exits with code 1, saying why, and writes no file.
    """
    if out is not None and out.suffix.lower() != ".png":
        raise typer.BadParameter(f"expected a .png file, got {str(out)!r}", param_hint="--out")
    source, name = _target(study, storage, url, token)
    found = _run(lambda: source.study(name))
    listed = _run(lambda: found.trials)
    path = out or Path(f"{name}-{kind.value}.png")
    if kind in ANALYSES:
        with working("loading the model's libraries") as say:
            from abo.analysis.gp_plots import draw

            _run(lambda: draw(kind.value, found.spec, listed, path, name, params, objective, say))
        typer.echo(str(path))
        return
    refused = _refusal(kind, found, listed, name)
    if refused is not None:
        print_error(refused)
        raise typer.Exit(1)
    _draw(kind, found, listed, path, name)
    typer.echo(str(path))


def _draw(kind: Kind, found: Any, listed: list[Any], path: Path, name: str) -> None:
    """Write the PNG of a plot ``kind`` that applies to the study (not an analysis)."""
    from abo.analysis import plots

    objectives = found.spec.objectives
    fidelity = found.spec.fidelity_of
    counts = fidelity.at_target if fidelity is not None else None  # results: at the target
    if kind is Kind.pareto:
        plots.pareto(listed, objectives, path, title=name)
    elif kind is Kind.convergence:
        plots.convergence(
            listed, found.direction, path, title=name, constraints=found.spec.constraints,
            counts=counts,
        )  # fmt: skip
    elif kind is Kind.cost:
        plots.cost(
            listed, found.direction, path, title=name, constraints=found.spec.constraints,
            fidelity=fidelity.parameter if fidelity is not None else None, counts=counts,
        )  # fmt: skip
    elif kind is Kind.timeline:
        plots.timeline(listed, path, title=name)
    elif kind is Kind.curves:
        plots.learning_curves(listed, _run(lambda: found.reports()), found.direction, path, name)
    else:
        plots.parallel(listed, found.space.to_json(), found.direction, path, title=name)


def _refusal(kind: Kind, found: Any, listed: list[Any], name: str) -> str | None:
    """Why ``kind`` does not apply to the study (its message), or ``None``: a drawing of
    nothing is refused rather than written as an empty picture."""
    from abo.analysis import plots
    from abo.analysis.summary import in_completion_order
    from abo.core.trial import TrialState

    spec = found.spec
    objectives = spec.objectives
    if kind is Kind.pareto and len(objectives) < 2:
        return f"kind: pareto plots a study of several objectives; {name!r} has one (plot its " \
            "convergence)"  # fmt: skip
    if kind not in (Kind.pareto, Kind.timeline) and len(objectives) > 1:
        return f"kind: {kind.value} plots one objective; {name!r} has {len(objectives)} (plot " \
            "its pareto front or timeline)"  # fmt: skip
    done = [t for t in listed if t.state is TrialState.DONE and t.values]
    nothing = f"kind: {kind.value} draws done trials; {name!r} has none yet"
    if kind is Kind.pareto and not in_completion_order(listed, objectives):
        return nothing
    if kind in (Kind.convergence, Kind.parallel) and not done:
        return nothing
    if kind is Kind.convergence and not plots.best_so_far(
        listed, found.direction, spec.constraints, _counts(spec)
    ) and not plots.infeasible_points(listed, spec.constraints):  # fmt: skip
        return f"kind: convergence: none of the {len(done)} done trials of {name!r} is at " \
            "its fidelity's target yet"  # fmt: skip
    if kind is Kind.timeline and not plots.lanes(listed):
        return f"kind: timeline draws finished trials; {name!r} has none yet"
    if kind is Kind.cost and not plots.cost_curve(listed, found.direction, spec.constraints):
        return f"kind: cost draws finished trials with their evaluation time; {name!r} has " \
            "none yet"  # fmt: skip
    if kind is Kind.curves and not any(_run(lambda: found.reports()).values()):
        return f"kind: curves draws the learning curves of trials that report; no trial of " \
            f"{name!r} has reported (trial.report(step, value) in the objective)"  # fmt: skip
    return None


def _counts(spec: Any) -> Any:
    """Which done trials are results: with a fidelity, those at its target."""
    fidelity = spec.fidelity_of
    return fidelity.at_target if fidelity is not None else None


def register(app: typer.Typer) -> None:
    """Add ``abo plot`` to the ``abo`` typer app."""
    app.command("plot")(plot)
