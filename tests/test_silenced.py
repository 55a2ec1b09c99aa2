"""Silencing warnings on one thread never changes what another thread sees."""

from __future__ import annotations

import threading
import warnings

from abo.quiet import silenced


def test_silenced_hides_this_threads_warnings_only() -> None:
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            with silenced():
                warnings.warn("from a silenced thread", stacklevel=1)

    before = [f for f in warnings.filters if "abo" not in repr(f[1])]
    with warnings.catch_warnings(record=True) as caught:  # one block, entered by this thread
        warnings.simplefilter("always")
        thread = threading.Thread(target=worker)
        thread.start()
        try:
            for i in range(200):
                warnings.warn(f"user warning {i}", stacklevel=1)
        finally:
            stop.set()
            thread.join()
    messages = [str(w.message) for w in caught]
    assert messages == [f"user warning {i}" for i in range(200)]  # none swallowed, none extra
    assert [f for f in warnings.filters if "abo" not in repr(f[1])] == before
