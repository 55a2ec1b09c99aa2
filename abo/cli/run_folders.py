"""The folders ``abo.Command`` runs a study's trials in, found and removed with the study
(``abo delete``): ``<workdir>/<study name>/trial-<id>-<attempt>``."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from abo.core.exceptions import AboError

if TYPE_CHECKING:
    from abo.core.trial import Trial

RUN_FOLDER = re.compile(r"trial-\d+-\d+|run-[0-9a-f]{8}")
"""The names ``abo.Command`` gives a trial's folder inside ``<workdir>/<study name>/``."""


def run_folders(name: str, trials: list[Trial], study_file: str | None = None) -> list[Path]:
    """The folders ``abo.Command`` keeps study ``name``'s trials in (``<workdir>/<name>``,
    each holding ``trial-<id>-<attempt>`` folders), that exist here: from the paths its
    finished trials recorded (``workdir`` in their metadata), and from a study file's
    ``[objective] workdir`` (which also finds the folders of trials still running)."""
    roots: set[Path] = set()
    for t in trials:
        where = t.user.get("workdir") if isinstance(t.user, dict) else None
        if isinstance(where, str) and where:
            folder = Path(where)
            if folder.parent.name == name and RUN_FOLDER.fullmatch(folder.name):
                roots.add(folder.parent)
    if study_file is not None:
        roots.update(_file_run_root(study_file, name))
    return sorted(r for r in roots if r.is_dir())


def _file_run_root(study_file: str, name: str) -> list[Path]:
    """``<workdir>/<name>`` of a study file whose objective is a command (as ``abo run``
    resolves it: ``abo-runs`` by default, a relative path from the file's folder)."""
    from abo.cli.config import load_spec

    try:
        spec = load_spec(study_file)
    except AboError:
        return []
    if "command" not in spec.objective:
        return []
    workdir = Path(str(spec.objective.get("workdir", "abo-runs")))
    return [(workdir if workdir.is_absolute() else spec.path.parent / workdir) / name]


def remove_run_folders(roots: list[Path]) -> list[str]:
    """Remove the trial folders in ``roots`` (and each root once empty); return what could not
    be removed, and why (anything else found in a root is left there)."""
    problems: list[str] = []
    for root in roots:
        try:
            for entry in sorted(root.iterdir()):
                if RUN_FOLDER.fullmatch(entry.name) and entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
            left = sorted(e.name for e in root.iterdir())
            if left:
                problems.append(f"{root}: kept, it holds more than trial folders ({left[0]}, ...)")
            else:
                root.rmdir()
        except OSError as exc:
            problems.append(f"{root}: {exc.strerror or exc}")
    return problems
