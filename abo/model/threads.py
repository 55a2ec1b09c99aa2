"""How many threads abo's own torch work uses, without changing the user's torch settings.

abo's GPs are small (at most ``max_exact`` points): their operations are latency-bound, and
torch's default of one intra-op thread per core made them slower, not faster, on a machine
whose cores are also busy with evaluations (the README's ask/tell example: 82 s with torch's
default against 17 s with one thread on a 2-core machine). So abo's proposals and fits run
with ``ABO_TORCH_THREADS`` threads (default 1) inside ``torch_threads()``, and the thread
count the user's own torch code sees is restored as soon as abo's work is done.

Example:
    >>> import torch
    >>> before = torch.get_num_threads()
    >>> with torch_threads(1):
    ...     inside = torch.get_num_threads()
    >>> inside, torch.get_num_threads() == before
    (1, True)
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from abo.core.exceptions import AboError

ENV_VAR = "ABO_TORCH_THREADS"
_lock = threading.Lock()
_depth = 0
_saved: int | None = None


def abo_threads() -> int:
    """Intra-op threads for abo's torch work: ``ABO_TORCH_THREADS`` (a positive integer), or 1."""
    raw = os.environ.get(ENV_VAR, "").strip() or "1"
    try:
        threads = int(raw)
    except ValueError:
        threads = 0
    if threads < 1:
        raise AboError(f"{ENV_VAR}: expected a positive integer, got {raw!r}")
    return threads


@contextmanager
def torch_threads(n: int | None = None) -> Iterator[None]:
    """Run the block with ``n`` (default ``abo_threads()``) torch threads, then restore.

    Re-entrant and shared by the threads of a process (torch's setting is process-wide): the
    first block to enter saves the user's count, the last to leave restores it.
    """
    global _depth, _saved
    import torch

    wanted = abo_threads() if n is None else n
    with _lock:
        if _depth == 0:
            _saved = torch.get_num_threads()
            if _saved != wanted:
                torch.set_num_threads(wanted)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved is not None:
                if torch.get_num_threads() != _saved:
                    torch.set_num_threads(_saved)
                _saved = None
