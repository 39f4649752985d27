"""nbgrader settings every user of the hub shares (classroom/jupyterhub_config.py puts this folder on
JUPYTER_CONFIG_PATH): the course and nbgrader's exchange, where instructors release and collect and
students fetch and submit. The hub sets COURSE_EXCHANGE for every server it starts. Validate shows every
line of a failure whole, as the course's own nbgrader_config.py has it (course_utils.testing.validate)."""

import os

from course_utils.testing.validate import keep_whole_lines

c = get_config()  # noqa: F821  (injected by nbgrader)

c.CourseDirectory.course_id = "seqmodels"  # as in the course's own nbgrader_config.py
c.Exchange.root = os.environ["COURSE_EXCHANGE"]
# Validate on a student's server: later units train small models inside test cells, far beyond nbgrader's
# default of 30 s per cell (the course's own nbgrader_config.py, which a student's server does not read, says 600).
c.Execute.timeout = 600
keep_whole_lines()  # a student's server reads no nbgrader_config.py of the course's root, only this one
