"""A trust region's own GP: which observations it takes, its coordinates, and what it resolves
that the study's GP of the whole cube cannot."""

from __future__ import annotations

import math

import pytest
import torch

from abo.model.local import (
    LENGTHSCALE,
    LOCAL_POINTS,
    fit_local,
    from_box,
    local_rows,
    min_points,
    noise_of,
    to_box,
)
from abo.model.surrogate import LENGTHSCALE_FLOOR, fit_gp


def _box(center: list[float], side: float) -> torch.Tensor:
    c = torch.tensor(center, dtype=torch.double)
    return torch.stack([(c - side / 2).clamp(0, 1), (c + side / 2).clamp(0, 1)])


def test_the_box_coordinates_map_its_sides_onto_the_unit_interval_and_back() -> None:
    box = _box([0.5, 0.98], 0.1)  # clipped at the cube's face: sides 0.1 and 0.07
    X = torch.rand(20, 2, generator=torch.Generator().manual_seed(0), dtype=torch.double)
    assert torch.allclose(from_box(to_box(X, box), box), X)
    assert torch.allclose(to_box(box, box), torch.tensor([[0.0, 0.0], [1.0, 1.0]]).double())


def test_rows_inside_the_box_nearest_its_centre_at_most_k_in_the_order_observed() -> None:
    g = torch.Generator().manual_seed(1)
    X = torch.rand(400, 3, generator=g, dtype=torch.double)
    center = torch.full((3,), 0.5, dtype=torch.double)
    box = _box([0.5] * 3, 0.6)
    rows = local_rows(X, box, center, k=30)
    inside = ((X >= box[0]) & (X <= box[1])).all(-1)
    assert rows.numel() == 30 and bool(inside[rows].all())
    assert torch.equal(rows, rows.sort().values)
    dist = (X - center).norm(dim=-1)  # a cube-shaped box: its coordinates keep the order
    farthest_taken = dist[rows].max()
    others = inside.clone()
    others[rows] = False
    assert bool((dist[others] >= farthest_taken).all())
    assert local_rows(X, box, center).numel() == min(int(inside.sum()), LOCAL_POINTS)
    assert local_rows(X, _box([0.5] * 3, 1e-6), center).numel() == 0


def test_the_noise_setting_is_read_from_the_study_gp() -> None:
    X = torch.rand(10, 2, generator=torch.Generator().manual_seed(2), dtype=torch.double)
    Y = X.sum(-1, keepdim=True)
    assert noise_of(fit_gp(X, Y, noise="deterministic").model) == "deterministic"
    assert noise_of(fit_gp(X, Y, noise="auto").model) == "auto"
    assert min_points(3) == 8 and min_points(10) == 20


def test_in_a_small_box_its_own_gp_has_lengthscales_the_cube_s_cannot() -> None:
    # a ripple of wavelength 0.01 around a point: its lengthscales, in the cube's units, are
    # below the study GP's floor (a fortieth of the cube), and it predicts it as well
    center = torch.tensor([0.4, 0.6, 0.5], dtype=torch.double)

    def f(X: torch.Tensor) -> torch.Tensor:
        return torch.sin(2 * math.pi * (X - center) / 0.01).sum(-1, keepdim=True)

    g = torch.Generator().manual_seed(3)
    box = _box(center.tolist(), 0.01)
    X = from_box(torch.rand(120, 3, generator=g, dtype=torch.double), box)
    held = from_box(torch.rand(200, 3, generator=g, dtype=torch.double), box)
    fitted = fit_local(to_box(X, box), f(X), "deterministic", box[1] - box[0])
    assert fitted is not None
    local, hypers = fitted
    cube = fit_gp(X, f(X), noise="deterministic").model
    floor = float(cube.covar_module.base_kernel.raw_lengthscale_constraint.lower_bound)
    ls = local.covar_module.base_kernel.lengthscale.detach().reshape(-1) * (box[1] - box[0])
    assert bool((ls < floor).all()), (ls, floor)
    with torch.no_grad():
        err = (local.posterior(to_box(held, box)).mean - f(held)).pow(2).mean().sqrt()
    assert float(err) < 0.2  # of a ripple whose values span [-3, 3]


def test_its_hyperparameters_are_recorded_in_the_cube_s_units_and_reused_without_a_fit() -> None:
    g = torch.Generator().manual_seed(4)
    small, large = _box([0.5, 0.5], 0.05), _box([0.5, 0.5], 0.1)
    X = from_box(torch.rand(40, 2, generator=g, dtype=torch.double), small)
    Y = -(X - 0.51).pow(2).sum(-1, keepdim=True)
    fitted = fit_local(to_box(X, small), Y, "deterministic", small[1] - small[0])
    assert fitted is not None
    model, hypers = fitted
    in_box = model.covar_module.base_kernel.lengthscale.detach().reshape(-1)
    assert hypers[LENGTHSCALE] == pytest.approx((in_box * 0.05).tolist())
    # the region doubled: the same lengthscales in the cube are half as long in its units
    again = fit_local(to_box(X, large), Y, "deterministic", large[1] - large[0], hypers, False)
    assert again is not None
    kept = again[0].covar_module.base_kernel.lengthscale.detach().reshape(-1)
    assert kept.tolist() == pytest.approx((in_box / 2).clamp_min(LENGTHSCALE_FLOOR).tolist())
    assert again[1][LENGTHSCALE] == pytest.approx(hypers[LENGTHSCALE])
    refit = fit_local(to_box(X, large), Y, "deterministic", large[1] - large[0], hypers, True)
    assert refit is not None and refit[1] != hypers  # a fit moves them
