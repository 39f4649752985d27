"""nbgrader settings of a student's server (classroom/jupyterhub_config.py puts this folder first on a
student's JUPYTER_CONFIG_PATH).

nbgrader names a submission after the Unix user that makes it. On this hub every server runs as the
Unix user that started the hub, so the student id is the JupyterHub user name instead: nbgrader uses
an explicit CourseDirectory.student_id when submitting and fetching feedback, as it does for
`nbgrader submit --student`."""

import os

c = get_config()  # noqa: F821  (injected by nbgrader)

c.CourseDirectory.student_id = os.environ["JUPYTERHUB_USER"]
