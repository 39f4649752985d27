"""The grader's import graph: one module per stage, imports pointing one way (to earlier stages), no cycle.

The stage order is declared once, in the list of ``grader/__init__.py``'s docstring. Every import of
a ``grader`` module is collected from the syntax tree, lazy ones inside functions included.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

GRADER = Path(__file__).resolve().parents[2] / "grader"
MODULES = sorted(p.stem for p in GRADER.glob("*.py") if p.stem != "__init__")


def stage_order() -> list[str]:
    """The module names listed in ``grader/__init__.py``'s docstring, in order."""
    doc = ast.get_docstring(ast.parse((GRADER / "__init__.py").read_text(encoding="utf-8"))) or ""
    return re.findall(r"^- ``(\w+)``", doc, flags=re.MULTILINE)


def grader_imports(module: str) -> set[str]:
    """The ``grader`` modules that ``grader/<module>.py`` imports, anywhere in the file."""
    tree = ast.parse((GRADER / f"{module}.py").read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # a relative import: `from . import x`, `from .x import y`
                base = node.module or ""
                names = [f"grader.{base}" if base else f"grader.{a.name}" for a in node.names]
            else:
                base = node.module or ""
                names = [f"{base}.{a.name}" if base == "grader" else base for a in node.names]
        else:
            continue
        for name in names:
            if name == "grader" or name.startswith("grader."):
                found.add(name.split(".")[1] if "." in name else "__init__")
    found.discard(module)
    return found


def test_every_module_has_its_place_in_the_declared_order():
    order = stage_order()
    assert len(order) == len(set(order)), f"a module is listed twice: {order}"
    assert sorted(order) == MODULES, "grader/__init__.py must list every module of grader/ once"


@pytest.mark.parametrize("module", MODULES)
def test_a_module_imports_only_earlier_stages(module):
    order = stage_order()
    later = sorted(m for m in grader_imports(module) if m not in order or order.index(m) > order.index(module))
    assert not later, f"grader/{module}.py imports a later (or undeclared) stage: {later}"


def test_the_import_graph_has_no_cycle():
    graph = {m: grader_imports(m) for m in MODULES}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                cycle = [*path[path.index(target) :], target] if target in path else [module, target]
                raise AssertionError(f"import cycle: {' -> '.join(cycle)}")
            if target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in MODULES:
        if module not in state:
            visit(module, [module])


def test_the_runner_imports_nothing_from_grader():
    assert grader_imports("runner") == set()
    tree = ast.parse((GRADER / "runner.py").read_text(encoding="utf-8"))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert "grader" not in imported and "course_utils" not in imported


@pytest.mark.parametrize("module", ["__init__", *MODULES])
def test_each_docstring_opens_with_the_module_role(module):
    doc = ast.get_docstring(ast.parse((GRADER / f"{module}.py").read_text(encoding="utf-8")))
    assert doc, f"grader/{module}.py has no docstring"
    first = doc.splitlines()[0]
    assert len(first.split()) >= 5 and first.endswith("."), f"grader/{module}.py: {first!r}"
