"""Plots: convergence, the per-worker timeline (idle gaps visible) and parallel coordinates."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image as mpimg
import numpy as np

import abo
from abo import plots
from abo.trial import Trial, TrialState

SPACE = abo.Space(
    {
        "x": abo.Float(0.0, 1.0),
        "lr": abo.Float(1e-4, 1.0, log=True),
        "k": abo.Categorical(["a", "b"]),
    }
)


def _trial(i: int, worker: str | None, start: float, end: float, value: float, **kw) -> Trial:
    info = {"worker": worker, "started": start, "finished": end} if worker else {}
    return Trial(
        id=i,
        study="s",
        params={"x": i / 10, "lr": 10.0 ** -(i % 4), "k": "ab"[i % 2]},
        state=kw.get("state", TrialState.DONE),
        value=value,
        info=info,
        created_at=start - 0.5,
        finished_at=end + 0.1,
    )


TRIALS = [
    _trial(1, "w1", 0.0, 2.0, 3.0),
    _trial(2, "w2", 0.0, 1.0, 2.0),
    _trial(3, "w2", 1.0, 4.0, 1.0),
    _trial(4, "w1", 3.0, 4.0, 5.0),  # w1 idle from 2 to 3
    _trial(5, None, 10.0, 11.0, 0.5),  # told by hand: created_at / finished_at
]


def test_lanes_group_by_worker_in_start_order() -> None:
    lanes = plots.lanes(TRIALS)
    assert list(lanes) == ["unknown", "w1", "w2"]
    assert [t.id for t, _, _ in lanes["w1"]] == [1, 4]
    assert [(s, e) for _, s, e in lanes["w2"]] == [(0.0, 1.0), (1.0, 4.0)]
    assert lanes["unknown"][0][1:] == (9.5, 11.1)
    running = Trial(id=6, study="s", params={}, state=TrialState.RUNNING, created_at=1.0)
    assert "w9" not in plots.lanes([running])


def _blue_pixels(path: Path) -> int:
    img = mpimg.imread(path)[..., :3]
    blue = np.array([0x1F, 0x77, 0xB4]) / 255  # tab:blue, the colour of done bars
    return int((np.abs(img - blue).sum(axis=-1) < 0.05).sum())


def test_timeline_shows_idle_gaps(tmp_path: Path) -> None:
    gap = plots.timeline(TRIALS[:4], tmp_path / "gap.png", title="t")
    busy = [*TRIALS[:3], _trial(4, "w1", 2.0, 4.0, 5.0)]  # same span, w1 never idle
    full = plots.timeline(busy, tmp_path / "full.png", title="t")
    assert gap.read_bytes()[:4] == b"\x89PNG"
    # w1 sits idle for 1 s of the 4 s span: about 1/8 of the two lanes' bar area is missing
    ratio = _blue_pixels(gap) / _blue_pixels(full)
    assert 0.75 < ratio < 0.95, ratio


def test_parallel_and_convergence(tmp_path: Path) -> None:
    empty = plots.parallel([], SPACE.to_json(), "minimize", tmp_path / "empty.png")
    full = plots.parallel(TRIALS, SPACE.to_json(), "minimize", tmp_path / "p.png")
    assert empty.stat().st_size < full.stat().st_size
    conv = plots.convergence(TRIALS, "minimize", tmp_path / "c.png")
    assert conv.exists()
    assert [b for _, _, b in plots.best_so_far(TRIALS, "minimize")] == [2.0, 2.0, 1.0, 1.0, 0.5]
