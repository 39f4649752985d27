"""The nbgrader pipeline, end to end, on a temporary copy of the course.

For every unit in solutions/: regenerating the exercise reproduces the committed one byte
for byte; the solution submitted as a student scores full marks on every autograded cell;
the untouched exercise scores 0 on each; feedback never shows hidden tests; grades export
to CSV. All through nbgrader's own commands, as an instructor would run them.
"""

from __future__ import annotations

import csv
import filecmp
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from classroom_course import course_copy
from nbgrader.api import Gradebook

ROOT = Path(__file__).resolve().parents[2]
UNITS = sorted(p.name for p in (ROOT / "solutions").glob("[0-9][0-9]_*") if p.is_dir())
NBGRADER = [sys.executable, "-m", "nbgrader"]
STUDENTS = {"solution": "solutions", "blank": "exercises"}  # student id -> folder submitted


def nbgrader(course: Path, *args: str) -> None:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run([*NBGRADER, *args, "--log-level=WARN"], cwd=course, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise AssertionError(f"nbgrader {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """A copy of the course with exercises regenerated, both students submitted and autograded."""
    course = course_copy(tmp_path_factory.mktemp("course"))
    for unit in UNITS:
        nbgrader(course, "generate_assignment", unit, "--force")
        for student, folder in STUDENTS.items():
            submitted = course / "submitted" / student / unit
            shutil.copytree(ROOT / folder / unit, submitted)
            (submitted / "timestamp.txt").write_text("2026-01-01 12:00:00.000000 UTC")
        nbgrader(course, "autograde", unit, "--force")
        nbgrader(course, "generate_feedback", unit, "--force")
    return course


def test_units_exist():
    assert UNITS, "no units under solutions/"


@pytest.mark.parametrize("unit", UNITS)
def test_exercise_is_regenerated_byte_for_byte(course, unit):
    fresh, committed = course / "exercises" / unit, ROOT / "exercises" / unit
    assert committed.is_dir(), f"exercises/{unit} is missing: run `make exercises`"
    fresh_files = sorted(p.relative_to(fresh) for p in fresh.rglob("*") if p.is_file())
    committed_files = sorted(p.relative_to(committed) for p in committed.rglob("*") if p.is_file())
    assert fresh_files == committed_files, f"exercises/{unit}: file lists differ; run `make exercises`"
    for rel in fresh_files:
        assert filecmp.cmp(fresh / rel, committed / rel, shallow=False), (
            f"exercises/{unit}/{rel} differs from what solutions/ generates: run `make exercises` "
            "(never edit exercises/ by hand)"
        )


def _scores(course: Path, unit: str, student: str) -> dict[str, tuple[float, float]]:
    """Autograded cells of ``student``'s submission: grade id -> (score, max score)."""
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        submission = gb.find_submission(unit, student)
        return {
            grade.name: (grade.score, grade.max_score)
            for notebook in submission.notebooks
            for grade in notebook.grades
            if grade.auto_score is not None or not grade.needs_manual_grade
            if grade.cell_type == "code"
        }


@pytest.mark.parametrize("unit", UNITS)
def test_solution_scores_full_marks(course, unit):
    scores = _scores(course, unit, "solution")
    assert scores, f"{unit}: no autograded cells found"
    lost = {name: s for name, s in scores.items() if s[0] != s[1]}
    assert not lost, f"{unit}: the solution loses points on (score, max) {lost}"


@pytest.mark.parametrize("unit", UNITS)
def test_untouched_exercise_scores_zero(course, unit):
    scores = _scores(course, unit, "blank")
    earned = {name: s for name, s in scores.items() if s[0] != 0}
    assert not earned, f"{unit}: the unsolved exercise earns points on (score, max) {earned}"


def _hidden_test_lines(unit: str, release: Path) -> list[str]:
    """Lines of code inside the hidden-test regions of the unit's solution notebook that its release
    (``release``, what students are shown anyway) does not contain, as a line or inside one (as
    ``grader.redact.hidden_test_lines`` judges them: a hidden ``check_method(`` also opens visible lines)."""
    nb = json.loads((ROOT / "solutions" / unit / f"{unit}.ipynb").read_text(encoding="utf-8"))
    shown = json.loads(release.read_text(encoding="utf-8"))
    visible = "\n".join("".join(cell["source"]) for cell in shown["cells"])
    lines, inside = [], False
    for cell in nb["cells"]:
        for line in "".join(cell["source"]).splitlines():
            if "BEGIN HIDDEN TESTS" in line or "END HIDDEN TESTS" in line:
                inside = "BEGIN" in line
            elif inside and len(line.strip()) > 12 and line.strip() not in visible:
                lines.append(line.strip())
    return lines


@pytest.mark.parametrize("unit", UNITS)
def test_feedback_hides_hidden_tests(course, unit):
    hidden = _hidden_test_lines(unit, course / "exercises" / unit / f"{unit}.ipynb")
    assert hidden, f"{unit}: the solution has no hidden tests"
    pages = list((course / "feedback" / "blank" / unit).glob("*.html"))
    assert pages, f"{unit}: no feedback generated"
    for page in pages:
        text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))
        assert "HIDDEN TESTS" not in text, f"{page.name} shows the hidden-test markers"
        shown = [line for line in hidden if line in text]
        assert not shown, f"{page.name} shows hidden test code: {shown[:3]}"


def test_grades_export_to_csv(course):
    out = course / "grades.csv"
    nbgrader(course, "export", "--to", str(out))
    rows = list(csv.DictReader(out.open()))
    graded = {(r["assignment"], r["student_id"]) for r in rows}
    for unit in UNITS:
        assert {(unit, "solution"), (unit, "blank")} <= graded, f"{unit}: missing from the grades CSV"
    full = {r["assignment"]: float(r["score"]) for r in rows if r["student_id"] == "solution"}
    blank = {r["assignment"]: float(r["score"]) for r in rows if r["student_id"] == "blank"}
    for unit in UNITS:
        assert full[unit] > 0 and blank[unit] == 0, f"{unit}: CSV scores solution={full[unit]} blank={blank[unit]}"
