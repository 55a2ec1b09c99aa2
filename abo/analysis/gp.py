"""Understanding a study: which parameters matter, what the model believes, and how well.

Everything here reads a study's done trials (with a fidelity, those at its target) and one
objective (a study of several names the one with ``objective=``), and fits abo's GP on the
raw values (the objective's own units; no output transform), with the study's noise setting:

* ``importance``: per parameter, the first-order and total Sobol indices of the GP's posterior
  mean over the space (Saltelli's pick-freeze estimators on ``n`` scrambled Sobol points:
  the share of the mean's variance the parameter explains alone, and with its interactions),
  the GP's lengthscale (the shortest of a categorical's columns: short means the value
  changes fast along it), and a model-free check, the correlation ratio eta^2 of the
  observed values (the share of their variance explained by the parameter's bins: quantile
  bins of a numeric parameter, the choices of a categorical one). No dependency beyond abo's.
* ``cross_validation``: leave-one-out predictions of every observed value with their standard
  deviations, from the fitted GP's closed form (Rasmussen and Williams, eq. 5.12), no refits.
* ``contour``: the posterior mean over a grid of two numeric parameters, the others held at
  the values of the best trial in which both are active (in a conditional space, a trial where
  one of them is inactive says nothing about the pair).

Speed: the fits run with abo's torch threads (``abo.model.threads``; torch's default of one thread
per core made a 30-trial analysis take 10-30 s on a busy 2-core machine), and above
``FIT_POINTS`` observations the GP's hyperparameters are fitted on a seeded sample of them, the
model then conditioned on all of them with those hyperparameters (an exact fit's cost grows
as the cube of the points, conditioning once is cheap). ``progress``, where a function takes
it, is told each step in words (the command line shows it on a terminal).

Example:
    >>> import abo
    >>> study = abo.create_study({"x": abo.Float(0, 1), "y": abo.Float(0, 1)}, seed=0)
    >>> for t in study.ask_batch(12):
    ...     _ = study.tell(t.id, 10 * t.params["x"] + 0.1 * t.params["y"])
    >>> ranked = importance(study.spec, study.trials)
    >>> ranked[0].name, ranked[0].sobol > 0.9
    ('x', True)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor
from torch.quasirandom import SobolEngine

from abo.core.exceptions import AboError
from abo.core.space import Categorical
from abo.core.trial import Trial, TrialState
from abo.model.threads import torch_threads
from abo.spec.study_spec import StudySpec

MIN_TRIALS = 3
FIT_POINTS = 300
"""Observations the GP's hyperparameters are fitted on at most (a seeded uniform sample of a
larger study's); the model is conditioned on all of them."""

Progress = Callable[[str], None]
"""Told each step of an analysis in words (``"fitting the GP to 30 trials"``)."""


def _say(progress: Progress | None, text: str) -> None:
    if progress is not None:
        progress(text)


def numeric(spec: StudySpec) -> list[str]:
    """The parameters a contour can take (the numeric ones), in the space's order."""
    return [name for name in spec.space if not isinstance(spec.space[name], Categorical)]


@dataclass(frozen=True)
class Importance:
    """One parameter's importance (see the module)."""

    name: str
    sobol: float
    total: float
    lengthscale: float
    eta2: float

    def to_json(self) -> dict[str, Any]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def _objective(spec: StudySpec, objective: str | None) -> Any:
    objs = spec.objectives
    if objective is None:
        if len(objs) > 1:
            names = ", ".join(o.name for o in objs)
            raise AboError(f"objective: this study has {len(objs)} objectives ({names}); name "
                           "the one to analyse", field="objective")  # fmt: skip
        return objs[0]
    for o in objs:
        if o.name == objective:
            return o
    names = ", ".join(o.name for o in objs)
    raise AboError(f"objective: {objective!r} is not an objective of this study ({names})",
                   field="objective")  # fmt: skip


def observations(spec: StudySpec, trials: Sequence[Trial], objective: str | None = None
                 ) -> tuple[list[Trial], Tensor, Tensor]:  # fmt: skip
    """The done trials analysed (at the fidelity's target), their ``n x D`` encodings and
    ``n`` values; ``AboError`` with fewer than ``MIN_TRIALS``."""
    o = _objective(spec, objective)
    fidelity = spec.fidelity_of
    done = [
        t for t in trials
        if t.state is TrialState.DONE and isinstance(t.values.get(o.name), int | float)
        and math.isfinite(t.values[o.name]) and (fidelity is None or fidelity.at_target(t))
    ]  # fmt: skip
    if len(done) < MIN_TRIALS:
        raise AboError(f"trials: {len(done)} done trials to analyse; at least {MIN_TRIALS} needed",
                       field="trials")  # fmt: skip
    X = spec.space.to_unit_batch([t.params for t in done])
    y = torch.tensor([float(t.values[o.name]) for t in done], dtype=torch.double)
    return done, X, y


def fit(spec: StudySpec, X: Tensor, y: Tensor, progress: Progress | None = None) -> Any:
    """abo's GP on ``X`` and the raw values ``y`` (no output transform), fitted fully; above
    ``FIT_POINTS`` observations, its hyperparameters on a seeded sample (see the module)."""
    from abo.model.surrogate import condition, export_hypers, fit_gp

    noise = spec.noise if spec.noise in ("auto", "deterministic") else "auto"
    seed, n = spec.seed % 2**31, X.shape[0]
    with torch_threads():
        if n <= FIT_POINTS:
            _say(progress, f"fitting the GP to {n} trials")
            return fit_gp(X, y.unsqueeze(-1), noise=noise, full=True, seed=seed).model
        _say(progress, f"fitting the GP's hyperparameters to {FIT_POINTS} of the {n} trials")
        pick = torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:FIT_POINTS]
        pick = pick.sort().values
        sample = fit_gp(X[pick], y[pick].unsqueeze(-1), noise=noise, full=True, seed=seed)
        _say(progress, f"conditioning the GP on all {n} trials")
        return condition(X, y.unsqueeze(-1), noise, export_hypers(sample.model)).model


def _mean(model: Any, X: Tensor) -> Tensor:
    from abo.acquisitions.optimize import posterior_mean

    return posterior_mean(model, X)


def importance(spec: StudySpec, trials: Sequence[Trial], objective: str | None = None,
               n: int = 2048, progress: Progress | None = None) -> list[Importance]:  # fmt: skip
    """Every parameter's importance, most important first (see the module)."""
    _, X, y = observations(spec, trials, objective)
    model = fit(spec, X, y, progress)
    _say(progress, f"estimating Sobol indices on {n} points")
    with torch_threads():
        return _importance(spec, model, X, y, n)


def _importance(spec: StudySpec, model: Any, X: Tensor, y: Tensor, n: int) -> list[Importance]:
    space = spec.space
    names = list(space)
    engine = SobolEngine(2 * space.dim, scramble=True, seed=spec.seed % 2**31)
    both = engine.draw(n, dtype=torch.double)
    A = space.round(both[:, : space.dim])
    B = space.round(both[:, space.dim :])
    f_A, f_B = _mean(model, A), _mean(model, B)
    var = torch.cat([f_A, f_B]).var()
    ls = model.covar_module.base_kernel.lengthscale.detach().reshape(-1)
    out = []
    for name in names:
        cols = space._slices[name]
        AB = A.clone()
        AB[:, cols] = B[:, cols]
        if space.conditional:  # the swap may change which parameters are active
            AB = space.round(AB)
        f_AB = _mean(model, AB)
        sobol = float((f_B * (f_AB - f_A)).mean() / var) if var > 0 else 0.0
        total = float(0.5 * ((f_A - f_AB) ** 2).mean() / var) if var > 0 else 0.0
        eta2 = _eta2(space[name], X[:, cols], y)
        clipped = min(1.0, max(0.0, sobol)), min(1.0, max(0.0, total))
        out.append(Importance(name, *clipped, float(ls[cols].min()), eta2))
    return sorted(out, key=lambda i: (-i.total, -i.sobol, i.name))


def _eta2(param: Any, cols: Tensor, y: Tensor, bins: int = 5) -> float:
    """The correlation ratio of ``y`` on the parameter's bins (see the module)."""
    if isinstance(param, Categorical):
        labels = cols.argmax(dim=-1)
    else:
        k = max(1, min(bins, y.shape[0] // 3))
        edges = torch.quantile(cols[:, 0], torch.linspace(0, 1, k + 1, dtype=torch.double)[1:-1])
        labels = torch.bucketize(cols[:, 0].contiguous(), edges)
    total = ((y - y.mean()) ** 2).sum()
    if total <= 0:
        return 0.0
    between = sum(
        float((labels == b).sum()) * float(y[labels == b].mean() - y.mean()) ** 2
        for b in labels.unique()
    )
    return float(between / total)


@dataclass(frozen=True)
class Prediction:
    """A done trial's observed value and its leave-one-out prediction."""

    trial_id: int
    observed: float
    predicted: float
    std: float


def cross_validation(spec: StudySpec, trials: Sequence[Trial], objective: str | None = None,
                     progress: Progress | None = None) -> list[Prediction]:  # fmt: skip
    """Leave-one-out predictions of every analysed trial (see the module), in id order."""
    done, X, y = observations(spec, trials, objective)
    model = fit(spec, X, y, progress)
    _say(progress, f"predicting each of the {len(done)} trials from the others")
    with torch.no_grad(), torch_threads():
        Xt = model.transform_inputs(X)
        K = model.covar_module(Xt).to_dense()
        noise = model.likelihood.noise.detach().reshape(())
        K = K + noise * torch.eye(K.shape[0], dtype=K.dtype)
        tf = model.outcome_transform
        loc, scale = tf.means.reshape(()), tf.stdvs.reshape(())
        z = (y - loc) / scale - model.mean_module(Xt).detach()
        inv = torch.cholesky_inverse(torch.linalg.cholesky(K))
        alpha = inv @ z
        diag = inv.diagonal()
        mean_z = z - alpha / diag + model.mean_module(Xt).detach()
        var_z = 1.0 / diag
    return [
        Prediction(t.id, float(v), float(loc + scale * m), float(scale * s.sqrt()))
        for t, v, m, s in zip(done, y, mean_z, var_z, strict=True)
    ]


@dataclass(frozen=True)
class Contour:
    """The posterior mean over a grid of two parameters (``z[j][i]`` at ``x[i], y[j]``), the
    others at ``fixed`` (the values of trial ``held``, the best in which both are active), and
    the analysed trials' values of the two."""

    x_name: str
    y_name: str
    x: list[float]
    y: list[float]
    z: list[list[float]]
    fixed: dict[str, Any]
    points: list[tuple[float, float, float]]
    held: int = 0
    held_is_best: bool = True


def contour(spec: StudySpec, trials: Sequence[Trial], x_name: str, y_name: str,
            objective: str | None = None, grid: int = 40,
            progress: Progress | None = None) -> Contour:  # fmt: skip
    """The GP's posterior mean over ``x_name`` and ``y_name`` (both numeric; ``AboError``
    naming the field otherwise), the others held at the values of the best trial in which
    both are active (``AboError`` when no analysed trial has both)."""
    space = spec.space
    for field, name in (("x", x_name), ("y", y_name)):
        if name not in space or isinstance(space[name], Categorical):
            what = "is categorical" if name in space else "is not a parameter"
            raise AboError(f"{field}: {name!r} {what}; a contour takes two of the numeric "
                           f"parameters ({', '.join(numeric(spec)) or 'none'})",
                           field=field)  # fmt: skip
    if x_name == y_name:
        raise AboError("y: the same parameter as x; name two", field="y")
    done, X, y = observations(spec, trials, objective)
    o = _objective(spec, objective)
    both = [t for t in done if x_name in t.params and y_name in t.params]
    if not both:
        raise AboError(_never_together(spec, x_name, y_name, len(done)), field="y")
    model = fit(spec, X, y, progress)
    _say(progress, f"evaluating the posterior mean on a {grid} x {grid} grid")
    best = min(both, key=lambda t: (o.sign * -t.values[o.name], t.id))
    overall = min(done, key=lambda t: (o.sign * -t.values[o.name], t.id))
    fixed = {k: v for k, v in best.params.items() if k not in (x_name, y_name)}
    u = torch.linspace(0.0, 1.0, grid, dtype=torch.double)
    rows = space.to_unit(best.params).repeat(grid * grid, 1)
    cx, cy = space._slices[x_name].start, space._slices[y_name].start
    rows[:, cx] = u.repeat(grid)
    rows[:, cy] = u.repeat_interleave(grid)
    if space.conditional:  # an Int on an axis may be a parent: which others are active varies
        rows = space.round(rows)
    with torch_threads():
        Z = _mean(model, rows).reshape(grid, grid)
    decode_x = [float(space[x_name].decode([float(v)])) for v in u]
    decode_y = [float(space[y_name].decode([float(v)])) for v in u]
    points = [(float(t.params[x_name]), float(t.params[y_name]), float(t.values[o.name]))
              for t in both]  # fmt: skip
    return Contour(x_name, y_name, decode_x, decode_y, Z.tolist(), fixed, points, best.id,
                   best.id == overall.id)  # fmt: skip


def _never_together(spec: StudySpec, x_name: str, y_name: str, n_done: int) -> str:
    """Why no contour of ``x_name`` and ``y_name``: the conditions that keep them apart."""
    space = spec.space
    said = [f"{n!r} is active only when {space.condition_text(n)}"
            for n in (x_name, y_name) if space[n].when]  # fmt: skip
    return (
        f"y: {x_name!r} and {y_name!r} are active together in none of the {n_done} "
        f"analysed trials ({'; '.join(said)}); a contour needs trials in which both are"
    )
