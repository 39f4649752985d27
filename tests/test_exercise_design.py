"""What each exercise asks of a student beyond its lecture, checked statically (guide §4).

A student who copies the lecture's code into the exercise should not earn most of the points. So:

- the exercise header's points table lists every graded cell with the points its metadata carries,
  and says for each autograded part whether it goes beyond the lecture (``**yes**`` / ``no``; ``—``
  for a question graded by hand), with the share in a sentence under the table;
- in every unit at least half of the autograded points come from parts marked **yes**;
- a part marked **yes** is one whose answer the lecture does not print. For each function or class
  of its answer cell: the lecture defines nothing of the same name; no definition of the lecture is
  close to it (the similarity of normalised tokens, as the grader's copy check measures it); and no
  code cell of the lecture holds most of it inline (the share of its tokens found in runs of at
  least ``MIN_RUN`` tokens in the same order).

The two limits were measured on the answers the lecture prints (as found when this check was
written): the least similar printed definition scores 0.75 (lecture 08's label smoothing, 05's
``masked_pool`` 0.80), and the least covered inline answer 0.63 (lecture 01 learns BPE merges in a
loop that is the answer of its ``learn_bpe``); the parts that go beyond score at most 0.60 and 0.43.
"""

from __future__ import annotations

import ast
import json
import re
from difflib import SequenceMatcher
from pathlib import Path

import pytest

from grader.review import MIN_TOKENS, definitions, normalized_tokens, parse_cell, similarity

ROOT = Path(__file__).resolve().parents[1]
UNITS = sorted(p.name for p in (ROOT / "solutions").glob("[0-9][0-9]_*") if p.is_dir())
MAX_SIMILARITY = 0.70  # a definition of the lecture at least this similar prints the answer
MAX_COVERAGE = 0.60  # a lecture cell holding this share of the answer's tokens prints it inline
MIN_RUN = 6  # tokens in a row that count as copied code (shorter runs are everybody's `x = y.z(`)
MIN_SHARE = 0.5  # of the autograded points, from parts beyond the lecture
YES, NO, MANUAL = "**yes**", "no", "—"
SHARE = re.compile(r"\((\d+) of the (\d+) autograded points\)")


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def source(cell: dict) -> str:
    return "".join(cell["source"])


def graded_parts(unit: str) -> dict[str, int]:
    """Answer cells (their points: those of the test cells that follow, up to the next answer) and
    questions graded by hand (their own points), by grade id, in notebook order."""
    parts: dict[str, int] = {}
    current = None
    for cell in cells(ROOT / "solutions" / unit / f"{unit}.ipynb"):
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("solution") and cell["cell_type"] == "code":
            current = meta["grade_id"]
            parts[current] = 0
        elif meta.get("solution") and meta.get("grade"):
            parts[meta["grade_id"]] = meta["points"]
            current = None
        elif meta.get("grade") and cell["cell_type"] == "code":
            assert current is not None, f"{unit}: test cell {meta['grade_id']} follows no answer cell"
            parts[current] += meta["points"]
    return parts


def points_table(unit: str) -> tuple[dict[str, tuple[str, int]], int, str]:
    """The header's table: grade id -> (beyond-the-lecture mark, points); the total; the header text."""
    header = source(cells(ROOT / "solutions" / unit / f"{unit}.ipynb")[0])
    lines = [line.strip() for line in header.splitlines() if line.strip().startswith("|")]
    assert lines, f"{unit}: the exercise header has no points table"
    columns = [c.strip() for c in lines[0].strip("|").split("|")]
    for needed in ("Cell", "Beyond the lecture", "Points"):
        assert needed in columns, f"{unit}: the points table has no column {needed!r} (columns: {columns})"
    rows, total = {}, None
    for line in lines[2:]:
        row = dict(zip(columns, (c.strip() for c in line.strip("|").split("|"))))
        if "Total" in line:
            total = int(row["Points"].strip("*"))
        else:
            rows[row["Cell"].strip("`")] = (row["Beyond the lecture"], int(row["Points"]))
    assert total is not None, f"{unit}: the points table has no Total row"
    return rows, total, header


def lecture_code(unit: str) -> tuple[list[tuple[str, list[str]]], list[tuple[str, list[str]]]]:
    """The lecture's code as compared: (cell label, tokens of the whole cell) and (definition label,
    its tokens) for every function, class and method."""
    whole, defs = [], []
    for i, cell in enumerate(cells(ROOT / "lectures" / f"{unit}.ipynb")):
        tree = parse_cell(source(cell)) if cell["cell_type"] == "code" else None
        if tree is None:
            continue
        whole.append((f"cell {i}", normalized_tokens(tree)))
        defs += [(f"cell {i}: {name}", normalized_tokens(node)) for name, node in definitions(tree)]
    return whole, defs


def coverage(answer: list[str], code: list[str]) -> float:
    """Share of the answer's tokens found in ``code`` in runs of at least MIN_RUN tokens, in order."""
    blocks = SequenceMatcher(None, answer, code, autojunk=False).get_matching_blocks()
    return sum(b.size for b in blocks if b.size >= MIN_RUN) / len(answer)


def printed_in_lecture(answer: str, unit: str) -> list[str]:
    """Why the lecture of ``unit`` prints (part of) this answer cell's code; empty if it does not."""
    whole, defs = lecture_code(unit)
    names = {label.split(": ")[1] for label, _ in defs}
    reasons = []
    tree = parse_cell(answer)
    assert tree is not None, "the answer cell does not parse"
    for name, node in definitions(tree):
        if "." in name:
            continue  # a class is compared whole
        if name in names:
            reasons.append(f"{name}: the lecture defines {name}")
        tokens = normalized_tokens(node)
        if len(tokens) < MIN_TOKENS:
            continue  # too short to tell a copy from the obvious
        for label, other in defs:
            if similarity(tokens, other) >= MAX_SIMILARITY:
                reasons.append(f"{name}: {similarity(tokens, other):.2f} similar to {label}")
        for label, other in whole:
            if coverage(tokens, other) >= MAX_COVERAGE:
                reasons.append(f"{name}: {coverage(tokens, other):.0%} of it is in {label}")
    return reasons


def answer_sources(unit: str) -> dict[str, str]:
    return {
        cell["metadata"]["nbgrader"]["grade_id"]: source(cell)
        for cell in cells(ROOT / "solutions" / unit / f"{unit}.ipynb")
        if cell["metadata"].get("nbgrader", {}).get("solution") and cell["cell_type"] == "code"
    }


@pytest.mark.parametrize("unit", UNITS)
def test_points_table_matches_the_graded_cells(unit):
    parts = graded_parts(unit)
    rows, total, _ = points_table(unit)
    assert list(rows) == list(parts), f"{unit}: the table lists {list(rows)}, the notebook grades {list(parts)}"
    for grade_id, (mark, points) in rows.items():
        assert points == parts[grade_id], (
            f"{unit}: {grade_id} is worth {parts[grade_id]} points, the table says {points}"
        )
        manual = grade_id not in answer_sources(unit)
        assert mark in ((MANUAL,) if manual else (YES, NO)), (
            f"{unit}: {grade_id} is marked {mark!r}; an autograded part is {YES} or {NO}, a written one {MANUAL}"
        )
    assert total == sum(parts.values()), f"{unit}: the total says {total}, the parts add up to {sum(parts.values())}"


@pytest.mark.parametrize("unit", UNITS)
def test_half_the_autograded_points_go_beyond_the_lecture(unit):
    rows, _, header = points_table(unit)
    auto = {g: p for g, (mark, p) in rows.items() if mark != MANUAL}
    beyond = sum(p for g, p in auto.items() if rows[g][0] == YES)
    stated = SHARE.search(header)
    assert stated, f"{unit}: the header does not say '({beyond} of the {sum(auto.values())} autograded points)'"
    assert (int(stated[1]), int(stated[2])) == (beyond, sum(auto.values())), (
        f"{unit}: the header says {stated[0]}, the table gives {beyond} of {sum(auto.values())}"
    )
    assert beyond >= MIN_SHARE * sum(auto.values()), (
        f"{unit}: only {beyond} of {sum(auto.values())} autograded points go beyond the lecture"
    )


@pytest.mark.parametrize("unit", UNITS)
def test_parts_beyond_the_lecture_are_not_printed_in_it(unit):
    rows, _, _ = points_table(unit)
    answers = answer_sources(unit)
    printed = {g: printed_in_lecture(answers[g], unit) for g, (mark, _) in rows.items() if mark == YES}
    printed = {g: reasons for g, reasons in printed.items() if reasons}
    assert not printed, f"{unit}: parts marked beyond the lecture that it prints: {printed}"


def _lecture_definition(unit: str, name: str) -> str:
    for cell in cells(ROOT / "lectures" / f"{unit}.ipynb"):
        tree = parse_cell(source(cell)) if cell["cell_type"] == "code" else None
        for node in tree.body if tree else []:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
                return ast.unparse(node)
    raise AssertionError(f"lecture {unit} defines no {name}")


def test_the_check_finds_printed_code_renamed_edited_or_inline():
    """The check is not hollow: the lecture's own code, renamed, lightly edited or wrapped from an
    inline cell into a function, is found; an answer from another unit is not."""
    softmax = _lecture_definition("06_attention", "masked_softmax").replace("masked_softmax", "my_softmax")
    assert any("similar to" in r for r in printed_in_lecture(softmax, "06_attention"))
    renamed = re.sub(r"\bscores\b", "s", softmax).replace("dim=-1", "-1")
    assert printed_in_lecture(renamed, "06_attention")
    inline = (  # lecture 06 computes additive scores inline, in the cell that compares score functions
        "def additive(Q, K, W_q, W_k, w_v):\n"
        "    features = torch.tanh((Q @ W_q.T)[:, :, None, :] + (K @ W_k.T)[:, None, :, :])\n"
        "    additive = features @ w_v\n"
        "    return additive\n"
    )
    assert any("of it is in cell" in r for r in printed_in_lecture(inline, "06_attention"))
    assert any(
        "defines masked_softmax" in r for r in printed_in_lecture("def masked_softmax(s):\n    pass\n", "06_attention")
    )
    beam = answer_sources("07_transformers")["beam_answer"]
    assert printed_in_lecture(beam, "06_attention") == []
