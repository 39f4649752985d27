"""Courses for the grader tests: a tiny one for the classroom tests, a copy of the real one, scores read back.

One unit, ``98_classroom``, with two autograded parts in plain Python (no torch import, so a
submission grades in about a second): ``double`` (2 points) and ``greet`` (1 point). Students
submit one of three kinds of answer: ``right`` (3 points), ``half`` (``double`` only: 2 points)
and ``blank`` (the release stubs: 0 points). A ``slow`` answer is right but sleeps first, so that
a test can catch its grading mid-run. ``course_copy`` copies the real course (every unit of
``solutions/``) and ``submission_scores`` reads a student's scores back from a course's gradebook.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
UNIT = "98_classroom"
POINTS = {"double_test": 2.0, "greet_test": 1.0}
STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
RIGHT = {
    "double_answer": "def double(x):\n    return 2 * x",
    "greet_answer": "def greet(name):\n    return 'hi ' + name",
}
ANSWERS = {
    "right": RIGHT,
    "half": {"double_answer": RIGHT["double_answer"], "greet_answer": "def greet(name):\n    return name"},
    "blank": {"double_answer": STUB, "greet_answer": STUB},
}
EXPECTED = {
    "right": {"double_test": 2.0, "greet_test": 1.0},
    "half": {"double_test": 2.0, "greet_test": 0.0},
    "blank": {"double_test": 0.0, "greet_test": 0.0},
}


def slow(seconds: float) -> dict[str, str]:
    """Right answers whose first cell sleeps ``seconds`` before defining ``double``."""
    return dict(RIGHT, double_answer=f"import time\ntime.sleep({seconds})\n" + RIGHT["double_answer"])


def _cell(kind: str, source: str, grade_id: str, *, solution=False, grade=False, points=None):
    meta = {"grade": grade, "grade_id": grade_id, "locked": not solution, "schema_version": 3, "solution": solution}
    meta["task"] = False
    if points is not None:
        meta["points"] = points
    make = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
    return make(source, metadata={"nbgrader": meta})


def _notebook(answers: dict[str, str]) -> nbformat.NotebookNode:
    cells = [
        _cell("markdown", "# Classroom fixture", "intro"),
        _cell("code", "SEEN = []", "setup"),
        _cell("code", answers["double_answer"], "double_answer", solution=True),
        _cell(
            "code",
            "assert double(2) == 4, 'double(2)'\n### BEGIN HIDDEN TESTS\nassert double(-7) == -14\n"
            "### END HIDDEN TESTS",
            "double_test",
            grade=True,
            points=POINTS["double_test"],
        ),
        _cell("code", answers["greet_answer"], "greet_answer", solution=True),
        _cell("code", "assert greet('ada') == 'hi ada', \"greet('ada')\"", "greet_test", grade=True, points=1.0),
    ]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata.kernelspec = {"display_name": "Python 3", "language": "python", "name": "python3"}
    return nb


def make_course(root: Path) -> Path:
    """A course folder under ``root`` with the fixture unit's source and the course's nbgrader config."""
    source = {  # the right answers between nbgrader's solution markers
        k: v.replace("\n", "\n    ### BEGIN SOLUTION\n", 1) + "\n    ### END SOLUTION" for k, v in RIGHT.items()
    }
    folder = root / "solutions" / UNIT
    folder.mkdir(parents=True)
    nbformat.write(_notebook(source), str(folder / f"{UNIT}.ipynb"))
    shutil.copy(ROOT / "nbgrader_config.py", root)
    return root


def generated_course(root: Path) -> Path:
    """``make_course`` with the assignment generated (``exercises/`` and a SQLite gradebook that knows it)."""
    from grader.course import nbgrader_command

    course = make_course(root)
    nbgrader_command(course, "generate_assignment", UNIT, "--force")
    return course


def clone(template: Path, dest: Path) -> Path:
    """A copy of the course ``template`` (cheaper than generating the assignment again)."""
    shutil.copytree(template, dest)
    return dest


def course_copy(dest: Path) -> Path:
    """``dest`` (a new or empty folder) made a copy of the real course: ``solutions/`` and ``nbgrader_config.py``."""
    shutil.copytree(ROOT / "solutions", dest / "solutions")
    shutil.copy(ROOT / "nbgrader_config.py", dest)
    return dest


def submission_scores(course: Path, unit: str, student: str) -> dict[str, tuple[float, float]]:
    """Grade id -> (automatic score, most points) of each code cell of ``student``'s ``unit`` in the gradebook."""
    from nbgrader.api import Gradebook

    from grader.course import load_course

    with Gradebook(load_course(course).db_url) as gb:
        submission = gb.find_submission(unit, student)
        return {
            g.name: (g.auto_score, g.max_score)
            for nb in submission.notebooks
            for g in nb.grades
            if g.cell_type == "code"
        }


def submit(course: Path, student: str, answers: dict[str, str]) -> None:
    """Place ``student``'s notebook with ``answers`` in ``submitted/``, as ``python -m grader import`` does."""
    folder = course / "submitted" / student / UNIT
    folder.mkdir(parents=True)
    nbformat.write(_notebook(answers), str(folder / f"{UNIT}.ipynb"))
    (folder / "timestamp.txt").write_text("2026-11-24 12:00:00.000000 UTC")


def gradebook_scores(db_url: str) -> dict[str, dict[str, float | None]]:
    """Every submission of the unit in the gradebook: student -> grade id -> automatic score."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        return {
            sub.student.id: {g.name: g.auto_score for nb in sub.notebooks for g in nb.grades}
            for sub in gb.assignment_submissions(UNIT)
        }
