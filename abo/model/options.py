"""The model's settings a study chooses from, as plain data (no torch), so the spec can check
them without loading the model: refit modes, noise modes, output transforms, the devices the
GP may run on, and how many observations it is fitted on before it takes a subset."""

from __future__ import annotations

import re

REFIT_MODES = ("auto", "sync", "background", "full")
NOISE_MODES = ("auto", "deterministic")
OUTPUT_TRANSFORMS = ("auto", "none", "power")  # abo.model.warping implements none and power
MAX_EXACT = 500  # observations above which the GP sees a subset on a CPU (abo.model.surrogate)
MAX_EXACT_CUDA = 20_000
"""Observations above which the GP sees a subset on a CUDA device: an exact GP's fit and
acquisition search there stay within seconds up to it (docs/benchmarks.md, "The GP on an
accelerator"), where a CPU's would take minutes."""

DEVICE_FORM = re.compile(r"^(auto|cpu|cuda(:\d{1,3})?)$")
DEVICES = "'auto' (a CUDA device when one is present, else the CPU), 'cpu', 'cuda' or 'cuda:N'"


def max_exact_for(device_type: str) -> int:
    """The default ``max_exact`` for a device type (``"cpu"``, ``"cuda"``)."""
    return MAX_EXACT_CUDA if device_type == "cuda" else MAX_EXACT
