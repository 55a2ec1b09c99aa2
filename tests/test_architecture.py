"""The shape of the package: no import cycles, and light imports where nothing models."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ABO = Path(__file__).resolve().parents[1] / "abo"
HEAVY = ("torch", "botorch", "gpytorch", "distributed", "fastapi", "matplotlib")


def _modules() -> dict[str, Path]:
    out = {}
    for path in ABO.rglob("*.py"):
        parts = path.relative_to(ABO.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(tree: ast.AST) -> list[str]:
    """Every module a file imports, at any depth (functions too), but not for type checking."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for c in child.orelse:
                    visit(c)
                continue
            if isinstance(child, ast.Import):
                found.extend(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module:
                found.append(child.module)
                found.extend(f"{child.module}.{a.name}" for a in child.names)
            visit(child)

    visit(tree)
    return found


def test_no_module_imports_itself_through_others() -> None:
    modules = _modules()
    graph = {
        m: {t for t in _imports(ast.parse(p.read_text())) if t in modules and t != m}
        for m, p in modules.items()
    }
    cycles = []

    def walk(start: str, node: str, path: list[str]) -> None:
        for nxt in sorted(graph[node]):
            if nxt == start:
                cycles.append(" -> ".join([*path, start]))
            elif nxt not in path and nxt > start:
                walk(start, nxt, [*path, nxt])

    for module in sorted(graph):
        walk(module, module, [module])
    assert cycles == []


@pytest.mark.parametrize(
    "module", ["abo", "abo.storage", "abo.spec", "abo.outcomes", "abo.lifecycle", "abo.summary"]
)
def test_reading_modules_load_nothing_heavy(module: str) -> None:
    code = f"import sys, {module}; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"import {module} loaded {out.stdout.strip()}"
