"""Refit policies: reproducible resumes (sync) and asks that never wait for a fit (background)."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import pytest
import torch

import abo
import abo.model.refit as refit_module
from abo.model.fitproc import FitProcess
from abo.study.study import Study

SPACE = abo.Space({"x": abo.Float(0.0, 1.0), "y": abo.Float(0.0, 1.0)})


def _f(p: dict) -> float:
    return math.sin(6 * p["x"]) + (p["y"] - 0.3) ** 2


@pytest.mark.slow
def test_a_resumed_study_proposes_what_an_uninterrupted_one_would(tmp_path: Path) -> None:
    def run(folder: Path, resume_at: int | None) -> list[dict]:
        url = f"sqlite:///{folder / 'a.db'}"
        study = abo.create_study(
            SPACE, name="r", storage=url, seed=3, n_initial=3,
            strategy_options={"raw_samples": 64, "num_restarts": 2},
        )  # fmt: skip
        out = []
        for i in range(7):
            if i == resume_at:
                study = abo.load_study("r", storage=url)  # a fresh process's view: no memory
            trial = study.ask()
            study.tell(trial.id, _f(trial.params))
            out.append(trial.params)
        return out

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    straight, resumed = run(tmp_path / "a", None), run(tmp_path / "b", 5)
    assert straight == resumed
    assert any(
        t.proposal is not None and t.proposal.model is not None
        for t in abo.load_study("r", f"sqlite:///{tmp_path / 'b' / 'a.db'}").trials
    )


def test_background_asks_do_not_wait_for_a_running_refit(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    active, peak = [0], [0]
    lock = threading.Lock()

    def counted(real, gated: bool):  # the real fit; the background one is held back
        def fit(*args: object, **kwargs: object):
            with lock:
                active[0] += 1
                peak[0] = max(peak[0], active[0])
            try:
                if gated:
                    assert threading.current_thread().name == "abo-refit"
                    assert release.wait(60)
                return real(*args, **kwargs)
            finally:
                with lock:
                    active[0] -= 1

        return fit

    monkeypatch.setattr(refit_module, "fit_gp", counted(refit_module.fit_gp, False))
    monkeypatch.setattr(FitProcess, "fit", counted(FitProcess.fit, True))
    created = abo.create_study(
        SPACE,
        strategy="qlognei",
        seed=1,
        n_initial=4,
        strategy_options={"raw_samples": 64, "num_restarts": 2},
    )
    study = Study(created.storage, created.record, refit="background")
    for _ in range(5):  # the initial design, then the first fit (synchronous: nothing to use)
        t = study.ask()
        study.tell(t.id, _f(t.params))
    assert study._models.refits == 1
    for i in range(3):  # new data each time: a refit is wanted but held back in its thread
        t = study.ask()
        assert t.proposal.n_observations == 5 + i
        assert t.proposal.fit_observations == 4  # proposed from conditioned old hyperparameters
        study.tell(t.id, _f(t.params))
    assert study._models._thread is not None and study._models._thread.is_alive()
    release.set()
    study._models.wait(60)
    assert peak[0] == 1  # never two refits at once
    assert study._models.refits == 2
    t = study.ask()
    assert t.proposal.fit_observations > 4


def test_background_never_lags_more_than_max_staleness(monkeypatch: pytest.MonkeyPatch) -> None:
    storage = abo.storage.SQLStorage(None)
    base = abo.create_study(
        SPACE,
        storage=storage,
        seed=2,
        n_initial=4,
        refit="background",
        max_staleness=2,
        strategy_options={"raw_samples": 64, "num_restarts": 2},
    )
    study = Study(storage, base.record)
    real_fit = FitProcess.fit
    hold = threading.Event()

    def slow_background_fit(*args: object, **kwargs: object):
        hold.wait(1)  # a refit (in the child process) that cannot keep up
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(FitProcess, "fit", slow_background_fit)
    modelled = 0
    for _ in range(9):
        t = study.ask()
        assert t.proposal is not None
        if t.proposal.fit_observations is not None:  # past the Sobol design: a model proposed
            modelled += 1
            assert t.proposal.n_observations - t.proposal.fit_observations <= 2
        study.tell(t.id, _f(t.params))
    hold.set()
    assert modelled == 5  # every ask after the 4 initial points


def test_refit_policy_is_validated() -> None:
    with pytest.raises(abo.AboError, match="refit"):
        abo.create_study(SPACE, refit="sometimes")
    with pytest.raises(abo.AboError, match="max_staleness"):
        abo.create_study(SPACE, max_staleness=-1)


def test_full_refits_come_at_a_geometric_schedule() -> None:
    assert refit_module.full_refit_due(None, 5)  # the first fit is always full
    due = [n for n in range(2, 1001) if refit_module.full_refit_due(n - 1, n)]
    assert 25 <= len(due) <= 45  # about log(1000) / log(1.2) = 38, not one per observation
    assert sum(1 for n in due if n > 500) <= 5  # rare once a fit is expensive
    assert refit_module.full_refit_due(100, 200)  # a jump across several steps


def test_above_max_exact_the_gp_sees_a_subset_and_asks_report_it() -> None:
    study = abo.create_study(
        SPACE, seed=5, n_initial=2, max_exact=20,
        strategy_options={"raw_samples": 64, "num_restarts": 2},
    )  # fmt: skip
    gen = torch.Generator().manual_seed(0)
    for x, y in torch.rand(40, 2, generator=gen, dtype=torch.double).tolist():
        study.add({"x": x, "y": y}, _f({"x": x, "y": y}))
    t = study.ask()
    assert t.proposal.n_observations == 40 and t.proposal.fit_observations == 40
    assert t.proposal.gp_points == 20
    with pytest.raises(abo.AboError, match="max_exact"):
        abo.create_study(SPACE, max_exact=3)


def _grown(url: str | None, resume_at: int | None) -> list[abo.Trial]:
    """60 results, then 8 asks each followed by its tell (reloaded from storage at one)."""
    study = abo.create_study(
        SPACE, name="s", storage=url, seed=2, strategy="thompson",
        strategy_options={"raw_samples": 64, "num_restarts": 2},
    )  # fmt: skip
    gen = torch.Generator().manual_seed(1)
    for x, y in torch.rand(60, 2, generator=gen, dtype=torch.double).tolist():
        study.add({"x": x, "y": y}, _f({"x": x, "y": y}))
    for i in range(8):
        if i == resume_at:
            study = abo.load_study("s", storage=url)
        trial = study.ask()
        study.tell(trial.id, _f(trial.params))
    return study.trials[60:]


@pytest.mark.slow
def test_sync_refits_once_the_data_grew_5_percent_and_a_resume_keeps_the_schedule(
    tmp_path: Path,
) -> None:
    """Past 40 observations an ask refits only after refit_step new results; the asks in
    between condition the recorded hyperparameters on all the data (exactly, reproducibly)."""
    straight = _grown(None, None)
    # refit_step(60) = 3: fitted on 60, then on 63 and 66; every ask sees every result
    assert [t.proposal.fit_observations for t in straight] == [60, 60, 60, 63, 63, 63, 66, 66]
    assert [t.proposal.n_observations for t in straight] == list(range(60, 68))
    resumed = _grown(f"sqlite:///{tmp_path / 'r.db'}", 4)  # between two refits
    assert [t.params for t in resumed] == [t.params for t in straight]
    assert [t.proposal.fit_observations for t in resumed] == [60, 60, 60, 63, 63, 63, 66, 66]


def test_background_refits_start_every_observation_early_and_every_5_percent_later() -> None:
    assert [refit_module.refit_step(n) for n in (5, 39, 40, 200, 1000)] == [1, 1, 2, 10, 50]


def test_staleness_is_bounded_by_a_tenth_of_the_data_too() -> None:
    manager = refit_module.ModelManager("auto", mode="background")
    assert [manager.staleness_bound(n) for n in (8, 60, 150, 400)] == [5, 6, 15, 20]
    assert refit_module.ModelManager("auto", max_staleness=3).staleness_bound(400) == 3


def test_the_staleness_bound_widens_when_results_outpace_refits() -> None:
    """Past the static bound when results arrive faster than a refit takes: two refits'
    worth of results; a slow study keeps the tight bound; an explicit bound always wins."""
    manager = refit_module.ModelManager("auto", mode="background")
    manager.observe(300, now=0.0)
    assert manager.staleness_bound(300) == 20  # no pace known yet
    manager.observe(500, now=10.0)  # 20 results a second
    manager.fit_seconds = 1.5
    assert manager.staleness_bound(500) == 60
    slow = refit_module.ModelManager("auto", mode="background")
    slow.observe(300, now=0.0)
    slow.observe(310, now=100.0)  # one result every 10 s
    slow.fit_seconds = 1.5
    assert slow.staleness_bound(310) == 20
    fixed = refit_module.ModelManager("auto", mode="background", max_staleness=7)
    fixed.observe(300, now=0.0)
    fixed.observe(500, now=10.0)
    fixed.fit_seconds = 1.5
    assert fixed.staleness_bound(500) == 7


def test_background_models_of_one_refit_share_playbooks_lipschitz_cache() -> None:
    """Asks between two refits condition new models on the same hyperparameters; a busy
    point's Lipschitz constant is computed once for them, and afresh after a refit."""
    from abo.acquisitions.local_penalization import _LIPSCHITZ_CACHE, estimate_lipschitz

    manager = refit_module.ModelManager("auto", mode="background", max_staleness=50)
    gen = torch.Generator().manual_seed(3)
    X = torch.rand(30, 2, generator=gen, dtype=torch.double)
    Y = -((X - 0.4) ** 2).sum(-1, keepdim=True)
    key = tuple(range(30))
    fitted, _ = manager.model(key, X, Y)  # the first fit, in the foreground
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.double)
    busy, box = torch.tensor([[0.3, 0.6]], dtype=torch.double), torch.tensor([0.3, 0.3])
    first, _ = manager.model(key + (30,), torch.cat([X, X[:1] * 0.9]), torch.cat([Y, Y[:1]]))
    manager.wait()  # the refit the new observation started
    assert first.model is not fitted.model
    L1 = estimate_lipschitz(first.model, bounds, busy, box)
    assert len(_LIPSCHITZ_CACHE[fitted.model]) == 1  # stored under the fitted model
    refitted = manager._latest.fitted.model  # type: ignore[union-attr]
    second, _ = manager.model(key + (30, 31), torch.cat([X, X[:2] * 0.9]), torch.cat([Y, Y[:2]]))
    manager.wait()
    assert refitted is not fitted.model and second.model.abo_hypers_of() is refitted
    estimate_lipschitz(second.model, bounds, busy, box)
    assert len(_LIPSCHITZ_CACHE[refitted]) == 1  # new hyperparameters: computed again
    assert torch.allclose(estimate_lipschitz(first.model, bounds, busy, box), L1)


def test_every_entry_point_leaves_max_exact_to_the_device_and_a_cpu_takes_the_cap() -> None:
    """Python and HTTP default to ``None`` (chosen for the device); on this CPU machine the
    study's GPs then fit at most ``MAX_EXACT`` observations."""
    from abo.propose.proposer import Proposer
    from abo.service.schemas import StudyCreate
    from abo.spec.study_spec import StudySpec

    spec = StudySpec(space=abo.Space({"x": abo.Float(0, 1)}))
    assert spec.max_exact is None and StudyCreate(name="s", space={}).max_exact is None
    proposer = Proposer(StudySpec.create(abo.Space({"x": abo.Float(0, 1)}), device="cpu"))
    assert proposer.models.max_exact == refit_module.MAX_EXACT == 500
    assert proposer.device.type == "cpu"


@pytest.mark.slow
def test_background_refits_run_in_a_child_process_and_match_a_fit_here() -> None:
    """The refit's fit happens in another process (not holding this interpreter's lock) and
    gives the hyperparameters the same fit here would."""
    import os

    manager = refit_module.ModelManager("auto", mode="background", max_staleness=50)
    gen = torch.Generator().manual_seed(5)
    X = torch.rand(40, 2, generator=gen, dtype=torch.double)
    Y = -((X - 0.4) ** 2).sum(-1, keepdim=True)
    first, _ = manager.model(tuple(range(30)), X[:30], Y[:30])  # the first fit, here
    assert manager.fit_process is refit_module.FitProcess.shared()  # one child per process
    before = manager.fit_process.fits
    manager.model(tuple(range(40)), X, Y)  # ten new observations start a background refit
    manager.wait()
    pid = manager.fit_process.pid
    # > before, not == before + 1: the child is shared by the process, and a background refit
    # of another study in this process (an earlier test's) may land in between
    assert pid is not None and pid != os.getpid() and manager.fit_process.fits > before
    remote = manager._latest.fitted  # type: ignore[union-attr]
    assert remote.n == 40 and manager.refits == 2
    full = refit_module.full_refit_due(30, 40)
    here = refit_module.fit_gp(X, Y, previous=first, full=full, seed=40)
    assert refit_module.export_hypers(remote.model) == refit_module.export_hypers(here.model)


@pytest.mark.slow
def test_past_a_few_hundred_observations_background_refits_keep_asks_from_waiting() -> None:
    """5 % of the data outgrows the default staleness bound (20) past 400 observations; a
    refit then starts at half the bound, so asks do not stop to fit every 21 results.

    The bound is pinned at the default's 20: left to the measured pace (results per second
    times a refit's seconds, tested on its own above) a loaded machine widens it and refits
    less often, and under the full suite this test counted 2 refits instead of 3."""
    storage = abo.storage.SQLStorage(None)
    study = abo.create_study(
        SPACE, storage=storage, seed=4, n_initial=1, refit="background", max_exact=60,
        max_staleness=20, strategy_options={"raw_samples": 32, "num_restarts": 1},
    )  # fmt: skip
    gen = torch.Generator().manual_seed(4)
    for x, y in torch.rand(450, 2, generator=gen, dtype=torch.double).tolist():
        study.add({"x": x, "y": y}, _f({"x": x, "y": y}))
    asker = Study(storage, study.record, refit="background")
    manager = asker._models
    for _ in range(25):  # the old rule made the 21st ask wait
        t = asker.ask()
        assert t.proposal.n_observations - t.proposal.fit_observations <= 20
        asker.tell(t.id, _f(t.params))
        manager.wait(30)  # the refit a slow machine runs does not count against the ask
    assert manager.waits == 0 and manager.refits >= 3  # first fit, then every 10 results


def _auto_study(seed: int = 5) -> abo.Study:
    return abo.create_study(
        SPACE, strategy="qlognei", seed=seed, n_initial=4,
        strategy_options={"raw_samples": 64, "num_restarts": 2},
    )  # fmt: skip


def test_the_default_policy_is_sync_for_asks_without_a_pace() -> None:
    """``refit="auto"`` (the default) fits in the asking thread as ``sync`` does: same points."""
    auto, sync = _auto_study(), abo.create_study(
        SPACE, strategy="qlognei", seed=5, n_initial=4, refit="sync",
        strategy_options={"raw_samples": 64, "num_restarts": 2},
    )  # fmt: skip
    assert auto.spec.refit == "auto" and sync.spec.refit == "sync"
    for _ in range(7):
        a, s = auto.ask(), sync.ask()
        assert a.params == s.params
        auto.tell(a.id, _f(a.params))
        sync.tell(s.id, _f(s.params))
    assert auto._models._thread is None  # no background refit ever started
    assert auto._models._fit_process is None  # and no child process


@pytest.fixture()
def release(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Background fits (the ``abo-refit`` thread) wait until the returned event is set; the
    refits that would go to a child process fit here instead, held the same way."""
    event = threading.Event()
    real_fit = refit_module.fit_gp

    def held(*args: object, **kwargs: object):
        if threading.current_thread().name == "abo-refit":
            assert event.wait(60)
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(refit_module, "fit_gp", held)
    monkeypatch.setattr(
        FitProcess,
        "fit",
        lambda self, *a, **k: (_ for _ in ()).throw(
            refit_module.FitProcessDied("no child in this test")
        ),
    )
    return event


def test_with_a_pace_the_default_policy_never_waits_for_a_fit(release: threading.Event) -> None:
    """A hurried ask (``optimize``'s): while the first fit runs (past the wait it is allowed,
    ``first_fit_patience``), quasi-random points recorded as fallbacks; after it, conditioned
    hyperparameters while refits run in the background."""
    study = _auto_study()
    for _ in range(4):  # the design
        t = study.ask_batch(1, pace=0.5)[0]
        study.tell(t.id, _f(t.params))
    extra = study.ask_batch(2, pace=0.5)  # the first fit runs, held: fallbacks after a second
    assert [t.proposal.strategy for t in extra] == ["sobol", "sobol"]
    assert all(t.proposal.fallback for t in extra)  # not the design: said so
    assert study._models._thread is not None and study._models._thread.is_alive()
    release.set()
    study._models.wait(60)
    for t in extra:
        study.tell(t.id, _f(t.params))
    release.clear()  # the next refits are held again: asks must not wait for them
    fitted_on = set()
    for i in range(3):
        t = study.ask_batch(1, pace=0.5)[0]
        assert t.proposal.strategy == "qlognei"
        assert t.proposal.n_observations == 6 + i
        fitted_on.add(t.proposal.fit_observations)
        study.tell(t.id, _f(t.params))
    # the first fit's hyperparameters (fitted during the design), conditioned on all the data
    assert len(fitted_on) == 1 and fitted_on.pop() < 6
    assert study._models.waits == 0
    release.set()
    study._models.wait(60)


def test_with_a_pace_several_objectives_fit_their_first_gps_in_the_background(
    release: threading.Event,
) -> None:
    """As for one objective: while each objective's first fit runs, more design points; then
    qlognehvi with those hyperparameters, no ask waiting for a fit."""
    study = abo.create_study(
        SPACE, outcomes={"f": "minimize", "g": "minimize"}, strategy="qlognehvi", seed=5,
        n_initial=4, strategy_options={"raw_samples": 64, "num_restarts": 2, "mc_samples": 16},
    )  # fmt: skip

    def values(p: dict) -> dict[str, float]:
        return {"f": _f(p), "g": (p["x"] - 0.8) ** 2 + p["y"]}

    for _ in range(4):  # the design
        t = study.ask_batch(1, pace=0.5)[0]
        study.tell(t.id, values(t.params))
    extra = study.ask_batch(2, pace=0.5)  # both first fits run, held: more design
    assert [t.proposal.strategy for t in extra] == ["sobol", "sobol"]
    managers = study._proposer.objective_models
    assert len(managers) == 2
    assert all(m._thread is not None and m._thread.is_alive() for m in managers)
    release.set()
    for m in managers:
        m.wait(60)
    for t in extra:
        study.tell(t.id, values(t.params))
    release.clear()  # later refits are held again: asks must not wait for them
    for i in range(2):
        t = study.ask_batch(1, pace=0.5)[0]
        assert t.proposal.strategy == "qlognehvi" and t.proposal.n_observations == 6 + i
        assert t.proposal.fit_observations is not None and t.proposal.fit_observations < 6
        study.tell(t.id, values(t.params))
    assert all(m.waits == 0 for m in managers)
    release.set()
    for m in managers:
        m.wait(60)


def test_an_ask_without_a_pace_after_hurried_ones_is_reproducible(tmp_path: Path) -> None:
    """Hurried asks depend on timing; the next unhurried one depends only on what is stored."""
    import sqlite3

    url = f"sqlite:///{tmp_path / 'a.db'}"
    study = abo.create_study(
        SPACE, name="h", storage=url, strategy="qlognei", seed=8, n_initial=4,
        strategy_options={"raw_samples": 64, "num_restarts": 2},
    )  # fmt: skip
    for _ in range(7):
        t = study.ask_batch(1, pace=1.0)[0]
        study.tell(t.id, _f(t.params))
    study._models.wait(60)
    with sqlite3.connect(tmp_path / "a.db") as src, sqlite3.connect(tmp_path / "b.db") as dst:
        src.backup(dst)  # the same stored state, WAL included
    first = abo.load_study("h", storage=url).ask()
    second = abo.load_study("h", storage=f"sqlite:///{tmp_path / 'b.db'}").ask()
    assert first.params == second.params and first.proposal.strategy == "qlognei"
