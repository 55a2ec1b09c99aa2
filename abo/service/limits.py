"""What one study created over HTTP may cost: bounds on its search space.

A proposal's time and memory grow with the space's encoded dimension (a categorical counts
one dimension per choice, being one-hot): a 20,000-choice categorical made one ask take 194 s
and 350 MB. Bodies are already bounded in bytes; these bound the work. Measured on a 2-core
machine after 12 results: 1,000 choices, 6 s and 0.8 GB for an ask; 500 choices, 2.6 s.
A study created in Python or from a study file is not limited (its owner pays its cost).

Example:
    >>> import abo
    >>> try:
    ...     check_space_cost(abo.Space({"c": abo.Categorical(list(range(MAX_CHOICES + 1)))}))
    ... except abo.SearchSpaceError as exc:
    ...     print(exc.field)
    space.c
"""

from __future__ import annotations

from abo.core.exceptions import SearchSpaceError
from abo.core.space import Categorical, Space

MAX_CHOICES = 1_000
"""Most choices of one categorical parameter."""
MAX_PARAMETERS = 300
"""Most parameters of one study."""
MAX_DIMENSIONS = 1_000
"""Most encoded dimensions (one per numeric parameter, one per choice of a categorical)."""


def check_space_cost(space: Space) -> None:
    """Refuse a space beyond the limits above (``SearchSpaceError`` naming the field)."""
    for name, param in space.items():
        if isinstance(param, Categorical) and len(param.choices) > MAX_CHOICES:
            raise SearchSpaceError(
                f"space.{name}: {len(param.choices)} choices; a study served over HTTP may "
                f"have at most {MAX_CHOICES} per categorical",
                field=f"space.{name}",
            )
    if len(space) > MAX_PARAMETERS:
        raise SearchSpaceError(
            f"space: {len(space)} parameters; a study served over HTTP may have at most "
            f"{MAX_PARAMETERS}",
            field="space",
        )
    if space.dim > MAX_DIMENSIONS:
        raise SearchSpaceError(
            f"space: {space.dim} encoded dimensions (a categorical counts one per choice); a "
            f"study served over HTTP may have at most {MAX_DIMENSIONS}",
            field="space",
        )
