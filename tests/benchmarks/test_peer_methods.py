"""The peers as methods of the synthetic grids (``benchmarks/peer_methods.py``): each starts
from the shared initial design, runs asynchronously to the budget, and is never in a suite's
default method list."""

from __future__ import annotations

import pytest

from benchmarks.harness import simulate_run, suite_cells
from benchmarks.peer_methods import PEERS, CubePeer
from benchmarks.suites import SUITES, get_problem
from tests.benchmarks.peer_skips import installed


@pytest.mark.slow
@pytest.mark.parametrize("peer", PEERS)
def test_a_peer_runs_a_grid_cell_from_the_shared_design(peer: str) -> None:
    installed(peer)
    branin = get_problem("branin")
    run = simulate_run(branin, peer, k=3, budget=12, seed=1)
    baseline = simulate_run(branin, "random", k=3, budget=12, seed=1)
    n0 = run["n_initial"]
    assert len(run["regret"]) == 12 and run["strategy_options"] == {"budget": 12}
    # the same free design as every other method of the cell: the same best after it
    assert run["regret"][n0 - 1] == baseline["regret"][n0 - 1]
    assert run["regret"][-1] <= run["regret"][n0 - 1]
    assert len(run["proposal_seconds"]) == 12 - n0


def test_peers_run_only_when_named_and_only_on_one_objective() -> None:
    default = {cell[0] for cell in suite_cells(SUITES["smoke"])}
    assert not default & set(PEERS) and "optuna-gp" in default
    named = suite_cells(SUITES["smoke"], methods=["ax"], seeds=1)
    assert {cell[0] for cell in named} == {"ax"} and len(named) == 4  # 2 problems x 2 k
    with pytest.raises(ValueError, match="fit\\(s\\) none of the problems"):
        suite_cells(SUITES["multiobjective"], methods=["hebo"])
    with pytest.raises(ValueError, match="peer: unknown 'nevergrad'"):
        CubePeer("nevergrad", dim=2, seed=0, k=1)
