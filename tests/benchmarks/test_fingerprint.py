"""The proposal fingerprint: its baseline covers the registry, its check names what changed,
and a cheap subset of today's proposals matches the committed baseline bit for bit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# benchmarks/ lives at the repository root and is not part of the installed package.
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.fingerprint import (  # noqa: E402
    BASELINE,
    cells,
    digest,
    environment,
    main,
    overall,
)

# the default strategy on every kind of study, and random search's seeded draws on the
# conditional space: about 10 s on 2 busy cores (the full run is about 80 s)
SUBSET = [
    "auto/mixed", "auto/conditional", "auto/two-objectives", "auto/constraint", "auto/fidelity",
    "random/conditional",
]  # fmt: skip


def test_the_baseline_covers_every_registered_strategy_and_kind() -> None:
    baseline = json.loads(BASELINE.read_text())
    assert set(baseline["digests"]) == {f"{s}/{k}" for s, k in cells()}
    assert baseline["overall"] == overall(baseline["digests"])
    assert set(SUBSET) <= set(baseline["digests"])


def test_a_digest_sees_the_last_bit_of_a_float() -> None:
    a = {"params": {"x": float.hex(0.1)}}
    b = {"params": {"x": float.hex(0.1 + 2**-56)}}  # the next float after 0.1
    assert digest([a]) == digest([dict(a)]) and digest([a]) != digest([b])


def test_check_exits_1_naming_each_pair_that_differs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ABO_TORCH_THREADS", "1")  # main pins it; restored after the test
    pairs = ["random/mixed", "random/two-objectives", "random/fidelity"]
    assert main(["--only", *pairs, "--quiet"]) == 0
    digests = json.loads(capsys.readouterr().out)["digests"]
    digests["random/mixed"] = "0" * 64  # a proposal that moved
    del digests["random/fidelity"]  # a pair the baseline does not know
    stale = tmp_path / "fingerprint.json"
    stale.write_text(json.dumps({"digests": digests, "environment": environment()}))
    assert main(["--check", "--baseline", str(stale), "--only", *pairs, "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "random/mixed: proposals changed" in err
    assert "random/fidelity: not in the baseline" in err
    assert "random/two-objectives" not in err


@pytest.mark.slow  # a few GP fits per pair in a fresh process: about 10 s on 2 busy cores
def test_proposals_match_the_committed_baseline() -> None:
    baseline = json.loads(BASELINE.read_text())
    drift = {k: v for k, v in environment().items() if baseline["environment"].get(k) != v}
    if drift:
        pytest.skip(f"the baseline was made with other libraries or CPU kernels: {drift}")
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.fingerprint", "--check", "--quiet", "--only", *SUBSET],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"{len(SUBSET)} (strategy, kind) digests match" in done.stdout
