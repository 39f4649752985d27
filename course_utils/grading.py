"""nbgrader add-ons for the instructor side of the course.

``HideTestCode`` is an nbgrader/nbconvert preprocessor used when generating feedback: a
failing test shows the student its exception type and message (which our tests write to
name the mistake) but not the traceback, whose context lines would reveal the hidden tests.
Wired up in ``nbgrader_config.py``.
"""

from __future__ import annotations

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool


class HideTestCode(Preprocessor):
    """Reduce the error output of every autograder test cell to ``ExceptionName: message``."""

    enabled = Bool(True).tag(config=True)  # nbconvert preprocessors are off unless enabled

    def preprocess_cell(self, cell, resources, index):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources
