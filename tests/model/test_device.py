"""Where the GP and the acquisition search run: the ``device`` setting, its checks, and (on a
machine with a CUDA device) every strategy proposing there."""

from __future__ import annotations

import pytest
import torch

import abo
from abo.model.device import resolve_device
from abo.model.options import MAX_EXACT, MAX_EXACT_CUDA, max_exact_for
from abo.propose.proposer import Proposer
from abo.storage import open_storage

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device (torch sees none here)")
no_cuda = pytest.mark.skipif(CUDA, reason="checks a machine without a CUDA device")
SPACE = abo.Space({"x": abo.Float(0.0, 1.0), "y": abo.Float(0.0, 1.0)})


def _bowl(p: dict) -> float:
    return (p["x"] - 0.3) ** 2 + (p["y"] - 0.6) ** 2


def _run(study: abo.Study, n: int) -> list[abo.Trial]:
    for _ in range(n):
        trial = study.ask()
        study.tell(trial.id, _bowl(trial.params))
    return study.trials


@pytest.mark.parametrize("bad", ["gpu", "cuda:x", "", "CPU", "cuda:", 3, None])
def test_a_malformed_device_is_refused_naming_it_and_nothing_is_stored(tmp_path, bad) -> None:
    url = f"sqlite:///{tmp_path / 'd.db'}"
    with pytest.raises(abo.AboError, match="device") as err:
        abo.create_study(SPACE, name="d", storage=url, device=bad)
    assert err.value.field == "device"
    assert open_storage(url).list_studies() == []


@no_cuda
def test_cuda_asked_for_where_there_is_none_is_one_clear_error_and_nothing_is_stored(
    tmp_path,
) -> None:
    """Python, the service's ``device`` override and ``cuda:N`` alike; ``auto`` is the CPU."""
    url = f"sqlite:///{tmp_path / 'd.db'}"
    for device in ("cuda", "cuda:0"):
        with pytest.raises(abo.AboError, match="torch sees no CUDA device") as err:
            abo.create_study(SPACE, name="d", storage=url, device=device)
        assert err.value.field == "device"
    assert open_storage(url).list_studies() == []
    from abo.service.app import create_app

    with pytest.raises(abo.AboError, match="no CUDA device"):
        create_app(url, device="cuda")
    assert resolve_device("auto") == torch.device("cpu")


@no_cuda
def test_auto_is_the_cpu_here_and_proposes_exactly_what_cpu_does() -> None:
    """The same seed and tells give the same points with ``auto`` and ``cpu`` on a machine
    without CUDA, and a CPU proposal records no device."""
    runs = [
        _run(abo.create_study(SPACE, seed=3, n_initial=3, device=d), 6) for d in ("auto", "cpu")
    ]
    assert [t.params for t in runs[0]] == [t.params for t in runs[1]]
    model_made = [t for t in runs[0] if t.proposal and t.proposal.model is not None]
    assert model_made and all("device" not in t.proposal.details for t in model_made)


def test_max_exact_is_chosen_for_the_device_unless_given() -> None:
    cpu = Proposer(abo.create_study(SPACE, device="cpu").config)
    assert cpu.models.max_exact == MAX_EXACT == max_exact_for("cpu")
    given = Proposer(abo.create_study(SPACE, device="cpu", max_exact=40).config)
    assert given.models.max_exact == 40
    assert max_exact_for("cuda") == MAX_EXACT_CUDA > MAX_EXACT


def test_the_services_device_overrides_each_studys_in_its_process(tmp_path) -> None:
    from abo.service.state import ServiceState

    url = f"sqlite:///{tmp_path / 'd.db'}"
    abo.create_study(SPACE, name="d", storage=url, device="auto", seed=1)
    storage = open_storage(url)
    opened = ServiceState(storage, device="cpu")._open(storage.load_study("d"))
    assert opened._proposer.device == torch.device("cpu")
    assert opened.config.device == "auto"  # the stored setting is untouched


def test_auto_proposes_on_the_cpu_while_it_fits_everything_and_on_cuda_beyond() -> None:
    """The decision alone (no CUDA needed): with a CUDA device at hand, ``auto`` keeps the
    CPU up to ``MAX_EXACT`` observations and moves every GP there beyond (each taking the
    device's ``max_exact``, the models made elsewhere dropped); ``cpu`` never moves."""
    auto = Proposer(abo.create_study(SPACE, device="cpu").config, device="auto")
    auto.large_device = torch.device("cuda")  # as resolve_device would on a GPU machine
    managers = [*auto.objective_models, auto.failure_models]
    auto.place(MAX_EXACT)
    assert auto.device == torch.device("cpu") and auto.models.max_exact == MAX_EXACT
    auto.models._latest = object()  # a model fitted on the CPU
    auto.place(MAX_EXACT + 1)
    assert auto.device == torch.device("cuda")
    assert all(m.device == torch.device("cuda") for m in managers)
    assert all(m.max_exact == MAX_EXACT_CUDA for m in managers) and auto.models._latest is None
    auto.place(10)
    assert auto.device == torch.device("cpu") and auto.models.max_exact == MAX_EXACT
    fixed = Proposer(abo.create_study(SPACE, device="cpu", max_exact=50).config, device="auto")
    fixed.large_device = torch.device("cuda")
    fixed.place(60)
    assert fixed.models.max_exact == 50  # a study's own max_exact holds on any device
    cpu = Proposer(abo.create_study(SPACE, device="cpu").config)
    cpu.place(10_000)
    assert cpu.device == torch.device("cpu") and cpu.models.max_exact == MAX_EXACT


def _gpu_cells() -> list[tuple[str, str]]:
    """``auto`` on every kind of study, and every other strategy on the first it takes."""
    from benchmarks.fingerprint import cells

    chosen, seen = [], set()
    for strategy, kind in cells():
        if strategy == "auto" or strategy not in seen:
            chosen.append((strategy, kind))
            seen.add(strategy)
    return chosen


@needs_cuda
@pytest.mark.slow
def test_every_strategy_proposes_on_cuda_and_records_it() -> None:
    """The fingerprint's script (designs, failures, busy points, batches) with
    ``device="cuda"``: valid points, and every model proposal records the CUDA device."""
    from benchmarks.fingerprint import KINDS_BY_NAME, play

    failures = []
    for strategy, kind_name in _gpu_cells():
        kind = KINDS_BY_NAME[kind_name]
        try:
            study = play(strategy, kind, device="cuda")
        except Exception as exc:  # collect every cell's failure, not just the first
            failures.append(f"{strategy}/{kind_name}: {type(exc).__name__}: {exc}")
            continue
        for trial in study.trials:
            kind.space.validate(trial.params)
            if trial.proposal is not None and trial.proposal.model is not None:
                assert trial.proposal.details.get("device", "").startswith("cuda"), trial
    assert failures == []


@needs_cuda
@pytest.mark.slow
def test_on_cuda_the_gp_is_exact_on_thousands_and_auto_moves_there_past_the_cpus_cap() -> None:
    """2,000 told results: the CPU's GP would see a 500-point subset; on CUDA it sees all.
    ``auto`` proposes on the CPU at 300 results and on CUDA at 600."""
    g = torch.Generator().manual_seed(0)
    X = torch.rand(2000, 2, generator=g, dtype=torch.double).tolist()
    study = abo.create_study(SPACE, seed=0, device="cuda", noise="deterministic")
    auto = abo.create_study(SPACE, seed=0, noise="deterministic")
    for i, (x, y) in enumerate(X):
        point = {"x": x, "y": y}
        study.add(point, _bowl(point))
        if i < 600:
            auto.add(point, _bowl(point))
        if i == 299:
            assert "device" not in auto.ask().proposal.details  # 300 results: the CPU
    trial = study.ask()
    assert trial.proposal.model is not None and trial.proposal.gp_points == 2000
    assert trial.proposal.details["device"].startswith("cuda")
    late = auto.ask().proposal
    assert late.details["device"].startswith("cuda") and late.gp_points == 600


@no_cuda
def test_abo_serve_refuses_a_cuda_device_it_does_not_have(tmp_path) -> None:
    """``abo serve --device cuda`` on this machine: exit 1 and one line naming ``device``,
    before it listens; ``--device cpu`` is accepted (checked by ``--help`` listing it)."""
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "abo.cli.main", "serve", "--storage", f"sqlite:///{tmp_path}/x.db"]
    proc = subprocess.run(
        [*cmd, "--device", "cuda", "--port", "1"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1, proc.stderr
    assert "device" in proc.stderr and "no CUDA device" in proc.stderr
    assert not (tmp_path / "x.db").exists()  # it stopped before touching the storage
    helped = subprocess.run([*cmd[:4], "--help"], capture_output=True, text=True, timeout=120)
    assert "--device" in helped.stdout
