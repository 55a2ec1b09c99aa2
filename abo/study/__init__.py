"""The facade: ``Study`` (ask/tell in-process), ``create_study``/``load_study``/
``delete_study``, ``StudyAPI`` (what ``Study`` and the service's ``RemoteStudy`` share) and
``StudyLike``, the contract every front end keeps. Names load on first use (PEP 562)."""

import importlib as _importlib
import typing as _typing

_EXPORTS = {
    "Study": "abo.study.study",
    "create_study": "abo.study.study",
    "delete_study": "abo.study.study",
    "load_study": "abo.study.study",
    "StudyLike": "abo.study.protocol",
}

if _typing.TYPE_CHECKING:
    from abo.study.protocol import StudyLike as StudyLike
    from abo.study.study import Study as Study
    from abo.study.study import create_study as create_study
    from abo.study.study import delete_study as delete_study
    from abo.study.study import load_study as load_study


def __getattr__(name: str) -> object:
    if name in _EXPORTS:
        return getattr(_importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'abo.study' has no attribute {name!r}")
