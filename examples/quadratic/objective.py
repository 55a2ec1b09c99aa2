"""A stand-in simulation: reads its parameters from the command line, prints its value last.

Run by ``abo run study.toml`` once per trial, in the trial's own working directory.
"""

from __future__ import annotations

import argparse
import json
import math
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--x", type=float, required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--solver", required=True)
    parser.add_argument("--sleep", type=float, default=0.2)
    args = parser.parse_args()
    time.sleep(args.sleep)  # a real simulation would take minutes
    penalty = {"cg": 0.0, "gmres": 0.3, "jacobi": 1.0}[args.solver]
    value = (args.x - 1.0) ** 2 + (math.log10(args.lr) + 3.0) ** 2 + 0.1 * abs(args.layers - 3)
    print(f"solver {args.solver} converged")  # logs are fine: only the last line is read
    print(json.dumps({"value": value + penalty, "iterations": 10 * args.layers}))


if __name__ == "__main__":
    main()
