"""The peer adapters (``benchmarks/peers.py``, ``syne_tune_peer.py``, ``hebo_peer.py``): Ax,
SMAC3, Syne Tune's searchers and HEBO driven asynchronously, with up to three trials pending, on
a small mixed space with a conditional parameter. Each peer's tests skip, saying why, when it is
not installed (the ``peers`` extra; HEBO's own environment)."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import Any

import pytest

from benchmarks import hebo_peer
from benchmarks.hebo_peer import HeboMethod
from benchmarks.peers import AxMethod, Param, SmacMethod
from benchmarks.syne_tune_peer import SyneTuneMethod
from tests.benchmarks.peer_skips import installed as _installed

SPACE = (
    Param("lr", "float", 1e-4, 1.0, log=True),
    Param("n", "int", 1, 10),
    Param("kind", "cat", choices=("a", "b", "c")),
    Param("x", "float", -1.0, 1.0, when=(("kind", ("b",)),)),
)
PEERS: dict[str, Callable[..., Any]] = {
    "ax": AxMethod,
    "smac": SmacMethod,
    "syne-botorch": lambda *a, **kw: SyneTuneMethod(*a, **kw, searcher="botorch"),
    "syne-bore": lambda *a, **kw: SyneTuneMethod(*a, **kw, searcher="bore"),
    "hebo": HeboMethod,
}


def _loss(c: dict[str, Any]) -> float:
    """Minimised; its optimum (lr = 1e-3, n = 8, kind b, x = 0.5) is off the space's centre,
    which is Ax's first trial."""
    value = (math.log10(c["lr"]) + 3.0) ** 2 / 4.0 + (c["n"] - 8) ** 2 / 10.0
    value += {"a": 1.0, "b": 0.5, "c": 0.8}[c["kind"]]
    return value + ((c["x"] - 0.5) ** 2 if c["kind"] == "b" else 0.0)


def _check_config(c: dict[str, Any]) -> None:
    """Exactly the active parameters, each of its own Python type and within its bounds."""
    assert set(c) == ({"lr", "n", "kind", "x"} if c["kind"] == "b" else {"lr", "n", "kind"})
    assert type(c["lr"]) is float and 1e-4 <= c["lr"] <= 1.0
    assert type(c["n"]) is int and 1 <= c["n"] <= 10
    assert c["kind"] in ("a", "b", "c") and type(c["kind"]) is str
    if "x" in c:
        assert type(c["x"]) is float and -1.0 <= c["x"] <= 1.0


@pytest.mark.slow
@pytest.mark.parametrize("peer", sorted(PEERS))
def test_a_peer_runs_asynchronously_on_a_conditional_space(peer: str) -> None:
    _installed(peer)
    method = PEERS[peer](SPACE, seed=1, k=3)
    pending: deque[tuple[Any, dict[str, Any]]] = deque()
    configs: list[dict[str, Any]] = []
    values: list[float] = []

    def ask() -> None:
        handle, config = method.ask()
        _check_config(config)
        configs.append(config)
        pending.append((handle, config))

    for _ in range(3):  # three pending before the first tell
        ask()
    while pending:  # tell the oldest, ask one more: three pending until the last 2
        handle, config = pending.popleft()
        values.append(_loss(config))
        method.tell(handle, values[-1])
        if len(configs) < 12:
            ask()

    assert len(values) == 12
    assert min(values) < values[0]
    # pending trials are known: no configuration was handed out twice
    assert len({tuple(sorted(c.items())) for c in configs}) == 12
    assert any("x" in c for c in configs) and any("x" not in c for c in configs)
    # the same seed asks for the same first trials
    again = PEERS[peer](SPACE, seed=1, k=3)
    assert [again.ask()[1] for _ in range(3)] == configs[:3]


def test_a_space_the_adapters_cannot_express_is_refused() -> None:
    # checked before any peer is imported: no install needed
    bad_parent = (Param("x", "float", 0.0, 1.0), Param("y", "int", 1, 3, when=(("x", (0.5,)),)))
    for cls in (AxMethod, SmacMethod, SyneTuneMethod, HeboMethod):
        with pytest.raises(ValueError, match="parent 'x' must be a categorical or int"):
            cls(bad_parent, seed=0, k=1)
        with pytest.raises(ValueError, match="needs low > 0"):
            cls((Param("z", "float", 0.0, 1.0, log=True),), seed=0, k=1)


def test_hebo_without_its_environment_says_how_to_make_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setenv("ABO_HEBO_PYTHON", str(tmp_path / "no-such-python"))
    assert not hebo_peer.available()
    with pytest.raises(RuntimeError, match="HEBO's environment is missing.*ABO_HEBO_PYTHON"):
        HeboMethod(SPACE, seed=0, k=1)


def test_the_hebo_worker_answers_a_bad_message_with_an_error() -> None:
    from benchmarks.hebo_worker import Worker

    worker = Worker()
    assert worker.handle({"op": "ask"}) == {"error": "send init first"}
    worker.opt = object()  # past init: an unknown op is named
    assert "'fly' is not init, ask, tell or add" in worker.handle({"op": "fly"})["error"]


def test_syne_tunes_gp_learns_each_loss_at_its_own_configuration() -> None:
    """Trials told in the reverse of their asking: without the repair, Syne Tune 0.16 pairs
    the first configuration with the first loss told, which is the last trial's."""
    _installed("syne-botorch")
    from benchmarks.peers import _decode

    method = SyneTuneMethod(SPACE, seed=0, k=3, searcher="botorch")
    asked = [method.ask() for _ in range(3)]
    for handle, config in reversed(asked):
        method.tell(handle, _loss(config))
    searcher = method.scheduler.base_scheduler.searcher
    configs = [_decode(SPACE, raw) for raw in searcher._configs_with_results()]
    assert [_loss(c) for c in configs] == list(searcher.objectives())
    assert configs == [config for _, config in asked]
