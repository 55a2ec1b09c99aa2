"""Numbers no float can hold (``10**400``, ``2**1024``) and TOML's ``inf``/``nan``, at every
Python entry point and in a study file: each is an abo error naming the field, never an
``OverflowError`` or a silent acceptance, and nothing is changed.

The HTTP API's side is in ``tests/service/test_hostile_input.py``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import abo
from abo.cli.config import build_objective, load_spec
from abo.core.exceptions import AboError, ConfigError, InvalidValueError, StudyNotFoundError
from abo.executors import ThreadExecutor

HUGE = [10**400, 2**1024, -(2**1024), 10**5000]  # the last is beyond int-to-text's limit
IDS = ["10**400", "2**1024", "-2**1024", "10**5000"]


def _space() -> abo.Space:
    return abo.Space({"x": abo.Float(0, 1), "epochs": abo.Int(1, 27)})


def _refused(call: Callable[[], Any], field: str) -> AboError:
    """``call`` raises an abo error naming ``field`` at the start of a short message."""
    with pytest.raises(AboError) as info:
        call()
    exc = info.value
    assert exc.field == field, str(exc)
    assert str(exc).startswith(f"{field}: ") or str(exc).startswith(f"{field}."), str(exc)
    assert len(str(exc)) < 400, str(exc)  # a huge number is shown by its size
    return exc


# -- abo.create_study options ---------------------------------------------------------------
# (option builder from a huge number, the field named, whether the error is InvalidValueError:
# a number that is not finite; the integer options refuse it as out of their range instead)
ASHA = {"rule": "asha"}
MEDIAN = {"rule": "median"}
TWO = {"outcomes": {"f": "minimize", "g": "minimize"}}
OPTIONS: list[tuple[str, Callable[[int], dict[str, Any]], str, bool]] = [
    ("lease", lambda h: {"lease_seconds": h}, "lease_seconds", True),
    ("min_step", lambda h: {"stopping": {**ASHA, "min_step": h}}, "stopping.min_step", True),
    ("max_step", lambda h: {"stopping": {**ASHA, "max_step": h}}, "stopping.max_step", True),
    (
        "reduction_factor",
        lambda h: {"stopping": {**ASHA, "reduction_factor": h}},
        "stopping.reduction_factor",
        True,
    ),
    (
        "warmup_steps",
        lambda h: {"stopping": {**MEDIAN, "warmup_steps": h}},
        "stopping.warmup_steps",
        True,
    ),
    (
        "min_trials",
        lambda h: {"stopping": {**MEDIAN, "min_trials": h}},
        "stopping.min_trials",
        True,
    ),
    (
        "beta",
        lambda h: {"strategy": "ucb", "strategy_options": {"beta": h}},
        "strategy_options.beta",
        True,
    ),
    (
        "nested_strategy_option",
        lambda h: {"strategy": "ucb", "strategy_options": {"beta": [1.0, {"deep": h}]}},
        "strategy_options.beta.1.deep",
        True,
    ),
    (
        "constraint_bound",
        lambda h: {"outcomes": {"f": "minimize", "c": {"kind": "constraint", "bound": h}}},
        "outcomes.c.bound",
        True,
    ),
    (
        "reference_point",
        lambda h: {**TWO, "reference_point": {"f": h, "g": 1}},
        "reference_point.f",
        True,
    ),
    (
        "fidelity_target",
        lambda h: {"fidelity": {"parameter": "epochs", "target": h}},
        "fidelity.target",
        False,
    ),
    (
        "fidelity_fixed_cost",
        lambda h: {"fidelity": {"parameter": "epochs", "cost": {"fixed": h}}},
        "fidelity.cost",
        True,
    ),
    (
        "fidelity_unit_cost",
        lambda h: {"fidelity": {"parameter": "epochs", "cost": {"per_unit": h}}},
        "fidelity.cost",
        True,
    ),
    ("seed", lambda h: {"seed": h}, "seed", False),
    ("n_initial", lambda h: {"n_initial": h}, "n_initial", False),
    ("max_retries", lambda h: {"max_retries": h}, "max_retries", False),
    ("max_staleness", lambda h: {"max_staleness": h}, "max_staleness", False),
    ("max_exact", lambda h: {"max_exact": h}, "max_exact", False),
]


@pytest.mark.parametrize("huge", HUGE, ids=IDS)
@pytest.mark.parametrize(
    ("option", "field", "not_finite"), [o[1:] for o in OPTIONS], ids=[o[0] for o in OPTIONS]
)
def test_create_study_refuses_a_huge_option_naming_it_and_creates_nothing(
    tmp_path: Path, option: Callable[[int], dict[str, Any]], field: str, not_finite: bool, huge: int
) -> None:
    storage = f"sqlite:///{tmp_path / 'abo.db'}"
    given = option(huge)
    exc = _refused(lambda: abo.create_study(_space(), name="s", storage=storage, **given), field)
    if not_finite and field != "fidelity.target":
        assert isinstance(exc, InvalidValueError) and isinstance(exc, ValueError)
    with pytest.raises(StudyNotFoundError):
        abo.load_study("s", storage=storage)


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")], ids=str)
def test_a_strategy_option_that_is_not_finite_is_refused(bad: float) -> None:
    """Strategies take their options unchecked: ``beta = inf`` used to make a study."""
    _refused(
        lambda: abo.create_study(_space(), strategy="ucb", strategy_options={"beta": bad}),
        "strategy_options.beta",
    )
    ok = abo.create_study(_space(), strategy="ucb", strategy_options={"beta": 4})
    assert ok.spec.strategy_options == {"beta": 4}


def test_a_fidelity_cost_beyond_the_float_range_at_the_top_is_refused() -> None:
    """Each cost finite, but ``fixed + per_unit * high`` is not."""
    cost = {"fixed": 1e308, "per_unit": 1e308}
    with pytest.raises(AboError, match="fidelity.cost: an evaluation at 27 would cost inf"):
        abo.create_study(_space(), fidelity={"parameter": "epochs", "cost": cost})


# -- the space --------------------------------------------------------------------------------
PARAMETERS: list[tuple[str, Callable[[int], Any], str]] = [
    ("float_high", lambda h: abo.Float(0, abs(h)), "high"),
    ("float_low", lambda h: abo.Float(-abs(h), 0), "low"),
    ("float_step", lambda h: abo.Float(0, 1, step=abs(h)), "step"),
    ("int_high", lambda h: abo.Int(0, abs(h)), "high"),
    ("int_step", lambda h: abo.Int(0, 10, step=abs(h)), "step"),
    ("categorical_choice", lambda h: abo.Categorical([1, h]), "integer choice"),
    (
        "json_high",
        lambda h: abo.Space.from_json({"x": {"type": "float", "low": 0, "high": abs(h)}}),
        "high",
    ),
]


@pytest.mark.parametrize("huge", HUGE, ids=IDS)
@pytest.mark.parametrize(
    ("make", "what"), [p[1:] for p in PARAMETERS], ids=[p[0] for p in PARAMETERS]
)
def test_a_parameter_refuses_a_huge_bound_or_choice(
    make: Callable[[int], Any], what: str, huge: int
) -> None:
    with pytest.raises(abo.SearchSpaceError) as info:
        make(huge)
    assert what in str(info.value) and "integer of" in str(info.value), str(info.value)
    assert len(str(info.value)) < 300


def test_a_categorical_integer_choice_within_2_53_is_kept() -> None:
    """JSON clients read integers exactly up to 2**53: a larger choice would come back as
    another number, so it is refused; the largest exact ones are kept."""
    assert abo.Categorical([-(2**53), 2**53]).choices == (-(2**53), 2**53)
    with pytest.raises(abo.SearchSpaceError, match="2\\*\\*53"):
        abo.Categorical([2**53 + 1])


# -- a running study: tell, add, report, ask, metadata ------------------------------------------
def _snapshot(study: abo.Study) -> list[Any]:
    return [(t.id, t.state, t.values, t.user, t.params) for t in study.trials] + [
        sorted(study.reports().items())
    ]


CALLS: list[tuple[str, Callable[[abo.Study, int, int], Any], str]] = [
    ("tell", lambda s, t, h: s.tell(t, h), "value"),
    ("tell_dict", lambda s, t, h: s.tell(t, {"value": h}), "value.value"),
    (
        "tell_metadata",
        lambda s, t, h: s.tell(t, 1.0, metadata={"loss": {"last": h}}),
        "metadata.loss.last",
    ),
    ("report_value", lambda s, t, h: s.report(t, 1, h), "value"),
    ("report_step", lambda s, t, h: s.report(t, h, 1.0), "step"),
    ("add_value", lambda s, t, h: s.add({"x": 0.5, "epochs": 3}, h), "value"),
    ("add_param", lambda s, t, h: s.add({"x": h, "epochs": 3}, 1.0), "x"),
    ("add_int_param", lambda s, t, h: s.add({"x": 0.5, "epochs": h}, 1.0), "epochs"),
    ("enqueue_param", lambda s, t, h: s.enqueue({"x": h, "epochs": 3}), "x"),
    ("ask_pace", lambda s, t, h: s.ask_batch(1, pace=h), "pace"),
    ("ask_info", lambda s, t, h: s.ask_batch(1, info={"k": [1, h]}), "info.k.1"),
]


@pytest.mark.parametrize("huge", HUGE, ids=IDS)
@pytest.mark.parametrize(("call", "field"), [c[1:] for c in CALLS], ids=[c[0] for c in CALLS])
def test_a_study_refuses_a_huge_number_naming_it_and_changes_nothing(
    tmp_path: Path, call: Callable[[abo.Study, int, int], Any], field: str, huge: int
) -> None:
    study = abo.create_study(
        _space(), storage=f"sqlite:///{tmp_path / 'abo.db'}", strategy="random", seed=0
    )
    trial = study.ask()
    study.report(trial.id, 0, 0.5)
    before = _snapshot(study)
    exc = _refused(lambda: call(study, trial.id, huge), field)
    assert isinstance(exc, ValueError)  # InvalidValueError or SearchSpaceError
    assert _snapshot(study) == before
    assert study.tell(trial.id, 1.0).values == {"value": 1.0}  # the trial still takes its result


@pytest.mark.parametrize("huge", HUGE, ids=IDS)
def test_a_huge_reference_point_for_the_hypervolume_is_refused(huge: int) -> None:
    study = abo.create_study(_space(), strategy="random", seed=0, **TWO)
    study.add({"x": 0.5, "epochs": 3}, {"f": 1.0, "g": 2.0})
    _refused(lambda: study.hypervolume({"f": huge, "g": 3.0}), "reference_point.f")


@pytest.mark.parametrize("huge", HUGE[:2], ids=IDS[:2])
def test_an_objective_returning_a_huge_extra_keeps_it_as_text(huge: int) -> None:
    """What an objective returns beside its value is kept, not refused: a huge integer as its
    digits (as NaN is kept as ``"nan"``)."""
    study = abo.create_study(_space(), strategy="random", seed=0)
    with ThreadExecutor(1) as executor:
        study.optimize(
            lambda p: {"value": p["x"], "big": huge}, n_trials=1, executor=executor, verbosity=0
        )
    (trial,) = study.trials
    assert trial.value is not None and trial.user["big"] == str(huge)


# -- the study file (abo run) -----------------------------------------------------------------
BASE = {
    "study": 'n_trials = 2\nstrategy = "random"\nname = "f"\nstorage = "sqlite:///f.db"\n',
    "space": (
        'x = { type = "float", low = 0, high = 1 }\nepochs = { type = "int", low = 1, high = 9 }\n'
    ),
    "objective": "command = \"{python} -c 'print({x})'\"\n",
    "executor": 'kind = "threads"\n',
}
# (table, the line added to it, the field named); TOML ints are 64-bit, but inf and nan are
# floats, and 1e400 reads as inf
TOML: list[tuple[str, str, str]] = [
    ("study", "lease_seconds = inf", "study.lease_seconds"),
    ("study", "lease_seconds = nan", "study.lease_seconds"),
    ("study", "lease_seconds = 1e400", "study.lease_seconds"),
    ("study", "trial_timeout = inf", "study.trial_timeout"),
    ("study", "trial_timeout = nan", "study.trial_timeout"),
    ("study", 'stopping = { rule = "asha", min_step = nan }', "study.stopping.min_step"),
    ("study", 'stopping = { rule = "asha", max_step = inf }', "study.stopping.max_step"),
    ("study", 'stopping = { rule = "median", warmup_steps = -inf }', "study.stopping.warmup_steps"),
    ("study", "strategy_options = { beta = inf }", "study.strategy_options.beta"),
    ("study", 'outcomes = { value = "minimize", c = "<= inf" }', "study.outcomes.c.bound"),
    (
        "study",
        'outcomes = { f = "minimize", c = { kind = "constraint", bound = nan } }',
        "study.outcomes.c.bound",
    ),
    (
        "study",
        'outcomes = { f = "minimize", g = "minimize" }\nreference_point = { f = inf, g = 1 }',
        "study.reference_point.f",
    ),
    ("study", 'fidelity = { parameter = "epochs", cost = { fixed = inf } }', "study.fidelity.cost"),
    (
        "study",
        'fidelity = { parameter = "epochs", cost = { fixed = 1e300, per_unit = 1e308 } }',
        "study.fidelity.cost",
    ),
    ("space", 'y = { type = "float", low = 0, high = inf }', "space.y"),
    ("space", 'y = { type = "float", low = 0, high = 1, step = nan }', "space.y"),
    ("space", 'y = { type = "categorical", choices = [1.0, nan] }', "space.y"),
    ("space", 'y = { type = "categorical", choices = [1, 9223372036854775807] }', "space.y"),
    ("objective", "timeout = inf", "objective.timeout"),
    ("objective", "timeout = nan", "objective.timeout"),
    ("objective", "stop_grace = inf", "objective.stop_grace"),
    ("executor", "n_workers = inf", "executor.n_workers"),
    ("executor", "n_workers = 1.5", "executor.n_workers"),
]


def _file(folder: Path, table: str, line: str) -> Path:
    body = {**BASE, table: BASE[table] + line + "\n"}
    if table == "study" and line.startswith("outcomes = { f"):
        body["objective"] = "command = \"{python} -c 'print(1)'\"\n"
    path = folder / "study.toml"
    path.write_text("".join(f"[{t}]\n{b}" for t, b in body.items()))
    return path


@pytest.mark.parametrize(("table", "line", "field"), TOML, ids=[f"{t}:{ln}" for t, ln, _ in TOML])
def test_a_study_file_refuses_a_number_that_is_not_finite_naming_the_key(
    tmp_path: Path, table: str, line: str, field: str
) -> None:
    path = _file(tmp_path, table, line)
    with pytest.raises(ConfigError) as info:
        load_spec(path)
    assert str(info.value).startswith(f"{field}: ") or str(info.value).startswith(f"{field}."), str(
        info.value
    )
    assert not (tmp_path / "f.db").exists()  # checked before the storage is opened


def test_the_study_file_without_a_bad_number_loads(tmp_path: Path) -> None:
    """The base the table above changes is itself a good file (so each row tests its line)."""
    spec = load_spec(_file(tmp_path, "objective", "stop_grace = 2.5"))
    assert build_objective(spec).stop_grace == 2.5


@pytest.mark.parametrize("line", ["lease_seconds = inf", "trial_timeout = nan"])
def test_abo_run_of_a_file_with_inf_is_one_line_naming_the_key(tmp_path: Path, line: str) -> None:
    path = _file(tmp_path, "study", line)
    out = subprocess.run(
        [sys.executable, "-m", "abo.cli.main", "run", str(path), "--quiet"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1, out.stderr
    assert f"study.{line.split()[0]}" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "f.db").exists()
