"""nbgrader configuration of the course's student edition (read from the edition's root folder): what
Validate needs, nothing of grading."""

c = get_config()  # noqa: F821  (injected by nbgrader)

c.CourseDirectory.course_id = "seqmodels"
# Later units train small models inside test cells; nbgrader's default of 30 s per cell is too tight.
c.Execute.timeout = 600
c.ExecutePreprocessor.timeout = 600

# Validate shows every line of a failure whole (nbgrader cuts printed lines at 87 characters).
from course_utils.testing.validate import keep_whole_lines  # noqa: E402

keep_whole_lines()
