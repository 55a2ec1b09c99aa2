"""Outcome constraints inside the strategies: the probability of feasibility from one GP per
constraint, as BoTorch's constrained acquisitions compute it."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from botorch.acquisition.analytic import LogConstrainedExpectedImprovement
from botorch.models import ModelListGP
from strategy_helpers import make_ctx, peaked_data

from abo.acquisitions.believer import BelieverStrategy
from abo.acquisitions.feasibility import Feasibility
from abo.acquisitions.local_penalization import LocalPenalizationStrategy, PlaybookStrategy
from abo.acquisitions.optimize import FastLogEI
from abo.acquisitions.qlognei import QLogNEIStrategy
from abo.acquisitions.thompson import ThompsonStrategy
from abo.model.surrogate import fit_gp


def constrained(seed: int = 3) -> tuple:
    """A peaked objective on 12 points and one constraint, ``x0 <= 0.5`` (slack ``0.5 - x0``),
    whose GP is on a scale far from standardised so a scale mistake would show."""
    X, Y = peaked_data(n=12, seed=seed)
    objective = fit_gp(X, Y, noise="deterministic").model
    S = 40.0 * (0.5 - X[:, :1])
    slack = fit_gp(X, S, noise="deterministic").model
    feas = Feasibility(names=("c",), models=(slack,), observed=(S >= 0).reshape(-1))
    return X, Y, objective, slack, feas


def test_constrained_fast_logei_is_botorchs_log_constrained_ei() -> None:
    X, Y, objective, slack, feas = constrained()
    best_f = Y[feas.observed].max()
    ours = FastLogEI(objective, best_f=best_f, feasibility=feas)
    theirs = LogConstrainedExpectedImprovement(
        ModelListGP(objective, slack),
        best_f=best_f,
        objective_index=0,
        constraints={1: (0.0, None)},
    )
    points = torch.rand(64, 1, 2, generator=torch.Generator().manual_seed(1), dtype=torch.double)
    assert torch.allclose(ours(points), theirs(points), atol=1e-6)
    points.requires_grad_(True)
    ours(points).sum().backward()
    assert torch.isfinite(points.grad).all()


def test_believer_measures_against_the_best_feasible_point_and_proposes_inside() -> None:
    X, Y, objective, _, feas = constrained()
    ctx = replace(make_ctx(objective, X, Y), feasibility=feas)
    proposal = BelieverStrategy(raw_samples=128, num_restarts=3).propose(ctx, 2)
    best_feasible = Y[feas.observed].max().item()
    assert Y.max().item() > best_feasible + 0.1  # the infeasible best would set a higher bar
    assert abs(proposal.info[0]["incumbent"] - best_feasible) < 1e-3  # the GP's mean there
    assert (proposal.X[:, 0] <= 0.55).all(), proposal.X  # x0 <= 0.5, up to the GP's error


def test_with_nothing_feasible_yet_the_believer_heads_for_feasibility() -> None:
    X, Y, objective, slack, _ = constrained()
    nothing = Feasibility(names=("c",), models=(slack,), observed=torch.zeros(12, dtype=torch.bool))
    ctx = replace(make_ctx(objective, X, Y), feasibility=nothing)
    x = BelieverStrategy(raw_samples=128, num_restarts=3).propose(ctx, 1).X
    assert x[0, 0] <= 0.55, x


def test_qlognei_thompson_and_the_penalisers_propose_feasible_points() -> None:
    X, Y, objective, _, feas = constrained()
    unconstrained_best = X[Y.argmax(), 0].item()
    assert unconstrained_best > 0.5  # the objective alone would pull across the constraint
    for strategy in (
        QLogNEIStrategy(mc_samples=64, raw_samples=128, num_restarts=3),
        ThompsonStrategy(raw_samples=128, num_restarts=3),
        PlaybookStrategy(raw_samples=128, num_restarts=3),
        LocalPenalizationStrategy(raw_samples=128, num_restarts=3),
    ):
        ctx = replace(make_ctx(objective, X, Y, seed=2), feasibility=feas)
        proposal = strategy.propose(ctx, 3)
        assert (proposal.X[:, 0] <= 0.55).all(), (strategy.name, proposal.X)
        assert torch.pdist(proposal.X).min() > 1e-3  # three different points


def test_every_constraint_aware_strategy_avoids_where_the_classifier_expects_failures() -> None:
    from abo.model.failures import success_targets

    X, Y = peaked_data(n=16, seed=4)
    ok = X[:, 0] <= 0.5  # evaluations failed right of x0 = 0.5
    assert X[~ok][:, 0].numel() and Y[~ok].max() > Y[ok].max()  # where the objective looked best
    objective = fit_gp(X[ok], Y[ok], noise="deterministic").model
    classifier = fit_gp(X, success_targets(ok), noise="classifier").model
    feas = Feasibility(
        names=(),
        models=(),
        observed=torch.ones(int(ok.sum()), dtype=torch.bool),
        success=classifier,
    )
    for strategy in (
        BelieverStrategy(raw_samples=128, num_restarts=3),
        QLogNEIStrategy(mc_samples=64, raw_samples=128, num_restarts=3),
        ThompsonStrategy(raw_samples=128, num_restarts=3),
        PlaybookStrategy(raw_samples=128, num_restarts=3),
    ):
        ctx = replace(make_ctx(objective, X[ok], Y[ok], seed=1), feasibility=feas)
        proposal = strategy.propose(ctx, 2)
        assert (proposal.X[:, 0] <= 0.6).all(), (strategy.name, proposal.X)


def test_the_feasible_bound_is_the_softplus_bound_times_the_probability_of_feasibility() -> None:
    from abo.acquisitions.feasibility import FeasibleBound
    from abo.acquisitions.optimize import log_softplus, standardized_posterior

    X, Y, objective, _, feas = constrained()
    points = torch.rand(32, 2, generator=torch.Generator().manual_seed(2), dtype=torch.double)
    for kappa in (0.0, 2.0):
        acq = FeasibleBound(objective, feas, kappa=kappa)
        mean, std = standardized_posterior(objective, points)
        expected = log_softplus(mean + kappa * std) + feas.log_prob(points)
        assert torch.allclose(acq(points.unsqueeze(-2)), expected.detach(), atol=1e-9)
    # the feasible half wins: the best of the grid by the bound lies in x0 <= 0.5
    grid = torch.rand(2048, 1, 2, generator=torch.Generator().manual_seed(4), dtype=torch.double)
    with torch.no_grad():
        top = grid[FeasibleBound(objective, feas, kappa=2.0)(grid).argmax(), 0]
    assert top[0] <= 0.55, top


def test_likely_feasible_keeps_the_likely_half_or_the_most_likely_few() -> None:
    from abo.acquisitions.feasibility import likely_feasible

    _, _, _, slack, feas = constrained()
    grid = torch.rand(500, 2, generator=torch.Generator().manual_seed(5), dtype=torch.double)
    kept = likely_feasible(feas, grid)
    assert 0 < kept.shape[0] < grid.shape[0] and (kept[:, 0] <= 0.55).all()
    right = grid[grid[:, 0] > 0.8]  # none likely feasible: the most likely ones
    few = likely_feasible(feas, right, least=5)
    assert few.shape[0] == 5
    with torch.no_grad():
        logp = feas.log_prob(right)
    assert torch.allclose(feas.log_prob(few).sort().values, logp.topk(5).values.sort().values)


@pytest.mark.parametrize("strategy", ["ucb", "aegis", "aegis-rs"])
def test_ucb_and_aegis_propose_inside_the_feasible_region(strategy: str) -> None:
    from abo.acquisitions.registry import make_strategy

    X, Y, objective, _, feas = constrained()
    ctx = replace(make_ctx(objective, X, Y), feasibility=feas)
    made = make_strategy(strategy, raw_samples=128, num_restarts=3)
    proposal = made.propose(ctx, 4)
    assert proposal.X.shape == (4, 2)
    # all four arms of AEGiS and UCB's bound weigh feasibility
    assert (proposal.X[:, 0] <= 0.6).float().mean() >= 0.75, (proposal.X, proposal.info)


def _constrained_front() -> tuple:
    """Two utilities of one input that trade off (u1 = x, u2 = 1 - x^2), observed near the
    ends, and a constraint x <= 0.45 (slack 0.45 - x): the gap of the front that may be
    filled is (0.1, 0.45], not the unconstrained (0.2, 0.8)."""
    X = torch.tensor([[0.0], [0.05], [0.1], [0.9], [0.95], [1.0]], dtype=torch.double)
    U = torch.cat([X, 1 - X**2], dim=-1)
    fits = [fit_gp(X, U[:, i : i + 1], noise="deterministic").model for i in range(2)]
    slack = fit_gp(X, 0.45 - X, noise="deterministic").model
    feas = Feasibility(names=("c",), models=(slack,), observed=(X[:, 0] <= 0.45))
    return ModelListGP(*fits), X, U, feas


@pytest.mark.parametrize("strategy", ["qlognehvi", "thompson", "parego"])
def test_strategies_of_several_objectives_fill_the_feasible_part_of_the_front(
    strategy: str,
) -> None:
    from abo.acquisitions.registry import make_strategy

    model, X, U, feas = _constrained_front()
    ref = torch.tensor([-0.1, -0.1], dtype=torch.double)
    ctx = replace(make_ctx(model, X, U, seed=3), ref_point=ref, feasibility=feas)
    options = {"raw_samples": 64, "num_restarts": 2}
    if strategy == "qlognehvi":
        options["mc_samples"] = 64
    made = make_strategy(strategy, **options)
    proposal = made.propose(ctx, 2)
    assert (proposal.X[:, 0] <= 0.5).all(), (proposal.X, proposal.info)
    unconstrained = made.propose(replace(ctx, feasibility=None), 2)
    assert (unconstrained.X[:, 0] > 0.5).any(), unconstrained.X  # the constraint moved it


def test_constrained_qlognehvi_is_botorchs_with_the_slack_as_a_constraint() -> None:
    from botorch.acquisition.multi_objective.logei import (
        qLogNoisyExpectedHypervolumeImprovement,
    )
    from botorch.acquisition.multi_objective.objective import IdentityMCMultiOutputObjective
    from botorch.sampling import SobolQMCNormalSampler

    from abo.acquisitions.qlognehvi import QLogNEHVIStrategy

    model, X, U, feas = _constrained_front()
    ref = torch.tensor([-0.1, -0.1], dtype=torch.double)
    ctx = replace(make_ctx(model, X, U, seed=3), ref_point=ref, feasibility=feas)
    ours = QLogNEHVIStrategy(mc_samples=64).acquisition(ctx, ref, X[:0])
    theirs = qLogNoisyExpectedHypervolumeImprovement(
        model=ModelListGP(*model.models, feas.models[0]),
        ref_point=ref.tolist(),
        X_baseline=ours.X_baseline,
        sampler=SobolQMCNormalSampler(torch.Size([64]), seed=ctx.seed()),
        objective=IdentityMCMultiOutputObjective(outcomes=[0, 1]),
        constraints=[lambda Z: -Z[..., 2]],
        prune_baseline=False,
    )
    # between the observed points (at them the two posteriors' jitter differs, in log space)
    points = torch.linspace(0.025, 0.975, 20, dtype=torch.double).reshape(-1, 1, 1)
    with torch.no_grad():
        a, b = ours(points), theirs(points)
    # the same improvement; the steep feasibility weight (BoTorch's eta = 1e-3) magnifies the
    # two posteriors' rounding just past the constraint's boundary, where it is tiny
    assert torch.allclose(a.exp(), b.exp(), atol=0.02 * float(b.exp().max())), (a, b)
    assert (
        a[points.reshape(-1) > 0.6].max()
        < a[(points.reshape(-1) > 0.2) & (points.reshape(-1) < 0.4)].max()
    )
