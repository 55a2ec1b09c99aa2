"""When the GP's hyperparameters are refitted: the schedule, which depends only on data sizes."""

from __future__ import annotations

import hashlib
import math

FULL_REFIT_GROWTH = 1.2  # a full multi-start refit each time the data grow by this factor


def full_refit_due(n_prev: int | None, n: int) -> bool:
    """Whether a refit on ``n`` observations, after one on ``n_prev``, is a full one.

    Full refits happen on the first fit and whenever ``n`` crosses the next power of
    ``FULL_REFIT_GROWTH`` (about every 10-20 % of growth): often while the model is still
    learning its scales, rarely once a fit costs seconds. Depends only on the two sizes, so
    a resumed study makes the same choice.
    """
    if n_prev is None or n_prev < 1:
        return True
    growth = math.log(FULL_REFIT_GROWTH)
    return math.floor(math.log(n) / growth) > math.floor(math.log(n_prev) / growth)


def data_key(key: tuple[int, ...]) -> str:
    """A short digest of the observed trial ids (what a fit saw)."""
    return hashlib.sha1(",".join(map(str, key)).encode()).hexdigest()[:16]


def refit_step(n: int) -> int:
    """New observations that make a refit worth its cost after a fit on ``n``.

    One while fits are cheap; 5 % of the data once they are not, so a refit does not occupy a
    core for good in a fast study (the conditioned model uses every observation regardless;
    only the hyperparameters wait).
    """
    return max(1, n // 20)
