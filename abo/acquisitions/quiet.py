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
* ``OptimizationWarning: ... ABNORMAL``: an L-BFGS-B line search could not improve further; the
  search still returns the best point it reached (``search_warnings`` records these).

``quiet_proposal`` wraps a strategy's ``propose``: inside it (on that thread only) the warnings
above are ignored; every other warning, above all one about the user's own code, passes as
usual. What really degraded a proposal (``degraded``: a fallback that searched less well) is
summarised as one ``AboWarning`` per proposal, saying what happened and what abo did instead.

Python's warning filters are process-wide, and ``warnings.catch_warnings`` is not thread-safe:
one thread leaving it restores the filters another thread is still relying on. So the
filters here are installed once and match only while the *current thread* is inside a proposal
(a thread-local depth); they never change what another thread, or code outside a proposal,
sees.
"""

from __future__ import annotations

import functools
import re
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast

from botorch.exceptions.warnings import (
    BadInitialCandidatesWarning,
    BotorchWarning,
    OptimizationWarning,
)
from linear_operator.utils.warnings import NumericalWarning

from abo.exceptions import AboWarning

F = TypeVar("F", bound=Callable[..., Any])

_local = threading.local()
_install_lock = threading.Lock()


def _depth() -> int:
    return getattr(_local, "depth", 0)


class _WithinProposal:
    """A filter's message pattern that matches only on a thread inside ``quiet_proposal``."""

    def __init__(self, pattern: str) -> None:
        self._re = re.compile(pattern)

    def match(self, text: str) -> re.Match[str] | None:
        return self._re.match(text) if _depth() > 0 else None

    def __repr__(self) -> str:
        return f"<abo: inside a proposal, {self._re.pattern!r}>"


HANDLED: tuple[tuple[type[Warning], str], ...] = (
    (NumericalWarning, r"A not p\.d\., added jitter"),
    (BotorchWarning, r"Low-rank cholesky updates failed"),
    (RuntimeWarning, r"Optimization failed (in `gen_candidates_scipy`|on the second try)"),
    (BadInitialCandidatesWarning, r"Unable to find non-zero acquisition function values"),
)
"""Warnings ignored inside a proposal: ``(category, message regex)``."""

_FILTERS = [("ignore", _WithinProposal(pattern), cat, None, 0) for cat, pattern in HANDLED]


def _install() -> None:
    """Put the proposal-only filters first in the process's filter list (once it is so, free).

    They must come first: a filter added later (``simplefilter("always")``, pytest's ``-W``)
    is placed in front of older ones and would otherwise win inside a proposal too.
    """
    filters = cast(list[Any], warnings.filters)  # a list at runtime; typeshed says Sequence
    if filters[: len(_FILTERS)] == _FILTERS:
        return
    with _install_lock:
        for entry in _FILTERS:
            while entry in filters:
                filters.remove(entry)
        filters[:0] = _FILTERS
        mutated = getattr(warnings, "_filters_mutated", None)
        if mutated is not None:  # invalidate the "already shown" registries, as filterwarnings
            mutated()


@contextmanager
def quiet() -> Iterator[None]:
    """Ignore the ``HANDLED`` warnings raised on this thread inside the block (nests)."""
    _install()
    _local.depth = _depth() + 1
    try:
        yield
    finally:
        _local.depth -= 1


def degraded(what: str) -> None:
    """Note that the running proposal was degraded: ``what`` happened and what abo did.

    The enclosing ``quiet_proposal`` turns the notes into one ``AboWarning``; outside a
    proposal the note is warned at once.
    """
    notes = getattr(_local, "notes", None)
    if notes is None or _depth() == 0:
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
