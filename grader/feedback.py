"""Feedback without hidden tests: nbgrader's ``HideTestCode`` preprocessor and the redaction it uses.

``HideTestCode`` is an nbgrader/nbconvert preprocessor used when generating feedback (wired up
in ``nbgrader_config.py``). Feedback keeps, for each graded or answer cell that failed, one line:
the exception type and the start of its message (which our tests write to name the mistake), with
any line of hidden-test code cut out. Everything else the grading run printed is dropped:
tracebacks (their context lines would quote hidden tests), streams, displays and results, since
student code that ran next to the tests could print what it saw there. ``redact`` and
``hidden_test_lines`` also serve ``grader.plan`` (the graded notebook) and ``grader.cli`` (the
leak check after ``nbgrader generate_feedback``).
"""

from __future__ import annotations

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool, Int

HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
REDACTED = "[hidden test code removed]"


def hidden_test_lines(source: str, min_length: int = 13, visible: str = "") -> list[str]:
    """The stripped lines between BEGIN/END HIDDEN TESTS markers that are long enough to matter.

    Lines that also occur in ``visible`` (what students are shown anyway) are left out.
    """
    lines, inside = [], False
    for line in source.splitlines():
        if HIDDEN_BEGIN in line or HIDDEN_END in line:
            inside = HIDDEN_BEGIN in line
        elif inside and len(line.strip()) >= min_length and line.strip() not in visible:
            lines.append(line.strip())
    return lines


def redact(text: str, hidden: list[str]) -> str:
    """``text`` with every occurrence of a hidden-test line (and the markers) replaced."""
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


class HideTestCode(Preprocessor):
    """Reduce every code cell's outputs to one ``ExceptionName: message`` line per failure.

    Applies to feedback only. Errors of graded and answer cells are kept as one line (without
    hidden-test code, found in the gradebook's copy of the source cells when available); all
    other outputs are removed.
    """

    enabled = Bool(True).tag(config=True)  # nbconvert preprocessors are off unless enabled
    max_message = Int(600, help="Characters of a failure message shown to the student").tag(config=True)

    def preprocess(self, nb, resources):
        """Look up the notebook's hidden-test lines (in the gradebook), then process every cell."""
        visible = "\n".join(cell.source for cell in nb.cells)  # hidden tests are already cleared here
        self._hidden = self._hidden_lines(resources, visible)
        return super().preprocess(nb, resources)

    @staticmethod
    def _hidden_lines(resources, visible: str) -> list[str]:
        info = (resources or {}).get("nbgrader") or {}
        if not info.get("db_url"):
            return []
        try:
            from nbgrader.api import Gradebook

            with Gradebook(info["db_url"]) as gb:
                notebook = gb.find_notebook(info["notebook"], info["assignment"])
                return [
                    line
                    for cell in notebook.source_cells
                    for line in hidden_test_lines(cell.source or "", visible=visible)
                ]
        except Exception:  # noqa: BLE001 - feedback without the gradebook still hides tracebacks
            return []

    def preprocess_cell(self, cell, resources, index):
        """Keep one redacted ``ExceptionName: message`` line per error of a graded cell; drop the rest."""
        if cell.cell_type != "code":
            return cell, resources
        meta = cell.metadata.get("nbgrader", {})
        graded = meta.get("grade") or meta.get("solution")
        kept = []
        for output in cell.get("outputs", []):
            if graded and output.get("output_type") == "error":
                line = summarize_error(
                    output.get("ename", "Error"),
                    output.get("evalue", ""),
                    getattr(self, "_hidden", []),
                    self.max_message,
                )
                ename, _, evalue = line.partition(": ")
                output["ename"], output["evalue"], output["traceback"] = ename, evalue, [line]
                kept.append(output)
        cell["outputs"] = kept
        return cell, resources
