"""A child Python process that fits GP hyperparameters for background refits.

A refit in a thread of the proposing process holds its interpreter lock for most of the fit
(GPyTorch and SciPy's L-BFGS-B are many small Python-level steps), so asks that overlap a
refit slowed down several-fold. Here the fit runs in a process of its own: the refit thread
only waits on a pipe (without the lock) and conditions a model on the hyperparameters that
come back.

The child is ``python -c "from abo.model.fitproc import main; main()"``, started on first use. It
reads pickled requests on stdin and writes pickled replies on stdout (its own prints go to
stderr); it exits when its stdin closes, which is also what happens when the parent dies.
"""

from __future__ import annotations

import atexit
import os
import pickle
import subprocess
import sys
import threading
import warnings
from collections.abc import Mapping
from typing import Any, BinaryIO

from torch import Tensor

from abo.core.exceptions import SurrogateFitError


class FitProcessDied(SurrogateFitError):
    """The child exited or broke its pipe during a fit: the fit may be retried here."""


class FitProcess:
    """Fits GP hyperparameters in a child process, one fit at a time (thread-safe).

    ``FitProcess.shared()`` is the one a process's studies use: one child (torch loaded:
    a few hundred MiB) however many studies a service holds; their refits take turns.
    """

    _shared: FitProcess | None = None
    _shared_lock = threading.Lock()

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self.fits = 0

    @classmethod
    def shared(cls) -> FitProcess:
        """This process's refit child (started on its first fit, stopped at exit)."""
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = cls()
                atexit.register(cls._shared.close)
            return cls._shared

    @property
    def pid(self) -> int | None:
        """The child's process id, once started."""
        return self._proc.pid if self._proc is not None else None

    def _start(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            env = dict(os.environ, PYTHONUNBUFFERED="1")
            self._proc = subprocess.Popen(
                [sys.executable, "-c", "from abo.model.fitproc import main; main()"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
            )  # fmt: skip
        return self._proc

    def start(self) -> None:
        """Start the child now (it loads torch while the caller goes on), not at its first fit."""
        with self._lock:
            self._start()

    def fit(
        self,
        X: Tensor,
        Y: Tensor,
        noise: str,
        hypers: Mapping[str, list[float]] | None,
        full: bool,
        seed: int,
        threads: int = 1,
        fidelity: tuple[int, ...] = (),
        prior: Any = None,
    ) -> tuple[dict[str, list[float]], bool]:
        """``fit_gp`` on ``X, Y`` in the child, warm-started from ``hypers``.

        Returns the fitted raw hyperparameters and whether the warm start won.

        Raises:
            SurrogateFitError: the fit failed (it would fail anywhere).
            FitProcessDied: the child died (the next fit restarts it).
        """
        request = {
            "X": X.detach().cpu(), "Y": Y.detach().cpu(), "noise": noise,
            "hypers": dict(hypers) if hypers else None, "full": full, "seed": seed,
            "threads": threads, "fidelity": tuple(fidelity), "prior": prior,
        }  # fmt: skip
        with self._lock:
            proc = self._start()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                pickle.dump(request, proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
                proc.stdin.flush()
                reply = pickle.load(proc.stdout)
            except (OSError, EOFError, pickle.UnpicklingError) as exc:
                self._kill()
                raise FitProcessDied(f"refit process: died during a fit ({exc!r})") from exc
            self.fits += 1
        if "error" in reply:
            raise SurrogateFitError(reply["error"])
        return reply["hypers"], bool(reply["warm"])

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            for stream in (proc.stdin, proc.stdout):
                try:
                    if stream is not None:
                        stream.close()
                except OSError:
                    pass
            if proc.poll() is None:
                proc.kill()
            proc.wait()

    def close(self) -> None:
        """Stop the child (a fit it is running is abandoned)."""
        with self._lock:
            self._kill()


def _serve(inp: BinaryIO, out: BinaryIO) -> None:
    """The child's loop: one reply per request until stdin closes."""
    import torch

    from abo.model.surrogate import condition, export_hypers, fit_gp

    while True:
        try:
            request = pickle.load(inp)
        except EOFError:
            return
        try:
            torch.set_num_threads(int(request["threads"]))
            X, Y, noise = request["X"], request["Y"], request["noise"]
            fid = tuple(request.get("fidelity", ()))
            prior = request.get("prior")  # a warm start's sources (abo.spec.warm_start.WarmPrior)
            hypers = request["hypers"]
            previous = condition(X, Y, noise, hypers, fid, prior) if hypers else None
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fitted = fit_gp(X, Y, noise, previous, request["full"], request["seed"], fid, prior)
            reply: dict[str, Any] = {"hypers": export_hypers(fitted.model), "warm": fitted.warm}
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which decides
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        try:
            pickle.dump(reply, out, protocol=pickle.HIGHEST_PROTOCOL)
            out.flush()
        except (BrokenPipeError, ConnectionResetError):
            return  # the parent exited while this fit ran: nobody to reply to


CHILD_NICENESS = 10
"""How much the child lowers its CPU priority: its refits are background work, so on a busy
machine the asks (which workers wait for) and the evaluations come first. On 2 cores, the
quadratic example's asks took 1.2-1.7 s while the child loaded torch beside them."""


def main() -> None:
    """The child's entry point: stdout is the reply pipe, prints go to stderr."""
    try:
        os.nice(CHILD_NICENESS)
    except (AttributeError, OSError):  # no nice() on this platform: same priority as the parent
        pass
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _serve(sys.stdin.buffer, out)
    try:
        out.close()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the parent went first; the reply it no longer wanted is dropped
