"""``StudyLike``: what a local ``Study`` and a service's ``RemoteStudy`` both are.

The asynchronous loop, the CLI and the plots are written against this protocol, so they drive
a study in this process and one on a service alike. Both implement it through one base class,
``abo.study.api.StudyAPI``, and one contract suite runs over both
(``tests/study/test_study_like.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from abo.core.outcomes import Outcome
from abo.core.space import Space
from abo.core.trial import Report, Trial
from abo.spec.study_spec import StudySpec

if TYPE_CHECKING:
    from abo.executors.base import Executor
    from abo.run.loop import OptimizeResult


@runtime_checkable
class StudyLike(Protocol):
    """The ask/tell surface of a study, wherever it lives."""

    @property
    def name(self) -> str: ...

    @property
    def spec(self) -> StudySpec: ...

    @property
    def config(self) -> StudySpec: ...

    @property
    def space(self) -> Space: ...

    @property
    def outcomes(self) -> tuple[Outcome, ...]: ...

    @property
    def direction(self) -> str: ...

    @property
    def strategy(self) -> str: ...

    @property
    def seed(self) -> int: ...

    @property
    def trials(self) -> list[Trial]: ...

    def trials_dataframe(self) -> Any:
        """Every trial as a ``pandas.DataFrame`` (``abo.analysis.dataframe``)."""
        ...

    @property
    def pending(self) -> list[Trial]: ...

    @property
    def best(self) -> Trial | None: ...

    @property
    def best_trials(self) -> list[Trial]: ...

    def reference_point(self) -> dict[str, float]: ...

    def hypervolume(self, reference_point: Mapping[str, float] | None = None) -> float: ...

    def trial(self, trial_id: int) -> Trial: ...

    def __len__(self) -> int: ...

    def ask(self, n_workers: int | None = None, info: Mapping[str, Any] | None = None) -> Trial: ...

    def ask_batch(
        self,
        n: int,
        n_workers: int | None = None,
        info: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        *,
        pace: float | None = None,
    ) -> list[Trial]: ...

    def tell(
        self,
        trial_id: int,
        value: Any,
        metadata: Mapping[str, Any] | None = None,
        *,
        info: Mapping[str, Any] | None = None,
    ) -> Trial: ...

    def fail(
        self,
        trial_id: int,
        reason: str = "",
        metadata: Mapping[str, Any] | None = None,
        info: Mapping[str, Any] | None = None,
    ) -> Trial: ...

    def lose(self, trial_id: int, reason: str) -> Trial: ...

    def heartbeat(self, trial_id: int) -> Trial: ...

    def report(self, trial_id: int, step: Any, value: Any) -> bool: ...

    def reports(self, trial_id: int | None = None) -> dict[int, list[Report]]: ...

    def enqueue(self, params: Mapping[str, Any], *, allow_duplicate: bool = False) -> bool: ...

    def add(
        self,
        params: Mapping[str, Any],
        value: Any,
        metadata: Mapping[str, Any] | None = None,
        *,
        allow_duplicate: bool = False,
    ) -> Trial: ...

    def delete(self) -> None: ...

    def optimize(
        self,
        objective: Callable[..., Any],
        n_trials: int | None = None,
        n_workers: int | None = 4,
        executor: Executor | None = None,
        callback: Callable[[Any, Trial], None] | None = None,
        timeout: float | None = None,
        max_trials: int | None = None,
        **options: Any,
    ) -> OptimizeResult: ...
