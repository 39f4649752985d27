"""Validate shows each failure message whole (issue 31): ``nbgrader validate`` under the course's own
configuration (``nbgrader_config.py``) and under the hub's (``classroom/jupyter/common/``, what a
student's server reads) prints a hint longer than nbgrader's 90-character width without cutting it.
The JupyterLab button is checked in the browser (tests/classroom/test_browser_round_trip.py).

Each run of nbgrader validate starts one kernel on a two-cell notebook: about 8 s each on the course's
2-core machine while other tests run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
HINT = (
    "row i gets 2 f(X_n) e_n w~_j for every entry n = (i, j), e_n the error inside the square: "
    "do not forget the 2 (the derivative of the square)"
)


def graded_notebook(path: Path) -> None:
    """A one-part nbgrader notebook at ``path`` whose test cell fails with ``HINT``."""
    test = nbformat.v4.new_code_cell(f"assert answer() == 2, {HINT!r}")
    test.metadata["nbgrader"] = {
        "grade": True,
        "grade_id": "part_test",
        "locked": True,
        "points": 1,
        "schema_version": 3,
        "solution": False,
        "task": False,
    }
    answer = nbformat.v4.new_code_cell("def answer():\n    return 1")
    answer.metadata["nbgrader"] = {
        "grade": False,
        "grade_id": "part_answer",
        "locked": False,
        "schema_version": 3,
        "solution": True,
        "task": False,
    }
    nb = nbformat.v4.new_notebook(cells=[answer, test])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def validate(cwd: Path, env: dict[str, str]) -> str:
    """What ``nbgrader validate part.ipynb`` prints in ``cwd``."""
    done = subprocess.run(
        [str(BIN / "nbgrader"), "validate", "part.ipynb"],
        cwd=cwd,
        env={**os.environ, "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")]), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("where", ["course", "hub student"])
def test_nbgrader_validate_prints_a_long_hint_whole(tmp_path, where):
    assert len(HINT) > 90
    if where == "course":  # `make lab`: nbgrader reads the course's nbgrader_config.py from the current folder
        shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
        env = {}
    else:  # a student's server on the hub: their home holds no nbgrader_config.py; JUPYTER_CONFIG_PATH does
        env = {
            "JUPYTER_CONFIG_PATH": os.pathsep.join(
                str(ROOT / "classroom" / "jupyter" / d) for d in ("student", "common")
            ),
            "COURSE_EXCHANGE": str(tmp_path / "exchange"),
            "JUPYTERHUB_USER": "student1",
        }
    graded_notebook(tmp_path / "part.ipynb")
    printed = validate(tmp_path, env)
    assert "VALIDATION FAILED ON 1 CELL(S)" in printed, printed
    assert HINT in printed, f"the hint is cut:\n{printed}"


def test_stock_nbgrader_cuts_the_hint():
    """Without the course's configuration nbgrader cuts the same hint: the test above can fail."""
    shown = subprocess.run(
        [sys.executable, "-c", f"from nbgrader.validator import Validator; print(Validator()._indent({HINT!r}))"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert HINT not in shown and shown.rstrip().endswith("...") and HINT[:60] in shown, shown


def test_a_students_server_validates_with_the_courses_cell_timeout(monkeypatch):
    """A student's server on the hub reads only classroom/jupyter/{student,common}: Validate there must allow a
    test cell the 600 s of the course's own configuration, not nbgrader's 30 s."""
    from nbgrader.validator import Validator
    from traitlets.config.loader import PyFileConfigLoader

    monkeypatch.setattr(Validator, "_indent", Validator._indent)  # the configs patch it; undone after the test
    monkeypatch.setenv("COURSE_EXCHANGE", "/nonexistent/exchange")
    common = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT / "classroom" / "jupyter" / "common")).load_config()
    course = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    assert common.Execute.timeout == course.Execute.timeout == 600
