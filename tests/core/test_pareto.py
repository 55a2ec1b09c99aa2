"""The Pareto front, the default reference point and the hypervolume (``abo.core.pareto``)."""

from __future__ import annotations

import itertools

import pytest
import torch

from abo.core.exceptions import AboError
from abo.core.pareto import REF_MARGIN, hypervolume, pareto_mask, reference_point


def _dominated(U: torch.Tensor, i: int) -> bool:
    return any(bool((U[j] >= U[i]).all() and (U[j] > U[i]).any()) for j in range(U.shape[0]))


def test_the_front_is_exactly_the_rows_no_other_row_dominates() -> None:
    U = torch.rand(40, 3, generator=torch.Generator().manual_seed(0), dtype=torch.double)
    U = torch.cat([U, U[:1]])  # a duplicate of a row: kept when that row is on the front
    mask = pareto_mask(U)
    assert mask.tolist() == [not _dominated(U, i) for i in range(U.shape[0])]
    assert mask[0] == mask[-1]
    assert pareto_mask(torch.zeros(0, 2)).shape == (0,)


def test_hypervolume_of_two_objectives_equals_the_union_of_boxes_on_a_grid() -> None:
    U = torch.rand(12, 2, generator=torch.Generator().manual_seed(1), dtype=torch.double)
    ref = torch.tensor([-0.05, 0.1], dtype=torch.double)
    n = 400  # midpoint rule on a grid over [ref, 1]^2
    xs = ref[0] + (torch.arange(n, dtype=torch.double) + 0.5) * (1 - ref[0]) / n
    ys = ref[1] + (torch.arange(n, dtype=torch.double) + 0.5) * (1 - ref[1]) / n
    grid = torch.cartesian_prod(xs, ys)
    covered = (U.unsqueeze(0) >= grid.unsqueeze(1)).all(-1).any(-1).double().mean()
    area = covered * (1 - ref[0]) * (1 - ref[1])
    assert hypervolume(U, ref) == pytest.approx(float(area), abs=5e-3)


def test_points_that_do_not_beat_the_reference_add_nothing() -> None:
    ref = torch.tensor([0.0, 0.0], dtype=torch.double)
    inside = torch.tensor([[0.5, 0.5]], dtype=torch.double)
    outside = torch.tensor([[2.0, -0.1], [-1.0, 3.0]], dtype=torch.double)
    assert hypervolume(inside, ref) == pytest.approx(0.25)
    assert hypervolume(torch.cat([inside, outside]), ref) == pytest.approx(0.25)
    assert hypervolume(outside, ref) == 0.0


def test_reference_point_is_beyond_the_worst_initial_values_and_then_fixed() -> None:
    U = torch.tensor([[1.0, 4.0], [3.0, 2.0], [0.0, 3.0], [-9.0, -9.0]], dtype=torch.double)
    ref = reference_point(U, n_initial=3)  # from the first three rows only
    assert ref.tolist() == pytest.approx([0.0 - REF_MARGIN * 3.0, 2.0 - REF_MARGIN * 2.0])
    assert torch.equal(reference_point(U[:3], 3), ref)  # later rows never move it
    assert not torch.equal(reference_point(U[:2], 3), ref)  # ... earlier ones do, until then
    flat = reference_point(torch.tensor([[5.0, 0.0]], dtype=torch.double), 4)
    assert flat.tolist() == pytest.approx([5.0 - REF_MARGIN * 5.0, -REF_MARGIN])
    with pytest.raises(ValueError, match="no results"):
        reference_point(torch.zeros(0, 2), 3)


@pytest.mark.parametrize("m", [2, 3, 4])
def test_hypervolume_never_falls_as_points_are_added(m: int) -> None:
    U = torch.rand(15, m, generator=torch.Generator().manual_seed(m), dtype=torch.double)
    ref = torch.zeros(m, dtype=torch.double)
    volumes = [hypervolume(U[:k], ref) for k in range(1, 16)]
    assert all(b >= a - 1e-12 for a, b in itertools.pairwise(volumes))
    assert volumes[-1] > volumes[0]


def test_a_hypervolume_beyond_the_float_range_raises_and_a_wide_finite_one_is_measured() -> None:
    """Spans that overflow a float are measured scaled; a volume that does is an error naming
    its magnitude, never ``inf`` (which JSON carried as ``null``)."""
    U = torch.tensor([[1e308, 1.0]], dtype=torch.double)
    wide = hypervolume(U, torch.tensor([-1e308, 0.5], dtype=torch.double))
    assert wide == pytest.approx(1e308)  # a span of 2e308 times 0.5
    with pytest.raises(AboError, match=r"hypervolume: about 1e616, beyond the float range"):
        huge = torch.tensor([[1e308, 1e308]], dtype=torch.double)
        hypervolume(huge, torch.tensor([-1e308, -1e308], dtype=torch.double))
    small = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.double)
    assert hypervolume(small, torch.tensor([-1.0, -1.0]).double()) == pytest.approx(3.0)
