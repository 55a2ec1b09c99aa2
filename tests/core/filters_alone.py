"""Silencing warnings on one thread never changes what another thread sees, and abo leaves
``warnings.filters`` exactly as it found them (scikit-learn reads every entry as a standard
filter: abo's own objects there broke its cross-validation).

Run by ``test_silenced.py`` in a Python process of its own (the file name keeps the suite
from collecting it in its shared worker processes); alone: ``pytest tests/core/filters_alone.py``.
"""

from __future__ import annotations

import threading
import warnings

import pytest
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score

import abo
from abo.acquisitions.quiet import quiet
from abo.core.quiet import silenced
from abo.executors import ThreadExecutor

IRIS = load_iris()


def _standard(entry: object) -> bool:
    """Whether a filter entry is what ``warnings.filterwarnings`` itself would store."""
    assert isinstance(entry, tuple) and len(entry) == 5
    action, message, category, module, lineno = entry
    return (
        action in ("error", "ignore", "always", "default", "module", "once")
        and (message is None or isinstance(message, str) or isinstance(message.pattern, str))
        and isinstance(category, type)
        and issubclass(category, Warning)
        and (module is None or isinstance(module, str) or isinstance(module.pattern, str))
        and isinstance(lineno, int)
    )


@pytest.fixture(scope="module", autouse=True)
def _imported() -> None:
    """A model proposal once first: the libraries it imports add their own filters then."""
    study = abo.create_study(abo.Space({"x": abo.Float(0.0, 1.0)}), seed=0)
    for _ in range(3):
        trial = study.ask()
        study.tell(trial.id, trial.params["x"])
    cross_val_score(LogisticRegression(max_iter=200), IRIS.data, IRIS.target, cv=3)


def _settled() -> None:
    """Wait for abo's background fits (their threads silence their own warnings, so the
    entries are rightly in place while one runs). No 60-second cap: under the whole suite's
    load on a slow 2-core machine a refit in its child process outlasted one, and the check
    after it failed on a fit still running; the test's own timeout bounds the wait."""
    busy = [t for t in threading.enumerate() if t.name in ("abo-refit", "abo-warm-up")]
    while busy:
        for thread in busy:
            thread.join()
        busy = [t for t in threading.enumerate() if t.name in ("abo-refit", "abo-warm-up")]


def test_silenced_hides_this_threads_warnings_only() -> None:
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            with silenced():
                warnings.warn("from a silenced thread", stacklevel=1)

    before = list(warnings.filters)
    with warnings.catch_warnings(record=True) as caught:  # one block, entered by this thread
        warnings.simplefilter("always")
        thread = threading.Thread(target=worker)
        thread.start()
        try:
            for i in range(200):
                warnings.warn(f"user warning {i}", stacklevel=1)
        finally:
            stop.set()
            thread.join()
    messages = [str(w.message) for w in caught]
    assert messages == [f"user warning {i}" for i in range(200)]  # none swallowed, none extra
    assert list(warnings.filters) == before


def test_threads_entering_and_leaving_at_once_leave_the_filters_as_they_were() -> None:
    before = list(warnings.filters)
    start = threading.Barrier(4)

    def worker() -> None:
        start.wait()
        for _ in range(300):
            with silenced(), quiet():
                warnings.warn("hidden", RuntimeWarning, stacklevel=1)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert list(warnings.filters) == before


def test_a_catch_warnings_block_of_another_thread_brings_back_no_entry() -> None:
    """A thread enters ``catch_warnings`` (BoTorch's fits do) while another is silenced, and
    leaves it after the silenced one is out: the list it puts back held abo's entries."""
    before = list(warnings.filters)
    inside, caught, out = threading.Event(), threading.Event(), threading.Event()

    def silenced_thread() -> None:
        with silenced():
            inside.set()
            caught.wait(10)
        out.set()

    def catching_thread() -> None:
        inside.wait(10)
        with warnings.catch_warnings():  # copies the list that holds the entries
            caught.set()
            out.wait(10)
        # leaving it put the older list back

    threads = [threading.Thread(target=silenced_thread), threading.Thread(target=catching_thread)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out.is_set()
    assert list(warnings.filters) == before


def test_catch_warnings_blocks_ending_out_of_order_bring_back_no_entry() -> None:
    """A fit (silenced, with BoTorch's ``catch_warnings`` inside) and a proposal (``quiet``,
    with its own ``catch_warnings``) on two threads: the fit's block ends first and the fit
    leaves, then the proposal's block puts back the copy the fit's block made, entries and all;
    the proposal's scope sweeps them out when it leaves."""
    before = list(warnings.filters)
    steps = [threading.Event() for _ in range(4)]

    def fit() -> None:
        with silenced():
            with warnings.catch_warnings():  # a copy holding the silenced entries
                steps[0].set()
                steps[1].wait(10)
        steps[2].set()

    def proposal() -> None:
        steps[0].wait(10)
        with quiet():
            with warnings.catch_warnings():  # saves the fit's copy, puts it back at the end
                steps[1].set()
                steps[2].wait(10)
            steps[3].set()

    threads = [threading.Thread(target=fit), threading.Thread(target=proposal)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(step.is_set() for step in steps)
    assert list(warnings.filters) == before


def test_the_filters_inside_a_silenced_block_are_standard_and_gone_after_it() -> None:
    before = list(warnings.filters)
    with silenced(), quiet():
        assert all(_standard(f) for f in warnings.filters)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with silenced():  # first again, in front of the block's own "always"
                warnings.warn("hidden", RuntimeWarning, stacklevel=1)
        assert caught == []
    assert list(warnings.filters) == before


def test_scikit_learn_cross_validates_while_a_thread_is_silenced() -> None:
    model = LogisticRegression(max_iter=200)
    with silenced(), quiet():  # abo's filters in place, as while a fit runs on another thread
        scores = cross_val_score(model, IRIS.data, IRIS.target, cv=3, n_jobs=1)
    assert scores.mean() > 0.8


def test_tuning_a_scikit_learn_model_in_process_past_the_design() -> None:
    """An ask/tell loop around cross-validation in the same process, with model proposals
    between (how a user tunes a scikit-learn model; no document shows it)."""
    space = abo.Space({"C": abo.Float(1e-3, 1e2, log=True), "tol": abo.Float(1e-5, 1e-1, log=True)})
    study = abo.create_study(space, direction="maximize", seed=0)
    before = list(warnings.filters)
    for _ in range(7):
        trial = study.ask()
        assert list(warnings.filters) == before
        model = LogisticRegression(C=trial.params["C"], tol=trial.params["tol"], max_iter=300)
        score = cross_val_score(model, IRIS.data, IRIS.target, cv=3, n_jobs=1).mean()
        study.tell(trial.id, float(score))
        assert list(warnings.filters) == before
    strategies = [t.proposal.strategy for t in study.trials if t.proposal is not None]
    assert strategies.count("sobol") == 4 and len(strategies) == 7  # 3 model proposals
    assert study.best is not None and study.best.value is not None and study.best.value > 0.8


@pytest.mark.slow
def test_asks_tells_and_optimize_leave_the_filters_exactly_as_they_were() -> None:
    warnings.filterwarnings("ignore", message="a user's own filter", category=UserWarning)
    before = list(warnings.filters)
    try:
        space = abo.Space({"x": abo.Float(0.0, 1.0), "y": abo.Float(0.0, 1.0)})
        study = abo.create_study(space, seed=1)
        for t in study.ask_batch(5):
            study.tell(t.id, (t.params["x"] - 0.3) ** 2 + t.params["y"])
        assert list(warnings.filters) == before
        with ThreadExecutor(2) as ex:
            study.optimize(lambda p: (p["x"] - 0.3) ** 2 + p["y"], n_trials=8, executor=ex)
        _settled()
        assert list(warnings.filters) == before
    finally:
        warnings.filters.remove(before[0])
