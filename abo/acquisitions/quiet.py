"""Numerical notes from abo's own acquisition searches, kept from users who cannot act on them.

BoTorch and GPyTorch report every numerical recovery as a warning. During a proposal abo
copes with each of these, so printing them only alarms the user:

* ``NumericalWarning: A not p.d., added jitter``: a Cholesky factorisation succeeded once a
  little jitter was added to the diagonal (a posterior over nearly coincident points);
* ``BotorchWarning: Low-rank cholesky updates failed``: BoTorch sampled the joint posterior
  directly instead of updating its cached factor (the same distribution, a little slower);
* ``RuntimeWarning: Optimization failed in `gen_candidates_scipy```: BoTorch restarted an
  acquisition search from new points after a line search failed;
* ``BadInitialCandidatesWarning: Unable to find non-zero acquisition function values``: no
  raw sample of an acquisition that can be exactly zero (a posterior sample's hypervolume
  improvement) was positive, so the searches started from random points; the strategy
  checks the value it reached and falls back where it is zero;
* ``BotorchWarning: When all training points are infeasible, ...``: no result satisfied every
  outcome constraint yet; BoTorch then measures improvement from a bound below every
  objective value, so each candidate's worth is weighted by its probability of feasibility
  (the ``q(Log)ProbabilityOfFeasibility`` the note recommends, with the objective to break ties);
* ``OptimizationWarning: ... ABNORMAL``: an L-BFGS-B line search could not improve further; the
  search still returns the best point it reached (``search_warnings`` records these).

``quiet_proposal`` wraps a strategy's ``propose``: inside it (on that thread only) the warnings
above are ignored; every other warning, above all one about the user's own code, passes as
usual. What really degraded a proposal (``degraded``: a fallback that searched less well) is
summarised as one ``AboWarning`` per proposal, saying what happened and what abo did instead.

Python's warning filters are process-wide, and ``warnings.catch_warnings`` is not thread-safe:
one thread leaving it restores the filters another thread is still relying on. So the
filters here are standard entries whose private category matches only while the *current
thread* is inside a proposal (``abo.core.quiet.ThreadScope``), present only while a proposal runs;
they never change what another thread, or code outside a proposal, sees.
"""

from __future__ import annotations

import functools
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

from botorch.exceptions.warnings import (
    BadInitialCandidatesWarning,
    BotorchWarning,
    OptimizationWarning,
)
from linear_operator.utils.warnings import NumericalWarning

from abo.core.exceptions import AboWarning
from abo.core.quiet import ThreadScope

F = TypeVar("F", bound=Callable[..., Any])

HANDLED: tuple[tuple[type[Warning], str], ...] = (
    (NumericalWarning, r"A not p\.d\., added jitter"),
    (BotorchWarning, r"Low-rank cholesky updates failed"),
    (RuntimeWarning, r"Optimization failed (in `gen_candidates_scipy`|on the second try)"),
    (BadInitialCandidatesWarning, r"Unable to find non-zero acquisition function values"),
    (BotorchWarning, r"When all training points are infeasible"),
)
"""Warnings ignored inside a proposal: ``(category, message regex)``."""

_SCOPE = ThreadScope("_InProposal", HANDLED, sys.modules[__name__])
_local = threading.local()


def quiet() -> AbstractContextManager[None]:
    """Ignore the ``HANDLED`` warnings raised on this thread inside the block (nests)."""
    return _SCOPE.scope()


def degraded(what: str) -> None:
    """Note that the running proposal was degraded: ``what`` happened and what abo did.

    The enclosing ``quiet_proposal`` turns the notes into one ``AboWarning``; outside a
    proposal the note is warned at once.
    """
    notes = getattr(_local, "notes", None)
    if notes is None or not _SCOPE.active():
        warnings.warn(what, AboWarning, stacklevel=2)
    elif what not in notes:
        notes.append(what)


def quiet_proposal(propose: F) -> F:
    """Decorate a strategy's ``propose(self, ctx, n)``: quiet inside, one summary warning after.

    Only the outermost proposal on a thread warns (a strategy that calls another's ``propose``
    still yields one ``AboWarning`` at most).
    """

    @functools.wraps(propose)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        outer = getattr(_local, "notes", None) is None
        if outer:
            _local.notes = []
        try:
            with quiet():
                proposal = propose(self, *args, **kwargs)
            notes = list(_local.notes) if outer else []
        finally:
            if outer:
                _local.notes = None
        if notes:
            name = getattr(self, "name", type(self).__name__)
            warnings.warn(f"{name}: {'; '.join(notes)}", AboWarning, stacklevel=2)
        return proposal

    return wrapper  # type: ignore[return-value]


@contextmanager
def search_warnings() -> Iterator[list[str]]:
    """Record BoTorch's ``OptimizationWarning``s from a ``gen_candidates_scipy`` call.

    BoTorch forces them to be shown (its own ``simplefilter("always")``), so no filter can hide
    them; ``optimize_acqf`` records them the same way. The list yielded holds their messages
    once the block ends; every other warning raised in the block is re-issued unchanged.
    """
    messages: list[str] = []
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", OptimizationWarning)
            yield messages
    finally:
        for w in caught:
            if issubclass(w.category, OptimizationWarning):
                messages.append(str(w.message))
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
