"""The feedback stage (``grader.feedback``): what students see of a failing cell, without hidden tests."""

from __future__ import annotations

import nbformat

from grader.feedback import HideTestCode
from grader.redact import REDACTED, hidden_test_lines, redact, summarize_error

SOURCE = """check_equal(add(2, 3), 5, "add(2, 3)")
### BEGIN HIDDEN TESTS
assert add(10, -4) == 6, "hidden add check"
x = 1
### END HIDDEN TESTS"""


def test_hide_test_code_keeps_message_drops_traceback():
    test_cell = nbformat.v4.new_code_cell(
        "assert secret_check()", metadata={"nbgrader": {"grade": True, "solution": False}}
    )
    test_cell.outputs = [
        nbformat.v4.new_output(
            "error", ename="AssertionError", evalue="rows must sum to 1", traceback=["---", "assert secret_check()"]
        )
    ]
    answer_cell = nbformat.v4.new_code_cell("x", metadata={"nbgrader": {"grade": False, "solution": True}})
    answer_cell.outputs = [nbformat.v4.new_output("error", ename="NameError", evalue="x", traceback=["line x"])]
    nb = nbformat.v4.new_notebook(cells=[test_cell, answer_cell])
    nb, _ = HideTestCode()(nb, {})
    assert nb.cells[0].outputs[0]["traceback"] == ["AssertionError: rows must sum to 1"]
    # answer cells too keep one line: a traceback there can quote hidden tests the answer was called from
    assert nb.cells[1].outputs[0]["traceback"] == ["NameError: x"]
    printed = nbformat.v4.new_code_cell("y", metadata={"nbgrader": {"grade": True, "solution": False}})
    printed.outputs = [nbformat.v4.new_output("stream", name="stdout", text="what the test passed me")]
    nb, _ = HideTestCode()(nbformat.v4.new_notebook(cells=[printed]), {})
    assert nb.cells[0].outputs == []  # output printed next to the tests is dropped


def test_hidden_lines_skip_short_and_visible_ones():
    assert hidden_test_lines(SOURCE) == ['assert add(10, -4) == 6, "hidden add check"']
    assert hidden_test_lines(SOURCE, visible='assert add(10, -4) == 6, "hidden add check"') == []


def test_messages_are_redacted_and_shortened():
    hidden = hidden_test_lines(SOURCE)
    text = redact(f"AssertionError at\n{hidden[0]}\n### END HIDDEN TESTS", hidden)
    assert hidden[0] not in text and "HIDDEN" not in text and text.count(REDACTED) == 2
    long = summarize_error("ValueError", "\n".join(f"line {i}" for i in range(20)) + hidden[0], hidden, limit=60)
    assert long.startswith("ValueError: line 0") and len(long) <= 60 and hidden[0] not in long
