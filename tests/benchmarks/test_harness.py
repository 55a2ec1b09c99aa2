"""The benchmark harness end to end: JSON lines, resume, synchronous batches, noisy regret."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

# benchmarks/ lives at the repository root and is not part of the installed package.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.__main__ import main  # noqa: E402
from benchmarks.harness import _Loop, read_runs, shard, simulate_run, suite_cells  # noqa: E402
from benchmarks.methods import AboBatchMethod, all_methods  # noqa: E402
from benchmarks.problems import branin  # noqa: E402
from benchmarks.simulator import initial_design, sample_durations, simulate  # noqa: E402
from benchmarks.suites import SUITES, NoisyProblem, get_problem  # noqa: E402


def test_tiny_suite_runs_resumes_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "tiny.jsonl"
    assert main(["run", "tiny", "--out", str(out)]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 4  # random and optuna-tpe x branin x k=2 x 2 seeds
    assert {(r["method"], r["seed"]) for r in lines} == {
        (m, s) for m in ("random", "optuna-tpe") for s in (0, 1)
    }
    for run in lines:
        assert run["problem"] == "branin" and run["k"] == 2 and run["budget"] == 8
        assert len(run["times"]) == len(run["regret"]) == 8
        assert len(run["proposal_seconds"]) == 8 - run["n_initial"]
        assert np.all(np.diff(run["times"]) >= 0) and np.all(np.diff(run["regret"]) <= 0)
        assert 0 < run["utilization"] <= 1 and run["duplicate_rate"] == 0.0
    # common random numbers: both methods share the initial design of a seed
    by = {(r["method"], r["seed"]): r for r in lines}
    assert by["random", 0]["regret"][:4] == by["optuna-tpe", 0]["regret"][:4]

    before = out.read_text()
    assert main(["run", "tiny", "--out", str(out)]) == 0
    assert out.read_text() == before  # resumed: nothing ran again

    report = tmp_path / "report"
    assert main(["report", str(out), "--out", str(report)]) == 0
    text = (report / "report.md").read_text()
    assert "| random | 2 | 2 |" in text and "| optuna-tpe | 2 | 2 |" in text
    png = report / "branin-halfnormal-k2.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_async_loop_matches_the_shared_simulator() -> None:
    ours = simulate_run(get_problem("branin"), "random", k=3, budget=15, seed=4)
    theirs = simulate(branin(), "random", k=3, budget=15, seed=4)
    assert ours["times"] == pytest.approx([c.time for c in theirs.completions], abs=1e-6)
    assert ours["regret"] == pytest.approx([c.regret for c in theirs.completions], rel=1e-5)


def test_synchronous_batches_wait_for_the_slowest_worker() -> None:
    problem, k, budget, seed = branin(), 4, 16, 2
    n0 = 2 * problem.dim
    taus = sample_durations("halfnormal", budget, np.random.default_rng([seed, 2]))
    opt = AboBatchMethod(problem, seed, k, n0, strategy="random")
    loop = _Loop(problem, opt, k, budget, taus, np.random.default_rng(0), synchronous=True)
    loop.run(initial_design(problem.dim, n0, seed))
    batches = [taus[i : i + k] for i in range(n0, budget, k)]
    assert loop.clock == pytest.approx(sum(b.max() for b in batches))
    # asynchronously the same jobs finish sooner: no worker waits for the others
    loop = _Loop(problem, AboBatchMethod(problem, seed, k, n0, strategy="random"), k, budget,
                 taus, np.random.default_rng(0), synchronous=False)  # fmt: skip
    loop.run(initial_design(problem.dim, n0, seed))
    assert loop.clock < sum(b.max() for b in batches)


def test_noisy_regret_is_measured_on_the_true_function() -> None:
    problem = NoisyProblem("branin-loud", branin(), 1e3)  # noise swamps the signal
    n0, budget = 4, 14
    taus = sample_durations("halfnormal", budget, np.random.default_rng([0, 2]))
    opt = AboBatchMethod(problem.true, 0, 2, n0, strategy="random")
    loop = _Loop(problem, opt, 2, budget, taus, np.random.default_rng(0), synchronous=False)
    loop.run(initial_design(2, n0, 0))
    true_regrets = [problem.true.regret(problem.true(x)) for x in loop.seen]
    # every reported regret is the true regret of an evaluated point, not a noisy value
    assert all(min(abs(r - t) for t in true_regrets) < 1e-4 * (1 + r) for r in loop.regrets)
    best_true = np.minimum.accumulate(true_regrets)
    assert not np.allclose(loop.regrets, best_true)  # picked by noisy y, not by true f
    run = simulate_run(get_problem("branin-noisy"), "random", k=2, budget=12, seed=0)
    assert run["regret"] == simulate_run(get_problem("branin-noisy"), "random", 2, 12, 0)["regret"]


def test_grid_sharding_and_sequential_cells() -> None:
    cells = suite_cells(SUITES["smoke"], ["seq-logei", "random"], ["branin"], [4, 16], 2)
    assert [c for c in cells if c[0] == "seq-logei"] == [
        ("seq-logei", "branin", 1, "halfnormal", 60, s) for s in (0, 1)
    ]
    assert len(cells) == 2 + 2 * 2
    parts = shard(cells, "0/2") + shard(cells, "1/2")
    assert sorted(parts) == sorted(cells)
    with pytest.raises(ValueError, match="shard"):
        shard(cells, "2/2")
    with pytest.raises(ValueError, match="method: unknown"):
        suite_cells(SUITES["smoke"], ["nope"])
    assert all_methods()["seq-logei"].workers(16) == 1


def test_read_runs_merges_files_without_duplicates(tmp_path: Path) -> None:
    run = simulate_run(get_problem("branin"), "random", k=2, budget=6, seed=0)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(json.dumps(run) + "\n")
    b.write_text(json.dumps(run) + "\n" + json.dumps({**run, "seed": 1}) + "\n")
    assert sorted(r["seed"] for r in read_runs([a, b])) == [0, 1]


@pytest.mark.slow
def test_python_m_benchmarks_runs_the_harness_in_a_subprocess(tmp_path: Path) -> None:
    import subprocess

    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "one.jsonl"
    cmd = [sys.executable, "-m", "benchmarks", "run", "tiny", "--methods", "random", "--seeds", "1"]
    done = subprocess.run([*cmd, "--out", str(out)], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["method"] for line in out.read_text().splitlines()] == ["random"]
    bad = subprocess.run([*cmd, "--out", str(out), "--shard", "3/2"], cwd=root,
                         capture_output=True, text=True)  # fmt: skip
    assert bad.returncode == 2 and "shard" in bad.stderr


@pytest.mark.slow
def test_latency_times_asks_and_caps_slow_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.latency import measure

    options = {"refit": "background", "max_staleness": 5}  # study options reach the study
    times, capped = measure("default", 20, repeats=2, seed=0, cap=60.0, options=options, busy=2)
    assert len(times) == 2 and not capped and all(0 < t < 30 for t in times)
    times, capped = measure("optuna-gp", 20, repeats=2, seed=0, cap=60.0, busy=2)  # same data
    assert len(times) == 2 and not capped and all(0 < t < 30 for t in times)
    times, capped = measure("believer", 100, repeats=50, seed=0, cap=0.5)
    assert capped and len(times) < 50  # cut off after half a second of asking


def test_latency_command_checks_the_strategy_names_first() -> None:
    from abo.core.exceptions import UnknownStrategyError
    from benchmarks.__main__ import parser
    from benchmarks.latency import main

    args = parser().parse_args(["latency", "--strategies", "believer", "nope"])
    with pytest.raises(UnknownStrategyError, match="'nope'; choose one of .*believer"):
        main(args)  # before any study is made or any process started


@pytest.mark.slow
def test_latency_of_a_study_with_constraints_and_failures() -> None:
    import numpy as np

    from benchmarks.latency import constraint_values, crashes, measure

    x = np.full(6, 0.5)
    assert not crashes(x) and crashes(np.array([0.9, *x[1:]]))
    assert constraint_values(x, 1.0) == {"value": 1.0, "spread": 0.0, "total": 3.0}
    options = {"refit": "background"}
    times, capped = measure(
        "constrained", 10, repeats=1, seed=0, cap=120.0, options=options, setup=300.0, busy=2
    )
    assert len(times) == 1 and not capped and 0 < times[0] < 60


@pytest.mark.slow
def test_loop_utilization_on_a_real_dask_cluster() -> None:
    from benchmarks.loop_utilization import measure

    m = measure(trials=8, workers=2, strategy="random", seed=0, extra=2)
    assert m["trials"] == 10 and m["workers"] == 2
    assert 0.3 < m["utilization_at_n"] <= 1.0  # up to the 8th completion, before the drain
    # each trial sleeps >= 0.5 s, so 8 trials on 2 workers take >= 2 s
    assert m["makespan_s"] >= 2.0 and 0.3 < m["utilization"] <= 1.0
    assert 0.0 <= m["proposal_wait"] < 0.2 and 0.0 <= m["driver_busy"] < 0.5


def test_waiting_worker_seconds_counts_idle_workers_while_proposing() -> None:
    from abo.core.trial import ProposalRecord, Trial, TrialState
    from benchmarks.loop_utilization import waiting_worker_seconds

    def trial(i: int, created: float, finished: float) -> Trial:
        return Trial(i, "s", {}, TrialState.DONE, 0.0, proposal=ProposalRecord("x", seconds=1.0),
                     created_at=created, finished_at=finished)  # fmt: skip

    # proposing [0, 1) with both workers idle, then [1, 2) with one busy on the first trial
    waited = waiting_worker_seconds([trial(1, 1.0, 3.0), trial(2, 2.0, 4.0)], workers=2)
    assert waited == pytest.approx(3.0, rel=1e-3)


def test_late_window_utilization_counts_busy_seconds_inside_the_window() -> None:
    from abo.core.trial import Trial, TrialState
    from benchmarks.loop_utilization import late_window, window_utilization

    def trial(i: int, started: float, finished: float) -> Trial:
        return Trial(i, "s", {}, TrialState.DONE, 0.0,
                     info={"started": started, "finished": finished})  # fmt: skip

    # two workers: one busy all along, the other idle for [4, 6)
    trials = [trial(0, 0, 10), trial(1, 0, 4), trial(2, 6, 10)]
    assert window_utilization(trials, 2, 0.0, 10.0) == pytest.approx(0.9)
    assert window_utilization(trials, 2, 4.0, 6.0) == pytest.approx(0.5)
    many = [trial(i, float(i), float(i) + 1) for i in range(11)]
    assert late_window(many) == (8.0, 10.0)


def test_refit_variants_run_by_name_only() -> None:
    from benchmarks.methods import all_methods

    specs = all_methods()
    full = specs["thompson+full"].build(get_problem("branin"), 0, 2, 3, {})
    background = specs["aegis+bg"].build(get_problem("branin"), 0, 2, 3, {})
    assert full.study.config.refit == "full" and full.study.strategy == "thompson"
    assert background.study.config.refit == "background"
    names = {c[0] for c in suite_cells(SUITES["smoke"], seeds=1)}
    assert "thompson" in names and not any("+" in n for n in names)


def test_noisy_runs_report_the_inference_regret_of_the_best_posterior_mean() -> None:
    from benchmarks.harness import inference_regret

    problem = get_problem("branin-noisy")
    run = simulate_run(problem, "random", k=2, budget=16, seed=1)
    assert run["inference_regret"] is not None and run["inference_regret"] >= 0.0
    assert simulate_run(get_problem("branin"), "random", 2, 16, 1)["inference_regret"] is None
    # the chosen point is an evaluated one: its regret is one of theirs
    gen = np.random.default_rng(0)
    X = [gen.random(2) for _ in range(12)]
    Y = [problem.true(x) + 0.01 * gen.standard_normal() for x in X]
    regrets = [problem.true(x) - problem.optimum for x in X]
    r = inference_regret(problem, X, Y)
    assert min(abs(r - t) for t in regrets) < 1e-9
    assert r <= np.median(regrets)  # a GP on nearly noiseless data picks a good point


def test_report_adds_an_inference_column_for_noisy_cells(tmp_path: Path) -> None:
    from benchmarks.report import write_report

    path = tmp_path / "r.jsonl"
    runs = [simulate_run(get_problem("branin-noisy"), m, 2, 12, s)
            for m in ("random", "optuna-tpe") for s in (0, 1)]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in runs))
    text = write_report([path], tmp_path / "out", bar="random")
    assert "log10 inference regret at N" in text and "vs random" in text


def test_synchronous_thompson_waits_for_the_whole_batch() -> None:
    run = simulate_run(get_problem("branin"), "sync-ts", k=3, budget=13, seed=0)
    assert run["synchronous"] and len(run["regret"]) == 13
    assert run["utilization"] < 1.0  # workers wait for the slowest of each batch


def test_report_gives_each_methods_pooled_95th_percentile_of_proposal_seconds(
    tmp_path: Path,
) -> None:
    """The wide suite's bar is an ask's 95th percentile; the table pools every seed's asks."""
    from benchmarks.report import write_report

    path = tmp_path / "r.jsonl"
    runs = [simulate_run(get_problem("branin"), "random", 2, 12, s) for s in (0, 1)]
    runs[1]["proposal_seconds"] = [0.5] * len(runs[1]["proposal_seconds"])  # one slow run
    path.write_text("".join(json.dumps(r) + "\n" for r in runs))
    text = write_report([path], tmp_path / "out", bar="random")
    header = next(line for line in text.splitlines() if line.startswith("| method"))
    row = next(line for line in text.splitlines() if line.startswith("| random |"))
    cells = dict(zip(header.split("|"), row.split("|"), strict=True))
    secs = runs[0]["proposal_seconds"] + runs[1]["proposal_seconds"]
    assert float(cells[" p95 s / proposal "]) == pytest.approx(np.percentile(secs, 95), abs=5e-4)
    assert float(cells[" p95 s / proposal "]) == pytest.approx(0.5, abs=5e-4)
    assert float(cells[" median s / proposal "]) < 0.5


def test_a_complete_report_leaves_out_cells_where_a_method_lacks_a_seed(tmp_path: Path) -> None:
    from benchmarks.report import write_report

    path = tmp_path / "r.jsonl"
    runs = [simulate_run(get_problem("branin"), m, k, 10, s)
            for k in (2, 3) for m in ("random", "optuna-tpe") for s in (0, 1)]  # fmt: skip
    runs = [r for r in runs if not (r["k"] == 3 and r["method"] == "optuna-tpe" and r["seed"])]
    path.write_text("".join(json.dumps(r) + "\n" for r in runs))
    full = write_report([path], tmp_path / "all", bar="random", seeds=2)
    assert "## branin, k = 2," in full and "## branin, k = 3," in full
    done = write_report([path], tmp_path / "done", bar="random", seeds=2, complete=True)
    assert "## branin, k = 2," in done and "## branin, k = 3," not in done
    with pytest.raises(ValueError, match="complete: needs seeds"):
        write_report([path], tmp_path / "x", bar="random", complete=True)
    with pytest.raises(ValueError, match="no cell has every method on seeds 0-2"):
        write_report([path], tmp_path / "x", bar="random", seeds=3, complete=True)
