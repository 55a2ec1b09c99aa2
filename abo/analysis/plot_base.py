"""What every plot of a study shares: the headless matplotlib backend, labels drawn as literal
text, the colour of each trial state and the predicate saying which trials are results."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import matplotlib

matplotlib.use("Agg")

from abo.core.trial import Trial, TrialState  # noqa: E402

_P = ParamSpec("_P")
_R = TypeVar("_R")


def literal_text(draw: Callable[_P, _R]) -> Callable[_P, _R]:
    """Draw with every label as literal text: a parameter or study name holding ``$...$`` is
    shown as written, never parsed as mathtext (``$\\nocmd{$`` made every plot of its study
    fail). Scoped to the call, so the user's own matplotlib settings are untouched."""

    @functools.wraps(draw)
    def literal(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with matplotlib.rc_context({"text.parse_math": False}):
            return draw(*args, **kwargs)

    return literal


Counts = Callable[[Trial], bool]
"""Which done trials are results (a study with a fidelity: those at its target)."""

COLOURS = {
    TrialState.DONE: "tab:blue",
    TrialState.FAILED: "tab:red",
    TrialState.LOST: "tab:orange",
    TrialState.STOPPED: "tab:purple",
    TrialState.RUNNING: "tab:gray",
}
"""The colour of each trial state in the timeline and the learning curves."""
