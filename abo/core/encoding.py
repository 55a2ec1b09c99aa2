"""A whole space's unit-cube encoding: points of ``[0, 1]^D`` to and from parameter dicts,
relaxed points snapped onto valid encodings, inactive parameters at ``INACTIVE``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from abo.core.param_values import ParamValue
from abo.core.params import Categorical, Parameter

if TYPE_CHECKING:
    from torch import Tensor

INACTIVE = 0.5
"""The unit-cube coordinate of an inactive parameter (every column of its block): one fixed
value, so two configurations without it do not differ in it, in the middle of the cube, so no
active value is more than half the cube from it (``Space.to_unit``)."""


def to_unit(params: Mapping[str, Parameter], values: Mapping[str, ParamValue]) -> Tensor:
    """Encode one parameter dict as a ``D`` tensor in the unit cube."""
    import torch

    out: list[float] = []
    for name, p in params.items():
        # an inactive parameter is absent from a valid dict: INACTIVE in its every column
        out.extend(p.encode(values[name]) if name in values else [INACTIVE] * p.width)
    return torch.tensor(out, dtype=torch.double)


def round_points(
    params: Mapping[str, Parameter],
    slices: Mapping[str, slice],
    order: list[str] | None,
    X: Tensor,
) -> Tensor:
    """``n x D`` relaxed points snapped onto encodings of valid parameters; ``order`` is the
    parents-first order of a conditional space (``None`` for one without conditions)."""
    import torch

    X = X.detach().to(torch.double).clamp(0.0, 1.0).clone()
    for name, p in params.items():
        s = slices[name]
        if isinstance(p, Categorical):  # one-hot at each row's argmax (the first on ties)
            block = torch.zeros_like(X[:, s])
            X[:, s] = block.scatter_(-1, X[:, s].argmax(dim=-1, keepdim=True), 1.0)
        else:  # a Float's or an Int's rounding is coordinate by coordinate: all rows at once
            X[:, s] = p.round(X[:, s])
    if order is not None:  # inactive parameters at INACTIVE: one encoding per configuration
        for name, on in active_rows(params, slices, order, X).items():
            X[~on, slices[name]] = INACTIVE
    return X


def active_rows(
    params: Mapping[str, Parameter], slices: Mapping[str, slice], order: list[str], X: Tensor
) -> dict[str, Tensor]:
    """Per parameter, which rows of rounded points ``X`` (``n x D``) it is active in."""
    import torch

    out: dict[str, Tensor] = {}
    for name in order:
        on = torch.ones(X.shape[0], dtype=torch.bool)
        for parent, values in params[name].when:
            q, cols = params[parent], X[:, slices[parent]]
            if isinstance(q, Categorical):
                allowed = torch.tensor([q._index(v) for v in values])
                holds = torch.isin(cols.argmax(dim=-1), allowed)
            else:  # an Int: decode each distinct coordinate once
                unique, inverse = torch.unique(cols[:, 0], return_inverse=True)
                decoded = torch.tensor([float(q.decode([float(u)])) for u in unique])
                holds = torch.isin(decoded[inverse], torch.tensor([float(v) for v in values]))
            on &= out[parent] & holds
        out[name] = on
    return out


def neighbours(
    params: Mapping[str, Parameter],
    slices: Mapping[str, slice],
    order: list[str] | None,
    X: Tensor,
) -> tuple[Tensor, Tensor]:
    """The valid points one discrete move from each rounded point of ``X`` (``n x D``): each
    integer or stepped real one step up or down, each categorical at each of its other
    choices. ``m x D`` rounded points, sorted per point, without the point itself or repeats
    (a move of an inactive parameter), and for each the row of ``X`` it moves (``m``).

    All points at once: the local search of the acquisition climbs from a dozen points at a
    time, and one call per point (a loop over the parameters in ``round_points`` each) was a
    quarter of an ask's time in mixed spaces."""
    import torch

    from abo.core.params import Float

    n, rows = X.shape[0], torch.arange(X.shape[0])
    moves: list[Tensor] = []
    owners: list[Tensor] = []
    for name, p in params.items():
        s = slices[name]
        if isinstance(p, Categorical):  # every point at each choice it does not hold
            for j in range(p.width):
                at = X[:, s.start + j] < 0.5
                Y = X[at].clone()
                Y[:, s] = 0.0
                Y[:, s.start + j] = 1.0
                moves.append(Y)
                owners.append(rows[at])
            continue
        if isinstance(p, Float) and p.n_steps is None:
            continue  # a plain real has no discrete move
        unique, inverse = torch.unique(X[:, s.start], return_inverse=True)
        step = [(k, p.encode(v)[0]) for k, u in enumerate(unique.tolist()) for v in _adjacent(p, u)]
        if not step:  # each distinct coordinate decoded once, its moves applied to its rows
            continue
        row, move = (inverse[:, None] == torch.tensor([k for k, _ in step])).nonzero(as_tuple=True)
        Y = X[row].clone()
        Y[:, s.start] = torch.tensor([e for _, e in step], dtype=X.dtype)[move]
        moves.append(Y)
        owners.append(row)
    if not n or not moves:
        return X.new_zeros(0, X.shape[-1]), torch.zeros(0, dtype=torch.long)
    m = sum(len(o) for o in owners)
    # one rounding for the moves and the points together: rounding is row by row
    both = round_points(params, slices, order, torch.cat([*moves, X]))
    Y, owner = both[:m], torch.cat(owners)
    kept = (Y != both[m:][owner]).any(dim=-1)
    keyed = torch.unique(torch.cat([owner[kept, None].to(Y), Y[kept]], dim=-1), dim=0)
    return keyed[:, 1:], keyed[:, 0].long()


def _adjacent(p: Parameter, u: float) -> list[ParamValue]:
    """The values one step below and above the one ``u`` encodes (none for a plain Float)."""
    from abo.core.params import Float, Int

    if isinstance(p, Int):
        v = p.decode([u])
        return [w for w in (v - p.step, v + p.step) if p.low <= w <= p.high]
    if isinstance(p, Float) and p.n_steps is not None:
        k = round(p._index(p.decode([u])))
        return [p.grid_value(j) for j in (k - 1, k + 1) if 0 <= j <= p.n_steps]
    return []
