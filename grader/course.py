"""The nbgrader course on disk: its configuration, gradebook URL, notebooks, data files, submissions and import.

Everything here reads or writes the course folder the instructor works in (``nbgrader_config.py``,
``source/`` or ``solutions/``, ``release/``, ``submitted/``) through nbgrader's ``CourseDirectory``,
or runs ``nbgrader`` itself. The gradebook is nbgrader's ``db_url``, a SQLAlchemy URL:
``sqlite:////abs/gradebook.db`` (nbgrader's default, in the course root) or
``postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE`` (driver: psycopg 3, SQLAlchemy's default for
``postgresql://``, from the ``classroom`` extra; a unix socket as ``postgresql://USER@/DATABASE?host=/run/dir``).
``check_db_url`` refuses anything else with a message that says what is wrong, before nbgrader would
fail deep inside SQLAlchemy. The data files of an exercise travel as ``{relative path: bytes}``
(``read_files``) and are written where the sandbox can read them by ``stage_files``, on this machine
or on a Dask worker alike.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+-]{0,99}$")
BACKENDS = ("sqlite", "postgresql")
EXAMPLE = "sqlite:////path/to/gradebook.db or postgresql://USER@HOST:5432/DATABASE"
MAX_SUBMISSION = 64 * 2**20  # bytes: a larger submitted notebook is not read


def check_db_url(url: str) -> str:
    """``url`` when it is a gradebook URL this course can use (its driver installed); else a ``ValueError``."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"the gradebook URL (db_url) is empty: expected {EXAMPLE}")
    try:
        parsed = make_url(url.strip())
    except (ArgumentError, ValueError) as exc:
        raise ValueError(f"db_url {url!r} is not a database URL ({exc}): expected {EXAMPLE}") from None
    shown = parsed.render_as_string(hide_password=True)
    backend = parsed.get_backend_name()
    if backend not in BACKENDS:
        raise ValueError(f"db_url {shown!r}: the gradebook can be SQLite or PostgreSQL, not {backend!r} ({EXAMPLE})")
    if not parsed.database:
        raise ValueError(f"db_url {shown!r} names no database ({EXAMPLE})")
    try:
        parsed.get_dialect().import_dbapi()
    except ImportError as exc:
        raise ValueError(
            f"db_url {shown!r} needs the {parsed.drivername!r} database driver, which is not installed ({exc}); "
            f"install the course with its classroom extra: pip install -e '.[classroom]'"
        ) from None
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy names an unknown driver in several ways
        raise ValueError(f"db_url {shown!r}: unknown database driver {parsed.drivername!r} ({exc})") from None
    return url.strip()


def sqlite_path(url: str) -> str | None:
    """The file of a SQLite gradebook (what the sandbox must not see); None for a database server."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    return parsed.database if parsed.get_backend_name() == "sqlite" else None


def load_course(course: Path, db_url: str | None = None):
    """nbgrader's ``CourseDirectory`` for ``course``, configured by its ``nbgrader_config.py``.

    ``db_url`` overrides the gradebook the configuration names (``c.CourseDirectory.db_url``; nbgrader's
    default: ``gradebook.db`` in the course root). A URL the course cannot use raises ``ValueError``.
    """
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    bin_dir = str(Path(sys.executable).parent)  # nbgrader's gradebook runs `alembic` from PATH
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    coursedir = CourseDirectory(config=config)
    coursedir.root = str(course.resolve())
    if db_url:
        coursedir.db_url = db_url
    coursedir.db_url = check_db_url(coursedir.db_url)
    return coursedir


def nbgrader_command(course: Path, *args: str, db_url: str | None = None) -> None:
    """Run ``nbgrader ARGS`` in ``course`` with this environment's tools; raise with its output if it fails.

    ``db_url``, when given, is the gradebook nbgrader uses, whatever ``nbgrader_config.py`` says.
    """
    if db_url:
        args = (*args, f"--CourseDirectory.db_url={db_url}")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args, "--log-level=WARN"],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")


def ensure_gradebook(coursedir, unit: str, course: Path) -> None:
    """Generate the assignment (release + gradebook entries) when the gradebook does not know it."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        try:
            gb.find_assignment(unit)
            return
        except MissingEntry:
            pass
    nbgrader_command(course, "generate_assignment", unit, "--force", db_url=coursedir.db_url)


def trusted_notebook(path: Path) -> dict:
    """An instructor's notebook (source or release) as a plain dict with string sources."""
    import nbformat

    return nbformat.read(str(path), as_version=4)


def source_dir(coursedir, unit: str) -> Path:
    """The folder of ``unit`` in the nbgrader source (``solutions/``), resolved."""
    return Path(coursedir.format_path(coursedir.source_directory, ".", unit)).resolve()


def unit_notebooks(coursedir, unit: str) -> dict[str, tuple[dict, dict]]:
    """Every notebook of ``unit``, by name (sorted): its source and its release, as notebook dicts."""
    release_dir = Path(coursedir.format_path(coursedir.release_directory, ".", unit))
    names = sorted(p.stem for p in source_dir(coursedir, unit).glob("*.ipynb"))
    return {
        n: (trusted_notebook(source_dir(coursedir, unit) / f"{n}.ipynb"), trusted_notebook(release_dir / f"{n}.ipynb"))
        for n in names
    }


def data_files(coursedir, folder: Path) -> list[Path]:
    """The files of an exercise ``folder`` that are not notebooks nor ignored by nbgrader (absolute paths)."""
    from nbgrader.utils import find_all_files

    return [Path(p) for p in find_all_files(str(folder), coursedir.ignore + ["*.ipynb"])]


def read_files(folder: str | Path | None, files: list[Path] | None = None) -> dict[str, bytes]:
    """The contents of ``files`` (default: every file under ``folder``) by path relative to ``folder``;
    {} when ``folder`` is None."""
    if not folder:
        return {}
    root = Path(folder)
    files = sorted(p for p in root.rglob("*") if p.is_file()) if files is None else files
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


def stage_files(files: dict[str, bytes], folder: Path) -> str | None:
    """Write ``files`` ({relative path: bytes}) under ``folder``, readable by the sandbox's unprivileged
    user (as are ``folder`` and its parent); return ``folder`` as a string, or None when there are no
    files. A path that leaves ``folder`` raises ``ValueError``."""
    if not files:
        return None
    for rel, data in files.items():
        if ".." in Path(rel).parts or Path(rel).is_absolute():
            raise ValueError(f"data file {rel!r} is outside the exercise folder")
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    for path in [folder.parent, folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return str(folder)


def submissions(coursedir, unit: str) -> list[Path]:
    """The folders ``submitted/<student>/<unit>`` of every student who submitted ``unit``, sorted."""
    return sorted(Path(p) for p in glob.glob(coursedir.format_path(coursedir.submitted_directory, "*", unit)))


def read_submission(path: Path) -> dict | None:
    """A submitted notebook as untrusted JSON: a dict, or None when it is unreadable, not a JSON object
    or larger than ``MAX_SUBMISSION`` bytes."""
    try:
        if path.stat().st_size > MAX_SUBMISSION:
            return None
        nb = json.loads(path.read_text(encoding="utf-8"))
        return nb if isinstance(nb, dict) else None
    except (OSError, ValueError):
        return None


def copy_submission_files(coursedir, unit: str, student: str, dest: Path) -> None:
    """Copy ``unit``'s data files and the submission's ``timestamp.txt`` and ``submission_secret.txt``
    into ``dest`` (the student's ``autograded/`` folder), as stock ``nbgrader autograde`` does."""
    folder = source_dir(coursedir, unit)
    for path in data_files(coursedir, folder):
        (dest / path.relative_to(folder)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, dest / path.relative_to(folder))
    submitted = Path(coursedir.format_path(coursedir.submitted_directory, student, unit))
    # generate_feedback copies these on to feedback/, where release_feedback reads them (the submission
    # time, and the secret that only the submitter's fetch_feedback can match)
    for name in ("timestamp.txt", "submission_secret.txt"):
        if (submitted / name).is_file():
            shutil.copy(submitted / name, dest / name)


def import_submissions(course: Path, unit: str, folder: Path) -> list[str]:
    """Copy ``folder/<student_id>.ipynb`` to ``submitted/<student_id>/<unit>/<notebook>.ipynb``."""
    coursedir = load_course(course)
    names = sorted(Path(coursedir.format_path(coursedir.source_directory, ".", unit)).glob("*.ipynb"))
    if len(names) != 1:
        raise ValueError(f"{unit}: import needs a unit with exactly one notebook, found {len(names)}")
    imported = []
    for path in sorted(Path(folder).glob("*.ipynb")):
        if not STUDENT_ID.match(path.stem):
            print(f"skipping {path.name}: not a valid student id", file=sys.stderr)
            continue
        dest = Path(coursedir.format_path(coursedir.submitted_directory, path.stem, unit))
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest / names[0].name)
        stamp = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
        (dest / "timestamp.txt").write_text(stamp.strftime("%Y-%m-%d %H:%M:%S.%f UTC"))
        imported.append(path.stem)
    return imported
