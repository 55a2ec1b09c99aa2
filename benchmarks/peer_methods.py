"""The peers (Ax, SMAC3, Syne Tune's searchers, HEBO) as methods of the synthetic grids.

The grids' problems are boxes: the unit cube of ``problem.dim`` floats. Each peer adapter
(``benchmarks/peers.py``, ``syne_tune_peer.py``, ``hebo_peer.py``) gets that space as floats
``x0 .. x{d-1}`` on [0, 1] and is driven by the simulator like every other method: the shared
initial design is *added* as results it did not propose (every method starts from the same
points), then it is asked while others run and told in completion order. Each peer keeps its
own rule after that: Ax still makes its centre and 4 Sobol points, SMAC its initial design
(a quarter of the budget, which it is told), Syne Tune's ``BOTorch`` and HEBO go straight to
their models (their 3 and ``d + 1`` random points are already there).

Named only (``python -m benchmarks run smoke --methods ax hebo ...``): they need the ``peers``
extra and HEBO's environment, so a suite's default method list leaves them out.
"""

from __future__ import annotations

from typing import Any

import numpy as np

PEERS = ("ax", "smac", "syne-botorch", "syne-bore", "hebo")


def make_peer(peer: str, params: Any, seed: int, k: int, budget: int | None = None) -> Any:
    """The adapter of ``peer`` (``PEERS``) on ``params``; ``budget`` is told to SMAC, which sizes
    its initial design by it (the others count for themselves)."""
    from benchmarks import hebo_peer, peers, syne_tune_peer

    if peer not in PEERS:
        raise ValueError(f"peer: unknown {peer!r}; choose one of {', '.join(PEERS)}")
    if peer == "ax":
        return peers.AxMethod(params, seed, k)
    if peer == "smac":
        return peers.SmacMethod(params, seed, k, budget=budget)
    if peer == "hebo":
        return hebo_peer.HeboMethod(params, seed, k)
    return syne_tune_peer.SyneTuneMethod(params, seed, k, searcher=peer[5:])


class CubePeer:
    """A peer adapter on the unit cube, with the simulator's ``Method`` interface."""

    def __init__(self, peer: str, dim: int, seed: int, k: int, budget: int | None = None) -> None:
        from benchmarks.peers import Param

        self.names = [f"x{i}" for i in range(dim)]
        params = tuple(Param(n, "float", 0.0, 1.0) for n in self.names)
        self.adapter = make_peer(peer, params, seed, k, budget)

    def add(self, x: np.ndarray, y: float) -> None:
        """A result of the shared initial design."""
        self.adapter.add(dict(zip(self.names, map(float, x), strict=True)), float(y))

    def ask(self) -> tuple[Any, np.ndarray]:
        handle, config = self.adapter.ask()
        return handle, np.array([config[n] for n in self.names], dtype=float)

    def tell(self, handle: Any, y: float) -> None:
        self.adapter.tell(handle, float(y))
