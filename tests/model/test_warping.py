"""Output warping: the power transform keeps the order of utilities, compresses heavy tails,
leaves Gaussian data nearly alone, and reaches the GP of a study that asks for it."""

from __future__ import annotations

import math

import pytest
import torch

import abo
from abo.model.warping import best_lambda, warp, yeo_johnson


def _skew(v: torch.Tensor) -> float:
    z = (v - v.mean()) / v.std()
    return float((z**3).mean())


def _heavy(n: int = 60, seed: int = 0) -> torch.Tensor:
    """Utilities of a loss spanning several orders of magnitude (a long tail of bad values)."""
    gen = torch.Generator().manual_seed(seed)
    return -torch.exp(3 * torch.randn(n, 1, generator=gen, dtype=torch.double))


def test_the_transform_is_monotone_and_continuous_at_zero() -> None:
    y = torch.linspace(-5, 5, 1001, dtype=torch.double)
    for lam in (-2.0, 0.0, 0.5, 1.0, 2.0, 3.5):
        z = yeo_johnson(y, lam)
        assert bool((z.diff() > 0).all()), lam
        assert yeo_johnson(torch.tensor([0.0], dtype=torch.double), lam).item() == 0.0
    assert torch.allclose(yeo_johnson(y, 1.0), y)  # exponent 1: the identity


def test_power_keeps_the_order_and_compresses_a_heavy_tail() -> None:
    Y = _heavy()
    W, lam = warp(Y, "power")
    assert lam is not None and lam > 1  # the tail is on the bad (negative) side
    assert torch.equal(W.argsort(0), Y.argsort(0))  # the best point stays the best
    assert abs(_skew(W)) < abs(_skew(Y)) / 1.5
    assert W.mean().abs().item() < 1e-9 and abs(W.std().item() - 1) < 1e-9


def test_gaussian_utilities_are_left_nearly_alone() -> None:
    gen = torch.Generator().manual_seed(3)
    Y = 5 + 2 * torch.randn(200, 1, generator=gen, dtype=torch.double)
    W, lam = warp(Y, "power")
    assert lam is not None and abs(lam - 1) < 0.5
    standardised = (Y - Y.mean()) / Y.std()
    assert (W - standardised).abs().max().item() < 0.3


def test_none_few_or_constant_values_are_not_transformed() -> None:
    Y = _heavy()
    for kind, values in (("none", Y), ("power", Y[:3]), ("power", torch.ones(10, 1))):
        W, lam = warp(values, kind)
        assert W is values and lam is None
    with pytest.raises(ValueError, match="output_transform"):
        warp(Y, "log")


def test_the_exponent_maximises_the_likelihood() -> None:
    from abo.model.warping import _log_likelihood

    gen = torch.Generator().manual_seed(4)
    y = -torch.exp(torch.randn(80, generator=gen, dtype=torch.double))  # a milder tail
    y = (y - y.mean()) / y.std()
    lam = best_lambda(y)
    assert 1 < lam < 4  # inside the search range, so a maximum on both sides
    best = _log_likelihood(y, lam)
    assert all(best >= _log_likelihood(y, lam + d) - 1e-9 for d in (-0.3, -0.05, 0.05, 0.3))
    assert math.isfinite(best)


def test_a_study_rejects_an_unknown_transform_naming_the_field() -> None:
    space = abo.Space({"x": abo.Float(0, 1)})
    with pytest.raises(abo.AboError, match="output_transform") as info:
        abo.create_study(space, output_transform="log")
    assert info.value.field == "output_transform"


def test_a_power_study_fits_its_gp_on_warped_values_and_records_the_exponent() -> None:
    space = abo.Space({"x": abo.Float(0, 1), "y": abo.Float(0, 1)})

    def loss(p: dict) -> float:  # a valley whose walls rise over four orders of magnitude
        return math.exp(12 * ((p["x"] - 0.3) ** 2 + (p["y"] - 0.6) ** 2))

    options = {"raw_samples": 32, "num_restarts": 2}
    runs = {}
    for transform in ("none", "power"):
        study = abo.create_study(
            space, seed=5, strategy="believer", output_transform=transform,
            strategy_options=options, n_initial=6,
        )  # fmt: skip
        for _ in range(9):
            t = study.ask()
            study.tell(t.id, loss(t.params))
        runs[transform] = study
    plain, warped = runs["none"], runs["power"]
    modelled = [t for t in warped.trials if t.proposal and t.proposal.strategy == "believer"]
    assert modelled and all("output_lambda" in t.proposal.details for t in modelled)
    assert not any("output_lambda" in (t.proposal.details if t.proposal else {})
                   for t in plain.trials)  # fmt: skip
    # the same Sobol design, then different models: the transform changed what the GP saw
    assert [t.params for t in plain.trials[:6]] == [t.params for t in warped.trials[:6]]
    assert [t.params for t in plain.trials[6:]] != [t.params for t in warped.trials[6:]]
    assert warped.spec.output_transform == "power"
    again = abo.create_study(
        space, seed=5, strategy="believer", output_transform="power",
        strategy_options=options, n_initial=6,
    )  # fmt: skip
    for t in warped.trials:  # the same seed and tells: the same proposals
        mine = again.ask()
        assert mine.params == t.params
        again.tell(mine.id, loss(mine.params))


def test_power_is_the_default_under_the_default_strategy_only_and_old_specs_keep_raw() -> None:
    """The broad suite measured the transform with the default strategy; other strategies,
    and studies stored before the option existed, model the raw values."""
    from abo.spec.study_spec import StudySpec

    space = abo.Space({"x": abo.Float(0, 1)})
    study = abo.create_study(space, seed=1)
    assert study.spec.output_transform == "auto"
    assert study.spec.resolved_output_transform == "power"
    ucb = abo.create_study(space, seed=1, strategy="ucb")
    assert ucb.spec.resolved_output_transform == "none"
    region = abo.create_study(space, seed=1, strategy="trust_region")  # auto inside a box
    assert region.spec.resolved_output_transform == "power"
    forced = abo.create_study(space, seed=1, strategy="ucb", output_transform="power")
    assert forced.spec.resolved_output_transform == "power"
    stored = study.spec.to_json()
    assert StudySpec.from_json(stored).resolved_output_transform == "power"
    del stored["output_transform"]  # what abo 0.1 stored
    assert StudySpec.from_json(stored).resolved_output_transform == "none"
    for _ in range(8):  # the default study records the exponent on its model's proposals
        t = study.ask()
        study.tell(t.id, math.exp(8 * t.params["x"]))
    modelled = [t for t in study.trials if t.proposal and t.proposal.strategy == "auto"]
    assert modelled and "output_lambda" in modelled[-1].proposal.details  # past MIN_POINTS


def test_a_slack_keeps_its_zero_and_signs_and_loses_its_heavy_tail() -> None:
    from abo.model.warping import warp_slack

    s = torch.tensor([0.4, -0.2, 0.0, 1.0, -3e4, 0.7, -0.05, 0.3], dtype=torch.double)
    w, lam = warp_slack(s)
    assert lam is not None and torch.equal(torch.sign(w), torch.sign(s))
    assert bool((w.argsort() == s.argsort()).all())  # monotone: the order of slacks stays
    assert w[2] == 0.0  # the bound stays the bound
    spread = lambda v: float(v.abs().max() / v.abs().median())  # noqa: E731
    assert spread(w) < spread(s) / 100  # the huge violation no longer dwarfs the rest


def test_gaussian_slacks_and_few_slacks_are_left_alone() -> None:
    from abo.model.warping import warp_slack

    for seed in range(5):  # Gaussian slacks: the identity is as likely, nothing changes
        g = torch.randn(200, generator=torch.Generator().manual_seed(seed), dtype=torch.double)
        same, lam = warp_slack(g)
        assert same is g and lam is None
    few = torch.tensor([1.0, -5.0, 2.0], dtype=torch.double)
    same, lam = warp_slack(few)
    assert same is few and lam is None
    zeros = torch.zeros(6, dtype=torch.double)
    assert warp_slack(zeros)[1] is None
