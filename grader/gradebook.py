"""Write the grades: ``autograded/``, nbgrader's gradebook and the instructor's log; export them to CSV.

``save`` writes one student's graded notebooks of a unit as stock ``nbgrader autograde`` does (the
folder ``autograded/<student>/<unit>/``, the grade and comment rows, nbgrader's late penalty), so
that ``nbgrader formgrader``, ``generate_feedback`` and ``export`` keep working; next to them it
writes ``autograde.log``, what the run saw (``log_entry``), which feedback never copies. ``export`` is
``nbgrader export`` plus a ``review_flags`` column read from those logs, and writes next to it
``<name>_parts.csv``, one column per graded cell (``export_parts``), to re-weight or drop a part.
Where the gradebook lives (``db_url``) is the course's configuration: ``grader.course.check_db_url``.
"""

from __future__ import annotations

import csv
import json
import shutil
import warnings
from pathlib import Path

from grader.course import copy_submission_files, load_course, nbgrader_command
from grader.grade import Graded
from grader.plan import autograded_notebook

LOG_NAME = "autograde.log"  # nbgrader's ignore list holds "*.log": feedback never copies it to students


def save(
    gb,
    coursedir,
    unit: str,
    student: str,
    results: list[Graded],
    release: dict[str, dict],
    hidden: dict[str, list[str]],
) -> None:
    """Write autograded/<student>/<unit>/ and the grades of ``results`` into the open gradebook ``gb``, as
    stock ``nbgrader autograde`` does. ``release`` and ``hidden`` map each notebook's name to its release
    notebook dict and to its hidden-test lines (``grader.redact.hidden_lines``)."""
    from nbformat import from_dict
    from nbformat.v4 import writes
    from nbgrader.preprocessors import AssignLatePenalties
    from nbgrader.utils import compute_checksum

    dest = Path(coursedir.format_path(coursedir.autograded_directory, student, unit))
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    copy_submission_files(coursedir, unit, student, dest)
    submitted = Path(coursedir.format_path(coursedir.submitted_directory, student, unit))
    timestamp = coursedir.get_existing_timestamp(str(submitted))
    warnings.filterwarnings("ignore", message=".*not in session.*")  # nbgrader's SQLAlchemy noise
    gb.update_or_create_student(student)
    # as stock `nbgrader autograde`: a regraded submission keeps its rows (and any manual grades)
    submission = gb.update_or_create_submission(unit, student, **({"timestamp": timestamp} if timestamp else {}))
    late = submission.assignment.duedate is not None and submission.total_seconds_late > 0
    for graded in results:
        nb = from_dict(autograded_notebook(graded.parts, graded.run, release[graded.notebook], hidden[graded.notebook]))
        # one query for each notebook's grade and comment rows, rather than one per cell
        record = next(n for n in submission.notebooks if n.name == graded.notebook)
        grades, comments = {g.name: g for g in record.grades}, {c.name: c for c in record.comments}
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            unchanged = meta.get("checksum") == compute_checksum(cell) if "grade_id" in meta else False
            if meta.get("grade"):
                grade = grades[meta["grade_id"]]
                auto = graded.scores.get(meta["grade_id"]) if not meta.get("solution") else (0.0 if unchanged else None)
                grade.auto_score, grade.needs_manual_grade = auto, auto is None
            if meta.get("solution") or meta.get("task"):
                comments[meta["grade_id"]].auto_comment = "No response." if unchanged and not meta.get("task") else None
        record.late_submission_penalty = None
        gb.db.commit()
        path = dest / f"{graded.notebook}.ipynb"
        path.write_text(writes(nb), encoding="utf-8")  # built here from trusted parts: skip re-validation
        path.chmod(0o444)
        if late:  # nbgrader's own late-penalty step, with its configured plugin
            resources = {
                "nbgrader": {
                    "notebook": graded.notebook,
                    "assignment": unit,
                    "student": student,
                    "db_url": coursedir.db_url,
                }
            }
            AssignLatePenalties(config=coursedir.config).preprocess(nb, resources)
    (dest / LOG_NAME).write_text(json.dumps([log_entry(g) for g in results], indent=1))


def log_entry(graded: Graded) -> dict:
    """What the instructor's log keeps of one graded notebook: scores, flags, outcome and each cell's
    verified record (a JSON-ready dict)."""
    run = graded.run
    return {
        "student": graded.student,
        "notebook": graded.notebook,
        "scores": graded.scores,
        "flags": graded.flags,
        "outcome": run.outcome,
        "detail": run.detail,
        "seconds": round(run.seconds, 2),
        "forged_lines": run.forged,
        "cells": {
            i: {k: r.get(k) for k in ("grade_id", "status", "ename", "evalue", "traceback")}
            for i, r in run.records.items()
        },
        "stderr": run.stderr,
    }


def export(course: Path, to: Path, db_url: str | None = None) -> Path:
    """``nbgrader export`` to ``to``, plus a ``review_flags`` column from the autograde logs.

    ``db_url`` overrides the configured gradebook.
    """
    coursedir = load_course(course, db_url)
    nbgrader_command(course, "export", "--to", str(to), db_url=coursedir.db_url)
    rows = list(csv.DictReader(to.open(newline="")))
    for row in rows:
        log = (
            Path(coursedir.format_path(coursedir.autograded_directory, row["student_id"], row["assignment"])) / LOG_NAME
        )
        found = [f for entry in (json.loads(log.read_text()) if log.exists() else []) for f in entry["flags"]]
        row["review_flags"] = "; ".join(found)
    if rows:
        with to.open("w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    export_parts(coursedir, to.with_name(f"{to.stem}_parts.csv"))
    return to


def export_parts(coursedir, to: Path) -> Path:
    """Write ``to``: one row per submission (student_id, assignment, score, max_score) and one column per
    graded cell, named ``UNIT/NOTEBOOK:GRADE_ID``, holding its points (empty for another unit's cells)."""
    from nbgrader.api import Gradebook

    rows, columns = [], {}
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        for assignment in gb.assignments:
            for sub in assignment.submissions:
                row = {"student_id": sub.student.id, "assignment": assignment.name, "score": sub.score}
                row["max_score"] = sub.max_score
                for nb in sub.notebooks:
                    for g in nb.grades:
                        name = f"{assignment.name}/{nb.name}:{g.name}"
                        columns[name] = None
                        row[name] = g.score
                rows.append(row)
    with to.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=["student_id", "assignment", "score", "max_score", *columns])
        writer.writeheader()
        writer.writerows(sorted(rows, key=lambda r: (r["assignment"], r["student_id"])))
    return to
