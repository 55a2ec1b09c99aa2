"""``abo import`` / ``from_optuna`` of conditional and define-by-run studies, and of sources that
are not Optuna storages: the source is only read, a failure is one line and leaves no study,
and a trial that cannot be placed is named, never silently dropped."""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from pathlib import Path

import optuna
import pytest

import abo
from abo.interop import from_optuna, to_optuna
from abo.storage import open_storage
from tests.cli_helpers import abo_here

CONDITIONAL = abo.Space(
    {
        "optimizer": abo.Categorical(["sgd", "adam", "rmsprop"]),
        "lr": abo.Float(1e-4, 1e-1, log=True),
        "momentum": abo.Float(0.0, 0.99, when={"optimizer": "sgd"}),
        "beta2": abo.Float(0.9, 0.999, when={"optimizer": ["adam", "rmsprop"]}),
        "layers": abo.Int(1, 3),
        "units_3": abo.Int(8, 64, when={"layers": 3}),
    }
)


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _studies(url: str) -> list[str]:
    return [s.name for s in open_storage(url).list_studies()]


def _define_by_run(url: str, name: str, n: int = 16, float_branch: bool = False) -> optuna.Study:
    """An Optuna-native study whose parameters depend on earlier ones' values."""
    study = optuna.create_study(study_name=name, storage=url,
                                sampler=optuna.samplers.RandomSampler(seed=3))  # fmt: skip

    def objective(trial: optuna.Trial) -> float:
        kind = trial.suggest_categorical("classifier", ["svc", "forest"])
        if kind == "svc":
            score = trial.suggest_float("svc_c", 1e-3, 1e3, log=True)
        else:
            score = float(trial.suggest_int("max_depth", 2, 32))
        layers = trial.suggest_int("n_layers", 1, 3)
        for i in range(layers):
            score += trial.suggest_int(f"units_{i}", 4, 128, log=True) / 100
        gamma = trial.suggest_float("gamma", 0.0, 1.0)
        if float_branch and gamma > 0.5:  # decided by a real value: no abo condition can say
            score += trial.suggest_float("tail", 0.0, 1.0)
        return score

    study.optimize(objective, n_trials=n)
    return study


def test_a_conditional_study_exported_then_imported_keeps_every_trial_and_condition(
    tmp_path: Path,
) -> None:
    abo_url = f"sqlite:///{tmp_path / 'abo.db'}"
    study = abo.create_study(CONDITIONAL, name="cond", storage=abo_url, strategy="random",
                             seed=5)  # fmt: skip
    for t in study.ask_batch(10):
        study.tell(t.id, t.params["lr"] + t.params.get("momentum", 0.0))
    optuna_db = tmp_path / "optuna.db"
    assert abo_here("export", "cond", "--to", "optuna", "--optuna-storage",
                    f"sqlite:///{optuna_db}", cwd=tmp_path).returncode == 0  # fmt: skip
    out = abo_here("import", "cond", "--from", "optuna", "--optuna-storage",
                   f"sqlite:///{optuna_db}", "--name", "back", cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0 and "imported 10 complete trials" in out.stdout, out.stderr
    back = abo.load_study("back", storage=abo_url)
    assert back.space == CONDITIONAL  # the conditions too, read from the exported spec
    assert [(t.params, t.value) for t in back.trials] == [(t.params, t.value) for t in study.trials]


def test_a_define_by_run_optuna_study_imports_as_a_conditional_space(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    source = _define_by_run(url, "dbr")
    done = from_optuna("dbr", url, storage=f"sqlite:///{tmp_path / 'abo.db'}", seed=0)
    assert (done.added, done.skipped) == (16, ())
    space = done.study.space
    assert space["svc_c"].when == (("classifier", ("svc",)),)
    assert space["max_depth"].when == (("classifier", ("forest",)),)
    assert space["units_0"].when == ()  # every trial has at least one layer
    (parent, values), *_ = space["units_1"].when
    assert parent == "n_layers" and set(values) == {2, 3} and not _
    assert space["units_2"].when == (("n_layers", (3,)),) and space["gamma"].when == ()
    imported = {t.user["optuna_number"]: t.params for t in done.study.trials}
    assert imported == {t.number: t.params for t in source.trials}
    asked = done.study.ask_batch(4)  # the study goes on, each ask with its active parameters
    for t in asked:
        assert ("svc_c" in t.params) == (t.params["classifier"] == "svc")


def test_trials_no_condition_places_are_named_and_nothing_is_written(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    source = _define_by_run(url, "float", n=12, float_branch=True)
    lacking = sorted(t.number for t in source.trials if "tail" not in t.params)
    assert 0 < len(lacking) < 12
    abo_url = f"sqlite:///{tmp_path / 'abo.db'}"
    with pytest.raises(abo.AboError, match=r"partial=True") as err:
        from_optuna("float", url, storage=abo_url)
    assert f"{len(lacking)} of 12 complete trials" in str(err.value)
    assert f"trial {lacking[0]}: it has no 'tail'" in str(err.value)
    assert _studies(abo_url) == []  # nothing half-made
    refused = abo_here("import", "float", "--optuna-storage", url, cwd=tmp_path)
    assert refused.returncode == 1 and "--partial" in refused.stderr, refused.stdout
    assert _studies(abo_url) == []
    with pytest.warns(abo.AboWarning, match=f"{len(lacking)} complete trials"):
        done = from_optuna("float", url, storage=abo_url, partial=True)
    assert done.added == 12 - len(lacking)
    assert [s.number for s in done.skipped] == lacking
    assert all("decides when" in s.reason for s in done.skipped)
    cli = abo_here("import", "float", "--optuna-storage", url, "--partial", cwd=tmp_path)
    assert cli.returncode == 0, cli.stderr
    assert f"{len(lacking)} complete trials skipped" in cli.stdout
    assert f"skipped: trial {lacking[0]}:" in cli.stderr


def _abo_db(path: Path) -> None:
    store = open_storage(f"sqlite:///{path}")
    abo.create_study({"x": abo.Float(0, 1)}, name="mine", storage=store)
    store.dispose()  # its connections closed, so the file holds everything and stays as it is


def _other_db(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.commit()


HOSTILE = {
    "an abo database": (_abo_db, "is not an Optuna storage (an abo database"),
    "garbage bytes": (lambda p: p.write_bytes(b"\x00garbage" * 512), "is not a SQLite database"),
    "an empty file": (lambda p: p.write_bytes(b""), "is empty"),
    "a missing path": (lambda p: None, "does not exist"),
    "a directory": (lambda p: p.mkdir(), "is not a file"),
    "a truncated database": (
        lambda p: (_abo_db(p), p.write_bytes(p.read_bytes()[:120])),
        "optuna_storage:",
    ),
    "another program's database": (_other_db, "another program's database"),
}


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_source_that_is_not_an_optuna_storage_is_one_line_and_untouched(
    tmp_path: Path, kind: str
) -> None:
    make, expected = HOSTILE[kind]
    source = tmp_path / "source.db"
    make(source)
    before = _digest(source)
    out = abo_here("import", "s", "--optuna-storage", f"sqlite:///{source}", cwd=tmp_path)
    assert out.returncode == 1, out.stdout
    assert out.stderr.startswith("error: optuna_storage:") and expected in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) <= 3, out.stderr  # one line (rich may wrap it)
    assert "SELECT" not in out.stderr and "Traceback" not in out.stderr
    assert _digest(source) == before and source.exists() == (before is not None or kind ==
                                                              "a directory")  # fmt: skip
    assert not (tmp_path / "abo.db").exists()  # the target is not even opened


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("optuna.db", "is not a storage URL"),
        ("sqlite://", "in-memory"),
        ("nosuchdb://x", "optuna_storage:"),
    ],
)
def test_a_source_url_that_names_no_storage_is_one_line(
    tmp_path: Path, url: str, expected: str
) -> None:
    with pytest.raises(abo.AboError, match=expected) as err:
        from_optuna("s", url, storage=f"sqlite:///{tmp_path / 'abo.db'}")
    assert err.value.field == "optuna_storage" and "\n" not in str(err.value)
    assert not (tmp_path / "abo.db").exists() and not (tmp_path / "optuna.db").exists()


def test_an_unknown_study_names_the_ones_there_and_the_source_is_unchanged(
    tmp_path: Path,
) -> None:
    path = tmp_path / "optuna.db"
    _define_by_run(f"sqlite:///{path}", "there", n=2)
    before = _digest(path)
    with pytest.raises(abo.AboError, match=r"no Optuna study 'missing' .*it has 'there'") as e:
        from_optuna("missing", f"sqlite:///{path}", storage=f"sqlite:///{tmp_path / 'a.db'}")
    assert e.value.field == "optuna_study" and _digest(path) == before
    done = from_optuna("there", f"sqlite:///{path}", storage=f"sqlite:///{tmp_path / 'a.db'}")
    assert done.added == 2 and _digest(path) == before  # a good import reads only, too


def test_a_postgresql_source_is_read_in_read_only_transactions(tmp_path: Path, pg_url: str) -> None:
    import sqlalchemy as sa

    abo.create_study({"x": abo.Float(0, 1)}, name="mine", storage=pg_url)
    engine = sa.create_engine(pg_url)

    def tables() -> set[str]:
        with engine.connect() as conn:
            return set(sa.inspect(conn).get_table_names())

    before = tables()
    with pytest.raises(abo.AboError, match="an abo database"):
        from_optuna("mine", pg_url, storage=f"sqlite:///{tmp_path / 'abo.db'}")
    assert tables() == before  # Optuna created none of its tables
    try:
        _define_by_run(pg_url, "pg", n=3)
        done = from_optuna("pg", pg_url, storage=f"sqlite:///{tmp_path / 'abo.db'}")
        assert done.added == 3
    finally:
        with engine.begin() as conn:
            for table in sorted(tables() - before):
                conn.exec_driver_sql(f'DROP TABLE IF EXISTS "{table}" CASCADE')
        engine.dispose()


def test_an_export_into_a_file_that_is_not_a_database_is_one_line(tmp_path: Path) -> None:
    study = abo.create_study({"x": abo.Float(0, 1)}, strategy="random", seed=0)
    study.tell(study.ask().id, 0.5)
    garbage = tmp_path / "g.db"
    garbage.write_bytes(b"\x01" * 4096)
    with pytest.raises(abo.AboError, match="optuna_storage: .*g.db") as err:
        to_optuna(study, f"sqlite:///{garbage}")
    assert "\n" not in str(err.value) and "SELECT" not in str(err.value)


def _add_trial(study: optuna.Study, params: dict, value: float) -> None:
    d = optuna.distributions
    dists = {"n": d.IntDistribution(1, 3), "u": d.IntDistribution(1, 10),
             "x": d.FloatDistribution(0.0, 1.0)}  # fmt: skip
    study.add_trial(optuna.trial.create_trial(
        params=params, distributions={k: dists[k] for k in params}, value=value
    ))  # fmt: skip


def test_a_continued_import_keeps_its_space_and_names_the_trials_outside_it(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    source = optuna.create_study(study_name="grow", storage=url)
    _add_trial(source, {"n": 1, "x": 0.1}, 1.0)
    _add_trial(source, {"n": 2, "u": 5, "x": 0.2}, 2.0)
    _add_trial(source, {"n": 1, "x": 0.3}, 3.0)
    abo_url = f"sqlite:///{tmp_path / 'abo.db'}"
    first = from_optuna("grow", url, storage=abo_url)
    assert first.added == 3 and first.study.space["u"].when == (("n", (2,)),)
    _add_trial(source, {"n": 3, "u": 4, "x": 0.4}, 4.0)  # n = 3 has u too: not what was seen
    with pytest.raises(abo.AboError, match=r"1 of 4 .* trial 3: u: inactive here"):
        from_optuna("grow", url, storage=abo_url)
    with pytest.warns(abo.AboWarning, match="trial 3"):
        again = from_optuna("grow", url, storage=abo_url, partial=True)
    assert (again.added, again.already, [s.number for s in again.skipped]) == (0, 3, [3])
    assert len(abo.load_study("grow", storage=abo_url)) == 3


def test_conditions_come_from_the_deciding_parameter_never_a_cycle_or_a_wide_integer() -> None:
    from abo.interop.conditions import infer

    params = {
        "opt": abo.Categorical(["sgd", "adam"]),
        "nesterov": abo.Categorical([True, False]),
        "momentum": abo.Categorical([0.5, 0.9]),
        "seed": abo.Int(0, 1000),
        "sched": abo.Categorical(["step", "cos"]),
        "gamma": abo.Float(0.1, 1.0),
    }
    rows = [
        {"opt": "sgd", "nesterov": True, "momentum": 0.5, "seed": 1, "sched": "step", "gamma": 0.5},
        {"opt": "sgd", "nesterov": False, "momentum": 0.5, "seed": 2, "sched": "cos"},
        {"opt": "adam", "seed": 3, "sched": "step"},
        {"opt": "adam", "seed": 4, "sched": "cos"},
        {"opt": "sgd", "nesterov": True, "momentum": 0.9, "seed": 5, "sched": "cos"},
    ]
    space, unexplained = infer(params, rows)
    # nesterov and momentum are always together: both hang on opt, never on each other
    assert space["nesterov"].when == (("opt", ("sgd",)),)
    assert space["momentum"].when == (("opt", ("sgd",)),)
    # gamma only with sgd and step: two parents together (the integer seed, which takes a
    # distinct value in every trial, is too wide to decide anything)
    assert dict(space["gamma"].when) == {"opt": ("sgd",), "sched": ("step",)}
    assert unexplained == {}
    _, none = infer({"a": abo.Float(0, 1), "b": abo.Float(0, 1)}, [{"a": 0.1}, {"a": 0.9, "b": 1}])
    assert "no categorical or integer parameter decides" in none["b"]
