"""The model's data for a proposal: trials encoded, observations, constraint and failure data."""

from __future__ import annotations

import bisect
import statistics
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from abo.acquisitions.base import FidelityLevels
from abo.analysis.summary import study_reference
from abo.core.fidelity import RUNGS, report_rows
from abo.core.trial import Report, Trial, TrialState
from abo.model.failures import success_targets
from abo.model.warping import warp, warp_slack
from abo.spec.study_spec import StudySpec

OBSERVED = (TrialState.DONE, TrialState.STOPPED)  # trials the GP models at their value


class ProposalData:
    """The data the GPs and the strategy see, from a snapshot of the trials (``Proposer``'s
    base: it sets ``spec``, ``multi`` and the encoding cache:
    ``_unit_rows`` and ``_unit_table``)."""

    spec: StudySpec
    multi: bool  # several objectives
    _unit_rows: dict[int, int]  # trial id -> its row of ``_unit_table``
    _unit_table: Tensor  # every encoded trial's unit-cube row, in order of first encoding
    _unit_lock: threading.Lock

    def unit(self, trials: Sequence[Trial]) -> Tensor:
        """``n x D`` unit-cube encodings of the trials' parameters.

        Each trial is encoded once (its parameters never change) into a row of one growing
        table, and a call gathers its rows by position: at 10,000 trials building the tensor
        from Python lists on every call cost more than the GP's prediction.
        """
        dim = self.spec.space.dim
        with self._unit_lock:  # proposal threads of one study may share this cache
            rows = self._unit_rows
            new = [t for t in trials if t.id not in rows]
            if new:
                encoded = torch.tensor(
                    [self.spec.space.to_unit(t.params).tolist() for t in new], dtype=torch.double
                ).reshape(len(new), dim)
                start = len(self._unit_table)
                for i, t in enumerate(new):
                    rows.setdefault(t.id, start + i)  # a trial listed twice keeps its first row
                self._unit_table = torch.cat([self._unit_table, encoded])
            if not trials:
                return torch.zeros(0, dim, dtype=torch.double)
            return self._unit_table[torch.tensor([rows[t.id] for t in trials])]

    def observations(
        self, trials: Sequence[Trial], reports: Mapping[int, Sequence[Report]] | None = None
    ) -> tuple[list[Trial], Tensor, Tensor]:
        """Model data: done trials as utilities (larger is better), and failed ones at the
        worst unless the failure classifier models them (``classifies``).

        A stopped trial counts at its last reported value: the rule stopped it for being
        behind at that step, and its last value (worse, for a curve that improves, than where
        it would have ended) steers proposals away from its region instead of proposing it
        again. With outcome constraints it is never feasible (it told none), so never the
        incumbent (``constraint_data``).

        A failed trial says its parameters are bad (the objective raised, diverged or timed
        out); modelling it at the worst observed utility steers proposals away from the region
        instead of proposing it again and again. The classifier does that with a model of its
        own, so the objective's GP is not bent by made-up values.

        In a study with a numeric fidelity (``abo.core.fidelity``), ``reports`` are observations
        too:
        each trial's reports at the rungs of the fidelity's range, at the step they reached
        (``abo.core.fidelity.report_rows``), as rows of their own (negative ids, ``stopped`` state:
        never feasible, never labelled for the failure classifier); a stopped trial is the row
        of its last report, at its step.
        """
        objs = self.spec.objectives
        names = [o.name for o in objs]
        if len(names) == 1:  # the common case, without a generator per trial
            name = names[0]
            done = [t for t in trials if t.state in OBSERVED and name in t.values]
        else:
            done = [t for t in trials if t.state in OBSERVED and all(n in t.values for n in names)]
        fidelity = self.spec.fidelity_of
        if fidelity is not None and fidelity.numeric and reports:
            done = [t for t in done if not (t.state is TrialState.STOPPED and reports.get(t.id))]
            done += self._report_rows(trials, reports)
        elif reports:
            done = self._projected(done, reports)
        failed = [t for t in trials if t.state is TrialState.FAILED]
        if self.classifies(trials):
            failed = []
        # utilities as one flat list of floats: a list per trial would be 10,000 objects for
        # Python's garbage collector to chase on every ask of a long study
        m = len(objs)
        if m == 1:
            sign, name = objs[0].sign, objs[0].name
            flat = [sign * t.values[name] for t in done]
        else:
            flat = [o.sign * t.values[o.name] for t in done for o in objs]
        Y_t = torch.tensor(flat, dtype=torch.double).reshape(len(done), m)
        observed = [*done, *failed] if done else list(done)
        if done and failed:  # failed trials at the worst utility seen, objective by objective
            Y_t = torch.cat([Y_t, Y_t.min(dim=0).values.expand(len(failed), m)])
        return observed, self.unit(observed), Y_t

    def _projected(
        self, observed: list[Trial], reports: Mapping[int, Sequence[Report]]
    ) -> list[Trial]:
        """Stopped trials at their projected final value: the last reported value plus the
        median of what the done trials gained from that step to their end (``observations``)."""
        name = self.spec.objective.name
        finished = [
            (reports[t.id], t.values[name])
            for t in observed
            if t.state is TrialState.DONE and reports.get(t.id) and name in t.values
        ]
        if not finished:
            return observed
        out = []
        for t in observed:
            curve = reports.get(t.id)
            if t.state is not TrialState.STOPPED or not curve:
                out.append(t)
                continue
            step = curve[-1].step
            gains = []
            for theirs, final in finished:
                k = bisect.bisect_left([r.step for r in theirs], step)
                if k < len(theirs):
                    gains.append(final - theirs[k].value)  # from reaching ``step`` to the end
            if not gains:
                out.append(t)
                continue
            value = curve[-1].value + statistics.median(gains)
            out.append(replace(t, value=value, values={**t.values, name: value}))
        return out

    def _report_rows(
        self, trials: Sequence[Trial], reports: Mapping[int, Sequence[Report]]
    ) -> list[Trial]:
        """Reports as observations at their steps (see ``observations``)."""
        fidelity = self.spec.fidelity_of
        name = self.spec.objective.name
        rows = []
        for t in trials:
            if t.state is TrialState.LOST or t.id not in reports:
                continue
            for slot, r in report_rows(fidelity, t, reports[t.id]):
                rows.append(
                    replace(
                        t,
                        id=-(t.id * (RUNGS + 2) + slot + 1),
                        params={**t.params, fidelity.parameter: r.step},
                        state=TrialState.STOPPED,
                        value=r.value,
                        values={name: r.value},
                    )
                )
        return rows

    def classifies(self, trials: Sequence[Trial]) -> bool:
        """Whether failed trials are modelled by the classifier: the study's failure model is
        (or resolves to) ``"classifier"`` and some trial failed and some succeeded."""
        if self.spec.resolved_failure_model != "classifier":
            return False
        states = [t.state for t in trials]  # ``in`` on a list tests identity first: no hashing
        return TrialState.FAILED in states and TrialState.DONE in states

    def failure_data(self, trials: Sequence[Trial]) -> tuple[tuple[int, ...], Tensor, Tensor]:
        """The classifier's data: the ids of the done and failed trials (lost ones say nothing
        about their parameters), their encodings and targets (``abo.model.failures``)."""
        labelled = [t for t in trials if t.state in (TrialState.DONE, TrialState.FAILED)]
        success = torch.tensor([t.state is TrialState.DONE for t in labelled])
        return tuple(t.id for t in labelled), self.unit(labelled), success_targets(success)

    def constraint_data(
        self, trials: Sequence[Trial], observed: Sequence[Trial]
    ) -> tuple[Tensor, Tensor, Tensor]:
        """The constraints' model data: the done trials that told every constraint, their
        ``n x c`` slacks (``>= 0`` where a constraint holds) as the GPs see them (each column
        through ``abo.model.warping.warp_slack``, which keeps the bound at 0), and per row of
        ``observed`` (the objective's data) whether that trial was feasible (failed ones are
        not)."""
        cons = self.spec.constraints
        told = [
            t
            for t in trials
            if t.state is TrialState.DONE and all(c.name in t.values for c in cons)
        ]
        S = torch.tensor(
            [[c.slack(t.values[c.name]) for c in cons] for t in told], dtype=torch.double
        ).reshape(len(told), len(cons))
        if S.shape[0] and cons:
            S = torch.stack([warp_slack(S[:, i])[0] for i in range(len(cons))], dim=-1)
        feasible = torch.tensor(
            [
                t.state is TrialState.DONE
                and all(c.name in t.values and c.holds(t.values[c.name]) for c in cons)
                for t in observed
            ],
            dtype=torch.bool,
        )
        return self.unit(told), S, feasible

    def model_data(
        self, trials: Sequence[Trial], reports: Mapping[int, Sequence[Report]] | None = None
    ) -> tuple[list[Trial], Tensor, Tensor, float | None]:
        """``observations`` with the study's output transform applied to the utilities (the
        exponent, or ``None`` when nothing was transformed)."""
        observed, X, Y = self.observations(trials, reports)
        kind = self.spec.resolved_output_transform
        if not self.multi:
            W, lam = warp(Y, kind)
            return observed, X, W, lam
        warped = [warp(Y[:, i : i + 1], kind)[0] for i in range(Y.shape[1])]  # each objective
        return observed, X, torch.cat(warped, dim=-1) if warped else Y, None

    def ref_point(self, trials: Sequence[Trial]) -> Tensor | None:
        """The hypervolume's reference point in utilities (the study's, or ``abo.core.pareto``'s
        rule over the done trials in completion order), ``None`` for one objective or before
        any result."""
        if not self.multi:
            return None
        return study_reference(self.spec, trials)

    def fidelity_levels(
        self, trials: Sequence[Trial], reports: Mapping[int, Sequence[Report]] | None = None
    ) -> FidelityLevels | None:
        """The fidelities a proposal weighs, their encodings and costs (``None`` without a
        fidelity): the cost model is the study's, or learned from the trials' durations. With
        a stopping rule only the target: the rule decides what stops, the model what starts
        (as MOBSTER does), and the runs' reports are the lower fidelities."""
        fidelity = self.spec.fidelity_of
        if fidelity is None:
            return None
        # with a stopping rule the rule is the schedule: every trial starts at the target and
        # the rule decides what stops (its reports teach the model the lower fidelities)
        values = [fidelity.target] if self.spec.stopping is not None else fidelity.levels()
        model = fidelity.cost_model(trials, reports or {})
        return FidelityLevels(
            columns=self.spec.space._slices[fidelity.parameter],
            levels=torch.tensor([fidelity.encode(v) for v in values], dtype=torch.double),
            costs=torch.tensor([fidelity.cost_of(v, model) for v in values], dtype=torch.double),
            target=values.index(fidelity.target),
        )

    def _history(self, trials: Sequence[Trial]) -> tuple[dict[str, Any], ...]:
        """The records this study's strategy made on earlier trials (``arm`` and details)."""
        name = self.spec.strategy
        return tuple(
            {"arm": t.proposal.arm, **t.proposal.details}
            for t in trials
            if t.proposal is not None and t.proposal.strategy == name
        )
