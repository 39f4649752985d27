"""nbgrader configuration for the course (read from the repository root only)."""

import os

c = get_config()  # noqa: F821  (injected by nbgrader)

c.CourseDirectory.course_id = "seqmodels"
c.CourseDirectory.root = os.getcwd()  # nbgrader reads this file from the current directory only
# The instructor edits solutions/NN_name/NN_name.ipynb; students get exercises/NN_name/.
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "*.log", "data"]
# The gradebook: by default gradebook.db (SQLite) in the course root. A class graded from several
# machines shares a PostgreSQL database instead (docs/distributed.md, "A shared gradebook on PostgreSQL"); set it
# here for every command, the formgrader included, or per command with `make ... DB_URL=...`:
# c.CourseDirectory.db_url = "postgresql://grader@db.example.org:5432/seqmodels"

# Lectures of later units train small models inside test cells; nbgrader's default of
# 30 s per cell is far too tight for a 2-core laptop.
c.Execute.timeout = 600
c.ExecutePreprocessor.timeout = 600

# Validate (`nbgrader validate` and the JupyterLab button) shows every line of a failure whole: nbgrader
# cuts printed lines at Validator.width - 3 characters, the end of a long hint included.
from course_utils.testing.validate import keep_whole_lines  # noqa: E402

keep_whole_lines()

# Exercises are released without outputs; the stub raises NotImplementedError.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Exercises open in JupyterLab unmodified: they carry the kernel metadata JupyterLab writes on load.
from nbgrader.converters import GenerateAssignment  # noqa: E402

from grader.release import OpenClean  # noqa: E402

c.GenerateAssignment.preprocessors = [*GenerateAssignment.class_traits()["preprocessors"].default(), OpenClean]

# Feedback shows test cells without their hidden tests, and failures without tracebacks
# (whose context lines would quote the hidden test code); the failure message remains.
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor  # noqa: E402
from nbgrader.preprocessors import ClearHiddenTests, GetGrades  # noqa: E402

from grader.feedback import HideTestCode  # noqa: E402

c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, HideTestCode, CSSHTMLHeaderPreprocessor]
