"""The real-task suite: live scikit-learn losses on mixed, conditional spaces, driven through
the simulator by abo and Optuna, scored as Bayesmark scores them."""

from __future__ import annotations

import math

import pytest

from benchmarks import real_tasks as rt


def test_active_drops_the_parameters_a_choice_switches_off() -> None:
    svm = rt.TASKS["svm-cancer"].params
    config = {"C": 1.0, "kernel": "rbf", "gamma": 0.1, "degree": 3, "coef0": 0.5}
    assert rt.active(svm, config) == {"C": 1.0, "kernel": "rbf", "gamma": 0.1}
    poly = rt.active(svm, {**config, "kernel": "poly"})
    assert set(poly) == {"C", "kernel", "gamma", "degree", "coef0"}
    assert set(rt.active(svm, {**config, "kernel": "sigmoid"})) == {"C", "kernel", "gamma",
                                                                    "coef0"}  # fmt: skip


def test_there_are_six_models_or_more_each_loss_finite_and_sensitive() -> None:
    models = {name.split("-")[0] for name in rt.TASKS}
    assert len(models) >= 6
    good = {"C": 10.0, "kernel": "rbf", "gamma": 0.01}
    bad = {"C": 1e-3, "kernel": "sigmoid", "gamma": 1.0, "coef0": 1.0}
    low, high = rt.svm_cancer(good), rt.svm_cancer(bad)
    assert math.isfinite(low) and low < 0.1 < high  # a real landscape, not a constant
    assert rt.svm_cancer(good) == low  # fixed folds: the same configuration, the same loss


@pytest.mark.slow
@pytest.mark.parametrize("method", ["auto", "optuna-tpe", "optuna-cmaes"])
def test_a_run_respects_the_budget_and_improves_on_its_first_result(method: str) -> None:
    run = rt.simulate(method, "knn-diabetes", k=3, budget=14, seed=0)
    assert run["evals"] == list(range(1, 15)) and len(run["ask_seconds"]) == 14
    assert run["regret"] == sorted(run["regret"], reverse=True)  # the best so far
    assert run["regret"][-1] < run["regret"][0]
    again = rt.simulate(method, "knn-diabetes", k=3, budget=14, seed=0)
    assert again["regret"] == run["regret"]  # the same seed, the same run


def test_the_rbf_variant_swaps_the_kernel_for_its_asks_only() -> None:
    import torch
    from gpytorch.kernels import MaternKernel, RBFKernel

    from abo.model import surrogate

    X, Y = torch.rand(6, 2, dtype=torch.double), torch.rand(6, 1, dtype=torch.double)
    opt = rt.METHODS["auto+rbf"](rt.TASKS["enet-diabetes"], 0, 4)
    with opt._swapped():
        inside = surrogate._build(X, Y, "auto").covar_module.base_kernel
    outside = surrogate._build(X, Y, "auto").covar_module.base_kernel
    assert type(inside) is RBFKernel and type(outside) is MaternKernel
    assert inside.lengthscale_prior is not None  # the same prior as the Matern kernel's
    handle, params = opt.ask()
    opt.tell(handle, rt.TASKS["enet-diabetes"].loss(params))
    assert surrogate.MaternKernel is MaternKernel  # restored after the ask and the tell


def test_the_warp_variant_warps_every_input_for_its_asks_only() -> None:
    import torch
    from botorch.models.transforms.input import ChainedInputTransform, Normalize, Warp

    from abo.model import surrogate

    X, Y = torch.rand(6, 3, dtype=torch.double), torch.rand(6, 1, dtype=torch.double)
    opt = rt.METHODS["auto+warp"](rt.TASKS["enet-diabetes"], 0, 4)
    with opt._swapped():
        inside = surrogate._build(X, Y, "auto").input_transform
    outside = surrogate._build(X, Y, "auto").input_transform
    assert isinstance(inside, ChainedInputTransform) and type(outside) is Normalize
    warp = inside["warp"]
    assert isinstance(warp, Warp) and warp.indices.tolist() == [0, 1, 2]
    handle, params = opt.ask()
    opt.tell(handle, rt.TASKS["enet-diabetes"].loss(params))
    assert surrogate.Normalize is Normalize  # restored after the ask and the tell


def test_the_float_warp_variant_warps_the_real_valued_coordinates_only() -> None:
    import torch
    from botorch.models.transforms.input import Normalize

    from abo.model import surrogate

    task = rt.TASKS["svm-cancer"]  # C, kernel (3 one-hot columns), gamma, degree, coef0
    opt = rt.METHODS["auto+warp-floats"](task, 0, 4)
    X, Y = torch.rand(6, 7, dtype=torch.double), torch.rand(6, 1, dtype=torch.double)
    with opt._swapped():
        inside = surrogate._build(X, Y, "auto").input_transform
        other = surrogate._build(X[:, :3], Y, "auto").input_transform  # not the space's GP
    assert inside["warp"].indices.tolist() == [0, 4, 6]  # C, gamma, coef0
    assert type(other) is Normalize
    handle, params = opt.ask()
    opt.tell(handle, task.loss(params))
    assert surrogate.Normalize is Normalize
