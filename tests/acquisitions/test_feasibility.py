"""Outcome constraints inside the strategies: the probability of feasibility from one GP per
constraint, as BoTorch's constrained acquisitions compute it."""

from __future__ import annotations

from dataclasses import replace

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
from abo.surrogate import fit_gp


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
    from abo.failures import success_targets

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
