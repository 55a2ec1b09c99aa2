"""``SamplePaths``: BoTorch's drawn Matheron paths of abo's GP, evaluated in closed form, give
BoTorch's values and autograd's gradients; other paths are left to BoTorch."""

from __future__ import annotations

import pytest
import torch
from botorch.acquisition.thompson_sampling import PathwiseThompsonSampling
from botorch.models import SingleTaskGP
from gpytorch.kernels import RBFKernel, ScaleKernel

from abo.acquisitions import paths as paths_module
from abo.acquisitions.paths import DrawnPaths, SamplePaths
from abo.model.surrogate import fit_gp


def _data(n: int, d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=torch.double)
    Y = 5.0 + torch.sin(6 * X).sum(-1, keepdim=True) - 3 * (X - 0.4).pow(2).sum(-1, keepdim=True)
    return X, Y


def _drawn(model, n: int, seed: int, kind=PathwiseThompsonSampling):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        acq = kind(model)
        acq.redraw(batch_size=n)
        acq.batch_size = n
    return acq


@pytest.mark.parametrize("noise", ["deterministic", "auto"])
def test_paths_in_closed_form_are_botorchs_values_and_gradients(noise: str, monkeypatch) -> None:
    X, Y = _data(40, 3, seed=1)
    model = fit_gp(X, Y, noise=noise).model
    n = 5
    acq = _drawn(model, n, seed=2)
    paths = SamplePaths.of(acq)
    assert paths is not None  # abo's GP: the closed form applies
    g = torch.Generator().manual_seed(3)
    Q = torch.rand(7, n, 3, generator=g, dtype=torch.double)
    Q[0] = X[:n] + 1e-5  # points a hair from the data, where the update term dominates
    a, b = Q.clone().requires_grad_(True), Q.clone().requires_grad_(True)
    fast = paths.values(a)
    slow = acq.samples(b.unsqueeze(-2)).reshape(b.shape[:-1])
    assert fast.shape == (7, n)
    assert torch.allclose(fast, slow, atol=1e-9, rtol=1e-9)
    weights = torch.randn(7, n, generator=g, dtype=torch.double)
    (ga,) = torch.autograd.grad((weights * fast).sum(), a)
    (gb,) = torch.autograd.grad((weights * slow).sum(), b)
    assert torch.allclose(ga, gb, atol=1e-8, rtol=1e-7), (ga - gb).abs().max()
    assert gb.norm(dim=-1).max() > 0.1  # real slopes were compared
    # the acquisition BoTorch's optimiser climbs (the separable sum over the paths), drawn
    # from the same seed, and every path at every raw point (features once per point)
    drawn = _drawn(model, n, seed=2, kind=DrawnPaths)
    assert drawn.closed is not None
    assert torch.allclose(drawn(Q), acq(Q), atol=1e-9, rtol=1e-9)
    raw = torch.rand(300, 3, generator=g, dtype=torch.double)
    everywhere = drawn.everywhere(raw)
    assert everywhere.shape == (n, 300)
    assert torch.allclose(everywhere, acq.samples(raw).reshape(n, -1), atol=1e-9, rtol=1e-9)
    # without gradients, in pieces (``CHUNK``: here 7 points a piece): the same values
    monkeypatch.setattr(paths_module, "CHUNK", 7 * n * 512)
    wide = raw.unsqueeze(1).expand(-1, n, -1)
    assert torch.allclose(paths.values(wide), everywhere.T, atol=1e-9, rtol=1e-9)


def test_each_point_is_evaluated_on_its_own_path() -> None:
    X, Y = _data(20, 2, seed=4)
    acq = _drawn(fit_gp(X, Y).model, 3, seed=5)
    paths = SamplePaths.of(acq)
    assert paths is not None
    x = torch.full((1, 3, 2), 0.3, dtype=torch.double)  # one point on all three paths
    values = paths.values(x)[0]
    assert (values.max() - values.min()) > 1e-3  # different draws differ there


def test_paths_of_another_kernel_are_left_to_botorch() -> None:
    X, Y = _data(20, 2, seed=6)
    gp = SingleTaskGP(X, Y, covar_module=ScaleKernel(RBFKernel(ard_num_dims=2))).eval()
    assert SamplePaths.of(_drawn(gp, 2, seed=7)) is None
