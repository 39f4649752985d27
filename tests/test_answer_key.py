"""The answer key stays out of the student's reach, and each test cell says what it checks: static checks
of every test cell of every exercise (guide §4, "A part's points pay for the skill it teaches").

A student's function can read every frame above it and every global (``sys._getframe(1).f_back``), so a test
that computes its expected value before calling the student's code hands over the answer. Statically, in each
scope of a test cell (the cell itself and each function it defines), in the order of the source: an expected
value passed to ``check_close``/``check_equal`` (their second argument) that reads a name (``_ref``,
``_ref[0].detach()``, ``0.2 * _want``) must not read one last assigned *before* a call of an answer function
that precedes the check, unless that name was an argument of the call (a round trip expects its input back), a
copy of inputs (``kept = x.clone()``, to see that they are unchanged) or what the student's code returned; an
expected value computed where it stands (``reference(*copies)``) is fine. The dynamic check of the bank
harness (``run_test_cell(..., watch_reach=True)``, run on every solution test cell by each bank) follows
values instead of names; this one also covers single numbers, which that check leaves out.

Each test cell also opens with a comment that says what method the part's checks enforce and how, or that
the part asks for values only: a line starting ``# Method:`` or ``# Values only:``.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UNITS = sorted(p.name for p in (ROOT / "solutions").glob("[0-9][0-9]_*") if p.is_dir())
CHECKS = ("check_close", "check_equal")


def _cells(unit: str) -> list[tuple[str, str, str]]:
    """(kind, grade id, source) of the code cells of a solution notebook: kind "answer", "test" or "other"."""
    found = []
    for cell in json.loads((ROOT / "solutions" / unit / f"{unit}.ipynb").read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code":
            continue
        meta = cell["metadata"].get("nbgrader", {})
        kind = "answer" if meta.get("solution") else "test" if meta.get("grade") else "other"
        found.append((kind, meta.get("grade_id", ""), "".join(cell["source"])))
    return found


def _answer_names(unit: str) -> set[str]:
    return {
        node.name
        for kind, _, text in _cells(unit)
        if kind == "answer"
        for node in ast.parse(text).body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef))
    }


def _names(node: ast.AST | None) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} if node is not None else set()


def _scope_nodes(scope: ast.AST):
    """The nodes of one scope in source order, without descending into nested function definitions."""
    stack = list(reversed(list(ast.iter_child_nodes(scope))))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _targets(node: ast.AST) -> set[str]:
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(node, (ast.For, ast.comprehension)):
        return {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
    if isinstance(node, ast.withitem) and node.optional_vars is not None:
        return {n.id for n in ast.walk(node.optional_vars) if isinstance(n, ast.Name)}
    return set()


# Methods that hand back (a view or a conversion of) a value computed earlier, not a new computation.
_VIEWS = frozenset(
    "detach to double float half clone tolist item reshape view squeeze unsqueeze cpu numpy expand contiguous "
    "transpose permute flatten t long int bool".split()
)


def _held_name(expected: ast.AST) -> str | None:
    """The name whose earlier value an expected expression reads (``_ref[0].detach()`` -> ``_ref``), or None
    when the expression computes its value where it stands (``reference(x)``, a literal)."""
    node = expected
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _VIEWS:
            node = node.func.value
        elif isinstance(node, ast.BinOp) and isinstance(node.left, ast.Constant):
            node = node.right
        elif isinstance(node, ast.BinOp) and isinstance(node.right, ast.Constant):
            node = node.left
        else:
            return None


_COPIES = frozenset({"clone", "copy", "deepcopy", "list", "dict", "tuple", "state_dict"})


def _unsuspicious(value: ast.AST | None, answers: set[str]) -> bool:
    """An assigned value that cannot be an answer key: copies of inputs (kept to see that the student's code
    does not change them) and what the student's own code returned."""
    if value is None:
        return False
    calls = [n for n in ast.walk(value) if isinstance(n, ast.Call)]
    if any(isinstance(c.func, ast.Name) and c.func.id in answers for c in calls):
        return True
    top = value.elt if isinstance(value, (ast.ListComp, ast.GeneratorExp)) else value
    parts = top.elts if isinstance(top, (ast.Tuple, ast.List)) else [top]
    return bool(parts) and all(
        isinstance(p, ast.Call)
        and (p.func.attr if isinstance(p.func, ast.Attribute) else getattr(p.func, "id", None)) in _COPIES
        for p in parts
    )


def early_references(source: str, answers: set[str]) -> list[str]:
    """Where a test cell checks against a name assigned before a call of an answer function."""
    tree = ast.parse(source)
    scopes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    found = []
    for scope in scopes:
        assigned: dict[str, int] = {}  # name -> index of the event that last assigned it
        calls: list[tuple[int, set[str]]] = []  # (event index, names given as arguments)
        events = 0
        for node in _scope_nodes(scope):
            if isinstance(node, ast.Call):
                callee = node.func
                name = callee.id if isinstance(callee, ast.Name) else None
                events += 1
                if name in answers:
                    given = set().union(*(_names(a) for a in node.args), *(_names(k.value) for k in node.keywords))
                    calls.append((events, given))
                elif name in CHECKS and len(node.args) >= 2:
                    ref = _held_name(node.args[1])
                    when = assigned.get(ref) if ref is not None else None
                    if when is not None:
                        if any(when < at < events and ref not in given for at, given in calls):
                            found.append(
                                f"line {node.lineno}: {ref!r} is assigned before a call of the answer "
                                f"and checked after it"
                            )
            value = getattr(node, "value", None) if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            for name in _targets(node):
                events += 1
                if _unsuspicious(value, answers):
                    assigned.pop(name, None)
                else:
                    assigned[name] = events
    return found


@pytest.mark.parametrize("unit", UNITS)
def test_expected_values_are_computed_after_the_students_call(unit):
    answers = _answer_names(unit)
    problems = [
        f"{grade_id}: {problem}"
        for kind, grade_id, text in _cells(unit)
        if kind == "test"
        for problem in early_references(text, answers)
    ]
    assert not problems, f"{unit}: references computed before the student's call:\n" + "\n".join(problems)


@pytest.mark.parametrize("unit", UNITS)
def test_every_test_cell_says_what_method_it_enforces(unit):
    missing = [
        grade_id
        for kind, grade_id, text in _cells(unit)
        if kind == "test"
        and not any(line.lstrip().startswith(("# Method:", "# Values only:")) for line in text.splitlines()[:12])
    ]
    assert not missing, (
        f"{unit}: test cells without a '# Method: ...' or '# Values only: ...' comment in their first lines: {missing}"
    )


def test_the_static_check_finds_a_reference_computed_first():
    answers = {"student"}
    early = "x = make()\nwant = reference(x)\ngot = student(x)\ncheck_close(got, want, 'f')\n"
    late = "x = make()\ngot = student(x)\nwant = reference(x)\ncheck_close(got, want, 'f')\n"
    helper = (
        "def _check(x):\n    expected = ref(x)\n    out = student(x)\n    check_equal(out, expected[0].detach(), 'g')\n"
    )
    loop = "for x in xs:\n    got = student(x.clone())\n    check_close(got, ref(x), 'h')\n"
    round_trip = "x = make()\ncheck_close(student(x), x, 'round trip')\n"
    unchanged = "x = make()\nkept = x.clone()\nstudent(x)\ncheck_close(x, kept, 'inputs unchanged')\n"
    assert early_references(early, answers) and early_references(helper, answers)
    assert not early_references(late, answers)
    assert not early_references(loop, answers)
    assert not early_references(round_trip, answers)
    assert not early_references(unchanged, answers)


def _fake_unit(tmp_path, test_source: str) -> str:
    """A one-part unit in tmp_path: setup, an answer (softmax over the last axis) and the given test cell."""

    def cell(kind, grade_id, text):
        meta = {"locked": True} if kind == "setup" else {"solution": True} if kind == "answer" else {"grade": True}
        return {"cell_type": "code", "metadata": {"nbgrader": {"grade_id": grade_id, **meta}}, "source": text}

    unit = "99_fake"
    folder = tmp_path / unit
    folder.mkdir(parents=True)
    setup = "import torch\nfrom course_utils.testing.checks import check_close\n"
    answer = "def softmax(x):\n    return torch.softmax(x, dim=-1)\n"
    cells = [cell("setup", "setup", setup), cell("answer", "softmax_answer", answer)]
    cells.append(cell("test", "softmax_test", test_source))
    (folder / f"{unit}.ipynb").write_text(json.dumps({"cells": cells}), encoding="utf-8")
    return unit


def test_the_reach_check_finds_a_reference_held_during_the_call(tmp_path, monkeypatch):
    import sys

    sys.path.insert(0, str(ROOT / "tests" / "banks"))
    import notebook_cells

    where = {}
    monkeypatch.setattr(notebook_cells, "solution_path", lambda unit: where["root"] / unit / f"{unit}.ipynb")
    leaky = "_x = torch.randn(3, 5)\n_ref = torch.softmax(_x, dim=-1)\ncheck_close(softmax(_x), _ref, 'w')\n"
    pairs = "_cases = [(x, torch.softmax(x, -1)) for x in torch.randn(2, 3, 4)]\nfor _x, _w in _cases:\n"
    pairs += "    check_close(softmax(_x.clone()), torch.softmax(_x, -1), 'w')\n"
    after = "_x = torch.randn(3, 5)\n_got = softmax(_x.clone())\ncheck_close(_got, torch.softmax(_x, dim=-1), 'w')\n"
    for name, source in (("leaky", leaky), ("pairs", pairs), ("after", after)):
        where["root"] = tmp_path / name
        unit = _fake_unit(where["root"], source)
        if name == "after":
            notebook_cells.run_test_cell(unit, "softmax_test", watch_reach=True)
        else:
            with pytest.raises(AssertionError, match="within reach"):
                notebook_cells.run_test_cell(unit, "softmax_test", watch_reach=True)
