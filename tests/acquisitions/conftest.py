"""Fixtures for the strategy tests (helpers live in ``strategy_helpers``)."""

from __future__ import annotations

import pytest
from strategy_helpers import peaked_data

from abo.model.surrogate import fit_gp


@pytest.fixture(scope="module")
def peaked() -> tuple[object, object, object]:
    """A deterministic GP fitted to ``peaked_data``: ``(model, X, Y)``."""
    X, Y = peaked_data()
    return fit_gp(X, Y, noise="deterministic").model, X, Y
