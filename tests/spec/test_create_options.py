"""Creating a study that exists (``load_if_exists``): every option is validated, and one given
explicitly that differs from the stored one is an error naming it, stored against given,
unless the caller keeps the stored options (``load_if_exists="keep"``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import abo
from abo import AboError, Float, OptionsConflictError, SearchSpaceError, Space
from abo.spec.options_check import differences

SPACE = Space({"x": Float(0.0, 1.0), "y": Float(0.0, 1.0)})
STORED = {
    "strategy": "random",
    "seed": 3,
    "lease_seconds": 600,
    "max_retries": 2,
    "stopping": "median",
}


@pytest.fixture()
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'o.db'}"
    study = abo.create_study(SPACE, name="o", storage=url, **STORED)
    study.tell(study.ask().id, 0.5)
    return url


def _stored_spec(url: str) -> dict:
    return abo.load_study("o", storage=url).spec.to_json()


def test_differing_options_are_refused_naming_each_stored_and_given(url: str) -> None:
    before = _stored_spec(url)
    with pytest.raises(OptionsConflictError) as err:
        abo.create_study(
            SPACE, name="o", storage=url, load_if_exists=True,
            strategy="auto", lease_seconds=60, max_retries=2, stopping="asha",
        )  # fmt: skip
    message = str(err.value)
    assert message.startswith("strategy: study 'o' exists with other options (")
    assert "strategy: stored 'random', given 'auto'" in message
    assert "lease_seconds: stored 600, given 60" in message
    assert "stopping: stored {'rule': 'median'" in message and "given {'rule': 'asha'" in message
    assert "max_retries" not in message  # the same as stored
    assert "load_if_exists='keep'" in message
    assert err.value.field == "strategy"
    assert list(err.value.differences) == ["strategy", "lease_seconds", "stopping"]
    assert _stored_spec(url) == before  # nothing changed


def test_options_not_given_are_not_compared_and_equal_ones_load(url: str) -> None:
    plain = abo.create_study(SPACE, name="o", storage=url, load_if_exists=True)
    assert (plain.strategy, plain.seed, plain.spec.lease_seconds) == ("random", 3, 600)
    same = abo.create_study(SPACE, name="o", storage=url, load_if_exists=True, **STORED)
    assert len(same) == 1
    float_lease = abo.create_study(
        SPACE, name="o", storage=url, load_if_exists=True, lease_seconds=600.0
    )
    assert float_lease.spec.lease_seconds == 600


def test_a_given_seed_that_differs_is_refused(url: str) -> None:
    with pytest.raises(OptionsConflictError, match="seed: stored 3, given 4"):
        abo.create_study(SPACE, name="o", storage=url, seed=4, load_if_exists=True)


def test_keep_loads_the_stored_options_but_still_validates_the_given_ones(url: str) -> None:
    kept = abo.create_study(
        SPACE, name="o", storage=url, load_if_exists="keep", strategy="auto", lease_seconds=60
    )
    assert (kept.strategy, kept.spec.lease_seconds) == ("random", 600)
    for load in (True, "keep"):
        with pytest.raises(AboError) as err:
            abo.create_study(SPACE, name="o", storage=url, load_if_exists=load, lease_seconds=-1)
        assert err.value.field == "lease_seconds"
        with pytest.raises(abo.UnknownStrategyError):
            abo.create_study(SPACE, name="o", storage=url, load_if_exists=load, strategy="nope")
        with pytest.raises(AboError) as err:
            abo.create_study(SPACE, name="o", storage=url, load_if_exists=load, stopping="x")
        assert str(err.value.field).startswith("stopping")
    # the space and outcomes are the study itself: "keep" does not keep another one
    with pytest.raises(SearchSpaceError, match="space"):
        abo.create_study({"x": Float(0.0, 1.0)}, name="o", storage=url, load_if_exists="keep")


def test_load_if_exists_takes_only_false_true_or_keep(url: str) -> None:
    for bad in ("yes", 1, None):
        with pytest.raises(AboError) as err:
            abo.create_study(SPACE, name="o", storage=url, load_if_exists=bad)
        assert err.value.field == "load_if_exists", bad


def test_a_new_study_with_keep_is_created_with_the_given_options(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'n.db'}"
    study = abo.create_study(SPACE, name="n", storage=url, load_if_exists="keep", max_retries=4)
    assert study.spec.max_retries == 4


def test_warm_start_sources_are_compared_by_name(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    for name in ("a", "b"):
        src = abo.create_study(SPACE, name=name, storage=url, strategy="random", seed=0)
        for t in src.ask_batch(3):
            src.tell(t.id, t.params["x"])
    abo.create_study(SPACE, name="w", storage=url, warm_start_from=["a"], seed=0)
    src.tell(src.ask().id, 0.1)  # a source that grew is the same source
    again = abo.create_study(
        SPACE, name="w", storage=url, warm_start_from=["a"], load_if_exists=True
    )
    assert [s["study"] for s in again.spec.warm_start_from] == ["a"]
    with pytest.raises(
        OptionsConflictError, match=r"warm_start_from: stored \['a'\], given \['b'\]"
    ):
        abo.create_study(SPACE, name="w", storage=url, warm_start_from=["b"], load_if_exists=True)


def test_differences_compare_normalised_values() -> None:
    spec = abo.create_study(SPACE, strategy="random", parameter_constraints=["x + y <= 1"]).spec
    assert isinstance(spec.parameter_constraints, tuple)
    same = spec.replace(parameter_constraints=["x + y <= 1"])
    assert differences(spec, same, ["parameter_constraints", "space", "outcomes"]) == {}
    other = dataclasses.replace(spec, noise="deterministic", strategy_options={"k": 1})
    assert differences(spec, other, ["noise", "strategy_options"]) == {
        "noise": ("auto", "deterministic"),
        "strategy_options": ({}, {"k": 1}),
    }


def test_the_default_design_is_two_per_parameter_up_to_ten_then_grows_slowly() -> None:
    """2 x parameters for 1 to 10 parameters (unchanged from before), then 20 and one more
    per 5 parameters: a 100-parameter study's model starts after 38 points, not 200."""
    from abo.spec.study_spec import default_n_initial

    def design(d: int) -> int:
        space = abo.Space({f"x{i}": abo.Float(0.0, 1.0) for i in range(d)})
        return abo.create_study(space, seed=0).spec.resolved_n_initial

    assert [design(d) for d in (1, 2, 6, 10)] == [2, 4, 12, 20]
    assert [design(d) for d in (11, 15, 20, 50, 100)] == [20, 21, 22, 28, 38]
    assert [default_n_initial(d) for d in (300, 1000)] == [78, 218]
    assert design(100) == len([t for t in _asked(100, 40) if t.proposal.strategy == "sobol"])


def _asked(d: int, n: int) -> list[abo.Trial]:
    space = abo.Space({f"x{i}": abo.Float(0.0, 1.0) for i in range(d)})
    study = abo.create_study(space, seed=0, strategy="random")
    return study.ask_batch(n)
