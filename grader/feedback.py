"""Feedback without hidden tests: nbgrader's ``HideTestCode`` preprocessor and the ``feedback`` command.

``HideTestCode`` is an nbgrader/nbconvert preprocessor used when generating feedback (wired up
in ``nbgrader_config.py``). Feedback keeps, for each graded or answer cell that failed, one line:
the exception type and the start of its message (which our tests write to name the mistake), with
any line of hidden-test code cut out. Everything else the grading run printed is dropped:
tracebacks (their context lines would quote hidden tests), streams, displays and results, since
student code that ran next to the tests could print what it saw there. ``feedback`` runs
``nbgrader generate_feedback`` and then deletes any page that still quotes a hidden test. The
hidden lines and their redaction are ``grader.redact``'s.
"""

from __future__ import annotations

import glob
import html
import os
import re
from pathlib import Path

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool, Int

from grader.course import load_course, nbgrader_command, trusted_notebook
from grader.notebook import notebook_text
from grader.redact import hidden_lines, quotes_hidden, summarize_error

__all__ = ["HideTestCode", "feedback"]


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
        self._hidden = self._hidden_lines(resources, nb)  # nb's hidden tests are already cleared here
        return super().preprocess(nb, resources)

    @staticmethod
    def _hidden_lines(resources, nb) -> list[str]:
        info = (resources or {}).get("nbgrader") or {}
        if not info.get("db_url"):
            return []
        try:
            from nbgrader.api import Gradebook

            with Gradebook(info["db_url"]) as gb:
                notebook = gb.find_notebook(info["notebook"], info["assignment"])
                source = {"cells": [{"source": cell.source or ""} for cell in notebook.source_cells]}
                return hidden_lines(source, nb)
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


def feedback(course: Path, units: list[str], db_url: str | None = None) -> list[str]:
    """Run ``nbgrader generate_feedback`` per unit; delete (and return) any page quoting hidden tests.

    A hidden-test line counts as quoted unless the release or the student's own answers contain it.
    ``db_url`` overrides the configured gradebook.
    """
    coursedir = load_course(course, db_url)
    leaked = []
    for unit in units:
        if not glob.glob(coursedir.format_path(coursedir.autograded_directory, "*", unit)):
            print(f"{unit}: nothing autograded yet, no feedback")
            continue
        nbgrader_command(course, "generate_feedback", unit, "--force", db_url=coursedir.db_url)
        source = Path(coursedir.format_path(coursedir.source_directory, ".", unit))
        release = Path(coursedir.format_path(coursedir.release_directory, ".", unit))
        hidden = {
            nb.stem: hidden_lines(trusted_notebook(nb), trusted_notebook(release / nb.name))
            for nb in source.glob("*.ipynb")
        }
        for page in glob.glob(os.path.join(coursedir.format_path(coursedir.feedback_directory, "*", unit), "*.html")):
            page = Path(page)
            graded = (
                Path(coursedir.format_path(coursedir.autograded_directory, page.parts[-3], unit)) / f"{page.stem}.ipynb"
            )
            own = notebook_text(trusted_notebook(graded), solution_only=True) if graded.exists() else ""
            plain = html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))
            if quotes_hidden(plain, hidden.get(page.stem, []), own):
                page.unlink()
                leaked.append(str(page))
    return leaked
