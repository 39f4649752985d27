"""course_utils.testing: the support that exercise tests (and a few lectures) use, not course material.

- ``checks``  assertions for exercise tests whose failures name the mistake (``check_close``, ``forbid``,
              ``check_method``, ...): what test cells import
- ``guard``   the call guard: a part fails when its code runs a forbidden function, however reached
- ``work``    the work watch: the tensor operations a call ran, its largest tensor, its dtypes
- ``layer``   beneath both: a watch at PyTorch's dispatcher that refuses operations run with the
              torch-function layer switched off
- ``validate`` nbgrader's Validate without its cutting of lines at 87 characters: each hint shown whole
              (called from the course's nbgrader configuration files)

The grader treats this package as infrastructure: an answer may import it, and its code is never
compared with answers (``grader.review``); the grading sandbox pre-imports ``checks`` and ``guard``
(``grader/runner.py``).
"""
