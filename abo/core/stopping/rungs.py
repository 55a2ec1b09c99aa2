"""Rung-based rules: asynchronous successive halving, and Hyperband's brackets of it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from abo.core.stopping.base import (
    GO_ON,
    Decision,
    Reports,
    number,
    optional_step,
    step_text,
    value_at,
)

GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0  # spreads consecutive trial ids evenly over [0, 1)


def _rungs(first: float, factor: int, up_to: float, max_step: float | None) -> list[float]:
    out: list[float] = []
    rung = float(first)
    while rung <= up_to and (max_step is None or rung < max_step):
        out.append(rung)
        rung *= factor
    return out


def _halve(
    trial_id: int, reports: Reports, sign: float, rungs: list[float], label: str, factor: int
) -> Decision:
    """Successive halving at ``rungs``, among the trials of ``reports``: the trial stops at a
    rung its latest report newly reached unless it is among the best ``1/factor`` there."""
    mine = reports[trial_id]
    latest = mine[-1]
    before = mine[-2].step if len(mine) > 1 else -math.inf
    mine_u = sign * latest.value
    for rung in rungs:
        if rung <= before:
            continue  # judged at this rung by an earlier report
        there = [mine_u]
        for other, theirs in reports.items():
            value = value_at(theirs, rung) if other != trial_id else None
            if value is not None:
                there.append(sign * value)  # its value on reaching the rung
        keep = max(1, len(there) // factor)
        better = sum(1 for u in there[1:] if u > mine_u)
        if better >= keep:
            return Decision(
                True,
                f"stopped by {label} at step {step_text(latest.step)}: rung {step_text(rung)}, "
                f"ranked {better + 1} of {len(there)} there, the best {keep} go on",
            )
    return GO_ON


@dataclass(frozen=True)
class ASHA:
    """Asynchronous successive halving (Li et al., 2020): rungs at ``min_step *
    reduction_factor**k`` (below ``max_step`` when given); on first reaching a rung a trial is
    ranked against the values every trial had there, and of ``n`` only the best
    ``max(1, n // reduction_factor)`` go on. No trial waits for a rung to fill."""

    min_step: float = 1.0
    reduction_factor: int = 3
    max_step: float | None = None
    rule: str = "asha"

    @classmethod
    def parse(cls, settings: dict[str, Any]) -> ASHA:
        """The rule from its settings, each checked (``AboError`` naming the one that is wrong)."""
        low = number(settings.get("min_step", 1.0), "min_step", 0.0, above=True)
        return cls(
            min_step=low,
            reduction_factor=number(
                settings.get("reduction_factor", 3), "reduction_factor", 2, integer=True
            ),
            max_step=optional_step(settings, "max_step", above=low),
        )

    def rungs(self, up_to: float) -> list[float]:
        """The rungs at or below ``up_to`` (and below ``max_step``)."""
        return _rungs(self.min_step, self.reduction_factor, up_to, self.max_step)

    def decide(self, trial_id: int, reports: Reports, sign: float) -> Decision:
        rungs = self.rungs(reports[trial_id][-1].step)
        return _halve(trial_id, reports, sign, rungs, "asha", self.reduction_factor)


@dataclass(frozen=True)
class Hyperband:
    """Asynchronous Hyperband (Li et al., 2018, with ASHA in each bracket): each trial is dealt
    a bracket from its id, and successive halving runs within each bracket alone. Bracket
    ``b`` has its first rung at ``min_step * reduction_factor**b``; the last bracket never
    stops a run, so some runs always go to the end whatever their start looks like, which is
    what protects the slow starters that rung-based stopping kills. Brackets are dealt in
    Hyperband's proportions (bracket ``b`` of ``B``: ``B / (B - b) * reduction_factor**(B - 1
    - b)``), most trials to the most aggressive one. ``brackets`` defaults to one per rung below
    ``max_step`` plus the one that never stops (3 without a ``max_step``)."""

    min_step: float = 1.0
    reduction_factor: int = 3
    max_step: float | None = None
    brackets: int | None = None
    rule: str = "hyperband"

    @classmethod
    def parse(cls, settings: dict[str, Any]) -> Hyperband:
        """The rule from its settings, ``brackets`` filled in when absent."""
        asha = ASHA.parse({k: v for k, v in settings.items() if k != "brackets"})
        given = settings.get("brackets")
        rule = cls(asha.min_step, asha.reduction_factor, asha.max_step)
        count = rule.count if given is None else number(given, "brackets", 1, integer=True)
        return cls(asha.min_step, asha.reduction_factor, asha.max_step, count)

    @property
    def count(self) -> int:
        """How many brackets there are."""
        if self.brackets is not None:
            return self.brackets
        if self.max_step is None:
            return 3
        return len(_rungs(self.min_step, self.reduction_factor, math.inf, self.max_step)) + 1

    def weights(self) -> list[float]:
        """Each bracket's share of the trials, most aggressive first."""
        n, eta = self.count, self.reduction_factor
        raw = [n / (n - b) * float(eta) ** (n - 1 - b) for b in range(n)]
        return [w / sum(raw) for w in raw]

    def bracket(self, trial_id: int) -> int:
        """The bracket a trial is dealt: a golden-ratio walk over the trial ids, so that any
        run of consecutive trials is split in the brackets' proportions."""
        u, total = ((trial_id + 1) * GOLDEN) % 1.0, 0.0
        weights = self.weights()
        for b, w in enumerate(weights):
            total += w
            if u < total:
                return b
        return len(weights) - 1

    def decide(self, trial_id: int, reports: Reports, sign: float) -> Decision:
        b = self.bracket(trial_id)
        if b == self.count - 1:
            return GO_ON  # the bracket that runs everything to the end
        peers = {t: r for t, r in reports.items() if self.bracket(t) == b}
        first = self.min_step * self.reduction_factor**b
        rungs = _rungs(first, self.reduction_factor, reports[trial_id][-1].step, self.max_step)
        label = f"hyperband (bracket {b + 1} of {self.count})"
        return _halve(trial_id, peers, sign, rungs, label, self.reduction_factor)


@dataclass(frozen=True)
class PASHA:
    """Progressive ASHA (Bohdal et al., 2023), as a stopping rule: ASHA whose largest step
    grows only when needed. Runs stop on reaching the current top rung, which starts at the
    second rung and moves one rung up (towards ``max_step``) each time the trials that reached
    it rank differently there than one rung below (values closer than ``epsilon`` count as
    tied). Runs stopped at a top rung that later grew are not resumed: PASHA suits studies
    that retrain the best configuration afterwards, which it finds by its last report."""

    min_step: float = 1.0
    reduction_factor: int = 3
    max_step: float | None = None
    epsilon: float = 0.0
    rule: str = "pasha"

    @classmethod
    def parse(cls, settings: dict[str, Any]) -> PASHA:
        """The rule from its settings, each checked (``AboError`` naming the one that is wrong)."""
        asha = ASHA.parse({k: v for k, v in settings.items() if k != "epsilon"})
        tied = number(settings.get("epsilon", 0.0), "epsilon", 0.0)
        return cls(asha.min_step, asha.reduction_factor, asha.max_step, tied)

    def levels(self, up_to: float) -> list[float]:
        """The rungs (and ``max_step``, the last level, when set) at or below ``up_to``."""
        rungs = _rungs(self.min_step, self.reduction_factor, up_to, self.max_step)
        if self.max_step is not None and self.max_step <= up_to:
            rungs.append(self.max_step)
        return rungs

    def _agree(self, reports: Reports, low: float, high: float, sign: float) -> bool:
        pairs = []
        for theirs in reports.values():
            a, b = value_at(theirs, low), value_at(theirs, high)
            if a is not None and b is not None:
                pairs.append((sign * a, sign * b))
        for i, (a1, b1) in enumerate(pairs):
            for a2, b2 in pairs[i + 1 :]:
                if abs(a1 - a2) > self.epsilon and abs(b1 - b2) > self.epsilon:
                    if (a1 > a2) != (b1 > b2):
                        return False
        return True

    def top(self, reports: Reports, sign: float) -> float:
        """The current top rung: the second, moved up while the rankings there disagree."""
        furthest = max(theirs[-1].step for theirs in reports.values() if theirs)
        reach = max(furthest, self.min_step) * self.reduction_factor**2  # a level past any run
        levels = self.levels(math.inf if self.max_step is not None else reach)
        k = 1
        while k + 1 < len(levels) and not self._agree(reports, levels[k - 1], levels[k], sign):
            k += 1
        return levels[min(k, len(levels) - 1)]

    def decide(self, trial_id: int, reports: Reports, sign: float) -> Decision:
        mine = reports[trial_id]
        step, before = mine[-1].step, mine[-2].step if len(mine) > 1 else -math.inf
        top = self.top(reports, sign)
        below = [r for r in self.rungs_below(top) if r <= step]
        decision = _halve(trial_id, reports, sign, below, "pasha", self.reduction_factor)
        if decision.stop or step < top or before >= top or top == self.max_step:
            return decision
        return Decision(
            True,
            f"stopped by pasha at step {step_text(step)}: the current top rung "
            f"{step_text(top)} (trials rank there as one rung below)",
        )

    def rungs_below(self, top: float) -> list[float]:
        """The rungs at which ASHA judges, below the current top rung."""
        return [r for r in _rungs(self.min_step, self.reduction_factor, top, None) if r < top]
