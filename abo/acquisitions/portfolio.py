"""``portfolio``: a bandit over abo's strategies that picks the member for every point.

No single acquisition wins everywhere (``docs/benchmarks.md``): ``believer`` refines best on
smooth deterministic functions, ``qlognei`` is not fooled by noise, ``thompson`` and ``aegis``
explore with many busy points. The portfolio runs them as members, in the spirit of GP-Hedge
(Hoffman, Brochu & de Freitas 2011):

* **choose**: each point's member is drawn from probabilities built on the members' past
  rewards; the member proposes with the shared fitted model and every busy point (points of
  the same call chosen before are busy too);
* **challenge**: once per call, one other member, drawn uniformly, nominates a point that is
  not evaluated, so every round compares two members' nominees;
* **reward**: on every ask, each earlier round is scored under the *current* model: the
  nominee with the higher posterior mean wins it (ties split). A member's score is its win
  rate over the rounds it took part in, smoothed towards one half (a Beta(1, 1) prior). With
  outcome constraints or a failure classifier, a nominee more likely feasible than not beats
  one that is not, and among nominees that are not the more likely feasible wins;
* **probabilities**: Hedge's exponential weights, ``p ∝ exp(η · T · score)`` with
  ``η = sqrt(8 ln K / T)`` over ``T`` rounds and ``K`` members, mixed with a ``floor`` so no
  member is starved.

Rewards are recomputed from what the proposals recorded (the nominees, in the unit cube), so
nothing lives in memory: a resumed study, or another process, reaches the same
probabilities. A round whose trial is still running counts like any other: its nominees are
judged by the model, not by the result. Each point's record holds the member chosen (its
``arm``), the probabilities and the nominees, so a report can show which member won where.

Cost: members share the one fitted model, and a call makes two acquisition searches (the
chosen members' points, one challenger nomination), never one per member; a cheap member
chosen (``thompson``) pays for one challenger search, not for all the others.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any, cast

import torch
from torch import Tensor

from abo.acquisitions.base import (
    REGISTRY,
    Proposal,
    ProposalContext,
    register_strategy,
)
from abo.acquisitions.feasibility import LIKELY, Feasibility
from abo.acquisitions.optimize import OptimizerBudget, PosteriorMoments
from abo.acquisitions.thompson import replace_duplicates
from abo.core.exceptions import AboError

MEMBERS = ("believer", "qlognei", "thompson", "playbook", "aegis")
"""The default members: the single strategies that were best somewhere in the benchmarks."""


def member_probabilities(
    members: Sequence[str],
    history: Sequence[Mapping[str, Any]],
    model: Any,
    floor: float,
    feasibility: Feasibility | None = None,
) -> tuple[dict[str, float], dict[str, tuple[float, int]]]:
    """Each member's probability, and its ``(wins, rounds)``, from the recorded rounds
    (judged by feasibility first when ``feasibility`` is given, see the module docstring).

    A round is a record whose ``nominees`` map two or more members to points; rounds naming
    a member that is no longer in ``members``, or a point of the wrong size, are skipped.
    """
    k = len(members)
    tally = {m: [0.0, 0] for m in members}
    inputs = getattr(model, "train_inputs", None)
    dim = inputs[0].shape[-1] if inputs else None
    rounds = _rounds(history, tally, dim)
    if rounds and model is not None:
        keys = _nominee_keys(rounds, model, feasibility)
        at = 0
        for entries in rounds:
            judged = keys[at : at + len(entries)]
            at += len(entries)
            top = max(judged)
            winners = [name for (name, _), v in zip(entries, judged, strict=True) if v == top]
            for name, _ in entries:
                tally[name][1] += 1
                if name in winners:
                    tally[name][0] += 1.0 / len(winners)
    n_rounds = len(rounds)
    if n_rounds == 0 or k == 1:
        weights = [1.0] * k
    else:
        eta_t = math.sqrt(8.0 * math.log(k) * n_rounds)  # eta * T, with eta = sqrt(8 ln K / T)
        scores = [(tally[m][0] + 1.0) / (tally[m][1] + 2.0) for m in members]
        top = max(scores)
        weights = [math.exp(eta_t * (s - top)) for s in scores]
    total = sum(weights)
    probs = {
        m: floor + (1.0 - k * floor) * w / total for m, w in zip(members, weights, strict=True)
    }
    return probs, {m: (tally[m][0], int(tally[m][1])) for m in members}


def _rounds(
    history: Sequence[Mapping[str, Any]], names: Mapping[str, Any], dim: int | None
) -> list[list[tuple[str, list[float]]]]:
    """The recorded rounds: each record's nominees that are among ``names`` with a point of
    ``dim`` coordinates, where two or more are."""
    rounds: list[list[tuple[str, list[float]]]] = []
    for record in history:
        nominees = record.get("nominees")
        if not isinstance(nominees, Mapping) or len(nominees) < 2:
            continue
        entries = [
            (str(name), list(x))
            for name, x in nominees.items()
            if name in names and isinstance(x, list | tuple) and len(x) == dim
        ]
        if len(entries) >= 2:
            rounds.append(entries)
    return rounds


def _nominee_keys(
    rounds: Sequence[Sequence[tuple[str, list[float]]]], model: Any, feasibility: Feasibility | None
) -> list[Any]:
    """The key each nominee of ``rounds`` (in order) is judged by: its posterior mean, or with
    ``feasibility`` (likely feasible, mean or log p)."""
    first = next(iter(model.parameters()), None)  # the model's device (the CPU without any)
    device = first.device if first is not None else None
    X = torch.tensor(
        [x for entries in rounds for _, x in entries], dtype=torch.double, device=device
    )
    with torch.no_grad():
        post = model.posterior(X.unsqueeze(-2))  # one-point posteriors: no n x n covariance
        mean = cast(PosteriorMoments, post).mean.reshape(-1).tolist()
        logp = feasibility.log_prob(X).tolist() if feasibility is not None else None
    if logp is None:
        return list(mean)
    return [(lp > LIKELY, mu if lp > LIKELY else lp) for mu, lp in zip(mean, logp, strict=True)]


def _unit(x: Tensor) -> list[float]:
    return [round(float(v), 6) for v in x]


@register_strategy(
    "portfolio",
    "a bandit over believer, qlognei, thompson, playbook and aegis (GP-Hedge style)",
    constraints="single",
)
class PortfolioStrategy:
    """Chooses a member strategy per point from rewards the shared model gives their nominees.

    Args:
        members: the member strategies (registered names; at least two).
        floor: the least probability of every member (below ``1 / len(members)``).
        raw_samples, num_restarts: the acquisition optimiser budget passed to every member.
        member_options: further options per member, e.g. ``{"playbook": {"kappa": 1.0}}``.
    """

    name = "portfolio"
    needs_model = True

    def __init__(
        self,
        members: Sequence[str] = MEMBERS,
        floor: float = 0.05,
        raw_samples: int = 512,
        num_restarts: int = 6,
        member_options: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        if isinstance(members, str) or not isinstance(members, Sequence):
            raise AboError(f"members: expected a list of strategy names, got {members!r}")
        names = [str(m) for m in members]
        if len(names) < 2 or len(set(names)) != len(names):
            raise AboError(f"members: expected two or more distinct strategies, got {names!r}")
        for m in names:
            if m == self.name or m not in REGISTRY:
                known = ", ".join(sorted(n for n in REGISTRY if n != self.name))
                raise AboError(f"members: {m!r} is not a strategy a portfolio can hold ({known})")
        if isinstance(floor, bool) or not isinstance(floor, int | float):
            raise AboError(f"floor: expected a number, got {floor!r}")
        if not 0.0 <= floor < 1.0 / len(names):
            raise AboError(f"floor: expected 0 <= floor < 1/{len(names)}, got {floor!r}")
        options = dict(member_options or {})
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise AboError(f"member_options: {unknown} are not members ({names})")
        self.members = names
        self.floor = float(floor)
        self.budget = OptimizerBudget(raw_samples=raw_samples, num_restarts=num_restarts)
        self._strategies = {}
        for m in names:
            kwargs = {
                "raw_samples": raw_samples,
                "num_restarts": num_restarts,
                **options.get(m, {}),
            }
            try:
                self._strategies[m] = REGISTRY[m].factory(**kwargs)
            except TypeError as exc:
                raise AboError(f"member_options: {m} does not accept them: {exc}") from exc

    def probabilities(self, ctx: ProposalContext) -> dict[str, float]:
        """The members' probabilities for the next point, from the rounds in ``ctx.history``."""
        return member_probabilities(
            self.members, ctx.history, ctx.model, self.floor, ctx.feasibility
        )[0]

    def propose(self, ctx: ProposalContext, n: int) -> Proposal:
        probs = self.probabilities(ctx)
        weights = torch.tensor([probs[m] for m in self.members], dtype=torch.double)
        draws = torch.multinomial(weights, n, replacement=True, generator=ctx.generator).tolist()
        chosen = [self.members[i] for i in draws]
        points: list[Tensor] = []
        infos: list[dict[str, Any]] = []
        for member in dict.fromkeys(chosen):  # each chosen member once, in order of choice
            count = chosen.count(member)
            busy = torch.cat([ctx.X_pending, *points]) if points else ctx.X_pending
            inner = self._strategies[member].propose(
                dataclasses.replace(ctx, X_pending=busy), count
            )
            X, replaced = replace_duplicates(
                dataclasses.replace(ctx, X_pending=busy), inner.X, self.budget
            )
            points.append(X)
            for i in range(count):
                extra = inner.info[i] if i < len(inner.info) else {}
                info: dict[str, Any] = {
                    "strategy": self.name,
                    "arm": member,
                    "p": {m: round(p, 4) for m, p in probs.items()},
                    "nominees": {member: _unit(X[i])},
                }
                if extra.get("arm") is not None:
                    info["member_arm"] = extra["arm"]
                if replaced[i] is not None:
                    info["replaced"] = "duplicate"
                infos.append(info)
        others = [m for m in self.members if m != infos[0]["arm"]]
        pick = int(torch.randint(len(others), (1,), generator=ctx.generator).item())
        challenger = others[pick]
        nominee = ctx.round(self._strategies[challenger].propose(ctx, 1).X)[0]
        infos[0]["nominees"][challenger] = _unit(nominee)
        return Proposal(torch.cat(points), infos)
