"""Plots: convergence, the per-worker timeline (idle gaps visible) and parallel coordinates."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import numpy as np
import pytest

import abo
import abo.core.space
from abo.analysis import plots
from abo.core.trial import Trial, TrialState

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


def test_convergence_with_a_constraint_counts_feasible_trials_and_marks_the_others(
    tmp_path: Path,
) -> None:
    from dataclasses import replace

    from abo.core.outcomes import Constraint

    limit = (Constraint("mem", "<=", 10.0),)
    mem = {1: 20.0, 2: 5.0, 3: 50.0, 4: 1.0, 5: 8.0}  # trials 1 and 3 break it
    trials = [replace(t, values={"value": t.value, "mem": mem[t.id]}) for t in TRIALS]
    # completion order 2, 1, 3, 4, 5: the first feasible is trial 2 (2.0); trial 3's 1.0 is not
    plain_curve = plots.best_so_far(trials, "minimize")
    assert [b for _, _, b in plain_curve] == [2.0, 2.0, 1.0, 1.0, 0.5]
    feasible_curve = plots.best_so_far(trials, "minimize", limit)
    assert [b for _, _, b in feasible_curve] == [2.0, 2.0, 2.0, 2.0, 0.5]
    assert [(n, s) for n, s, _ in feasible_curve] == [(n, s) for n, s, _ in plain_curve]
    assert [i for i, _ in plots.infeasible_points(trials, limit)] == [2, 3]
    plain = plots.convergence(trials, "minimize", tmp_path / "plain.png")
    marked = plots.convergence(trials, "minimize", tmp_path / "marked.png", constraints=limit)
    assert marked.read_bytes() != plain.read_bytes()


def _luminance(rgba: tuple[float, ...]) -> float:
    r, g, b = rgba[:3]
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _colour_bar(fig) -> object:
    bars = [a for a in fig.axes if a is not fig.axes[0]]
    assert len(bars) == 1, fig.axes
    return bars[0]


@pytest.mark.parametrize("direction", ["minimize", "maximize"])
def test_parallel_has_a_colour_bar_of_the_value_and_its_direction(direction: str) -> None:
    fig = plots.parallel_figure(TRIALS, SPACE.to_json(), direction)
    try:
        bar = _colour_bar(fig)
        label = bar.get_ylabel()
        assert label.startswith("objective value") and direction in label
        assert ("lower" if direction == "minimize" else "higher") in label
        lo, hi = bar.get_ylim()
        assert (lo, hi) == (0.5, 5.0)  # the done trials' values
        # the best value gets the darkest colour of the bar, the worst the lightest
        mappable = next(c for c in bar.collections if c.norm.vmin is not None)  # the colours
        best, worst = (0.5, 5.0) if direction == "minimize" else (5.0, 0.5)
        dark = _luminance(mappable.cmap(mappable.norm(best)))
        light = _luminance(mappable.cmap(mappable.norm(worst)))
        assert dark < 0.2 < 0.8 < light
    finally:
        plt.close(fig)


def _stress_space() -> abo.Space:
    params: dict[str, abo.core.space.Parameter] = {
        f"warmup_steps_{i}": abo.Float(-1.23456e-05 * (i + 1), 9.87654e04 * (i + 1))
        for i in range(5)
    }
    params["optimizer"] = abo.Categorical([f"optimizer-number-{j}" for j in range(12)])
    params["n"] = abo.Int(-1234567, 7654321)
    params["lr"] = abo.Float(1.2345e-7, 0.12345, log=True)
    params["dropout"] = abo.Float(0.0, 0.5, step=0.1)
    return abo.Space(params)


@pytest.mark.parametrize("which", ["small", "wide labels"])
def test_parallel_end_labels_never_overlap(which: str) -> None:
    space = SPACE if which == "small" else _stress_space()
    trials = TRIALS
    if which != "small":
        trials = [
            Trial(id=i, study="s", params=p, state=TrialState.DONE, value=float(i), info={})
            for i, p in enumerate(space.sample(20, seed=1))
        ]
    fig = plots.parallel_figure(trials, space.to_json(), "minimize")
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        ends = fig.findobj(lambda a: a.get_gid() == plots.END_LABEL)
        numeric = [n for n, p in space.items() if not isinstance(p, abo.Categorical)]
        assert len(ends) == 2 * (len(numeric) + 1)  # low and high of each axis and the value
        texts = [*ends, *fig.axes[0].get_xticklabels()]
        boxes = [t.get_window_extent(renderer) for t in texts]
        for i, a in enumerate(boxes):
            for j in range(i + 1, len(boxes)):
                assert not a.overlaps(boxes[j]), (texts[i].get_text(), texts[j].get_text())
        shown = {t.get_text() for t in ends}
        if which == "small":
            assert {"0", "1", "0.0001", "0.5", "5"} <= shown  # Float, log Float and value ends
            names = [t.get_text() for t in fig.axes[0].get_xticklabels()]
            assert names == ["x", "lr\n(log)", "k", "value"]
            # the categorical axis names its choices instead of low and high
            assert {"a", "b"} <= {t.get_text() for t in fig.axes[0].texts}
        else:
            assert {"-1.23e+06", "7.65e+06", "1.23e-07", "0.123", "0", "0.5"} <= shown
    finally:
        plt.close(fig)


def _scored(i: int, loss: float, cost: float) -> Trial:
    values = {"loss": loss, "cost": cost}
    return Trial(id=i, study="s", params={}, state=TrialState.DONE, values=values,
                 created_at=float(i), finished_at=float(10 - i))  # fmt: skip


def test_pareto_rings_exactly_the_front_in_every_pair_of_objectives(tmp_path: Path) -> None:
    from abo.core.outcomes import Objective

    two = [Objective("loss", "minimize"), Objective("cost", "maximize")]
    trials = [
        _scored(1, 1.0, 1.0),
        _scored(2, 2.0, 3.0),
        _scored(3, 2.5, 2.0),
        _scored(4, 0.5, 0.2),
    ]
    fig = plots.pareto_figure(trials, two, title="t")
    (ax, *_) = fig.axes
    done, ringed = ax.collections[:2]
    assert len(done.get_offsets()) == 4
    # trial 3 (loss 2.5, cost 2.0) is beaten by trial 2 in both objectives: not ringed
    assert sorted(map(tuple, ringed.get_offsets().tolist())) == [(0.5, 0.2), (1.0, 1.0), (2.0, 3.0)]
    # coloured by completion order: trial 4 finished first
    assert list(done.get_array()) == [1, 2, 3, 4] and done.get_offsets()[0].tolist() == [0.5, 0.2]
    plt.close(fig)
    three = [*two, Objective("mem", "minimize")]
    trials3 = [Trial(id=t.id, study="s", params={}, state=TrialState.DONE,
                     values={**t.values, "mem": float(t.id)}, finished_at=t.finished_at)
               for t in trials]  # fmt: skip
    fig = plots.pareto_figure(trials3, three)
    visible = [a for a in fig.axes if a.get_visible() and a.get_xlabel()]
    assert {(a.get_xlabel().split()[0], a.get_ylabel().split()[0]) for a in visible} == {
        ("loss", "cost"),
        ("loss", "mem"),
        ("cost", "mem"),
    }
    plt.close(fig)
    out = plots.pareto(trials, two, tmp_path / "front.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="one objective"):
        plots.pareto_figure(trials, two[:1])


def test_the_cost_curve_spends_every_finished_trial_and_counts_results_only(
    tmp_path: Path,
) -> None:
    def timed(i: int, state: TrialState, mesh: int, seconds: float, value: float | None) -> Trial:
        info = {"eval_seconds": seconds}
        params = {"x": 0.1 * i, "mesh": mesh}
        return Trial(i, "s", params, state, value=value, info=info, finished_at=float(i))

    trials = [
        timed(1, TrialState.DONE, 4, 1.0, 0.2),  # cheap and low: no result
        timed(2, TrialState.DONE, 32, 8.0, 0.9),
        timed(3, TrialState.FAILED, 32, 3.0, None),  # failed: its time is spent all the same
        timed(4, TrialState.DONE, 32, 8.0, 0.5),
        Trial(5, "s", {"x": 0.5, "mesh": 32}, TrialState.RUNNING),
    ]
    at_target = lambda t: t.params["mesh"] == 32  # noqa: E731
    curve = plots.cost_curve(trials, "minimize", counts=at_target)
    assert [(spent, best, t.id) for spent, best, t in curve] == [
        (1.0, None, 1), (9.0, 0.9, 2), (12.0, 0.9, 3), (20.0, 0.5, 4)
    ]  # fmt: skip
    assert plots.cost_curve(trials, "minimize")[0][1] == 0.2  # without a fidelity: all count
    png = plots.cost(trials, "minimize", tmp_path / "cost.png", fidelity="mesh", counts=at_target)
    assert mpimg.imread(png).shape[0] > 100


def test_names_with_dollar_signs_and_markup_are_drawn_as_written(tmp_path: Path) -> None:
    """A parameter named ``$\\nocmd{$`` was parsed as mathtext and every plot of its study
    failed with a ParseFatalException; labels are literal now, and the user's matplotlib
    settings are left as they were."""
    import matplotlib

    from abo.analysis import gp_plots as analysis_plots

    odd, tag = "$\\nocmd{$", "<b>x</b>"
    space = abo.Space(
        {odd: abo.Float(0, 1), tag: abo.Float(0, 1), "c": abo.Categorical(["$\\bad{$", "b"])}
    )
    study = abo.create_study(space, strategy="random", seed=0)
    for _ in range(8):
        t = study.ask()
        study.tell(t.id, t.params[odd] + t.params[tag] + (t.params["c"] == "b"))
    trials, spec = study.trials, study.spec
    before = matplotlib.rcParams["text.parse_math"]
    drawn = [
        plots.convergence(trials, "minimize", tmp_path / "c.png", title="$\\x{$"),
        plots.timeline(trials, tmp_path / "t.png"),
        plots.parallel(trials, space.to_json(), "minimize", tmp_path / "p.png"),
        analysis_plots.importance(spec, trials, tmp_path / "i.png"),
        analysis_plots.slices(spec, trials, tmp_path / "s.png"),
        analysis_plots.contour(spec, trials, tmp_path / "k.png", odd, tag),
    ]
    assert all(p.stat().st_size > 0 for p in drawn)
    assert matplotlib.rcParams["text.parse_math"] == before
