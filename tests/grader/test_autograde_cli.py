"""The instructor commands of ``python -m grader``, end to end, on a copy of the course.

For every unit in solutions/: a folder of LMS-style submissions (``alice.ipynb`` = the solution,
``bob.ipynb`` = the untouched exercise) is imported into submitted/, autograded in the sandbox
(two workers, every unit in one batch), given feedback and exported. The solution scores full
marks on every autograded cell and raises no review flag but copy flags (so the in-process
guards have no false positives on real units; a reference answer may be a near copy of the
library, see ``benchmarks/copy_flags.py``), the exercise scores 0, feedback hides hidden tests,
and the CSV has a review_flags column, where ``carol`` (first unit only: the solution with an
import of the library and a pasted library function) is flagged for both. Without a sandbox the
command refuses, naming the flag that overrides it; with that flag it grades the same way.
"""

from __future__ import annotations

import ast
import csv
import html
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from classroom_course import course_copy, submission_scores
from nbgrader.api import Gradebook

from grader.cli import main
from grader.course import load_course
from grader.gradebook import LOG_NAME
from grader.redact import hidden_test_lines
from grader.review import library_index
from grader.sandbox import UNSAFE_FLAG, sandbox_problem

ROOT = Path(__file__).resolve().parents[2]
UNITS = sorted(p.name for p in (ROOT / "solutions").glob("[0-9][0-9]_*") if p.is_dir())
SANDBOX = sandbox_problem() is None


def test_the_sandbox_exists_where_the_test_command_requires_it():
    """`make test` sets COURSE_REQUIRE_SANDBOX=1 where it can install bubblewrap (Linux, as root),
    so that CI fails loudly instead of skipping the attack catalog when the sandbox is missing."""
    if os.environ.get("COURSE_REQUIRE_SANDBOX") != "1":
        pytest.skip("COURSE_REQUIRE_SANDBOX is not set: the catalog skips where no sandbox can be made")
    assert SANDBOX, f"no grading sandbox here: {sandbox_problem()}"


def _library_function() -> tuple[str, str, str]:
    """(module, name, source) of the first function the copy flag compares, read from its file."""
    definition = next(d for d in library_index().definitions if d.kind == "function" and d.name.count(".") == 2)
    _, module, name = definition.name.split(".")
    path = ROOT / "course_utils" / f"{module}.py"
    text = path.read_text(encoding="utf-8")
    node = next(n for n in ast.parse(text).body if getattr(n, "name", None) == name)
    return f"course_utils.{module}", name, "".join(text.splitlines(keepends=True)[node.lineno - 1 : node.end_lineno])


def _copying(solution: Path, target: Path) -> str:
    """Write the solution with its first answer cell extended by a library import and a pasted library
    function; return that cell's grade id."""
    nb = json.loads(solution.read_text(encoding="utf-8"))
    module, name, source = _library_function()
    cell = next(
        c for c in nb["cells"] if c["cell_type"] == "code" and c["metadata"].get("nbgrader", {}).get("solution")
    )
    cell["source"] = "".join(cell["source"]) + f"\nimport {module} as _library\n\n\n" + source
    target.write_text(json.dumps(nb), encoding="utf-8")
    return cell["metadata"]["nbgrader"]["grade_id"]


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """A course copy after `import`, `autograde`, `feedback` and `export` for every unit."""
    course = course_copy(tmp_path_factory.mktemp("cli_course"))
    for unit in UNITS:
        inbox = tmp_path_factory.mktemp(f"lms_{unit}")
        shutil.copy(ROOT / "solutions" / unit / f"{unit}.ipynb", inbox / "alice.ipynb")
        shutil.copy(ROOT / "exercises" / unit / f"{unit}.ipynb", inbox / "bob.ipynb")
        if unit == UNITS[0]:
            _copying(ROOT / "solutions" / unit / f"{unit}.ipynb", inbox / "carol.ipynb")
        (inbox / "not a valid id.ipynb").write_text("{}")
        assert main(["--course", str(course), "import", unit, str(inbox)]) == 0
    unsafe = [] if SANDBOX else [UNSAFE_FLAG]
    assert main(["--course", str(course), "autograde", "--workers", "2", "--cell-timeout", "300", *unsafe]) == 0
    assert main(["--course", str(course), "feedback", *UNITS]) == 0
    assert main(["--course", str(course), "export", "--to", str(course / "grades.csv")]) == 0
    return course


def test_import_uses_the_lms_file_names(course):
    for unit in UNITS:
        students = sorted(p.parent.name for p in (course / "submitted").glob(f"*/{unit}"))
        assert students == ["alice", "bob"] + (["carol"] if unit == UNITS[0] else []), f"{unit}: imported {students}"
        assert (course / "submitted" / "alice" / unit / "timestamp.txt").exists()
        # nbgrader's release_feedback reads the submission time from feedback/, where generate_feedback
        # copies it from autograded/
        assert (course / "feedback" / "alice" / unit / "timestamp.txt").exists(), f"{unit}: no timestamp in feedback"


@pytest.mark.parametrize("unit", UNITS)
def test_solution_scores_full_marks_without_review_flags(course, unit):
    scores = submission_scores(course, unit, "alice")
    assert scores and all(score == most for score, most in scores.values()), f"{unit}: {scores}"
    log = json.loads((course / "autograded" / "alice" / unit / LOG_NAME).read_text())
    flags = [f for entry in log for f in entry["flags"] if not f.startswith("copy of course_utils.")]
    assert not flags, f"{unit}: honest solution flagged {flags}"


@pytest.mark.parametrize("unit", UNITS)
def test_untouched_exercise_scores_zero(course, unit):
    scores = submission_scores(course, unit, "bob")
    assert scores and all(score == 0 for score, _ in scores.values()), f"{unit}: {scores}"


@pytest.mark.parametrize("unit", UNITS)
def test_feedback_hides_hidden_tests_but_names_failures(course, unit):
    source = json.loads((ROOT / "solutions" / unit / f"{unit}.ipynb").read_text(encoding="utf-8"))
    hidden = [line for c in source["cells"] for line in hidden_test_lines("".join(c["source"]))]
    for student in ("alice", "bob"):
        page = course / "feedback" / student / unit / f"{unit}.html"
        text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))
        own = (course / "submitted" / student / unit / f"{unit}.ipynb").read_text(encoding="utf-8")  # JSON-escaped
        shown = [line for line in hidden if line in text and json.dumps(line)[1:-1] not in own]
        assert "HIDDEN TESTS" not in text and not shown, f"{unit}/{student} shows hidden test code {shown[:3]}"
    bob = html.unescape((course / "feedback" / "bob" / unit / f"{unit}.html").read_text(encoding="utf-8"))
    assert "NotImplementedError" in bob and "Traceback (most recent call last)" not in bob


def test_export_has_every_unit_and_review_flags(course):
    rows = list(csv.DictReader((course / "grades.csv").open()))
    assert {(r["assignment"], r["student_id"]) for r in rows} == {
        (u, s) for u in UNITS for s in ("alice", "bob", "carol")
    }
    assert all("review_flags" in r for r in rows)
    assert all(float(r["score"]) > 0 for r in rows if r["student_id"] == "alice")
    assert all(float(r["score"]) == 0 for r in rows if r["student_id"] == "bob")


def test_copying_from_the_library_is_flagged_in_the_grades(course, tmp_path):
    grade_id = _copying(ROOT / "solutions" / UNITS[0] / f"{UNITS[0]}.ipynb", tmp_path / "carol.ipynb")
    module, name, _ = _library_function()
    row = next(r for r in csv.DictReader((course / "grades.csv").open()) if r["student_id"] == "carol")
    flags = row["review_flags"].split("; ")
    assert f"imports {module}@{grade_id}" in flags, flags
    assert f"copy of {module}.{name} (1.00)@{grade_id}" in flags, flags


def test_refuses_without_a_sandbox_and_names_the_flag(course, capsys):
    before = sorted(p.relative_to(course) for p in course.rglob("*"))
    code = main(["--course", str(course), "autograde", UNITS[0], "--bwrap", str(course / "no-such-bwrap")])
    assert code == 2
    err = capsys.readouterr().err
    assert UNSAFE_FLAG in err and "bubblewrap" in err and "Refusing" in err
    assert sorted(p.relative_to(course) for p in course.rglob("*")) == before, "a refused run changed files"


def test_unsafe_flag_grades_without_the_sandbox(course):
    unit = UNITS[0]
    assert main(["--course", str(course), "autograde", unit, "--student", "alice", UNSAFE_FLAG]) == 0
    scores = submission_scores(course, unit, "alice")
    assert all(score == most for score, most in scores.values()), scores


def test_regrading_overwrites_scores_and_keeps_manual_grades(course):
    """Runs last: alice and bob swap notebooks and are regraded. Their autograded scores swap (the
    regrade rewrites the rows it reuses), while a grade the instructor gave by hand in the
    formgrader survives, as it does with stock `nbgrader autograde`."""
    unit = UNITS[0]
    with Gradebook(load_course(course).db_url) as gb:
        written = next(
            g for nb in gb.find_submission(unit, "alice").notebooks for g in nb.grades if g.cell_type == "markdown"
        )
        written.manual_score = 1.0
        gb.db.commit()
        written_id = written.name
    alice, bob = (course / "submitted" / s / unit / f"{unit}.ipynb" for s in ("alice", "bob"))
    a, b = alice.read_bytes(), bob.read_bytes()
    alice.write_bytes(b)
    bob.write_bytes(a)
    unsafe = [] if SANDBOX else [UNSAFE_FLAG]
    assert main(["--course", str(course), "autograde", unit, *unsafe]) == 0
    assert all(score == 0 for score, _ in submission_scores(course, unit, "alice").values())
    assert all(score == most for score, most in submission_scores(course, unit, "bob").values())
    with Gradebook(load_course(course).db_url) as gb:
        kept = next(g for nb in gb.find_submission(unit, "alice").notebooks for g in nb.grades if g.name == written_id)
        assert kept.manual_score == 1.0
