"""Made the schema-1 databases with abo 0.1.0 at d3e1cdd (kept for the record; see README.md).

Usage (with that release installed): ``python make_schema1.py sqlite:///schema1.db``.
"""

import sys

import abo

url = sys.argv[1]
space = abo.Space(
    {
        "x": abo.Float(-2.0, 2.0),
        "n": abo.Int(1, 8, log=True),
        "kind": abo.Categorical(["a", "b", "c"]),
    }
)
s = abo.create_study(
    space,
    name="legacy",
    storage=url,
    direction="minimize",
    strategy="qlognei",
    seed=7,
    n_initial=4,
    max_retries=1,
    lease_seconds=3600.0,
)
s.add({"x": 0.5, "n": 2, "kind": "a"}, 1.25, {"note": "warm start"})
s.enqueue({"x": -1.0, "n": 4, "kind": "b"})


def f(p: dict) -> float:
    return (p["x"] - 0.3) ** 2 + p["n"] / 10 + {"a": 0, "b": 0.2, "c": 0.5}[p["kind"]]


for i in range(8):
    t = s.ask()
    if i == 3:
        s.fail(t.id, "diverged", {"epoch": 2})
    else:
        s.tell(t.id, f(t.params), {"i": i})
t = s.ask()
s.lose(t.id, "worker died")  # lost, its retry queued
running = s.ask()  # the retry: left running with a lease
s.heartbeat(running.id)
s2 = abo.create_study(
    abo.Space({"lr": abo.Float(1e-4, 1e-1, log=True)}),
    name="maxi",
    storage=url,
    direction="maximize",
    strategy="thompson",
    seed=3,
    refit="background",
    max_staleness=50,
    noise="deterministic",
)
for _ in range(3):
    t = s2.ask()
    s2.tell(t.id, -abs(t.params["lr"] - 0.01))
print([(t.id, t.state.value, t.value) for t in s.trials])
print(len(s2))
