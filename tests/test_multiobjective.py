"""Studies of several objectives: the Pareto front, the hypervolume and its reference point,
and pending-aware proposals by the default strategy, over a real SQLite file and PostgreSQL."""

from __future__ import annotations

import math

import pytest

import abo
from abo import AboError

SPACE = abo.Space({"x": abo.Float(0.0, 1.0), "y": abo.Float(0.0, 1.0)})
OUTCOMES = {"f1": "minimize", "f2": "minimize"}


def zdt(p: dict) -> dict[str, float]:
    """A convex two-objective trade-off (ZDT1 in 2-D): the front is y = 0, f2 = 1 - sqrt(f1)."""
    g = 1.0 + 9.0 * p["y"]
    return {"f1": p["x"], "f2": g * (1.0 - math.sqrt(p["x"] / g))}


def dominated(a: dict, others: list[dict]) -> bool:
    return any(
        all(o[k] <= a[k] for k in OUTCOMES) and any(o[k] < a[k] for k in OUTCOMES) for o in others
    )


def run(study: abo.Study, n: int, workers: int = 2) -> list[abo.Trial]:
    """Ask/tell with ``workers`` trials in flight, oldest told first."""
    running = [study.ask(n_workers=workers) for _ in range(workers)]
    asked = list(running)
    while len(asked) < n:
        trial = running.pop(0)
        study.tell(trial.id, zdt(trial.params))
        new = study.ask(n_workers=workers)
        asked.append(new)
        running.append(new)
    for trial in running:
        study.tell(trial.id, zdt(trial.params))
    return asked


@pytest.fixture(scope="module")
def told(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[abo.Trial], dict]:
    url = f"sqlite:///{tmp_path_factory.mktemp('mo') / 'mo.db'}"
    study = abo.create_study(SPACE, name="zdt", storage=url, outcomes=OUTCOMES, seed=4)
    n_initial = study.spec.resolved_n_initial
    running = [study.ask(n_workers=2) for _ in range(2)]
    refs = []
    for _ in range(14):
        trial = running.pop(0)
        study.tell(trial.id, zdt(trial.params))
        if len([t for t in study.trials if t.state is abo.TrialState.DONE]) >= n_initial:
            refs.append(study.reference_point())
        running.append(study.ask(n_workers=2))
    return url, study.trials, {"refs": refs, "n_initial": n_initial}


@pytest.mark.slow
@pytest.mark.xdist_group("mo-told")  # one process builds the module fixture once
def test_the_default_strategy_proposes_by_hypervolume_with_busy_points(told) -> None:
    _, trials, info = told
    modelled = [t for t in trials if t.proposal.strategy != "sobol"]
    assert len(modelled) >= 8
    assert {(t.proposal.strategy, t.proposal.arm) for t in modelled} == {("auto", "qlognehvi")}
    record = modelled[-1].proposal
    assert record.model is not None and {k.split(":")[0] for k in record.model.hypers} == {
        "f1",
        "f2",
    }  # one GP per objective, each recorded for a resume
    assert len(record.details["ref_point"]) == 2
    points = [(t.params["x"], t.params["y"]) for t in trials]
    assert len(set(points)) == len(points)  # busy points are never proposed again


@pytest.mark.xdist_group("mo-told")  # one process builds the module fixture once
def test_best_trials_is_the_front_and_reopening_the_file_gives_the_same(told) -> None:
    url, trials, _ = told
    study = abo.load_study("zdt", storage=url)
    done = [t for t in study.trials if t.state is abo.TrialState.DONE]
    expected = [t.id for t in done if not dominated(t.values, [o.values for o in done])]
    assert [t.id for t in study.best_trials] == expected and expected
    with pytest.raises(AboError, match="use best_trials") as err:
        _ = study.best
    assert err.value.field == "best"
    # the model pushed the front toward y = 0, where the true front lies
    assert min(t.params["y"] for t in study.best_trials) < 0.1


@pytest.mark.xdist_group("mo-told")  # one process builds the module fixture once
def test_reference_point_is_fixed_once_the_design_is_told(told) -> None:
    url, _, info = told
    refs = info["refs"]
    assert len(refs) >= 5 and all(r == refs[0] for r in refs)
    study = abo.load_study("zdt", storage=url)
    ref = study.reference_point()
    assert ref == refs[0]
    done = [t for t in study.trials if t.state is abo.TrialState.DONE]
    first = sorted(done, key=lambda t: (t.finished_at, t.id))[: info["n_initial"]]
    for name in OUTCOMES:  # beyond the worst initial value, by 10 % of the initial range
        values = [t.values[name] for t in first]
        assert ref[name] == pytest.approx(max(values) + 0.1 * (max(values) - min(values)))


@pytest.mark.xdist_group("mo-told")  # one process builds the module fixture once
def test_hypervolume_grows_and_checks_its_reference_point(told) -> None:
    url, _, info = told
    study = abo.load_study("zdt", storage=url)
    hv = study.hypervolume()
    assert hv > 0 and hv == study.hypervolume(study.reference_point())
    assert study.hypervolume({"f1": 2.0, "f2": 20.0}) > hv  # a farther reference: more volume
    assert study.hypervolume({"f1": -1.0, "f2": 0.0}) == 0.0  # nothing beats it
    bad = [
        ({"f1": 1.0}, "reference_point.f2"),
        ({"f1": 1.0, "f2": 1.0, "f3": 1.0}, "reference_point.f3"),
        ({"f1": float("nan"), "f2": 1.0}, "reference_point.f1"),
        ([1.0, 2.0], "reference_point"),
    ]
    for reference, field in bad:
        with pytest.raises(AboError) as err:
            study.hypervolume(reference)  # type: ignore[arg-type]
        assert err.value.field == field and str(err.value).startswith(f"{field}:")
    single = abo.create_study(SPACE, strategy="random", seed=0)
    with pytest.raises(AboError, match="one objective") as err:
        single.hypervolume()
    assert err.value.field == "hypervolume"
    fresh = abo.create_study(SPACE, outcomes=OUTCOMES, strategy="random", seed=0)
    with pytest.raises(AboError, match="no trial is done yet"):
        fresh.hypervolume()
    assert fresh.best_trials == []


def test_same_seed_and_order_of_tells_give_the_same_proposals_in_postgresql(pg_url: str) -> None:
    a = abo.create_study(SPACE, outcomes=OUTCOMES, seed=11, strategy_options={"raw_samples": 64})
    b = abo.create_study(
        SPACE, outcomes=OUTCOMES, seed=11, strategy_options={"raw_samples": 64}, storage=pg_url
    )
    pa = [t.params for t in run(a, 7)]
    pb = [t.params for t in run(b, 7)]
    assert pa == pb
    assert a.trials[-1].proposal.arm == "qlognehvi"
    stored = abo.load_study(b.name, storage=pg_url)
    assert [t.id for t in stored.best_trials] == [t.id for t in a.best_trials]
    assert stored.hypervolume() == pytest.approx(a.hypervolume())


@pytest.mark.slow
def test_the_model_strategies_find_more_hypervolume_than_random_search() -> None:
    volumes = {}
    for strategy in ("qlognehvi", "parego", "thompson", "random"):
        study = abo.create_study(SPACE, outcomes=OUTCOMES, strategy=strategy, seed=2)
        run(study, 12)
        volumes[strategy] = study.hypervolume({"f1": 1.1, "f2": 11.0})
        arms = {t.proposal.strategy for t in study.trials} - {"sobol"}
        assert arms == {strategy}, arms
    assert all(volumes[s] > volumes["random"] for s in ("qlognehvi", "parego", "thompson"))


def test_a_declared_reference_point_is_the_studys_and_the_proposals(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'ref.db'}"
    given = {"f1": 2.0, "f2": 20.0}
    study = abo.create_study(
        SPACE, name="ref", storage=url, outcomes=OUTCOMES, seed=4, reference_point=given,
        strategy_options={"raw_samples": 64},
    )  # fmt: skip
    assert study.reference_point() == given  # known before any result
    trials = run(study, 7)
    assert study.reference_point() == given  # not replaced by the initial design's rule
    reloaded = abo.load_study("ref", storage=url)
    assert reloaded.spec.reference_point == given and reloaded.reference_point() == given
    assert reloaded.hypervolume() == pytest.approx(reloaded.hypervolume(given))
    modelled = [t for t in trials if t.proposal.strategy != "sobol"]
    assert modelled and all(t.proposal.details["ref_point"] == [-2.0, -20.0] for t in modelled)
    # the same seed and tells with the default reference point propose other points
    default = abo.create_study(
        SPACE, outcomes=OUTCOMES, seed=4, strategy_options={"raw_samples": 64}
    )
    other = run(default, 7)
    assert other[-1].proposal.details["ref_point"] != [-2.0, -20.0]
    assert [t.params for t in other] != [t.params for t in trials]


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"reference_point": {"f1": 1.0}}, "reference_point.f2"),
        ({"reference_point": {"f1": 1.0, "f2": 1.0, "g": 0.0}}, "reference_point.g"),
        ({"reference_point": {"f1": math.inf, "f2": 1.0}}, "reference_point.f1"),
        ({"reference_point": [1.0, 2.0]}, "reference_point"),
        ({"reference_point": {"value": 1.0}, "outcomes": None}, "reference_point"),
    ],
)
def test_a_bad_declared_reference_point_names_its_field(options: dict, field: str) -> None:
    with pytest.raises(AboError) as err:
        abo.create_study(SPACE, **{"outcomes": OUTCOMES, **options})
    assert err.value.field == field and str(err.value).startswith(f"{field}:")
