"""Where the read commands read: a study straight from its storage (no strategy built, so no
torch), or a running service; and what a STUDY argument points at (a name or a study file)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from abo.cli.console import DEFAULT_STORAGE, _run, storage_label
from abo.core.exceptions import AboError, StorageError, StudyNotFoundError

if TYPE_CHECKING:
    from abo.core.space import Space
    from abo.core.trial import Trial
    from abo.storage import Storage, StudyRecord


class _StoredStudy:
    """A study read straight from its storage: what the read commands show, without building
    the study's strategy (so neither torch nor BoTorch is imported)."""

    def __init__(self, store: Storage, record: StudyRecord) -> None:
        self.store = store
        self.record = record

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def direction(self) -> str:
        return self.record.direction

    @property
    def space(self) -> Space:
        return self.record.space

    @property
    def trials(self) -> list[Trial]:
        return self.store.trials(self.record)

    @property
    def best(self) -> Trial | None:
        objectives = self.record.spec.objectives
        if len(objectives) != 1:
            names = ", ".join(o.name for o in objectives)
            raise AboError(
                f"best: this study has {len(objectives)} objectives ({names}); no single trial "
                "is best"
            )
        return _best(self.trials, self.record.spec)

    @property
    def spec(self) -> Any:
        return self.record.spec

    @property
    def best_trials(self) -> list[Trial]:
        from abo.analysis.summary import pareto_trials, results  # BoTorch's Pareto utilities

        spec = self.record.spec
        return pareto_trials(results(self.trials, spec), spec.objectives, spec.constraints)

    def reference_point(self) -> dict[str, float]:
        """The default reference point of the hypervolume in each objective's units, as
        ``abo.Study.reference_point`` gives it (``AboError`` before a result)."""
        from abo.analysis.summary import study_reference
        from abo.core.trial import TrialState

        spec = self.record.spec
        ref = study_reference(spec, self.store.trials(self.record, [TrialState.DONE]))
        if ref is None:
            raise AboError("reference_point: no trial is done yet", field="reference_point")
        return {o.name: o.sign * float(r) for o, r in zip(spec.objectives, ref, strict=True)}

    def hypervolume(self, reference_point: dict[str, float]) -> float:
        """The volume the feasible done trials dominate from ``reference_point``, as
        ``abo.Study.hypervolume`` measures it."""
        import torch

        from abo.analysis.summary import in_completion_order, utilities
        from abo.core.pareto import hypervolume
        from abo.core.trial import TrialState

        spec = self.record.spec
        objectives = spec.objectives
        ref = torch.tensor([o.sign * reference_point[o.name] for o in objectives],
                           dtype=torch.double)  # fmt: skip
        done = self.store.trials(self.record, [TrialState.DONE])
        told = in_completion_order(done, objectives, spec.constraints)
        return hypervolume(utilities(told, objectives), ref)

    def reports(self, trial_id: int | None = None) -> dict[int, list[Any]]:
        """Intermediate values by trial id (only ``trial_id``'s when given)."""
        return self.store.reports(self.record, None if trial_id is None else [trial_id])

    def __len__(self) -> int:
        return self.store.count(self.record)

    def delete(self) -> None:
        """Delete exactly this study (not one created again under its name meanwhile)."""
        self.store.delete_study(self.name, expected=self.record)


def _best(trials: list[Trial], spec: Any) -> Trial | None:
    from abo.analysis.summary import best_trial

    return best_trial(trials, spec)


def _trial_json(trial: Trial) -> dict[str, Any]:
    from abo.analysis.summary import trial_json

    return trial_json(trial)


def _summary(store: Storage, record: StudyRecord) -> dict[str, Any]:
    """A study's definition and trial counts, in the form the service's ``/studies`` lists."""
    from abo.analysis.summary import study_summary

    return study_summary(store, record)


@dataclass
class _Source:
    """A storage or a service, behind the few reads the commands need.

    ``origin`` says where the storage came from, for advice in errors: ``"default"``
    (nothing given: ``./abo.db``), ``"--storage"``, or the study file it was read from.
    """

    storage: str | None
    url: str | None
    token: str | None
    origin: str = "--storage"

    def __post_init__(self) -> None:
        if self.storage and self.url:
            raise typer.BadParameter("give --storage or --url, not both")
        if not self.url and not self.storage:
            self.storage, self.origin = DEFAULT_STORAGE, "default"

    @property
    def label(self) -> str:
        return self.url or storage_label(self.storage)

    def _client(self) -> Any:
        from abo.service.client import Client

        return Client(self.url or "", token=self.token or os.environ.get("ABO_TOKEN"), retries=2)

    def _advice(self) -> str:
        if self.origin == "default":
            return (
                f"looked in ./abo.db ({self.label}), the default storage: give --storage URL, "
                "or the study's TOML file instead of its name"
            )
        if self.origin == "--storage":
            return f"looked in {self.label}"
        return f"looked in {self.label}, the storage {self.origin} names"

    def _store(self) -> Storage:
        """The storage, refusing (and not creating) a SQLite file that does not exist."""
        from abo.storage import open_storage

        label = storage_label(self.storage)
        if label.startswith("sqlite:///") and not label.startswith("sqlite:///file:"):
            path = Path(label[len("sqlite:///") :].partition("?")[0])
            if not path.exists():
                if self.origin == "default":
                    raise StorageError(
                        f"storage: there is no abo.db in {path.parent} (the default storage); "
                        "give --storage URL, or the study's TOML file instead of its name"
                    )
                where = "" if self.origin == "--storage" else f" (the storage {self.origin} names)"
                raise StorageError(f"storage: {path} does not exist{where}")
        return open_storage(self.storage)

    def studies(self) -> list[dict[str, Any]]:
        if self.url:
            return self._client().studies()
        store = self._store()
        return [_summary(store, r) for r in store.list_studies()]

    def study(self, name: str) -> Any:
        """A ``_StoredStudy`` or a ``RemoteStudy``; a missing study's error says where abo
        looked and what to give instead."""
        if self.url:
            return self._client().load_study(name)
        store = self._store()
        try:
            return _StoredStudy(store, store.load_study(name))
        except StudyNotFoundError as exc:
            raise StudyNotFoundError(f"{exc}; {self._advice()}") from None

    def delete(self, study: Any) -> None:
        """Delete ``study`` (from ``self.study``) with its trials."""
        if self.url:
            self._client().delete_study(study.name)
        else:
            study.delete()


def _target(
    study: str, storage: str | None, url: str | None, token: str | None
) -> tuple[_Source, str]:
    """Where the STUDY argument points: a name with the options, or a study file."""
    if not study.lower().endswith(".toml"):
        return _Source(storage, url, token), study
    if storage or url:
        raise typer.BadParameter(
            "a study file names its own storage: give the file, or a name with --storage/--url",
            param_hint="STUDY",
        )
    from abo.cli.config import locate_study

    name, where = _run(lambda: locate_study(study))
    return _Source(where, None, token, origin=study), name
