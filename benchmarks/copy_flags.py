"""How the grader's copy flag separates honest answers from copies of the course library, and its cost.

    python -m benchmarks.copy_flags [--threshold 0.9]

Three populations, each compared with the library index of ``grader.review`` (every function,
method and class of ``course_utils`` with at least ``MIN_TOKENS`` normalised tokens, infrastructure
modules left out):

* ``honest``: every answer cell of the reference solutions (``solutions/*/``), as submitted;
* ``verbatim``: each library definition's source, pasted into an answer cell;
* ``disguised``: the same with every local name renamed, docstrings and comments removed, the code
  reformatted (``ast.unparse``), and one statement of its own added at the top of each body.

For each it prints how many get a copy flag at ``--threshold`` and the similarities that matter
(the highest honest ones, the lowest copies), then the time of one review of a whole notebook.
Prints, never asserts.
"""

from __future__ import annotations

import argparse
import ast
import json
import time
from pathlib import Path

from grader.plan import Part
from grader.review import COPY_THRESHOLD, library_index, near_copies, review_flags

ROOT = Path(__file__).resolve().parents[1]


def honest_answers() -> list[tuple[str, str]]:
    """(unit/grade_id, source) of every code answer cell of the reference solutions."""
    found = []
    for path in sorted(ROOT.glob("solutions/*/*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("solution") and cell["cell_type"] == "code":
                found.append((f"{path.parent.name}/{meta['grade_id']}", "".join(cell["source"])))
    return found


class _Disguise(ast.NodeTransformer):
    """Rename every local name, drop docstrings, add one statement at the top of each body."""

    def __init__(self, names: set[str]) -> None:
        self.names = {n: f"my_{i}" for i, n in enumerate(sorted(names))}

    def _body(self, body: list) -> list:
        body = [s for s in body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        return [ast.parse("_unused_here = None").body[0], *body]

    def visit_FunctionDef(self, node):
        node.name = self.names.get(node.name, node.name)
        node.body = self._body(node.body)
        return self.generic_visit(node)

    def visit_Name(self, node):
        node.id = self.names.get(node.id, node.id)
        return node

    def visit_arg(self, node):
        node.arg = self.names.get(node.arg, node.arg)
        return node


def disguised(source: str) -> str:
    """``source`` (one definition) with its local names renamed, no docstrings or comments, reformatted."""
    tree = ast.parse(source)
    names = {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}
    names |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    if isinstance(tree.body[0], ast.FunctionDef):
        names.add(tree.body[0].name)
    return ast.unparse(ast.fix_missing_locations(_Disguise(names).visit(tree)))


def library_sources() -> list[tuple[str, str]]:
    """(dotted name, source) of every definition the index holds, cut from its module's source."""
    index = library_index()
    import course_utils

    base = Path(course_utils.__file__).parent
    wanted = {d.name for d in index.definitions}
    found = []
    for path in sorted(base.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines(keepends=True)
        module = ".".join(["course_utils", *path.relative_to(base).with_suffix("").parts])
        for node in ast.parse(text).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and f"{module}.{node.name}" in wanted:
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                found.append((f"{module}.{node.name}", "".join(lines[start - 1 : node.end_lineno])))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threshold", type=float, default=COPY_THRESHOLD)
    args = parser.parse_args()
    started = time.perf_counter()
    index = library_index()
    print(f"library index: {len(index.definitions)} definitions, built in {time.perf_counter() - started:.2f} s")
    honest = honest_answers()
    flagged = [(name, near_copies(src, index, args.threshold)) for name, src in honest]
    flagged = [(name, found) for name, found in flagged if found]
    print(f"\nhonest answers: {len(flagged)} of {len(honest)} flagged at {args.threshold}")
    for name, found in flagged:
        print(f"  {name:40} " + ", ".join(f"{lib} ({ratio:.3f})" for lib, ratio in found))
    top = sorted(((r, name, lib) for name, src in honest for lib, r in near_copies(src, index, 0.5)), reverse=True)
    print("  highest similarities:", ", ".join(f"{name} {r:.3f} ({lib.split('.', 1)[1]})" for r, name, lib in top[:6]))
    for label, make in (("verbatim", lambda s: s), ("disguised", disguised)):
        results = []
        for name, source in library_sources():
            best = near_copies(make(source), index, 0.5)
            results.append((max((r for _, r in best), default=0.0), name))
        missed = [(r, n) for r, n in results if r < args.threshold]
        print(
            f"\n{label} copies: {len(results) - len(missed)} of {len(results)} flagged; lowest similarities: "
            + ", ".join(f"{n.split('.', 1)[1]} {r:.3f}" for r, n in sorted(results)[:5])
        )
    cells = [Part(i, "answer", name, src) for i, (name, src) in enumerate(honest_answers())]
    started = time.perf_counter()
    review_flags(cells, index)
    per_cell = (time.perf_counter() - started) / len(cells)
    print(
        f"\nreview time: {1000 * per_cell:.1f} ms per answer cell "
        f"({1000 * per_cell * len(cells) / len(set(n.split('/')[0] for n, _ in honest_answers())):.0f} ms per notebook)"
    )


if __name__ == "__main__":
    main()
