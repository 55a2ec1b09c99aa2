"""Understanding a study (``abo.analysis.gp``): importance, leave-one-out cross-validation and the
contour of the posterior mean, from Python and the command line."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from cli_helpers import abo_here

import abo
from abo.analysis import gp as analysis

SPACE = abo.Space(
    {
        "x": abo.Float(0.0, 1.0),
        "lr": abo.Float(1e-4, 1.0, log=True),
        "noise": abo.Float(0.0, 1.0),
        "opt": abo.Categorical(["sgd", "adam"]),
    }
)


def _f(p: dict) -> float:
    """Driven by x, a little by the optimiser, not at all by ``noise``."""
    return math.sin(6.0 * p["x"]) + (0.4 if p["opt"] == "sgd" else 0.0) + 0.0 * p["noise"]


def _study(n: int = 30, storage: str | None = None) -> abo.Study:
    study = abo.create_study(SPACE, name="an", storage=storage, strategy="random", seed=3)
    for t in study.ask_batch(n):
        study.tell(t.id, _f(t.params))
    return study


def test_importance_ranks_what_drives_the_value_and_agrees_with_the_data() -> None:
    study = _study()
    ranked = study.importance()
    names = list(ranked)
    assert names[0] == "x" and names[1] == "opt" and ranked["x"]["total"] > 0.6
    for unused in ("noise", "lr"):
        assert ranked[unused]["total"] < 0.02  # a parameter the value ignores explains nothing
        assert ranked[unused]["lengthscale"] > ranked["x"]["lengthscale"]
    # the model-free check: the correlation ratio of x's quantile bins, computed here by hand
    done, X, y = analysis.observations(study.spec, study.trials)
    order = X[:, 0].argsort()
    bins = [order[i * len(order) // 5 : (i + 1) * len(order) // 5] for i in range(5)]
    by_hand = sum(len(b) * float(y[b].mean() - y.mean()) ** 2 for b in bins)
    assert ranked["x"]["eta2"] == pytest.approx(by_hand / float(((y - y.mean()) ** 2).sum()),
                                                rel=0.15)  # fmt: skip


def test_leave_one_out_is_the_gp_conditioned_without_each_point() -> None:
    study = _study(n=14)
    predictions = analysis.cross_validation(study.spec, study.trials)
    done, X, y = analysis.observations(study.spec, study.trials)
    model = analysis.fit(study.spec, X, y)
    tf, noise = model.outcome_transform, float(model.likelihood.noise.detach())
    loc, scale = float(tf.means.reshape(())), float(tf.stdvs.reshape(()))
    with torch.no_grad():
        Xt = model.transform_inputs(X)
        K = model.covar_module(Xt).to_dense()
        m = model.mean_module(Xt)
    z = (y - loc) / scale - m
    for k in (0, 5, 13):  # the GP's prediction at point k from the others, solved directly
        rest = [i for i in range(len(done)) if i != k]
        A = K[rest][:, rest] + noise * torch.eye(len(rest), dtype=K.dtype)
        w = torch.linalg.solve(A, K[rest, k])
        mean = loc + scale * float((m[k] + w @ z[rest]).detach())
        std = scale * math.sqrt(float((K[k, k] - w @ K[rest, k]).detach()) + noise)
        assert predictions[k].trial_id == done[k].id
        assert predictions[k].predicted == pytest.approx(mean, rel=1e-5, abs=1e-7)
        assert predictions[k].std == pytest.approx(std, rel=1e-4)


def test_the_contour_holds_the_others_at_the_best_and_bad_requests_name_the_field() -> None:
    study = _study(n=12)
    c = analysis.contour(study.spec, study.trials, "x", "lr", grid=7)
    best = study.best
    assert c.fixed == {k: v for k, v in best.params.items() if k not in ("x", "lr")}
    assert len(c.z) == 7 and len(c.z[0]) == 7 and c.y[0] == pytest.approx(1e-4)
    assert len(c.points) == 12 and all(math.isfinite(v) for row in c.z for v in row)
    for kwargs, field in [
        (dict(x_name="x", y_name="opt"), "y"),
        (dict(x_name="depth", y_name="x"), "x"),
        (dict(x_name="x", y_name="x"), "y"),
    ]:
        with pytest.raises(abo.AboError) as err:
            analysis.contour(study.spec, study.trials, **kwargs)
        assert err.value.field == field
    with pytest.raises(abo.AboError, match="at least 3 needed"):
        analysis.importance(study.spec, study.trials[:2])
    two = abo.create_study(SPACE, strategy="random", outcomes={"a": "minimize", "b": "maximize"})
    with pytest.raises(abo.AboError, match="name the one to analyse") as err:
        two.importance()
    assert err.value.field == "objective"


@pytest.mark.slow
def test_the_commands_draw_every_analysis_and_print_the_importance(tmp_path: Path) -> None:
    _study(storage=f"sqlite:///{tmp_path / 'abo.db'}")

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "abo.cli.main", *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=180)  # fmt: skip

    # the plots in this process (abo_here); the importance listing goes through the entry point
    for kind, extra in (("importance", []), ("slice", []), ("cv", []),
                        ("contour", ["--params", "x,lr"])):  # fmt: skip
        out = abo_here("plot", "an", "--kind", kind, *extra, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert (tmp_path / f"an-{kind}.png").read_bytes()[:4] == b"\x89PNG"
    bad = abo_here("plot", "an", "--kind", "contour", "--params", "x", cwd=tmp_path)
    assert bad.returncode == 1 and "params: a contour needs two parameters" in bad.stderr
    listed = cli("importance", "an", "--format", "json")
    rows = json.loads(listed.stdout)
    assert [r["name"] for r in rows][:2] == ["x", "opt"]
    assert set(rows[0]) == {"name", "sobol", "total", "lengthscale", "eta2"}
    torch.manual_seed(0)  # nothing above used torch's global generator (a check, not a need)


COND = abo.Space(
    {
        "lr": abo.Float(1e-4, 1.0, log=True),
        "optimizer": abo.Categorical(["sgd", "adam"]),
        "momentum": abo.Float(0.0, 0.99, when={"optimizer": "sgd"}),
        "beta": abo.Float(0.5, 0.999, when={"optimizer": "adam"}),
    }
)


def _conditional(n: int = 24) -> abo.Study:
    """adam is better, so the best trial has no momentum."""
    study = abo.create_study(COND, strategy="random", seed=5)
    for t in study.ask_batch(n):
        p = t.params
        study.tell(t.id, (math.log10(p["lr"]) + 2) ** 2 + (0.5 if p["optimizer"] == "sgd" else 0))
    return study


def test_a_contour_holds_the_others_where_both_of_its_parameters_are_active() -> None:
    """Before, the others were held at the best trial's values: optimizer=adam, where momentum
    does not exist."""
    study = _conditional()
    assert study.best.params["optimizer"] == "adam"
    c = analysis.contour(study.spec, study.trials, "lr", "momentum", grid=5)
    with_momentum = [t for t in study.trials if "momentum" in t.params]
    held = min(with_momentum, key=lambda t: t.value)
    assert c.fixed == {"optimizer": "sgd"} and c.held == held.id and not c.held_is_best
    assert len(c.points) == len(with_momentum)
    with pytest.raises(abo.AboError) as err:  # never active together: the conditions say why
        analysis.contour(study.spec, study.trials, "momentum", "beta")
    assert err.value.field == "y" and "in none of the 24 analysed trials" in str(err.value)
    assert "optimizer is 'sgd'" in str(err.value) and "optimizer is 'adam'" in str(err.value)


def test_the_contour_lists_only_the_parameters_it_accepts(tmp_path: Path) -> None:
    """Before, ``--params`` was told to pick among every parameter, categoricals included,
    which it then refused."""
    from abo.analysis.gp_plots import draw

    study = _conditional(n=6)
    png = tmp_path / "c.png"
    for params in ("lr", "lr,optimizer"):
        with pytest.raises(abo.AboError) as err:
            draw("contour", study.spec, study.trials, png, "s", params, None)
        assert err.value.field == "params" and "(lr, momentum, beta)" in str(err.value)
    assert "'optimizer' is categorical" in str(err.value)
    with pytest.raises(abo.AboError) as err:
        analysis.contour(study.spec, study.trials, "lr", "optimizer")
    assert "(lr, momentum, beta)" in str(err.value) and not png.exists()


def test_an_analysis_says_each_step_and_fits_a_large_study_on_a_sample() -> None:
    """Before, analyses ran with torch's thread per core (10-30 s for 30 trials on a busy
    machine), fitted every point exactly and said nothing while they did."""
    study = _study(n=analysis.FIT_POINTS + 40)
    steps: list[tuple[str, int]] = []
    ranked = analysis.importance(
        study.spec,
        study.trials,
        n=256,
        progress=lambda s: steps.append((s, torch.get_num_threads())),
    )
    n = analysis.FIT_POINTS + 40
    assert [s for s, _ in steps] == [
        f"fitting the GP's hyperparameters to {analysis.FIT_POINTS} of the {n} trials",
        f"conditioning the GP on all {n} trials",
        "estimating Sobol indices on 256 points",
    ]
    assert {threads for _, threads in steps} == {1}  # abo's torch threads, not one per core
    assert ranked[0].name == "x"
    _, X, y = analysis.observations(study.spec, study.trials)
    assert analysis.fit(study.spec, X, y).train_inputs[0].shape[0] == n  # conditioned on all


@pytest.mark.slow
def test_abo_importance_says_what_it_is_doing_on_a_terminal(tmp_path: Path) -> None:
    """Before, 21-36 s passed with nothing on the screen."""
    import os
    import pty
    import threading

    _study(n=12, storage=f"sqlite:///{tmp_path / 'abo.db'}")
    master, slave = pty.openpty()
    shown: list[bytes] = []

    def read() -> None:  # while it runs, so a full terminal buffer never blocks it
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the other end is closed: all read
                return
            if not chunk:
                return
            shown.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        proc = subprocess.run([sys.executable, "-m", "abo.cli.main", "importance", "an",
                               "--format", "csv"], cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=slave, text=True, timeout=180)  # fmt: skip
    finally:
        os.close(slave)
        reader.join(timeout=10)
        os.close(master)
    assert proc.returncode == 0 and proc.stdout.startswith("name,sobol")
    text = b"".join(shown).decode(errors="replace")
    assert "fitting the GP to 12 trials" in text and "estimating Sobol indices" in text
