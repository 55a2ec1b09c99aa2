"""HEBO (Huawei's winner of the NeurIPS 2020 black-box optimisation challenge) as a peer.

HEBO 0.3.6 pins ``numpy<1.25``, older than abo's NumPy, so it lives in its own virtual
environment and runs in a child process (``benchmarks/hebo_worker.py``) that this adapter
talks to over a pipe, one JSON line each way. Make the environment once, from the repository
root (a few minutes; the file pins what HEBO 0.3.6 needs to wheels that work together)::

    python3 -m venv .venv-hebo
    .venv-hebo/bin/pip install -r benchmarks/hebo-requirements.txt

``ABO_HEBO_PYTHON`` names another interpreter. The adapter has the benchmark methods'
interface (``benchmarks/peers.py``). HEBO as its authors run it: a GP with input and output
warping (a power transform of the losses), the MACE acquisition ensemble optimised by NSGA-II,
and ``rand_sample = parameters + 1`` Sobol points first. HEBO has no notion of pending points:
each ask is ``suggest(n_suggestions=1)``, a random member of MACE's Pareto front, so an ask
while others run differs from them only by that draw; nor of conditional spaces (the flat
space, inactive parameters dropped, as for Ax).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.peers import Param, _bounds, _check, _decode, _finite, _labels, encode

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "hebo_worker.py"


def hebo_python() -> Path:
    """The interpreter of HEBO's environment: ``ABO_HEBO_PYTHON``, else ``.venv-hebo``'s."""
    given = os.environ.get("ABO_HEBO_PYTHON")
    return Path(given) if given else ROOT / ".venv-hebo" / "bin" / "python"


def available() -> bool:
    """Whether HEBO's environment exists and imports HEBO."""
    python = hebo_python()
    if not python.exists():
        return False
    done = subprocess.run([str(python), "-c", "import hebo"], capture_output=True, timeout=120)
    return done.returncode == 0


class HeboMethod:
    """HEBO in a child process, minimising the loss; ``seed`` seeds its generators and Sobol
    sequence, ``k`` is not used (HEBO does not hear of pending trials)."""

    def __init__(self, params: Sequence[Param], seed: int, k: int) -> None:
        _check(params)
        self.params = tuple(params)
        self.k = k
        python = hebo_python()
        if not python.exists():
            raise RuntimeError(
                f"HEBO's environment is missing: no {python} (make it as benchmarks/hebo_peer.py "
                "says, or set ABO_HEBO_PYTHON)"
            )
        self.proc = subprocess.Popen(
            [str(python), str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=sys.stderr, text=True, bufsize=1,
        )  # fmt: skip
        described = [
            {"name": p.name, "kind": p.kind, "log": p.log, "labels": list(_labels(p)),
             "low": None if p.kind == "cat" else _bounds(p)[0],
             "high": None if p.kind == "cat" else _bounds(p)[1]}
            for p in self.params
        ]  # fmt: skip
        self.rand_sample = int(
            self._call({"op": "init", "seed": seed, "params": described})["rand_sample"]
        )

    def _call(self, msg: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"HEBO's worker exited (status {self.proc.poll()})")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"HEBO: {answer['error']}")
        return answer

    def ask(self) -> tuple[Any, dict[str, Any]]:
        """One suggestion and its active configuration."""
        answer = self._call({"op": "ask"})
        return answer["id"], _decode(self.params, answer["config"])

    def tell(self, handle: Any, value: float) -> None:
        """Observe suggestion ``handle``'s loss (finite: see ``peers._finite``)."""
        self._call({"op": "tell", "id": handle, "value": _finite(value)})

    def add(self, config: Mapping[str, Any], value: float) -> None:
        """Observe a result HEBO did not suggest (a shared initial design)."""
        raw = encode(self.params, config, flat=True)
        self._call({"op": "add", "config": raw, "value": _finite(value)})

    def close(self) -> None:
        """End the child process."""
        if getattr(self, "proc", None) is not None and self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=30)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # a worker that will not end on its own
            self.proc.kill()
