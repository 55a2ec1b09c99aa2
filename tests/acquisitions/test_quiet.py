"""Warnings users cannot act on stay inside abo's proposals; everything else still reaches them."""

from __future__ import annotations

import threading
import warnings

import pytest
import torch
from botorch.exceptions.warnings import OptimizationWarning
from botorch.models import SingleTaskGP
from botorch.test_functions import Branin
from gpytorch.kernels import RQKernel, ScaleKernel
from linear_operator.utils.warnings import NumericalWarning
from strategy_helpers import make_ctx, peaked_data

import abo
from abo.acquisitions.base import Proposal, ProposalContext
from abo.acquisitions.quiet import degraded, quiet_proposal
from abo.acquisitions.thompson import ThompsonStrategy

JITTER = "A not p.d., added jitter of 1.0e-08 to the diagonal"
BRANIN = Branin()
UNIT2 = abo.Space({"u": abo.Float(0, 1), "v": abo.Float(0, 1)})


def _branin(p: dict) -> float:
    lo, hi = BRANIN.bounds
    x = lo + (hi - lo) * torch.tensor([p["u"], p["v"]], dtype=torch.double)
    return float(BRANIN(x.unsqueeze(0)))


def _numerical_chatter(caught: list[warnings.WarningMessage]) -> list[str]:
    return [
        f"{w.category.__name__}: {w.message}"
        for w in caught
        if issubclass(w.category, OptimizationWarning | NumericalWarning)
        or "Optimization failed" in str(w.message)
    ]


def _run(strategy: str, noise: str, asks: int) -> list[warnings.WarningMessage]:
    """``asks`` asks with four trials always running, every warning recorded."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        study = abo.create_study(UNIT2, strategy=strategy, seed=0, noise=noise)
        pending = study.ask_batch(4, n_workers=4)
        for _ in range(asks):
            trial = pending.pop(0)
            study.tell(trial.id, _branin(trial.params))
            pending.append(study.ask(n_workers=4))
    return caught


@pytest.mark.slow
def test_a_thompson_study_prints_no_line_search_warnings() -> None:
    # before: three L-BFGS-B searches of this run ended ABNORMAL, each an OptimizationWarning
    caught = _run("thompson", "deterministic", asks=30)
    assert _numerical_chatter(caught) == []
    assert not [w for w in caught if issubclass(w.category, abo.AboWarning)]


@pytest.mark.slow
def test_a_qlognei_study_prints_no_jitter_or_line_search_warnings() -> None:
    # a learned noise near its floor: Cholesky factors need jitter 17 times in this run (inside
    # BoTorch's own searches, which record their warnings; this guards the rest of a proposal)
    caught = _run("qlognei", "auto", asks=30)
    assert _numerical_chatter(caught) == []


def _rq_model() -> tuple[SingleTaskGP, torch.Tensor, torch.Tensor]:
    """A near-noiseless GP whose kernel has no pathwise sampler: Thompson falls back."""
    X, Y = peaked_data()
    model = SingleTaskGP(X, Y, covar_module=ScaleKernel(RQKernel()))
    model.likelihood.noise = 1e-4
    return model.eval(), X, Y


def test_a_degraded_thompson_proposal_warns_once_and_hides_its_jitter() -> None:
    model, X, Y = _rq_model()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        proposal = ThompsonStrategy(n_candidates=1024).propose(make_ctx(model, X, Y), 2)
    assert all("max_posterior_sampling" in i["fallback"] for i in proposal.info)
    # the joint sample over 1024 candidates needed jitter (shown before); the fallback itself,
    # which searches less well, is said once for the two points
    assert _numerical_chatter(caught) == []
    notes = [str(w.message) for w in caught if issubclass(w.category, abo.AboWarning)]
    assert len(notes) == 1
    assert notes[0].startswith("thompson: the pathwise posterior sample failed")
    assert "exact joint sample over 1024 Sobol candidates" in notes[0]


@pytest.mark.parametrize("strategy", ["auto", "qlognei"])
def test_no_botorch_note_reaches_the_user_when_every_point_is_infeasible(strategy: str) -> None:
    """BoTorch's "When all training points are infeasible" note: abo copes (it weighs each
    candidate by its probability of feasibility), so the user is not told to act. (It compares
    no process-wide filter list, so it needs no process of its own, unlike filters_alone.py.)"""
    space = abo.Space({"x": abo.Float(0.0, 1.0), "y": abo.Float(0.0, 1.0)})
    outcomes = {"f": "minimize", "g": "<= -5"}  # g = y is never below -5
    study = abo.create_study(space, outcomes=outcomes, strategy=strategy, seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(7):
            trial = study.ask()
            study.tell(trial.id, {"f": trial.params["x"], "g": trial.params["y"]})
    assert [t.proposal.strategy for t in study.trials if t.proposal][-1] == strategy
    assert [str(w.message) for w in caught if "infeasible" in str(w.message)] == []


class _Noisy:
    """A strategy whose proposal raises a jitter warning, a user's warning and a degradation."""

    name = "noisy"
    needs_model = False

    @quiet_proposal
    def propose(self, ctx: ProposalContext, n: int) -> Proposal:
        warnings.warn(JITTER, NumericalWarning, stacklevel=1)
        warnings.warn("your objective's module is deprecated", DeprecationWarning, stacklevel=1)
        thread = threading.Thread(target=warnings.warn, args=(JITTER, NumericalWarning))
        thread.start()
        thread.join()
        degraded("first fallback")
        degraded("first fallback")
        degraded("second fallback")
        return Proposal(ctx.uniform(n), [{} for _ in range(n)])


def test_only_the_handled_warnings_of_this_thread_are_hidden() -> None:
    X, Y = peaked_data(4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _Noisy().propose(make_ctx(None, X, Y), 1)
        warnings.warn(JITTER, NumericalWarning, stacklevel=1)  # outside a proposal: shown
    seen = [(w.category, str(w.message)) for w in caught]
    assert seen == [
        (DeprecationWarning, "your objective's module is deprecated"),
        (NumericalWarning, JITTER),  # raised by another thread during the proposal
        (abo.AboWarning, "noisy: first fallback; second fallback"),
        (NumericalWarning, JITTER),
    ]


def test_a_user_error_filter_still_raises_inside_a_proposal() -> None:
    X, Y = peaked_data(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        with pytest.raises(DeprecationWarning, match="deprecated"):
            _Noisy().propose(make_ctx(None, X, Y), 1)


def test_a_degradation_outside_a_proposal_warns_at_once() -> None:
    with pytest.warns(abo.AboWarning, match="^lonely$"):
        degraded("lonely")
