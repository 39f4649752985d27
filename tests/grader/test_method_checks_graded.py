"""Answers that reach the right values without the skill a part teaches, graded end to end by the sandboxed
grader (issue 24's four kinds): each loses its part's points under ``python -m grader autograde``, as in the
mistake banks, while the other parts of the same notebook keep theirs.

The banks prove each entry with the very test code nbgrader runs, in one process; this runs a few of them the
way a class is graded: the runner script, a test cell in a copy of the namespace, bubblewrap, the audit hook
that decides who may set trace and profile functions (the work watch counts Python steps with one).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from classroom_course import course_copy
from nbgrader.api import Gradebook

from grader.cli import main
from grader.course import load_course
from grader.sandbox import UNSAFE_FLAG, sandbox_problem

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "banks"))

SANDBOX = sandbox_problem() is None

# unit -> the bank entries (by name) that one submission carries, each in its own answer cell
CHEATS = {
    "03_word_embeddings": [
        "numerical: CBOW gradients by central differences, parameter by parameter",  # work grows with D
        "frames: calls the test's own _reference_ppmi",  # the test cell's reference, called
    ],
    "04_rnn_bptt": [
        "numerical: BPTT gradients by finite differences of a NumPy loss (no tensor operations)",  # Python steps
        "frames: rnn_forward returns the test's nn.RNN outputs",  # the answer key read from the frames
    ],
    "05_lstm_gru": ["shortcut (layer off): torch.lstm_cell from C under DisableTorchFunction"],
    "10_beyond_attention": [
        "scan: one dense block-triangular system, by torch.linalg.lu_solve",  # memory in T
        "delta: chunks, but each chunk's system solved row by row (forward substitution)",  # steps, not chunks
    ],
    "11_pretraining": [
        "lora: forward through the dense update x @ (s B A)^T",  # the work watch: the (out, in) matrix in forward
        "frames: gpt2_to_course returns a value of its shape from its callers",  # nothing of its kind within reach
    ],
}


def _bank(unit: str) -> dict:
    module = __import__(f"test_{unit[:2]}_mistakes")
    return {m.name: m for m in module.BANK}


def _cheating(unit: str, target: Path) -> set[str]:
    """The solution with the CHEATS of ``unit`` in place of their answer cells; returns their test cells."""
    from notebook_cells import answer_source

    nb = json.loads((ROOT / "solutions" / unit / f"{unit}.ipynb").read_text(encoding="utf-8"))
    bank, tests = _bank(unit), set()
    for name in CHEATS[unit]:
        mistake = bank[name]
        cell = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == mistake.answer)
        cell["source"] = mistake.apply(answer_source(unit, mistake.answer))
        tests.add(mistake.test)
    target.write_text(json.dumps(nb), encoding="utf-8")
    return tests


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> tuple[Path, dict[str, set[str]]]:
    course = course_copy(tmp_path_factory.mktemp("method_course"))
    failing = {}
    for unit in CHEATS:
        inbox = tmp_path_factory.mktemp(f"lms_{unit}")
        failing[unit] = _cheating(unit, inbox / "mallory.ipynb")
        assert main(["--course", str(course), "import", unit, str(inbox)]) == 0
    unsafe = [] if SANDBOX else [UNSAFE_FLAG]
    assert (
        main(["--course", str(course), "autograde", *CHEATS, "--workers", "2", "--cell-timeout", "300", *unsafe]) == 0
    )
    return course, failing


@pytest.mark.parametrize("unit", sorted(CHEATS))
def test_each_kind_loses_its_part_and_only_its_part(graded, unit):
    course, failing = graded
    with Gradebook(load_course(course).db_url) as gb:
        submission = gb.find_submission(unit, "mallory")
        scores = {
            g.name: (g.auto_score, g.max_score)
            for nb in submission.notebooks
            for g in nb.grades
            if g.cell_type == "code"
        }
    for test, (score, most) in scores.items():
        if test in failing[unit]:
            assert score == 0, f"{unit}: {test} earned {score} of {most} with a method the part does not teach"
        else:
            assert score == most, f"{unit}: {test} lost points ({score} of {most}) it should keep"
