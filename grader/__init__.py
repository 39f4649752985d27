"""grader: the instructors' sandboxed autograder (not imported by notebooks; not visible to student code).

One module per stage, in the order a submission meets them:

- ``cli``       ``python -m grader {import,autograde,feedback,export}``: the instructor's commands
- ``autograde`` grade every submission of a unit in parallel; write ``autograded/`` and the gradebook
- ``distributed`` the same on Dask workers (``--scheduler``): each runs the sandbox, the caller saves
- ``gradebook`` the gradebook's URL (``--db-url``): SQLite by default, or a shared PostgreSQL server
- ``plan``      the notebook that runs: source cells, the student's answers spliced in, scores
- ``review``    review flags: suspicious constructs, imports of the course library, near copies of it
- ``sandbox``   bubblewrap, limits and the verified-record protocol (the trusted side of a run)
- ``runner``    the standalone script that executes cells next to student code, inside the sandbox
- ``feedback``  nbgrader's ``HideTestCode`` preprocessor and the redaction of hidden-test code
"""
