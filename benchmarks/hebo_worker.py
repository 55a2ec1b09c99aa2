"""HEBO behind a pipe: run by ``benchmarks/hebo_peer.py`` with the Python of HEBO's own
environment, which pins a NumPy older than abo's (so the two cannot share one).

Standard library, NumPy, pandas, torch and HEBO only: nothing of abo is imported here. One JSON
object per line on stdin, one answer per line on stdout:

* ``{"op": "init", "seed": s, "params": [{"name", "kind", "low", "high", "log", "labels"}]}``
  -> ``{"ok": true, "rand_sample": n}`` (HEBO's own initial design size: parameters + 1);
* ``{"op": "ask"}`` -> ``{"id": i, "config": {name: value}}`` (categoricals as their labels);
* ``{"op": "tell", "id": i, "value": v}`` -> ``{"ok": true}``;
* ``{"op": "add", "config": {name: value}, "value": v}`` -> ``{"ok": true}`` (a result HEBO
  did not suggest);
* an error -> ``{"error": "..."}``, and the worker goes on.
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any


def _space(params: list[dict[str, Any]]) -> Any:
    """HEBO's design space: ``pow``/``pow_int`` for log-scaled ranges, ``num``/``int`` for
    linear ones, ``cat`` for choices."""
    from hebo.design_space.design_space import DesignSpace

    items: list[dict[str, Any]] = []
    for p in params:
        if p["kind"] == "cat":
            items.append({"name": p["name"], "type": "cat", "categories": p["labels"]})
        elif p["kind"] == "int":
            kind = "pow_int" if p["log"] else "int"
            items.append({"name": p["name"], "type": kind, "lb": p["low"], "ub": p["high"]})
        else:
            kind = "pow" if p["log"] else "num"
            items.append({"name": p["name"], "type": kind, "lb": p["low"], "ub": p["high"]})
    return DesignSpace().parse(items)


class Worker:
    """One HEBO optimiser and the rows it suggested, by id, until they are told."""

    def __init__(self) -> None:
        self.opt: Any = None
        self.rows: dict[int, Any] = {}
        self.next_id = 0

    def handle(self, msg: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        op = msg.get("op")
        if op == "init":
            import torch
            from hebo.optimizers.hebo import HEBO

            np.random.seed(msg["seed"])  # HEBO draws from NumPy's and torch's global generators
            torch.manual_seed(msg["seed"])
            self.opt = HEBO(_space(msg["params"]), scramble_seed=msg["seed"])
            return {"ok": True, "rand_sample": int(self.opt.rand_sample)}
        if self.opt is None:
            return {"error": "send init first"}
        if op == "ask":
            row = self.opt.suggest(n_suggestions=1)
            i, self.next_id = self.next_id, self.next_id + 1
            self.rows[i] = row
            config = {k: _plain(v) for k, v in row.iloc[0].to_dict().items()}
            return {"id": i, "config": config}
        if op == "tell":
            row = self.rows.pop(int(msg["id"]))
            self.opt.observe(row, np.array([[float(msg["value"])]]))
            return {"ok": True}
        if op == "add":
            import pandas as pd

            row = pd.DataFrame([msg["config"]], columns=self.opt.space.para_names)
            self.opt.observe(row, np.array([[float(msg["value"])]]))
            return {"ok": True}
        return {"error": f"op: {op!r} is not init, ask, tell or add"}


def _plain(value: Any) -> Any:
    """A NumPy scalar as the Python value JSON can carry."""
    return value.item() if hasattr(value, "item") else value


def main() -> None:
    """Answer each line of stdin on the pipe; whatever HEBO and its libraries print goes to
    stderr, so the pipe carries answers only."""
    pipe = sys.stdout
    sys.stdout = sys.stderr
    worker = Worker()
    warnings.simplefilter("ignore")
    for line in sys.stdin:
        try:
            answer = worker.handle(json.loads(line))
        except Exception as exc:  # the driver raises it with the worker's words
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        pipe.write(json.dumps(answer) + "\n")
        pipe.flush()


if __name__ == "__main__":
    main()
