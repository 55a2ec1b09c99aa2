"""Benchmarks for abo: a discrete-event asynchronous simulator, test problems and comparisons.

Not part of the installed package; run from the repository root, e.g.
``python -m benchmarks.gp_vs_optuna --seeds 5``.
"""
