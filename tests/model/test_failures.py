"""The failure classifier: failed trials train a GP of where evaluations fail, the objective's
GP sees successful trials only, and proposals are weighed by the probability of success."""

from __future__ import annotations

import torch

import abo
from abo.acquisitions.feasibility import log_success
from abo.model.failures import success_targets
from abo.model.surrogate import fit_gp
from abo.propose.proposer import Proposer
from abo.spec.study_spec import StudySpec

SPACE = abo.Space({"x": abo.Float(0.0, 1.0), "y": abo.Float(0.0, 1.0)})


def fails(p: dict) -> bool:
    """Evaluations fail on the right third of the square, next to the optimum at x = 0.6."""
    return p["x"] > 0.66


def value(p: dict) -> float:
    return (p["x"] - 0.6) ** 2 + (p["y"] - 0.3) ** 2


def told(study: abo.Study, n: int) -> abo.Study:
    for t in study.ask_batch(n):  # the Sobol design, then one model proposal at a time
        study.fail(t.id, "diverged") if fails(t.params) else study.tell(t.id, value(t.params))
    for _ in range(4):
        t = study.ask()
        study.fail(t.id, "diverged") if fails(t.params) else study.tell(t.id, value(t.params))
    return study


def test_targets_are_the_dirichlet_log_odds_of_success() -> None:
    targets = success_targets(torch.tensor([True, False, True])).reshape(-1)
    assert targets[0] > 6 and targets[1] < -6 and targets[0] == targets[2] == -targets[1]


def test_the_classifier_learns_where_evaluations_fail_and_the_objective_gp_skips_them() -> None:
    study = told(abo.create_study(SPACE, seed=2, n_initial=10), 10)
    trials = study.trials
    failed = [t for t in trials if t.state is abo.TrialState.FAILED]
    done = [t for t in trials if t.state is abo.TrialState.DONE]
    assert failed and done
    last = trials[-1].proposal
    assert any(k.startswith("failure:") for k in last.model.hypers)  # recorded like the GP's
    assert last.gp_points == len(done) - 1  # the objective's GP: successes only (the last is new)
    proposer = Proposer(study.spec)
    assert proposer.classifies(trials)
    ids, X, targets = proposer.failure_data(trials)
    assert len(ids) == len(failed) + len(done)
    model = fit_gp(X, targets, noise="classifier").model
    inside = torch.tensor([[0.9, 0.5], [0.8, 0.1]], dtype=torch.double)
    outside = torch.tensor([[0.2, 0.5], [0.4, 0.9]], dtype=torch.double)
    with torch.no_grad():
        assert (log_success(model, inside).exp() < 0.3).all()
        assert (log_success(model, outside).exp() > 0.7).all()
    proposed = [t for t in trials if t.proposal.strategy not in ("sobol",)]
    assert sum(fails(t.params) for t in proposed) <= 1  # once learnt, the region is avoided


def test_worst_value_imputation_stays_an_option_and_is_what_old_studies_keep() -> None:
    study = told(abo.create_study(SPACE, seed=2, n_initial=10, failure_model="worst"), 10)
    trials = study.trials
    modelled = [t for t in trials if t.state is not abo.TrialState.RUNNING][:-1]
    last = trials[-1].proposal
    assert last.gp_points == len(modelled)  # failed trials in the GP, at the worst value
    assert not any(k.startswith("failure:") for k in last.model.hypers)
    stored = study.spec.to_json()
    stored.pop("failure_model")  # a spec written before the option existed
    assert StudySpec.from_json(stored).resolved_failure_model == "worst"
    # every built-in strategy reads the classifier's probability of success
    for name in abo.strategies(objectives=1):
        assert abo.create_study(SPACE, strategy=name).spec.resolved_failure_model == "classifier"


def test_lost_trials_teach_the_classifier_nothing() -> None:
    study = abo.create_study(SPACE, seed=1, n_initial=4, max_retries=0)
    a, b, c, d = study.ask_batch(4)
    study.tell(a.id, 1.0)
    study.fail(b.id, "diverged")
    study.tell(c.id, 2.0)
    study.lose(d.id, "worker died")
    ids, _, _ = Proposer(study.spec).failure_data(study.trials)
    assert set(ids) == {a.id, b.id, c.id}
