"""The model's settings a study chooses from, as plain data (no torch), so the spec can check
them without loading the model: refit modes, noise modes, output transforms, and the number
of observations above which the GP is fitted on a subset."""

from __future__ import annotations

REFIT_MODES = ("auto", "sync", "background", "full")
NOISE_MODES = ("auto", "deterministic")
OUTPUT_TRANSFORMS = ("auto", "none", "power")  # abo.model.warping implements none and power
MAX_EXACT = 500  # observations above which the GP sees a subset (abo.model.surrogate)
