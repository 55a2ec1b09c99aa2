"""``GET /api/v1/studies/{name}/analysis``: the analyses of ``abo.analysis.gp`` as JSON, for the
dashboard's analysis panels (and anyone else).

``kind`` picks one: ``importance`` (Sobol indices, lengthscales, eta^2 per parameter),
``slice`` (per parameter, the analysed trials' values against it), ``contour`` (the GP's
posterior mean over two numeric parameters ``x`` and ``y``) or ``cv`` (leave-one-out
predictions). Every kind reads the trials ``abo.analysis.gp.observations`` reads: done, with a
finite value of the objective, at the fidelity's target.

A GP fit takes a second or more and holds the interpreter lock for most of it, so fits run on
one thread of their own (never on the event loop, never more than one at a time) and each
result is cached by study, kind, arguments and number of done trials: a dashboard polling
every second refits only when a result arrives, and requests that want the same result while
it is computed share that one computation. Positions on the parameter axes are sent in the
unit cube (``u``: abo's encoding, log-scaled where the parameter is, one bin per integer) so
a page can draw without knowing the encodings.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Path, Query
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from abo.core.exceptions import AboError
from abo.core.outcomes import feasible
from abo.core.space import Categorical
from abo.core.trial import Trial, TrialState
from abo.service.state import CREATED_HEADER, ServiceState
from abo.spec.study_spec import StudySpec

Kind = Literal["importance", "slice", "contour", "cv"]
CACHE_SIZE = 64  # results kept (a contour is the largest: 40 x 40 means)
Key = tuple[str, float, str, str | None, str | None, str | None, int]


# -- response bodies ---------------------------------------------------------------------------
class ImportanceOut(BaseModel):
    """One parameter's importance (``abo.analysis.gp.Importance``)."""

    name: str
    sobol: float = Field(description="First-order Sobol index of the GP's posterior mean.")
    total: float = Field(description="Total Sobol index (with the parameter's interactions).")
    lengthscale: float = Field(description="The GP's lengthscale (short: changes fast).")
    eta2: float = Field(description="Correlation ratio of the observed values (model-free).")


class SlicePoint(BaseModel):
    """One analysed trial in a slice: its parameter value and its objective value."""

    trial_id: int
    x: Any = Field(description="The parameter's value.")
    u: float = Field(description="Its position on the axis, 0 to 1.")
    value: float = Field(description="The objective's value.")
    feasible: bool = Field(description="Whether every outcome constraint holds.")


class SliceOut(BaseModel):
    """One parameter's slice; ``points`` in completion order."""

    name: str
    type: str
    ticks: list[tuple[float, str]] = Field(description="Axis labels: (position 0 to 1, text).")
    points: list[SlicePoint]


class ContourPoint(BaseModel):
    """An analysed trial on the contour: its two parameters (and positions) and value."""

    x: float
    y: float
    u: float
    v: float
    value: float


class ContourOut(BaseModel):
    """The posterior mean ``z[j][i]`` at ``x[i], y[j]`` (grid positions ``u[i], u[j]``), the
    other parameters held at the best trial's values ``fixed``."""

    x_name: str
    y_name: str
    x: list[float]
    y: list[float]
    u: list[float] = Field(description="The grid's positions on both axes, 0 to 1.")
    z: list[list[float]]
    fixed: dict[str, Any]
    x_ticks: list[tuple[float, str]]
    y_ticks: list[tuple[float, str]]
    points: list[ContourPoint]


class PredictionOut(BaseModel):
    """A trial's observed value and its leave-one-out prediction (``abo.analysis.gp``)."""

    trial_id: int
    observed: float
    predicted: float
    std: float


class AnalysisOut(BaseModel):
    """One analysis of a study's done trials; the field named by ``kind`` is set."""

    kind: Kind
    objective: str = Field(description="The objective analysed.")
    direction: Literal["minimize", "maximize"]
    n_done: int = Field(description="Done trials when computed (a change recomputes).")
    n_analysed: int = Field(description="Trials analysed: done, finite, at the target.")
    computed_at: float = Field(description="When this was computed (the same when cached).")
    importance: list[ImportanceOut] | None = Field(None, description="Most important first.")
    slices: list[SliceOut] | None = Field(None, description="One per parameter, space order.")
    contour: ContourOut | None = None
    cv: list[PredictionOut] | None = Field(None, description="In trial id order.")


# -- computing ---------------------------------------------------------------------------------
def _ticks(spec: StudySpec, name: str) -> list[tuple[float, str]]:
    """Where a parameter's axis labels go (0 to 1) and what they say."""
    param = spec.space[name]
    if isinstance(param, Categorical):
        k = len(param.choices)
        return [((i + 0.5) / k, str(c)) for i, c in enumerate(param.choices)]
    values = [param.low, param.decode([0.5]), param.high]
    return [(param.encode(v)[0], f"{v:.4g}") for v in values]


def _position(spec: StudySpec, name: str, value: Any) -> float:
    """A parameter value's position on its axis, 0 to 1 (a categorical: its choice's slot)."""
    param = spec.space[name]
    if isinstance(param, Categorical):
        return (param.choices.index(value) + 0.5) / len(param.choices)
    return float(param.encode(value)[0])


def _slices(spec: StudySpec, done: Sequence[Trial], objective: str) -> list[SliceOut]:
    order = sorted(done, key=lambda t: (t.finished_at or 0.0, t.id))
    ok = {t.id: feasible(t.values, spec.outcomes) for t in order}
    return [
        SliceOut(
            name=name,
            type=type(spec.space[name]).__name__.lower(),
            ticks=_ticks(spec, name),
            points=[
                SlicePoint(
                    trial_id=t.id,
                    x=t.params[name],
                    u=_position(spec, name, t.params[name]),
                    value=float(t.values[objective]),
                    feasible=ok[t.id],
                )
                for t in order
                if name in t.params  # a conditional parameter: the trials it is active in
            ],
        )
        for name in spec.space
    ]


def _contour(spec: StudySpec, c: Any) -> ContourOut:
    n = len(c.x)
    return ContourOut(
        x_name=c.x_name,
        y_name=c.y_name,
        x=c.x,
        y=c.y,
        u=[k / (n - 1) for k in range(n)],  # the grid analysis.contour evaluates
        z=c.z,
        fixed=c.fixed,
        x_ticks=_ticks(spec, c.x_name),
        y_ticks=_ticks(spec, c.y_name),
        points=[
            ContourPoint(
                x=px,
                y=py,
                u=_position(spec, c.x_name, px),
                v=_position(spec, c.y_name, py),
                value=value,
            )
            for px, py, value in c.points
        ],
    )


def analyse(
    kind: Kind,
    spec: StudySpec,
    trials: Sequence[Trial],
    x: str | None = None,
    y: str | None = None,
    objective: str | None = None,
) -> AnalysisOut:
    """One analysis as the API sends it; ``AboError`` naming the field for bad arguments
    (``x``, ``y``, ``objective``; in that order) and for too few trials (``trials``)."""
    from abo.analysis import gp as analysis  # torch: loaded on the analysis thread, never at import

    for field, value in (("x", x), ("y", y)):
        if kind == "contour" and value is None:
            raise AboError(
                f"{field}: a contour needs two numeric parameters x and y (of "
                f"{', '.join(analysis.numeric(spec))})",
                field=field,
            )
        if kind != "contour" and value is not None:
            raise AboError(f"{field}: only kind=contour takes x and y", field=field)
    found: dict[str, Any] = {}
    if kind == "importance":
        ranked = analysis.importance(spec, trials, objective)
        found["importance"] = [ImportanceOut(**i.to_json()) for i in ranked]
    elif kind == "contour":
        assert x is not None and y is not None
        found["contour"] = _contour(spec, analysis.contour(spec, trials, x, y, objective))
    elif kind == "cv":
        preds = analysis.cross_validation(spec, trials, objective)
        found["cv"] = [PredictionOut(**vars(p)) for p in preds]
    done, _, _ = analysis.observations(spec, trials, objective)  # checks objective and trials
    o = next((o for o in spec.objectives if o.name == objective), spec.objectives[0])
    if kind == "slice":
        found["slices"] = _slices(spec, done, o.name)
    return AnalysisOut(
        kind=kind,
        objective=o.name,
        direction="maximize" if o.direction == "maximize" else "minimize",
        n_done=sum(t.state is TrialState.DONE for t in trials),
        n_analysed=len(done),
        computed_at=time.time(),
        **found,
    )


class AnalysisCache:
    """Analyses computed on one thread of their own, the last ``size`` results kept by key.

    A request for a key being computed waits for that computation instead of starting another;
    a computation that raised is dropped, so the next request tries again.
    """

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="abo-analysis")
        self._results: OrderedDict[Key, Future[AnalysisOut]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Key, compute: Callable[[], AnalysisOut]) -> Future[AnalysisOut]:
        """The result of ``key``: cached, being computed, or computed now by ``compute``."""
        with self._lock:
            found = self._results.get(key)
            if found is not None:
                self._results.move_to_end(key)
                return found
            future = self._pool.submit(compute)
            self._results[key] = future
            while len(self._results) > self.size:
                self._results.popitem(last=False)  # a waiter still gets its future's result
        future.add_done_callback(lambda f: self._drop_failed(key, f))
        return future

    def _drop_failed(self, key: Key, future: Future[AnalysisOut]) -> None:
        if future.cancelled() or future.exception() is not None:
            with self._lock:
                if self._results.get(key) is future:
                    del self._results[key]


# -- the route ---------------------------------------------------------------------------------
StudyName = Annotated[str, Path(min_length=1, max_length=128, description="The study's name.")]
Created = Annotated[
    float | None,
    Header(
        alias=CREATED_HEADER,
        description="The `created_at` of the study the client loaded (404 if replaced).",
        allow_inf_nan=False,
    ),
]


def analysis_routes(state: ServiceState) -> APIRouter:
    """``GET /studies/{name}/analysis`` (``app.py`` mounts it under ``/api/v1``)."""
    r = APIRouter()
    cache = AnalysisCache()

    @r.get(
        "/studies/{name}/analysis",
        response_model=AnalysisOut,
        response_model_exclude_none=True,
        tags=["analysis"],
    )
    async def analysis(
        name: StudyName,
        kind: Annotated[Kind, Query(description="Which analysis.")],
        x: Annotated[str | None, Query(max_length=128, description="contour: across.")] = None,
        y: Annotated[str | None, Query(max_length=128, description="contour: up.")] = None,
        objective: Annotated[
            str | None, Query(max_length=128, description="Needed with several objectives.")
        ] = None,
        created: Created = None,
    ) -> AnalysisOut:
        """Understand a study: parameter importance, slices, the posterior mean's contour over
        two parameters, or the GP's leave-one-out cross-validation (``abo.analysis.gp``) of its
        done trials (with a fidelity, those at its target). Cached until the number of done
        trials changes; 422 naming ``kind``, ``x``, ``y``, ``objective`` or ``trials`` (fewer
        than 3 analysed) when it cannot be computed. Reads only."""

        def read(study: Any) -> tuple[StudySpec, float, list[Trial]]:
            return study.spec, study.record.created_at, study.trials

        spec, created_at, trials = await run_in_threadpool(state.call, name, created, read, True)
        n_done = sum(t.state is TrialState.DONE for t in trials)
        key: Key = (name, created_at, kind, x, y, objective, n_done)
        future = cache.get(key, lambda: analyse(kind, spec, trials, x, y, objective))
        return await asyncio.wrap_future(future)

    return r


__all__ = ["AnalysisCache", "AnalysisOut", "analyse", "analysis_routes"]
