"""JointPosterior: ModelListGP's joint posterior of exact GPs, computed in matrix products."""

from __future__ import annotations

import pytest
import torch
from botorch.acquisition.multi_objective.logei import (
    qLogNoisyExpectedHypervolumeImprovement,
)
from botorch.models import ModelListGP
from botorch.sampling import SobolQMCNormalSampler

from abo.acquisitions.joint import JointPosterior
from abo.model.surrogate import fit_gp


@pytest.fixture(scope="module", params=["deterministic", "auto"])
def models(request) -> tuple[ModelListGP, torch.Tensor, torch.Tensor]:
    """Two objectives of 3 inputs, 40 observations, exact and learned noise."""
    gen = torch.Generator().manual_seed(0)
    X = torch.rand(40, 3, generator=gen, dtype=torch.double)
    U = torch.stack([-(X**2).sum(-1), -((X - 1) ** 2).sum(-1) + 0.3 * torch.sin(6 * X[:, 0])], -1)
    fits = [fit_gp(X, U[:, i : i + 1], noise=request.param).model for i in range(2)]
    return ModelListGP(*fits), X, U


def _moments(posterior):
    mvn = posterior.distribution
    return mvn.mean, mvn.covariance_matrix


def test_the_joint_posterior_is_model_list_gps_with_and_without_a_remembered_baseline(models):
    model, X, _ = models
    fast = JointPosterior.wrap(model, X)
    assert isinstance(fast, JointPosterior) and fast.num_outputs == 2
    gen = torch.Generator().manual_seed(1)
    B = torch.rand(5, 3, generator=gen, dtype=torch.double)
    cands = torch.rand(7, 2, 3, generator=gen, dtype=torch.double)  # 7 batches of 2 points
    full = torch.cat([B.expand(7, 5, 3), cands], dim=-2)
    with torch.no_grad():
        mean, cov = _moments(model.posterior(full))
        plain_mean, plain_cov = _moments(fast.posterior(full))
        fast.remember(B)
        cached_mean, cached_cov = _moments(fast.posterior(full))
        other = torch.rand(7, 6, 3, generator=gen, dtype=torch.double)  # not after B
        other_mean, _ = _moments(fast.posterior(other))
    for m, c in ((plain_mean, plain_cov), (cached_mean, cached_cov)):
        assert torch.allclose(m, mean, atol=1e-8)
        assert torch.allclose(c, cov, atol=1e-8)
    assert torch.allclose(other_mean, model.posterior(other).mean.detach(), atol=1e-8)
    with pytest.raises(NotImplementedError, match="latent"):
        fast.posterior(full, observation_noise=True)


def _same_values_and_gradients(exact, quick, gen: torch.Generator) -> None:
    """Both acquisitions at 9 random points: equal values, and equal gradients in the points."""
    T = torch.rand(9, 1, 3, generator=gen, dtype=torch.double)
    A, B = T.clone().requires_grad_(), T.clone().requires_grad_()
    va, vb = exact(A), quick(B)
    assert torch.allclose(va, vb, atol=1e-6)
    va.sum().backward()
    vb.sum().backward()
    assert A.grad is not None and B.grad is not None
    assert torch.allclose(A.grad, B.grad, atol=1e-5)


def test_qlognehvi_values_and_gradients_are_unchanged(models):
    model, X, U = models
    gen = torch.Generator().manual_seed(2)
    pending = torch.rand(4, 3, generator=gen, dtype=torch.double)
    ref = (U.min(0).values - 0.1).tolist()

    def acq(m):
        return qLogNoisyExpectedHypervolumeImprovement(
            model=m,
            ref_point=ref,
            X_baseline=X,
            X_pending=pending,
            sampler=SobolQMCNormalSampler(torch.Size([64]), seed=3),
            prune_baseline=False,
        )

    fast = JointPosterior.wrap(model, X)
    assert isinstance(fast, JointPosterior)
    exact, quick = acq(model), acq(fast)
    fast.remember(quick.X_baseline)
    _same_values_and_gradients(exact, quick, gen)


def test_models_it_cannot_speak_for_are_returned_as_they_are(models):
    from botorch.models import SingleTaskGP

    model, X, U = models
    single = model.models[0]
    one = JointPosterior.wrap(single, X)  # one GP: a joint posterior of one output
    assert isinstance(one, JointPosterior) and one.num_outputs == 1
    two_outputs = SingleTaskGP(X, U)  # a batched two-output GP, alone or in a list
    assert JointPosterior.wrap(two_outputs, X) is two_outputs
    listed = ModelListGP(two_outputs)
    assert JointPosterior.wrap(listed, X) is listed


@pytest.mark.parametrize("constrained", [False, True])
def test_qlognei_values_and_gradients_are_unchanged(models, constrained):
    """qLogNEI (qLogEI on exact values) over one GP, or over the objective's and a
    constraint's, its pruned baseline remembered: the GPyTorch posterior's values and
    gradients."""
    from botorch.acquisition.logei import qLogExpectedImprovement, qLogNoisyExpectedImprovement
    from botorch.acquisition.objective import GenericMCObjective

    from abo.acquisitions.qlognei import is_noise_free

    model, X, U = models
    gen = torch.Generator().manual_seed(4)
    pending = torch.rand(3, 3, generator=gen, dtype=torch.double)
    base = model if constrained else model.models[0]
    extra = (
        {
            "objective": GenericMCObjective(lambda Z, X=None: Z[..., 0]),
            "constraints": [lambda Z: -Z[..., 1]],  # the second output's slack, negated
        }
        if constrained
        else {}
    )

    sampler = SobolQMCNormalSampler(torch.Size([64]), seed=5)

    def acq(m):
        if is_noise_free(model.models[0]):  # exact values: qLogEI, as ``qlognei`` asks
            best = {"best_f": 0.0} if constrained else {"best_f": U[:, 0].max()}
            return qLogExpectedImprovement(m, sampler=sampler, X_pending=pending, **best, **extra)
        return qLogNoisyExpectedImprovement(
            model=m, X_baseline=X, X_pending=pending, sampler=sampler, prune_baseline=True, **extra
        )

    fast = JointPosterior.wrap(base, X)
    assert isinstance(fast, JointPosterior)
    exact, quick = acq(base), acq(fast)
    if isinstance(quick, qLogNoisyExpectedImprovement):
        assert torch.equal(exact.X_baseline, quick.X_baseline)  # the same points pruned
        fast.remember(quick.X_baseline)
    _same_values_and_gradients(exact, quick, gen)
