"""The instructor's class report: what a graded unit's class got wrong, per part, from the gradebook and the logs.

``unit_report`` reads one unit's grades from nbgrader's gradebook (SQLite or PostgreSQL, the
course's ``db_url``) and each student's ``autograde.log`` (``grader.gradebook``). For each test cell
(a *part*) it counts full, partial and zero marks, and groups the failures by the hint they carry:
the ``Hint:`` line of the course's checks when there is one, else the first line of the error, always
redacted of hidden test code (``grader.redact``). ``write_unit`` writes ``reports/<unit>.html`` (one
self-contained page, its plots inline as base64 PNG) and ``reports/<unit>_parts.csv``;
``write_course`` writes ``reports/course.html``, one row per unit plus the students who are behind.
Reports are regenerated outputs: each run overwrites the previous one. They name students, so they
are for the instructor only (``reports/`` is ignored by git and never copied into feedback).
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import os
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from grader.course import load_course, unit_notebooks
from grader.gradebook import LOG_NAME
from grader.redact import hidden_lines, summarize_error

BEHIND = 0.5  # a student below this share of a unit's points is behind on it
NOT_RUN = "not run: the notebook stopped at an earlier cell"
PART_COLUMNS = ["part", "points", "mean", "full", "partial", "zero", "failures", "top_hint", "top_hint_count"]


@dataclass
class Part:
    """One graded test cell of a unit, over the class."""

    notebook: str
    grade_id: str
    points: float
    scores: dict[str, float] = field(default_factory=dict)  # student -> points earned
    failures: dict[str, str] = field(default_factory=dict)  # student -> the hint line of the failure

    @property
    def name(self) -> str:
        """``notebook:grade_id``, unique within the unit."""
        return f"{self.notebook}:{self.grade_id}"

    def counts(self) -> tuple[int, int, int]:
        """(full, partial, zero): students with all the points, some of them, none."""
        full = sum(s >= self.points for s in self.scores.values())
        zero = sum(s <= 0 for s in self.scores.values())
        return full, len(self.scores) - full - zero, zero

    @property
    def hints(self) -> Counter:
        """Hint line -> how many students failed with it."""
        return Counter(self.failures.values())

    def example(self, hint: str) -> str:
        """The first student (by id) who failed with ``hint``."""
        return min(s for s, h in self.failures.items() if h == hint)

    def mean(self) -> float:
        """Mean points earned over the class."""
        return statistics.fmean(self.scores.values()) if self.scores else 0.0


@dataclass
class UnitReport:
    """A graded unit over the class: totals, parts (hardest first), submissions to read, ungraded answers."""

    unit: str
    most: float
    totals: dict[str, float]
    parts: list[Part]
    to_read: list[tuple[str, str, str]]  # (student, what, log path: absolute)
    ungraded: list[tuple[str, str]]  # (student, written cell)


def hint_line(ename: str | None, evalue: str | None, hidden: list[str]) -> str:
    """The line that names a failure's mistake: the ``Hint:`` line of the message, else its first line
    (``ExceptionName: message``); hidden test code redacted."""
    text = summarize_error(ename or "Error", evalue or "", hidden)
    for line in text.splitlines():
        if line.strip().lower().startswith("hint:"):
            return line.strip()
    return text.splitlines()[0] if text else "Error"


def _log(coursedir, unit: str, student: str) -> tuple[Path, list[dict]]:
    path = Path(coursedir.format_path(coursedir.autograded_directory, student, unit)) / LOG_NAME
    try:
        return path, json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return path, []


def unit_report(course: Path, unit: str, db_url: str | None = None) -> UnitReport:
    """Read ``unit``'s grades and logs into a ``UnitReport``.

    Raises ``ValueError`` naming the gradebook when the class is empty (no submission graded in any
    unit) or when ``unit`` was never graded.
    """
    from nbgrader.api import Gradebook, MissingEntry

    coursedir = load_course(course, db_url)
    shown = coursedir.db_url.split("@")[-1]  # no password in a message
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        if not any(a.submissions for a in gb.assignments):
            raise ValueError(f"empty class: the gradebook {shown} has no graded submission; run `make autograde`")
        try:
            subs = gb.find_assignment(unit).submissions
        except MissingEntry:
            subs = []
        if not subs:
            known = sorted(a.name for a in gb.assignments if a.submissions)
            raise ValueError(
                f"unit {unit!r} was never graded (gradebook {shown}); graded units: {', '.join(known)}. "
                f"Run `make autograde UNIT={unit}` first"
            )
        rows = []
        for sub in subs:
            for nb in sub.notebooks:
                for g in nb.grades:
                    manual = g.cell_type == "markdown" and g.needs_manual_grade and g.manual_score is None
                    rows.append((sub.student.id, nb.name, g.name, g.cell_type, g.score or 0.0, g.max_score, manual))
    hidden = {n: hidden_lines(s, r) for n, (s, r) in unit_notebooks(coursedir, unit).items()}
    parts: dict[str, Part] = {}
    totals: dict[str, float] = {}
    ungraded = []
    most: dict[str, float] = {}
    for student, notebook, grade_id, kind, earned, points, manual in rows:
        totals[student] = totals.get(student, 0.0) + earned
        most[f"{notebook}:{grade_id}"] = points
        if manual:
            ungraded.append((student, f"{notebook}:{grade_id}"))
        if kind == "code":
            part = parts.setdefault(f"{notebook}:{grade_id}", Part(notebook, grade_id, points))
            part.scores[student] = earned
    to_read = []
    for student in sorted(totals):
        path, entries = _log(coursedir, unit, student)
        where = str(path.resolve())
        if not entries:
            to_read.append((student, "no grading log", where))
        for entry in entries:
            to_read += [(student, flag, where) for flag in entry.get("flags", [])]
            cells = {r.get("grade_id"): r for r in entry.get("cells", {}).values()}
            for part in parts.values():
                if part.notebook != entry.get("notebook") or part.scores.get(student, 0) >= part.points:
                    continue
                record = cells.get(part.grade_id)
                if record is None:
                    hint = entry.get("detail") or NOT_RUN if entry.get("outcome") != "completed" else NOT_RUN
                    hint = summarize_error("NotRun", hint, hidden.get(part.notebook, [])).splitlines()[0]
                else:
                    hint = hint_line(record.get("ename"), record.get("evalue"), hidden.get(part.notebook, []))
                part.failures[student] = hint
    for part in parts.values():  # a failure without a log entry (graded by stock nbgrader, log lost)
        for student, earned in part.scores.items():
            if earned < part.points:
                part.failures.setdefault(student, "no grading log for this part")
    ordered = sorted(parts.values(), key=lambda p: (p.mean() / p.points if p.points else 1.0, p.name))
    return UnitReport(unit, sum(most.values()), totals, ordered, to_read, sorted(ungraded))


def _png(fig) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _histogram(values: list[float], most: float, title: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 2.6))
    ax.hist(values, bins=min(20, max(5, len(set(values)))), range=(0, max(most, 1e-9)), color="#4477aa")
    ax.set_xlabel("points")
    ax.set_ylabel("students")
    ax.set_title(title)
    data = _png(fig)
    plt.close(fig)
    return data


def _table(header: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


STYLE = (
    "body{font-family:sans-serif;max-width:70em;margin:1em auto;padding:0 1em}"
    "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}"
    "th{background:#eee}code{white-space:pre-wrap}"
)


def _page(title: str, body: str) -> str:
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
        "<p>For the instructor only: this page names students. It is regenerated by "
        f"<code>make report</code>, which overwrites it.</p>{body}</body></html>"
    )


def _summary(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return (
        f"{len(values)} students; mean {statistics.fmean(values):.2f}, median {statistics.median(values):.2f}, "
        f"quartiles {q[0]:.2f} / {q[2]:.2f}"
    )


def unit_html(report: UnitReport, reports: Path) -> str:
    """The report page of one unit (HTML text); links to logs are relative to the folder ``reports``."""
    e = html.escape
    values = [report.totals[s] for s in sorted(report.totals)]
    body = f"<h2>Scores</h2><p>{e(_summary(values))} (out of {report.most:g})</p>"
    body += f'<img alt="score histogram" src="{_histogram(values, report.most, report.unit)}">'
    rows = []
    for p in report.parts:
        share = [f"{n} ({n / max(len(p.scores), 1):.0%})" for n in p.counts()]
        rows.append([f"<code>{e(p.name)}</code>", f"{p.mean():.2f} / {p.points:g}", *share])
    body += "<h2>Parts, hardest first</h2>" + _table(["part", "mean / points", "full", "partial", "zero"], rows)
    body += "<h2>Mistakes to discuss, per part</h2>"
    for p in report.parts:
        if not p.hints:
            continue
        hint_rows = [[n, f"<code>{e(h)}</code>", e(p.example(h))] for h, n in p.hints.most_common()]
        body += f"<h3><code>{e(p.name)}</code></h3>" + _table(["students", "hint", "for example"], hint_rows)
    links = []
    for student, what, where in report.to_read:
        href = Path(os.path.relpath(where, reports)).as_posix()
        links.append([e(student), e(what), f'<a href="{e(href)}">{e("/".join(Path(where).parts[-3:]))}</a>'])
    body += "<h2>Submissions to read by hand</h2>"
    body += _table(["student", "why", "log"], links) if links else "<p>None: no review flag, timeout or crash.</p>"
    body += "<h2>Written answers still ungraded in the formgrader</h2>"
    body += (
        _table(["student", "cell"], [[e(s), e(c)] for s, c in report.ungraded]) if report.ungraded else "<p>None.</p>"
    )
    return _page(f"Class report: {report.unit}", body)


def write_parts_csv(report: UnitReport, path: Path) -> Path:
    """One row per part (hardest first): points, mean, full/partial/zero counts, failures, top hint."""
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(PART_COLUMNS)
        for p in report.parts:
            top = p.hints.most_common(1)
            hint, count = top[0] if top else ("", 0)
            writer.writerow([p.name, p.points, round(p.mean(), 3), *p.counts(), len(p.failures), hint, count])
    return path


def write_unit(course: Path, unit: str, db_url: str | None = None, out: Path | None = None) -> list[Path]:
    """Write ``<out>/<unit>.html`` and ``<out>/<unit>_parts.csv`` (``out``: ``course/reports``), overwriting
    earlier ones; return their paths. ``ValueError`` as ``unit_report``."""
    return _write(unit_report(course, unit, db_url), out or course / "reports")


def _write(report: UnitReport, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    page = out / f"{report.unit}.html"
    page.write_text(unit_html(report, out), encoding="utf-8")
    return [page, write_parts_csv(report, out / f"{report.unit}_parts.csv")]


def write_course(course: Path, db_url: str | None = None, out: Path | None = None) -> list[Path]:
    """Write every graded unit's report and ``<out>/course.html``: one row per unit, then the students
    who are behind (a unit missing, or below ``BEHIND`` of its points). Returns the paths written."""
    from nbgrader.api import Gradebook

    coursedir = load_course(course, db_url)
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        units = sorted(a.name for a in gb.assignments if a.submissions)
        students = sorted(s.id for s in gb.students)
    if not units:
        raise ValueError(f"empty class: the gradebook {coursedir.db_url.split('@')[-1]} has no graded submission")
    out = out or course / "reports"
    written, rows, behind = [], [], {}
    for unit in units:
        report = unit_report(course, unit, db_url)
        written += _write(report, out)
        values = list(report.totals.values())
        rows.append(
            [f'<a href="{html.escape(unit)}.html">{html.escape(unit)}</a>', len(values), html.escape(_summary(values))]
        )
        for student in students:
            if student not in report.totals:
                behind.setdefault(student, []).append(f"{unit}: missing")
            elif report.most and report.totals[student] < BEHIND * report.most:
                behind.setdefault(student, []).append(f"{unit}: {report.totals[student]:g}/{report.most:g}")
    body = "<h2>Units</h2>" + _table(["unit", "submissions", "scores"], rows)
    body += f"<h2>Students behind (a unit missing or below {BEHIND:.0%})</h2>"
    late = [[html.escape(s), html.escape("; ".join(w))] for s, w in sorted(behind.items())]
    body += _table(["student", "units"], late) if late else "<p>None.</p>"
    page = out / "course.html"
    page.write_text(_page("Class report: the course", body), encoding="utf-8")
    return [*written, page]
