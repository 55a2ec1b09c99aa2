"""Request and response bodies of the HTTP API (pydantic), strict about numbers.

Every request model forbids unknown fields and non-finite numbers, also inside free-form JSON
objects (``metadata``, ``info``, ``params``): FastAPI would otherwise accept ``NaN``,
``Infinity``, the string ``"nan"`` and ``1e400`` (parsed as ``inf``) as a float.
Response models mirror ``abo.Trial.to_dict()`` so the OpenAPI schema describes what is sent.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    create_model,
    model_validator,
)
from pydantic_core import PydanticCustomError

from abo.spec.study_spec import OPTIONS

MAX_ASK = 64
MAX_PAGE = 10_000
MAX_TRIAL_ID = 2**31 - 1
MAX_SEED = 2**63 - 1
Name = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]
Finite = Annotated[float, Field(strict=False, allow_inf_nan=False)]
Value = Annotated[float, Field(strict=True, allow_inf_nan=False)]
Reason = Annotated[str, Field(max_length=10_000)]
MAX_DEPTH = 32
NON_FINITE = "non_finite_json"  # the error type of a non-finite number inside a JSON object


def _checked_json(value: Any) -> Any:
    """Refuse JSON nested deeper than ``MAX_DEPTH`` (it would exhaust the recursion limit of
    whatever serialises it next) and non-finite numbers anywhere inside (``NaN``,
    ``Infinity``, ``1e400``: they would be stored as ``null``), naming the path to the value.
    Iterative, so checking is safe at any depth."""
    stack: list[tuple[Any, int, str]] = [(value, 0, "")]
    while stack:
        item, depth, path = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, float) and not math.isfinite(item):
            raise PydanticCustomError(
                NON_FINITE, "must be a finite number, got {value}", {"path": path, "value": item}
            )
        if isinstance(item, dict):
            stack += [(v, depth + 1, f"{path}.{k}" if path else str(k)) for k, v in item.items()]
        elif isinstance(item, list):
            stack += [(v, depth + 1, f"{path}.{i}" if path else str(i)) for i, v in enumerate(item)]
    return value


Json = Annotated[dict[str, Any], AfterValidator(_checked_json)]


def _float_overflow(value: Any) -> str | None:
    """The path to the first integer in ``value`` that no float can hold (``10**400``,
    ``2**1024``), or ``None``. Iterative: safe at any depth (bodies are bounded in bytes)."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, int) and not isinstance(item, bool):
            try:
                float(item)
            except OverflowError:
                return path
        elif isinstance(item, dict):
            stack += [(v, f"{path}.{k}" if path else str(k)) for k, v in item.items()]
        elif isinstance(item, list):
            stack += [(v, f"{path}.{i}" if path else str(i)) for i, v in enumerate(item)]
    return None


class _Request(BaseModel):
    """A request body: unknown fields, non-finite numbers and integers beyond the float
    range are refused, the latter anywhere in the body (``1e400`` is refused as ``inf``;
    ``10**400`` written out as digits is refused the same way, naming its path)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    @model_validator(mode="before")
    @classmethod
    def _no_huge_integers(cls, data: Any) -> Any:
        path = _float_overflow(data)
        if path is not None:
            raise PydanticCustomError(
                NON_FINITE,
                "must be a finite number, got an integer beyond the float range (+-1.8e308)",
                {"path": path},
            )
        return data


class StudyCreateBase(_Request):
    """What every create body has; the study's options are added from ``abo.spec.study_spec``."""

    name: Name
    load_if_exists: bool | Literal["keep"] = Field(
        default=True,
        description="When a study of this name exists: true loads it if its space, outcomes "
        "and every option given here equal the stored ones (409 `options_conflict` names each "
        'that differs; an option left out is not compared); "keep" loads it with its '
        "stored options whatever is given (still validated); false is 409 `study_exists`.",
    )
    space: dict[str, Json] = Field(
        description="The search space as `abo.Space.to_json()` writes it."
    )
    outcomes: Json | list[Json] | None = Field(
        default=None,
        description="A dict of outcome name to 'minimize'/'maximize', or a list of "
        "{name, kind, direction} (default: one objective 'value').",
    )
    direction: Literal["minimize", "maximize"] | None = Field(
        default=None, description="The direction of a study of one objective."
    )
    seed: Annotated[int | None, Field(ge=0, le=MAX_SEED)] = None


def _study_create() -> type[StudyCreateBase]:
    """The create body: ``StudyCreateBase`` and every option of ``abo.spec.study_spec.StudySpec``
    (taken
    from it, so a new study option is in the API the moment it is in the spec). The options
    are validated by the spec itself, with the same errors as in Python."""
    fields: dict[str, Any] = {}
    for option, (default, doc) in OPTIONS.items():
        kind: Any = Json if isinstance(default, dict) else Any
        fields[option] = (kind, Field(default=default, description=doc))
    return create_model(
        "StudyCreate",
        __base__=StudyCreateBase,
        __doc__="Create a study, or load it when one of that name exists with the same space.",
        **fields,
    )


if TYPE_CHECKING:
    StudyCreate = StudyCreateBase
else:
    StudyCreate = _study_create()


class AskRequest(_Request):
    """Start ``count`` trials; a ``client_id`` with running trials gets those back first."""

    count: Annotated[int, Field(ge=1, le=MAX_ASK)] = 1
    n_workers: Annotated[int | None, Field(ge=1, le=100_000)] = None
    client_id: Annotated[str | None, Field(min_length=1, max_length=128)] = None
    info: Json | None = Field(
        default=None, description="Merged into each new trial's `info` (e.g. the driver)."
    )
    pace: Annotated[float | None, Field(gt=0, le=1e9, allow_inf_nan=False)] = Field(
        default=None,
        description=(
            "Seconds each point may take before one of the caller's workers waits for it: "
            "the default strategy then never waits for a fit and switches to a cheaper member "
            "when its usual one cannot keep up (not exactly reproducible). Omit it for "
            "reproducible asks."
        ),
    )


def _values(value: Any) -> Any:
    """A told value: a finite number, or a dict of outcome name to finite number (which
    outcomes a study has is checked by the study, naming the outcome)."""
    items = value.items() if isinstance(value, dict) else [(None, value)]
    for name, number in items:
        path = {"path": name} if name is not None else {}
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise PydanticCustomError(
                "finite_number", "expected a number, got {got}", {"got": repr(number), **path}
            )
        if not math.isfinite(number):
            raise PydanticCustomError(
                "finite_number", "must be a finite number, got {got}", {"got": number, **path}
            )
    return value


Values = Annotated[Any, BeforeValidator(_values)]


class TellRequest(_Request):
    """A running trial's outcomes: a number (one objective) or a dict by outcome name (a
    repeat with the same values is a no-op)."""

    value: Values
    metadata: Json | None = None
    info: Json | None = None


class FailRequest(_Request):
    """The parameters caused the failure: the study's failure model learns from it where
    evaluations fail (unlike a lost trial, which says nothing about its parameters)."""

    reason: Reason = ""
    metadata: Json | None = None
    info: Json | None = None


class LoseRequest(_Request):
    """The infrastructure failed: the trial is lost and its parameters re-queued."""

    reason: Annotated[str, Field(min_length=1, max_length=10_000)]


class ReportRequest(_Request):
    """A running trial's intermediate value: ``value`` after ``step`` (steps increase; the
    same step and value again is a no-op)."""

    step: Annotated[float, Field(ge=0, allow_inf_nan=False)]  # strict: "3" is refused
    value: Annotated[float, Field(allow_inf_nan=False)]  # as tell refuses strings


class ReportItem(BaseModel):
    trial_id: int
    step: float
    value: float
    at: float


class ReportsOut(BaseModel):
    """Intermediate values, by trial id and then step."""

    reports: list[ReportItem]


class ParamsRequest(_Request):
    """Parameters to enqueue (evaluated next), checked against the study's space; parameters
    the study already has are skipped unless ``allow_duplicate``."""

    params: Json
    allow_duplicate: bool = False


class EnqueueResponse(BaseModel):
    """Whether the parameters were queued (``false``: the study already had them)."""

    queued: bool


class AddRequest(_Request):
    """A known result to record as a done trial (warm start); a done trial with the same
    parameters and value is returned instead, unless ``allow_duplicate``."""

    params: Json
    value: Values
    metadata: Json | None = None
    allow_duplicate: bool = False


class TrialOut(BaseModel):
    """One trial, as ``abo.Trial.to_dict()`` plus its duration."""

    id: int
    study: str
    params: dict[str, Any]
    state: Literal["running", "done", "failed", "lost", "stopped"]
    value: float | None = None
    reason: str | None = None
    retry_of: int | None = None
    attempt: int = 0
    values: dict[str, float] = Field(default_factory=dict)
    proposal: dict[str, Any] | None = Field(
        default=None, description="How the parameters were chosen (abo's own record)."
    )
    info: dict[str, Any] = Field(default_factory=dict)
    user: dict[str, Any] = Field(default_factory=dict)
    created_at: float
    finished_at: float | None = None
    lease_expires_at: float | None = None
    duration: float | None = None


class ReportOut(BaseModel):
    """Whether the trial should stop (the study's stopping rule ended it), and the trial."""

    stop: bool
    trial: TrialOut


class AskResponse(BaseModel):
    """The started trials, their leases, and how many observations the model had."""

    trials: list[TrialOut]
    n_observations: int = Field(
        description="Observations of the model that proposed these (0 for design points)."
    )


class TrialPage(BaseModel):
    """A page of trials in id order; ``next_offset`` is ``null`` on the last page."""

    trials: list[TrialOut]
    total: int
    offset: int
    next_offset: int | None = None


class StudyOut(BaseModel):
    """A study's definition and a summary of its trials."""

    name: str
    spec: dict[str, Any] = Field(
        description="The whole study spec (`abo.spec.study_spec.StudySpec`)."
    )
    space: dict[str, Any]
    outcomes: list[dict[str, Any]]
    direction: str
    strategy: str
    seed: int
    config: dict[str, Any]
    created_at: float
    n_trials: int = Field(
        description="How many trials the study holds, in every state (a count, not a budget)."
    )
    states: dict[str, int]
    best: TrialOut | None = None
    front_size: int | None = Field(
        None,
        description="Several objectives: how many done trials are on the Pareto front "
        "(`best` is then null: no single trial is best).",
    )
    n_feasible: int | None = Field(
        None,
        description="With outcome constraints: how many done trials satisfy them all (`best` "
        "is the best of these; null before one does).",
    )
    sources: dict[str, int] = Field(
        default_factory=dict,
        description="Where the trials' parameters came from, by source: design, model, random, "
        "fallback (quasi-random where the model was not to be had), enqueued, added, retry.",
    )


class StudyList(BaseModel):
    studies: list[StudyOut]


class BestOut(BaseModel):
    """The best done trial, ``null`` before the first result."""

    trial: TrialOut | None = None


class BestTrialsOut(BaseModel):
    """The Pareto front of done trials (for one objective, the best trial), in id order."""

    trials: list[TrialOut]


class ReferencePointOut(BaseModel):
    """The default reference point of the hypervolume, in each objective's units."""

    reference_point: dict[str, float]


class HypervolumeRequest(BaseModel):
    """A reference point by objective name; ``null``: the study's default."""

    model_config = ConfigDict(extra="forbid")
    reference_point: dict[str, Any] | None = None


class HypervolumeOut(BaseModel):
    hypervolume: float
    reference_point: dict[str, float]


class ErrorDetail(BaseModel):
    code: str = Field(description="Machine-readable, e.g. `invalid_value`, `trial_not_found`.")
    message: str
    field: str | None = None


class ErrorBody(BaseModel):
    """Every error response: ``{"error": {"code", "message", "field"}}``."""

    error: ErrorDetail


class Health(BaseModel):
    """``/healthz``: the process answers."""

    status: str


class Ready(Health):
    """``/readyz``: the storage can be written; and how many asks wait for a proposal."""

    asks_waiting: int
