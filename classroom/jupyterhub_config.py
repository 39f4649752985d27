"""JupyterHub for a class: instructors and students as distinct users, nbgrader's exchange between them.

Started by ``make hub`` (and by ``tests/classroom/``) as ``jupyterhub -f classroom/jupyterhub_config.py``
with the course's virtual environment, so every user's single-user server is that environment's
``jupyterhub-singleuser``: the course's Python, PyTorch, JupyterLab and nbgrader. Settings come from
the environment (docs/classroom.md):

    COURSE_HUB_PASSWORD     the one password of the test login (8 characters or more; required)
    COURSE_HUB_INSTRUCTORS  comma-separated user names (default: instructor)
    COURSE_HUB_STUDENTS     comma-separated user names (default: student1,student2)
    COURSE_HUB_COURSE       the instructor's course directory, holding nbgrader_config.py (default: the repository)
    COURSE_HUB_STATE        where the hub keeps its database, the users' homes and the exchange
                            (default: classroom/state, git-ignored)
    COURSE_HUB_PORT         the public port on 127.0.0.1 (default 8000); the hub's API and the proxy's
                            API take COURSE_HUB_API_PORT (8081) and COURSE_HUB_PROXY_API_PORT (8001)
    COURSE_HUB_IP           the public address (default 127.0.0.1: nothing outside this machine sees it)

Roles: an instructor's server starts in the course directory (nbgrader reads its nbgrader_config.py
there) with every nbgrader panel; a student's starts in their own home with the student panels only
(Assignments, Validate): ``classroom/jupyter/student/`` disables the formgrader, "Create Assignment"
and course-list lab plugins and the formgrader and course-list server extensions, and comes first on
the student's ``JUPYTER_CONFIG_PATH``. Both roles read ``classroom/jupyter/common/nbgrader_config.py``
(the course id and the exchange).

Users are JupyterHub users, not Unix users: ``SimpleLocalProcessSpawner`` runs every server as the
Unix user that started the hub, each with a home under ``COURSE_HUB_STATE/home/``. That runs the same
on a laptop, in CI as root and as any other user, with no accounts to create or remove; it does not
keep users' files apart from each other, so a real class uses real accounts (docs/classroom.md, "For a real class").
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from jupyterhub.spawner import SimpleLocalProcessSpawner

c = get_config()  # noqa: F821  (injected by JupyterHub)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VENV_BIN = Path(sys.executable).parent  # the hub runs from the course's environment; so do the users
USER_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")  # JupyterHub lower-cases names; keep them path-safe


def user_list(variable: str, default: str) -> list[str]:
    """The comma-separated user names in environment ``variable`` (``default`` when unset).

    Raises ValueError naming the variable when the list is empty or a name is not lower-case letters,
    digits, ``_``, ``.`` or ``-`` (JupyterHub would log such a user in under another name).
    """
    names = [n.strip() for n in os.environ.get(variable, default).split(",") if n.strip()]
    if not names:
        raise ValueError(f"{variable} names no user; give comma-separated user names, e.g. alice,bob")
    bad = [n for n in names if not USER_NAME.match(n)]
    if bad:
        raise ValueError(f"{variable}: {bad} are not valid user names (lower-case letters, digits, '_', '.', '-')")
    return names


def port(variable: str, default: int) -> int:
    """The TCP port in environment ``variable``; ValueError unless it is a number from 1 to 65535."""
    text = os.environ.get(variable, str(default))
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{variable}={text!r} is not a TCP port (1-65535)")
    return int(text)


INSTRUCTORS = user_list("COURSE_HUB_INSTRUCTORS", "instructor")
STUDENTS = user_list("COURSE_HUB_STUDENTS", "student1,student2")
if set(INSTRUCTORS) & set(STUDENTS):
    raise ValueError(f"{sorted(set(INSTRUCTORS) & set(STUDENTS))} listed as both instructor and student")
PASSWORD = os.environ.get("COURSE_HUB_PASSWORD", "")
if len(PASSWORD) < 8:
    raise ValueError("set COURSE_HUB_PASSWORD to the test login's password, 8 characters or more")
COURSE = Path(os.environ.get("COURSE_HUB_COURSE", REPO)).resolve()
if not (COURSE / "nbgrader_config.py").is_file():
    raise ValueError(f"COURSE_HUB_COURSE={COURSE} is not a course directory: it has no nbgrader_config.py")
STATE = Path(os.environ.get("COURSE_HUB_STATE", HERE / "state")).resolve()
EXCHANGE = STATE / "exchange"
IP = os.environ.get("COURSE_HUB_IP", "127.0.0.1")
PORT, API_PORT, PROXY_API_PORT = (
    port(name, default)
    for name, default in (("COURSE_HUB_PORT", 8000), ("COURSE_HUB_API_PORT", 8081), ("COURSE_HUB_PROXY_API_PORT", 8001))
)
PROXY = HERE / "node_modules" / ".bin" / "configurable-http-proxy"
if not PROXY.exists():
    raise ValueError(f"{PROXY} is missing: run `make hub` (or `npm ci --prefix classroom`) to install the proxy")

# Created before any server starts; open to every user, as nbgrader's exchange must be (nbgrader
# keeps each student's submissions apart by their names inside it).
for folder in (STATE / "home", EXCHANGE):
    folder.mkdir(parents=True, exist_ok=True)
os.chmod(EXCHANGE, 0o1777)


class CourseSpawner(SimpleLocalProcessSpawner):
    """A local server per user, configured for the user's role (instructor or student)."""

    @property
    def role(self) -> str:
        """``"instructor"`` or ``"student"``, from the user lists above."""
        return "instructor" if self.user.name in INSTRUCTORS else "student"

    def make_preexec_fn(self, name):
        """Start instructors in the course directory (nbgrader reads nbgrader_config.py from there)."""
        home_first = super().make_preexec_fn(name)
        if self.role != "instructor":
            return home_first

        def preexec():
            home_first()
            os.chdir(COURSE)

        return preexec

    def user_env(self, env: dict) -> dict:
        """The user's home, the course's PATH and the role's Jupyter configuration before all others."""
        env = super().user_env(env)
        env["PATH"] = os.pathsep.join([str(VENV_BIN), env.get("PATH", os.defpath)])  # nbgrader runs `alembic`
        env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(str(HERE / "jupyter" / d) for d in (self.role, "common"))
        env["COURSE_EXCHANGE"] = str(EXCHANGE)
        return env


def set_notebook_dir(spawner: CourseSpawner) -> None:
    """Show instructors the course directory and students their home."""
    spawner.notebook_dir = str(COURSE) if spawner.role == "instructor" else spawner.home_dir


c.JupyterHub.bind_url = f"http://{IP}:{PORT}"
c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{API_PORT}"
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{PROXY_API_PORT}"
c.ConfigurableHTTPProxy.command = [str(PROXY)]
c.ConfigurableHTTPProxy.pid_file = str(STATE / "proxy.pid")
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(STATE / "jupyterhub.pid")
c.JupyterHub.cleanup_servers = True  # stopping the hub stops every user's server

# The test login: the users above, one shared password. For a real class replace these lines with
# your institution's authenticator (docs/classroom.md, "For a real class").
c.JupyterHub.authenticator_class = "shared-password"
c.SharedPasswordAuthenticator.user_password = PASSWORD
c.Authenticator.allowed_users = set(INSTRUCTORS + STUDENTS)

c.JupyterHub.spawner_class = CourseSpawner
c.SimpleLocalProcessSpawner.home_dir_template = str(STATE / "home" / "{username}")
c.Spawner.pre_spawn_hook = set_notebook_dir
c.Spawner.cmd = [str(VENV_BIN / "jupyterhub-singleuser")]
c.Spawner.args = ["--allow-root"] if os.geteuid() == 0 else []  # CI runs as root; so do its users' servers
c.Spawner.ip = "127.0.0.1"
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
