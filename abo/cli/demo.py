"""The ``abo demo`` objective: Hartmann-6 with a random evaluation time, like a real simulation.

Kept free of torch so Dask workers can import it quickly.
"""

from __future__ import annotations

import math
import random
import time
from typing import Any

HARTMANN6_MIN = -3.32237
_A = [
    [10, 3, 17, 3.5, 1.7, 8],
    [0.05, 10, 17, 0.1, 8, 14],
    [3, 3.5, 1.7, 10, 17, 8],
    [17, 8, 0.05, 10, 0.1, 14],
]
_P = [
    [0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886],
    [0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991],
    [0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650],
    [0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381],
]
_ALPHA = [1.0, 1.2, 3.0, 3.2]
PARAMS = [f"x{i}" for i in range(1, 7)]


def hartmann6(x: list[float]) -> float:
    """The Hartmann-6 function on ``[0, 1]^6``; its minimum is about -3.32237."""
    total = 0.0
    for a, p, alpha in zip(_A, _P, _ALPHA, strict=True):
        total -= alpha * math.exp(
            -sum(ai * (xi - pi) ** 2 for ai, xi, pi in zip(a, x, p, strict=True))
        )
    return total


def slow_hartmann6(
    params: dict[str, Any], min_seconds: float = 0.2, max_seconds: float = 1.5
) -> float:
    """Hartmann-6 after sleeping a random 0.2-1.5 s (seeded by the parameters)."""
    x = [float(params[name]) for name in PARAMS]
    rng = random.Random(repr(x))
    time.sleep(rng.uniform(min_seconds, max_seconds))
    return hartmann6(x)
