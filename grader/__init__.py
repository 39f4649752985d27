"""grader: the instructors' sandboxed autograder (not imported by notebooks; not visible to student code).

One module per stage. The list below is the stage order, foundations first: a module imports only
modules listed above it (``tests/grader/test_structure.py`` checks this, lazy imports included).

- ``runner``     the standalone script that executes cells next to student code, inside the sandbox
- ``sandbox``    the sandbox: its bubblewrap command, its limits, and why one cannot be made here
- ``session``    one run of the runner in its sandbox: cells in, records verified against a per-run key
- ``notebook``   notebook JSON read tolerantly: cells, their text, their nbgrader metadata
- ``release``    the kernel metadata that lets an exercise open unmodified in JupyterLab (nbgrader preprocessor)
- ``redact``     hidden-test lines and their redaction, defined once
- ``plan``       the notebook that runs: source cells, the student's answers spliced in, scores
- ``review``     review flags: suspicious constructs, imports of the course library, near copies of it
- ``course``     the nbgrader course on disk: configuration, gradebook URL, notebooks, data files, import
- ``grade``      a ``Job`` and the pure function that grades one notebook
- ``pools``      where jobs run: threads on this machine or Dask workers (``--scheduler``)
- ``gradebook``  write ``autograded/``, the gradebook and the log; export grades to CSV
- ``feedback``   nbgrader's ``HideTestCode`` preprocessor and the feedback command with its leak check
- ``edition``    the student edition: lectures, exercises and course_utils without answers, searched for leaks
- ``autograde``  orchestration: every submission of a unit through a pool, then saved
- ``report``     the instructor's class report: per-part results and the hints that fired, from the gradebook
- ``cli``        ``python -m grader {import,autograde,feedback,export,report}``: argument parsing only
- ``__main__``   the entry point of ``python -m grader``
"""
