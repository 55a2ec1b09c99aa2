"""A study's trials as a pandas ``DataFrame``: one row per trial, one column per field.

pandas is an optional extra (``pip install "abo[pandas]"``); without it ``trials_dataframe``
raises ``ImportError`` saying so. Columns, in order:

* ``id``, ``state``;
* the outcomes: ``value`` in a study of one objective, else one ``values_<name>`` column per
  outcome (constraints too);
* ``params_<name>`` per parameter (in the space's order);
* ``created``, ``started``, ``finished`` (pandas ``Timestamp``, UTC; ``started`` is when a
  worker began it, when the loop ran it), ``duration`` (seconds, creation to end) and
  ``eval_seconds`` (the evaluation alone, when the loop ran it);
* ``worker`` (``host:pid`` of the worker that evaluated it), ``attempt`` and ``retry_of`` (the
  retry lineage: ``retry_of`` is the lost trial this one retries), ``reason`` (why it failed,
  was lost or stopped);
* ``strategy`` and ``arm`` (which strategy proposed it: ``sobol``, ``enqueued``, ...);
* ``user_<key>`` per metadata key the objective returned.

Example:
    >>> import abo
    >>> study = abo.create_study({"x": abo.Float(0, 1)}, strategy="random", seed=0)
    >>> t = study.ask(); _ = study.tell(t.id, 0.5, metadata={"note": "first"})
    >>> frame = study.trials_dataframe()  # doctest: +SKIP
    >>> list(frame.columns)[:4]  # doctest: +SKIP
    ['id', 'state', 'value', 'params_x']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from abo.core.trial import Trial
from abo.spec.study_spec import StudySpec


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:
        raise ImportError(
            "trials_dataframe: needs pandas, an optional extra of abo; install it with "
            '`pip install "abo[pandas]"` (or `pip install pandas`)'
        ) from None
    return pandas


def rows(trials: Sequence[Trial], spec: StudySpec) -> list[dict[str, Any]]:
    """The rows ``trials_dataframe`` puts in its frame, as plain dicts (times in seconds
    since the epoch)."""
    single = len(spec.outcomes) == 1
    users = sorted({k for t in trials for k in t.user})
    out = []
    for t in trials:
        row: dict[str, Any] = {"id": t.id, "state": t.state.value}
        if single:
            row["value"] = t.value
        else:
            for o in spec.outcomes:
                row[f"values_{o.name}"] = t.values.get(o.name)
        for name in spec.space:
            row[f"params_{name}"] = t.params.get(name)
        started = t.info.get("started")
        row["created"] = t.created_at
        row["started"] = started if isinstance(started, int | float) else None
        row["finished"] = t.finished_at
        row["duration"] = t.duration
        seconds = t.info.get("eval_seconds")
        row["eval_seconds"] = seconds if isinstance(seconds, int | float) else None
        row["worker"] = t.info.get("worker")
        row["attempt"] = t.attempt
        row["retry_of"] = t.retry_of
        row["reason"] = t.reason
        row["strategy"] = t.proposal.strategy if t.proposal is not None else None
        row["arm"] = t.proposal.arm if t.proposal is not None else None
        for key in users:
            row[f"user_{key}"] = t.user.get(key)
        out.append(row)
    return out


def trials_dataframe(trials: Sequence[Trial], spec: StudySpec) -> Any:
    """The trials as a ``pandas.DataFrame`` (columns in the module docstring); nullable
    integer columns for ``retry_of``, UTC timestamps for the times."""
    pandas = _pandas()
    frame = pandas.DataFrame(rows(trials, spec))
    if frame.empty:
        return frame
    for column in ("created", "started", "finished"):
        frame[column] = pandas.to_datetime(frame[column], unit="s", utc=True)
    frame["retry_of"] = frame["retry_of"].astype("Int64")
    return frame
