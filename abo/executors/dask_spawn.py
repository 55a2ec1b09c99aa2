"""Refusing to start Dask worker processes from a script without a ``__main__`` guard."""

from __future__ import annotations

import ast
import os
import sys

from abo.core.exceptions import AboError


def _is_main_guard(node: ast.AST) -> bool:
    """``if __name__ == "__main__":`` (either way round)."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return len(names) == 1 and len(consts) == 1


def unguarded_script_line() -> tuple[str, int] | None:
    """Where the running script starts worker processes outside ``if __name__ == "__main__":``.

    Worker processes start by re-running the main script (Python's ``spawn``), so a script that
    starts a local cluster at its top level starts it again in every worker, which fails with
    pages of tracebacks. Returns ``(file, line)`` of the top-level statement of ``__main__``
    now running when it is not under the guard; ``None`` when it is, or when there is no
    script file to check (an interactive session, ``python -c``, a notebook).
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path or not os.path.isfile(path):
        return None
    frame = sys._getframe(1)
    while frame is not None and not (
        frame.f_globals is vars(main) and frame.f_code.co_name == "<module>"
    ):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return None
    line = frame.f_lineno
    try:
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        start, end = node.lineno, getattr(node, "end_lineno", node.lineno) or node.lineno
        if start <= line <= end:
            return None if _is_main_guard(node) else (path, line)
    return None


def check_spawn_safe() -> None:
    """Refuse, in one line, to start worker processes from an unguarded script (see above)."""
    where = unguarded_script_line()
    if where is not None:
        path, line = where
        raise AboError(
            f"executor: {os.path.basename(path)} line {line} starts Dask worker processes at "
            "the top level of the script, and every worker re-runs the script when it starts; "
            'put that code under `if __name__ == "__main__":`'
        )
