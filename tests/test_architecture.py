"""The shape of the package: rooms in layers that import only downwards, no import cycles,
light imports where nothing models, and small pieces (modules of at most 400 lines, functions
of at most 60, bar a shrinking list)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ABO = Path(__file__).resolve().parents[1] / "abo"
HEAVY = ("torch", "botorch", "gpytorch", "distributed", "fastapi", "matplotlib")
MODULE_LINES = 400  # a module's lines, data tables included (they are not functions)
FUNCTION_LINES = 60  # a function's lines from ``def`` to its end: docstring and nested ones in

# Pieces allowed over those limits, each at a ceiling it may shrink from but never pass; one leaves
# the list once within the limit (the test fails while it is listed). Every piece that was over
# when the limits came in has been split, so the list is empty: keep it so. Keys: a module's
# path, or "path::Class.function"; ``python tests/test_architecture.py`` prints the list.
OVER_LIMIT: dict[str, int] = {}


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


# The rooms of ``abo``, lowest first: a module may import its own room and the rooms below it,
# never one above (imports for type checking aside). The root package ``abo`` is the public
# facade over all of them; a room may take only ``abo.__version__`` from it.
LAYERS = (
    "core",  # what a study is made of: space, outcomes, trials, errors
    "model",  # the GP: fit, likelihood, warping, refit
    "acquisitions",  # the strategies and their registry
    "spec",  # a study's definition, checked (names a strategy, so above them)
    "storage",  # where it is kept, and every transition of a trial
    "analysis",  # what the trials add up to, what the GP says, plots
    "propose",  # the proposer: data, fits, design, strategy call
    "executors",  # where evaluations run
    "run",  # the loop, reports, progress, commands
    "study",  # the facade: Study, StudyAPI, StudyLike
    "interop",  # Optuna in and out
    "service",  # the HTTP API and its client
    "cli",  # the abo command
)


def _room(module: str) -> str:
    """The room a module of ``abo`` lives in (``""`` for the root package)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else ""


def _upward(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a room into a higher one, and every use of the root beyond its
    version, as ``importer -> imported``."""
    rank = {room: i for i, room in enumerate(LAYERS)}
    found = []
    for module, deps in sorted(graph.items()):
        if module == "abo":
            continue
        for dep in sorted(deps):
            if dep == "abo":
                continue
            if dep == "abo.__version__" or _room(dep) == "":
                if dep != "abo.__version__":
                    found.append(f"{module} -> {dep}")
            elif rank[_room(dep)] > rank[_room(module)]:
                found.append(f"{module} -> {dep}")
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    names = set(modules) | {"abo.__version__"}
    return {
        m: {t for t in _imports(ast.parse(p.read_text())) if t in names and t != m}
        for m, p in modules.items()
    }


def test_every_module_lives_in_a_room_of_the_layers() -> None:
    """The package's top level holds only the rooms (and the root's ``__init__``)."""
    assert sorted(p.name for p in ABO.iterdir() if p.suffix == ".py") == ["__init__.py"]
    rooms = sorted(p.name for p in ABO.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert rooms == sorted(LAYERS)


def test_no_room_imports_a_room_above_it() -> None:
    """Lower layers never import higher ones, in functions too; type checking aside."""
    assert _upward(_graph()) == []


def test_the_layer_check_finds_an_upward_import() -> None:
    """A core module importing the loop, or anything but the version from the root, is found;
    the same import the other way round is not."""
    graph = {
        "abo.core.space": {"abo.run.loop", "abo.core.trial"},
        "abo.run.loop": {"abo.core.space", "abo.__version__", "abo"},
        "abo.cli.main": {"abo.create_study"},
    }
    assert _upward(graph) == ["abo.cli.main -> abo.create_study", "abo.core.space -> abo.run.loop"]


def test_no_module_imports_itself_through_others() -> None:
    graph = {m: {d for d in deps if d != "abo.__version__"} for m, deps in _graph().items()}
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
    "module",
    [
        "abo",
        "abo.storage",
        "abo.spec.study_spec",
        "abo.core.outcomes",
        "abo.storage.lifecycle",
        "abo.analysis.summary",
    ],
)
def test_reading_modules_load_nothing_heavy(module: str) -> None:
    code = f"import sys, {module}; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"import {module} loaded {out.stdout.strip()}"


def _sizes() -> dict[str, int]:
    """The lines of every module of ``abo`` and of every function in it, by ``OVER_LIMIT`` key
    (a name defined twice, such as a property and its setter, counts at its longest)."""
    sizes: dict[str, int] = {}
    for path in sorted(ABO.rglob("*.py")):
        where = path.relative_to(ABO.parent).as_posix()
        text = path.read_text()
        sizes[where] = len(text.splitlines())
        for name, size in _functions(ast.parse(text), ""):
            sizes[f"{where}::{name}"] = max(size, sizes.get(f"{where}::{name}", 0))
    return sizes


def _functions(node: ast.AST, prefix: str) -> list[tuple[str, int]]:
    """Every function under ``node`` by qualified name (``Class.method``, ``outer.inner``) with
    its lines from ``def`` to its end (decorators out)."""
    found = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = f"{prefix}{child.name}"
            if not isinstance(child, ast.ClassDef):
                found.append((name, (child.end_lineno or child.lineno) - child.lineno + 1))
            found += _functions(child, f"{name}.")
        else:
            found += _functions(child, prefix)
    return found


def _limit(key: str) -> int:
    return FUNCTION_LINES if "::" in key else MODULE_LINES


def _over_limit_now() -> dict[str, int]:
    return {k: v for k, v in _sizes().items() if v > _limit(k)}


def _problems(sizes: dict[str, int], listed: dict[str, int]) -> list[str]:
    """What breaks the limits: a piece over its limit and not listed, a listed one grown past
    its listed size, one listed but now within its limit, and one listed but gone."""
    problems = []
    for key, size in sizes.items():
        ceiling = listed.get(key)
        if ceiling is None and size > _limit(key):
            problems.append(f"{key}: {size} lines, over the limit of {_limit(key)}")
        elif ceiling is not None and size > ceiling:
            problems.append(f"{key}: {size} lines, grown past its listed {ceiling}")
        elif ceiling is not None and size <= _limit(key):
            problems.append(f"{key}: {size} lines, within {_limit(key)}: take it off OVER_LIMIT")
    return problems + [
        f"{key}: listed in OVER_LIMIT but gone" for key in listed if key not in sizes
    ]


def test_no_module_or_function_is_over_its_limit_or_grew_past_its_listed_size() -> None:
    """Modules of at most 400 lines and functions of at most 60; those listed in
    ``OVER_LIMIT`` may be over, up to their listed size, and leave the list once within."""
    problems = _problems(_sizes(), OVER_LIMIT)
    assert problems == [], "\n".join(problems)


def test_the_list_of_pieces_over_the_limits_only_shrinks() -> None:
    """A listed piece may shrink while over its limit; growing, fitting the limit, or going
    away while listed each fails, as does a new piece over its limit."""
    listed = {"abo/a.py": 450, "abo/a.py::f": 80, "abo/b.py": 500, "abo/c.py::g": 70}
    assert _problems({"abo/a.py": 420, "abo/a.py::f": 80, "abo/b.py": 500}, listed) == [
        "abo/c.py::g: listed in OVER_LIMIT but gone"
    ]
    sizes = {"abo/a.py": 451, "abo/a.py::f": 60, "abo/b.py": 400, "abo/c.py::g": 70}
    sizes |= {"abo/d.py": 401, "abo/d.py::h": 61, "abo/d.py::i": 60}
    assert _problems(sizes, listed) == [
        "abo/a.py: 451 lines, grown past its listed 450",
        "abo/a.py::f: 60 lines, within 60: take it off OVER_LIMIT",
        "abo/b.py: 400 lines, within 400: take it off OVER_LIMIT",
        "abo/d.py: 401 lines, over the limit of 400",
        "abo/d.py::h: 61 lines, over the limit of 60",
    ]


def test_the_size_check_measures_functions_from_def_to_end_and_modules_by_lines() -> None:
    """A nested function and a method count under their qualified names, decorators out."""
    sizes = _sizes()
    text = (ABO / "spec" / "study_spec.py").read_text()
    assert sizes["abo/spec/study_spec.py"] == len(text.splitlines())
    tree = ast.parse(text)
    (spec,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "StudySpec"]
    (check,) = [n for n in spec.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    assert sizes["abo/spec/study_spec.py::StudySpec.check"] == check.end_lineno - check.lineno + 1


if __name__ == "__main__":  # print OVER_LIMIT as the tree is now, to paste above
    print("OVER_LIMIT: dict[str, int] = {")
    for key, size in _over_limit_now().items():
        print(f"    {key!r}: {size},".replace("'", '"'))
    print("}")
