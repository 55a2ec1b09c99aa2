"""abo studies to and from Optuna's storage, so Optuna's tools open abo studies and an Optuna
study's results start an abo one.

``to_optuna(study, storage)`` writes an abo study's finished trials into an Optuna storage (any
URL Optuna takes: ``sqlite:///optuna.db``, PostgreSQL, ...), as an Optuna study of the same
name; ``optuna-dashboard sqlite:///optuna.db`` and ``optuna.visualization`` then show it:

* the space: ``Float`` -> ``FloatDistribution`` (log, step), ``Int`` -> ``IntDistribution``
  (log, step), ``Categorical`` -> ``CategoricalDistribution``; a trial of a conditional space
  has only its active parameters, and the whole abo spec (conditions included) is kept in the
  study's user attribute ``abo_spec``;
* the objectives: their directions, and ``set_metric_names`` with their names; outcome
  constraints as Optuna's constraints (a value ``<= 0`` holds: ``value - bound`` for
  ``<=``, ``bound - value`` for ``>=``);
* the states: ``done`` -> ``COMPLETE``, ``failed`` -> ``FAIL``, ``stopped`` -> ``PRUNED``
  with its last value; reports at whole-number steps -> intermediate values; ``running`` and
  ``lost`` trials are not written (a lost trial's parameters live on in its retry);
* creation and end times, and the user attributes ``abo_id``, ``abo_state``,
  ``abo_worker``, ``abo_retry_of``, ``abo_reason``, ``abo_strategy`` and the trial's
  metadata under its own keys.

``from_optuna(name, storage, ...)`` creates (or continues) an abo study from an Optuna study,
which it opens read-only (``abo.interop.source``: a path that does not exist, an abo
database or any other non-Optuna source is a one-line error, and nothing is created in it):

* the space: the ``abo_spec`` an export stored, when every trial fits it; otherwise one
  parameter per name from the distributions of the complete trials (two different ones for
  a name are an error naming it), and a parameter only some trials have becomes conditional
  on the categorical or integer parameter that decides it (``abo.interop.conditions``);
* the objectives from its directions and metric names;
* every ``COMPLETE`` trial added as a known result (``study.add``, so importing again adds
  nothing twice). Failed, pruned and running trials are not results and are counted, not
  imported. A complete trial that cannot be placed (a parameter no condition explains, an
  infinite value) makes the import an error naming each such trial and why, and nothing is
  written; ``partial=True`` imports the others and names the skipped ones. A failed import
  leaves no new study behind.

Optuna is an optional dependency (``pip install optuna``); without it these raise
``ImportError`` saying so.
"""

from __future__ import annotations

from abo.interop._common import distribution, parameter
from abo.interop.export import Exported, to_optuna
from abo.interop.importing import Imported, Skipped, from_optuna

__all__ = [
    "Exported",
    "Imported",
    "Skipped",
    "distribution",
    "from_optuna",
    "parameter",
    "to_optuna",
]
