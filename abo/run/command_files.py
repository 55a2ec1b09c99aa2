"""Trial files written and read without following links: a symbolic or hard link planted at
a trial's folder or file fails the trial instead of having abo write through it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

STDERR_TAIL = 2000


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC


class _Planted(Exception):
    """A trial's folder or file is a link (or not what abo made): nothing is written there."""


def _open_folder(folder: Path) -> int:
    """A descriptor of the trial's folder, made if new; ``_Planted`` if it is a symbolic link
    (even one swapped in after the check: opened with ``O_NOFOLLOW``) or not this user's."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        folder.mkdir()
    except FileExistsError:
        pass  # an earlier attempt's, or planted: judged below
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC)
    except OSError as exc:
        kind = "a symbolic link" if folder.is_symlink() else f"not a folder ({exc.strerror})"
        raise _Planted(f"workdir: {folder} is {kind}; refusing to write the trial there") from None
    info = os.fstat(fd)
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        os.close(fd)
        raise _Planted(f"workdir: {folder} belongs to another user; refusing to write there")
    return fd


def _create(folder_fd: int, name: str, folder: Path) -> int:
    """Create ``name`` in the folder for writing, never through a link: ``O_EXCL`` with
    ``O_NOFOLLOW``. A regular file an earlier run left is removed first (removing a name
    never touches what a link points to); a symbolic or hard link is ``_Planted``."""
    for _ in range(2):
        try:
            return os.open(name, _CREATE, 0o644, dir_fd=folder_fd)
        except FileExistsError:
            info = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                raise _Planted(
                    f"{name}: {folder / name} is a symbolic link; refusing to write through it"
                ) from None
            if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
                raise _Planted(
                    f"{name}: {folder / name} is not a plain file of its own (a hard link or "
                    "a special file); refusing to write to it"
                ) from None
            os.unlink(name, dir_fd=folder_fd)  # an earlier run's: replaced
    raise _Planted(f"{name}: {folder / name} keeps reappearing; refusing to write to it")


def _read(folder_fd: int, name: str) -> bytes:
    """The bytes of ``name`` in the folder, not through a symbolic link."""
    fd = os.open(name, os.O_RDONLY | _NOFOLLOW | _CLOEXEC, dir_fd=folder_fd)
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def _tail(folder_fd: int, name: str, n: int = STDERR_TAIL) -> str:
    try:
        data = _read(folder_fd, name)[-n:]
    except OSError:
        return ""
    return data.decode(errors="replace").strip()
