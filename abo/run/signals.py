"""SIGINT/SIGTERM before a run's loop is listening: remember them instead of dying.

``abo run`` spends seconds starting up (imports, opening the storage, starting the cluster)
before the optimization loop installs its own handlers. A batch system's SIGTERM in that
window would otherwise kill the process mid-start (exit -15). With :func:`defer` called first,
the signal is recorded; the loop takes it with :func:`take` as soon as it starts and stops
cleanly (nothing is running yet, so the stop is immediate). A second signal before then means
"now": the default action runs (SIGTERM kills, Ctrl-C raises ``KeyboardInterrupt``).
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

_received: list[str] = []
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _handler(signum: int, _frame: Any) -> None:
    if _received:  # a second one: do what it would have done without us
        if signum == signal.SIGINT:
            signal.signal(signum, signal.default_int_handler)
            raise KeyboardInterrupt
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    _received.append(signal.Signals(signum).name)


def defer() -> None:
    """Record SIGINT/SIGTERM from now until a loop installs its own handlers (main thread only)."""
    if threading.current_thread() is threading.main_thread():
        for s in _SIGNALS:
            signal.signal(s, _handler)


def take() -> str | None:
    """The name of a deferred signal not yet acted on (and forget it), or None."""
    return _received.pop(0) if _received else None
