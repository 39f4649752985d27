"""The instructor's class report on a synthetic class built from unit 01's mistake bank, graded for real.

Each entry of ``tests/banks/test_01_mistakes.py`` for the unit's first two parts becomes one
student who submits the solution with that one mistake; two honest students submit the solution, one
the untouched exercise (the stub), and one the solution without its first answer cell (a review
flag). The class is graded with the real grader (sandboxed where a sandbox can be made), then
``python -m grader report`` writes the page and the per-part CSV. Checked against the bank: every
bank student fails the part the bank names, with the hint line the bank's own run of that test
raises, and passes every part before its mistake; the honest students pass everything, the stub
fails everything; each part's failure count is what the gradebook says; the flagged submission is
listed to read. Bad input: a unit never graded, an empty class. The page opens in headless
Chromium, its images load, and it quotes no hidden test code.
"""

from __future__ import annotations

import csv
import html
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from classroom_course import course_copy

from grader.autograde import autograde
from grader.cli import main
from grader.course import load_course, nbgrader_command, unit_notebooks
from grader.redact import hidden_lines
from grader.report import hint_line, unit_report
from grader.sandbox import sandbox_problem

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "banks"))
from notebook_cells import FRAMES, SHORTCUT, answer_source, assert_loses_points, load_cells  # noqa: E402
from test_01_mistakes import BANK, UNIT  # noqa: E402

HONEST, STUB, NOCELL = ["honest1", "honest2"], "stub", "nocell"
ORDER = [c.grade_id for c in load_cells(UNIT) if c.kind in ("answer", "test")]  # the notebook's order
TESTS = [c.grade_id for c in load_cells(UNIT) if c.kind == "test"]
ANSWERS = [c.grade_id for c in load_cells(UNIT) if c.kind == "answer"]
FIRST_ANSWER = ANSWERS[0]
# The bank's entries for the first two parts (24 of 81): 28 submissions grade in ~130 s on 2 cores, all 85 in ~7 min.
STUDENTS = {f"m{i:02d}": m for i, m in enumerate(BANK) if m.answer in ANSWERS[:2]}


def _submit(course: Path, student: str, nb: dict) -> None:
    folder = course / "submitted" / student / UNIT
    folder.mkdir(parents=True)
    (folder / f"{UNIT}.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    (folder / "timestamp.txt").write_text("2026-11-24 12:00:00.000000 UTC")


def _with(nb: dict, grade_id: str, source: str | None) -> dict:
    """``nb`` with the cell ``grade_id``'s source replaced (None: the cell removed)."""
    nb = json.loads(json.dumps(nb))
    cells = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id]
    assert len(cells) == 1, grade_id
    if source is None:
        nb["cells"].remove(cells[0])
    else:
        cells[0]["source"] = source
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The synthetic class graded; (course, seconds the grading took)."""
    course = course_copy(tmp_path_factory.mktemp("report") / "course")
    nbgrader_command(course, "generate_assignment", UNIT, "--force")
    solution = json.loads((ROOT / "solutions" / UNIT / f"{UNIT}.ipynb").read_text(encoding="utf-8"))
    for student, mistake in STUDENTS.items():
        _submit(course, student, _with(solution, mistake.answer, mistake.apply(answer_source(UNIT, mistake.answer))))
    for student in HONEST:
        _submit(course, student, solution)
    _submit(course, STUB, json.loads((course / "exercises" / UNIT / f"{UNIT}.ipynb").read_text(encoding="utf-8")))
    _submit(course, NOCELL, _with(solution, FIRST_ANSWER, None))
    started = time.monotonic()
    autograde(course, [UNIT], workers=2, sandbox=sandbox_problem() is None, log=lambda line: None)
    return course, time.monotonic() - started


@pytest.fixture(scope="module")
def report(graded):
    return unit_report(graded[0], UNIT)


@pytest.fixture(scope="module")
def expected_hints(graded):
    """Student -> the hint line of the error the bank's own run of its mistake raises."""
    source, release = unit_notebooks(load_course(graded[0]), UNIT)[UNIT]
    hidden = hidden_lines(source, release)
    found = {}
    for student, mistake in STUDENTS.items():
        error = assert_loses_points(UNIT, mistake)
        found[student] = hint_line(type(error).__name__, str(error), hidden)
    return found


def test_grading_the_class_stays_cheap(graded):
    print(f"graded {len(STUDENTS) + 4} submissions of {UNIT} in {graded[1]:.0f} s")
    # ~130 s alone on 2 cores, ~265 s next to another test worker (make test): a gross regression fails
    assert graded[1] < 600, f"grading the synthetic class took {graded[1]:.0f} s"


def test_each_bank_student_fails_the_part_the_bank_names_with_its_hint(report, expected_hints):
    parts = {p.grade_id: p for p in report.parts}
    assert sorted(parts) == sorted(TESTS)
    wrong = {}
    for student, mistake in STUDENTS.items():
        part = parts[mistake.test]
        if part.failures.get(student) != expected_hints[student]:
            wrong[mistake.name] = (part.failures.get(student), expected_hints[student])
        before = ORDER[: ORDER.index(mistake.answer)]  # a later answer cannot change an earlier test
        earlier = [t for t in before if t in parts and student in parts[t].failures]
        assert not earlier, f"{mistake.name!r} fails {earlier}, which run before its answer cell"
    assert not wrong, f"report hint != bank hint (report, bank): {wrong}"


def test_each_part_counts_the_failures_and_ranks_the_hints(report, expected_hints):
    for part in report.parts:
        failing = {s for s, v in part.scores.items() if v < part.points}
        assert set(part.failures) == failing, part.name
        assert part.counts()[0] == len(part.scores) - len(failing)
        targeted = {s for s, m in STUDENTS.items() if m.test == part.grade_id}
        assert targeted | {STUB} <= failing, part.name
        if part.grade_id == TESTS[0]:  # nothing runs before the first part's answer: exactly the bank's
            assert failing == targeted | {STUB, NOCELL}, part.name
        # the hint most students failed with, among those the bank aims at this part
        ours = Counter(expected_hints[s] for s in targeted)
        if ours:  # (parts after the first two have no bank students here)
            top, count = ours.most_common(1)[0]
            assert part.hints[top] >= count, (part.name, top, part.hints)
    shares = [p.mean() / p.points for p in report.parts]
    assert shares == sorted(shares), "the parts must come hardest first"
    assert all(s not in p.failures for p in report.parts for s in HONEST)
    assert all(STUB in p.failures for p in report.parts)


def test_the_flagged_students_are_the_banks_shortcuts_and_frames_readers(report):
    """Besides copy flags (the reference answers are near copies of the library, as any honest student's
    may be), exactly the bank's shortcut and ``frames:`` entries and the missing cell are listed to read."""
    flagged = {s for s, why, _ in report.to_read if not why.startswith("copy of")}
    bank = {s for s, m in STUDENTS.items() if m.name.startswith((SHORTCUT, FRAMES))}
    assert bank, "the first two parts have shortcut and frames: entries"
    assert flagged == bank | {NOCELL}, (sorted(flagged - bank), sorted(bank - flagged))
    why = [w for s, w, _ in report.to_read if s == NOCELL]
    assert any(FIRST_ANSWER in w for w in why), why


def test_make_report_writes_the_page_and_the_parts_csv(graded, report, capsys):
    course = graded[0]
    (course / "reports").mkdir(exist_ok=True)
    (course / "reports" / f"{UNIT}.html").write_text("old")  # a regenerated output: overwritten
    assert main(["--course", str(course), "report", "--unit", UNIT]) == 0
    page = (course / "reports" / f"{UNIT}.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "data:image/png;base64," in page
    assert "http://" not in page and "https://" not in page, "the page must work offline"
    rows = list(csv.DictReader((course / "reports" / f"{UNIT}_parts.csv").open()))
    assert [r["part"] for r in rows] == [p.name for p in report.parts]
    for row, part in zip(rows, report.parts):
        assert int(row["failures"]) == len(part.failures)
        assert row["top_hint"] == part.hints.most_common(1)[0][0]
    assert main(["--course", str(course), "report"]) == 0
    assert (course / "reports" / "course.html").read_text(encoding="utf-8").count(STUB) == 1
    assert main(["--course", str(course), "export", "--to", str(course / "grades.csv")]) == 0
    parts = list(csv.DictReader((course / "grades_parts.csv").open()))
    assert {r["student_id"] for r in parts} == {*STUDENTS, *HONEST, STUB, NOCELL}
    assert all(f"{UNIT}/{UNIT}:{t}" in parts[0] for t in TESTS)


def test_a_unit_never_graded_and_an_empty_class_are_refused(graded, tmp_path, capsys):
    assert main(["--course", str(graded[0]), "report", "--unit", "02_evaluation"]) == 2
    err = capsys.readouterr().err
    assert "'02_evaluation' was never graded" in err and UNIT in err and "Traceback" not in err
    empty = course_copy(tmp_path / "empty")
    assert main(["--course", str(empty), "report", "--unit", UNIT]) == 2
    assert "empty class" in capsys.readouterr().err
    assert main(["--course", str(empty), "report"]) == 2
    assert "empty class" in capsys.readouterr().err


def test_the_page_renders_in_a_browser_without_hidden_code(graded):
    sys.path.insert(0, str(ROOT / "tests" / "classroom"))
    from classroom_hub import CHROMIUM_ARGS, chromium

    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        problem = "the Python package playwright is not installed (make setup installs it)"
    else:
        problem = None if chromium() else "no Chromium on PATH (make browser-tools installs it)"
    if problem:
        if os.environ.get("COURSE_REQUIRE_BROWSER") == "1":
            pytest.fail(f"COURSE_REQUIRE_BROWSER=1 but {problem}")
        pytest.skip(problem)
    course = graded[0]
    main(["--course", str(course), "report", "--unit", UNIT])
    page_file = course / "reports" / f"{UNIT}.html"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS, timeout=60_000)
        try:
            page = browser.new_page()
            page.goto(page_file.as_uri())
            widths = page.eval_on_selector_all("img", "imgs => imgs.map(i => i.complete ? i.naturalWidth : 0)")
            text = page.inner_text("body")
        finally:
            browser.close()
    assert widths and all(w > 0 for w in widths), widths
    source, release = unit_notebooks(load_course(course), UNIT)[UNIT]
    hidden = hidden_lines(source, release)
    assert hidden, "unit 01 has hidden tests to look for"
    raw = html.unescape(page_file.read_text(encoding="utf-8"))
    leaked = [line for line in hidden if line in text or line in raw]
    assert not leaked, f"the report quotes hidden test code: {leaked[:3]}"
    assert "Mistakes to discuss" in text and STUB in text
    shutil.rmtree(course / "reports")


def test_make_report_runs_the_report_command():
    done = subprocess.run(
        ["make", "-n", "-C", str(ROOT), "report", f"UNIT={UNIT}"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert f"-m grader report --unit {UNIT}" in " ".join(done.stdout.split()), done.stdout
    done = subprocess.run(["make", "-n", "-C", str(ROOT), "report"], capture_output=True, text=True, timeout=60)
    assert "-m grader report" in " ".join(done.stdout.split()) and "--unit" not in done.stdout, done.stdout
