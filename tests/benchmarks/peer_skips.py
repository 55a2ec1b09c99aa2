"""Skip a test unless a peer optimiser is installed (``pip install -e .[peers]``; HEBO's own
environment), saying what is missing."""

from __future__ import annotations

import pytest

from benchmarks import hebo_peer

NEEDS = {"ax": ("ax", "pip install ax-platform"), "smac": ("smac", "pip install smac"),
         "syne-botorch": ("syne_tune", "pip install syne-tune"),
         "syne-bore": ("syne_tune", "pip install syne-tune")}  # fmt: skip


def installed(peer: str) -> None:
    """Skip unless ``peer`` is installed. Imports happen here, not at module level, so that
    collecting the suite does not import Ax (about 3 s) in every test process."""
    if peer == "hebo":
        if not hebo_peer.available():
            pytest.skip(f"HEBO's environment is missing ({hebo_peer.hebo_python()}): "
                        "see benchmarks/hebo_peer.py")  # fmt: skip
        return
    module, how = NEEDS[peer]
    pytest.importorskip(module, reason=f"{peer} is not installed ({how})")
