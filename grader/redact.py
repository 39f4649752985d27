"""Hidden-test lines and their redaction: what students must never be shown (pure functions, defined once).

nbgrader marks hidden tests with ``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS`` in the source
(``solutions/``). ``hidden_lines`` lists the code lines between those markers that the student is not
shown anyway; ``redact`` cuts them (and the markers) out of any text; ``summarize_error`` is the one
line a student sees of a failure; ``solution_lines`` lists the answers' lines the release does not show.
The graded notebook (``grader.plan``), the feedback preprocessor and
the leak check after ``nbgrader generate_feedback`` (``grader.feedback``) all use these.
"""

from __future__ import annotations

from grader.notebook import cell_text, cells, nbgrader_meta, notebook_text

HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
REDACTED = "[hidden test code removed]"


def hidden_test_lines(source: str, min_length: int = 13, visible: str = "") -> list[str]:
    """The stripped lines of one cell's ``source`` between BEGIN/END HIDDEN TESTS markers that are at
    least ``min_length`` characters long, leaving out those that occur in ``visible`` (what students
    are shown anyway). Returns a list of strings, in source order."""
    return _marked_lines(source, HIDDEN_BEGIN, HIDDEN_END, min_length, visible, inside=False)


def _marked_lines(text: str, begin: str, end: str, min_length: int, visible: str, inside: bool) -> list[str]:
    """The stripped lines of ``text`` between ``begin`` and ``end`` marker lines (from the first line on when
    ``inside``), at least ``min_length`` characters long and not found in ``visible``."""
    lines = []
    for line in text.splitlines():
        if begin in line or end in line:
            inside = begin in line
        elif inside and len(line.strip()) >= min_length and line.strip() not in visible:
            lines.append(line.strip())
    return lines


SOLUTION_BEGIN, SOLUTION_END = "### BEGIN SOLUTION", "### END SOLUTION"


def solution_lines(source_nb: dict, shown_nb: dict, min_length: int = 13) -> list[str]:
    """The stripped lines of the answers in notebook ``source_nb`` (the nbgrader source) that notebook
    ``shown_nb`` (the release) does not show: the code between BEGIN/END SOLUTION markers of its answer
    cells (the whole cell where it has no markers) and the model answers of its written-answer cells.
    Lines shorter than ``min_length`` characters are left out. Returns a list of strings, cell by cell."""
    visible = notebook_text(shown_nb)
    found = []
    for cell in cells(source_nb):
        text = cell_text(cell) or ""
        if not nbgrader_meta(cell).get("solution"):
            continue
        found += _marked_lines(
            text, SOLUTION_BEGIN, SOLUTION_END, min_length, visible, inside=SOLUTION_BEGIN not in text
        )
    return found


def hidden_lines(source_nb: dict, shown_nb: dict) -> list[str]:
    """The hidden-test lines of every cell of notebook ``source_nb`` that notebook ``shown_nb`` (the
    release, or the feedback copy) does not show anyway. Both are notebook dicts; returns a list of
    strings, cell by cell."""
    visible = notebook_text(shown_nb)
    return [line for c in cells(source_nb) for line in hidden_test_lines(cell_text(c) or "", visible=visible)]


def redact(text: str, hidden: list[str]) -> str:
    """``text`` with every occurrence of a line of ``hidden`` (and of the markers) replaced by ``REDACTED``."""
    for line in sorted(set(hidden) | {HIDDEN_BEGIN, HIDDEN_END}, key=len, reverse=True):
        if line in text:
            text = text.replace(line, REDACTED)
    return text


def summarize_error(ename: str, evalue: str, hidden: list[str], limit: int = 600) -> str:
    """``ExceptionName: message`` for students: at most 8 lines and ``limit`` characters, redacted."""
    text = redact(f"{ename}: {evalue}".strip(), hidden)
    lines = text.splitlines() or [""]
    short = "\n".join(lines[:8])
    if len(short) > limit:
        short = short[: limit - 3] + "..."
    elif len(lines) > 8:
        short += "\n..."
    return redact(short, hidden)


def quotes_hidden(page: str, hidden: list[str], own: str = "") -> bool:
    """Whether text ``page`` quotes a line of ``hidden`` that the student's own answers ``own`` do not contain."""
    return any(line in page and line not in own for line in hidden)
