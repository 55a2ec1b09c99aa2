"""The suite's ``xdist_group`` marks take effect under ``--dist loadgroup`` (pyproject's addopts).

pytest-xdist groups a marked test by adding ``@GROUP`` to its node id in the worker; the
scheduler then sends every test of that id's group to one process. When the suffix is lost (as
with pytest 9.2 and pytest-xdist 3.8) nothing fails: the SLURM tests share the 2-CPU node at
once and test_multiobjective.py builds its module fixture in every process. This test fails then.
"""

from __future__ import annotations

import pytest


@pytest.mark.xdist_group("probe")
def test_a_grouped_test_carries_its_group_to_the_scheduler(request: pytest.FixtureRequest) -> None:
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not in a pytest-xdist worker under --dist loadgroup")
    assert request.node.nodeid.endswith("@probe"), request.node.nodeid
