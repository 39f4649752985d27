"""The gradebook on a PostgreSQL server: the same grades as SQLite, and concurrent graders lose nothing.

A throwaway PostgreSQL server (Debian's ``initdb`` and ``pg_ctl``) runs for this module in a temporary
folder, listening on a unix socket in that folder only (no TCP port); as root it runs as the
``postgres`` user, since PostgreSQL refuses to run as root. The tiny fixture unit
(``classroom_course``) is graded through ``python -m grader --db-url ...`` (sandboxed where a sandbox
can be made): into PostgreSQL it gets the same scores as into SQLite, ``export`` reads them back
(per part too) and ``report`` counts each part's failures from them; two grader processes grading
disjoint students into the same database at the same time leave every submission and every grade
in it. Where no server can be started the tests skip and say why, unless ``COURSE_REQUIRE_POSTGRES=1``
(``make test`` as root, where it installs PostgreSQL), and then they fail. A malformed ``--db-url`` is
refused in one line, without a server.
"""

from __future__ import annotations

import csv
import glob
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from classroom_course import ANSWERS, EXPECTED, UNIT, clone, generated_course, gradebook_scores, submit

from grader.cli import main
from grader.course import check_db_url, nbgrader_command
from grader.sandbox import UNSAFE_FLAG, sandbox_problem

UNSAFE = [] if sandbox_problem() is None else [UNSAFE_FLAG]
KINDS = ["right", "half", "blank"]


def _unavailable(reason: str):
    if os.environ.get("COURSE_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"COURSE_REQUIRE_POSTGRES=1 but {reason}")
    pytest.skip(reason)


def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[4]))
    path = found[-1] if found else shutil.which("pg_ctl")
    return Path(path).parent if path else None


class Server:
    """A PostgreSQL server in a temporary folder, reachable only through its unix socket there."""

    def __init__(self, bindir: Path, folder: Path, as_user: list[str]) -> None:
        self.bindir, self.folder, self.as_user = bindir, folder, as_user
        self.data = folder / "data"

    def run(self, tool: str, *args: str, user: bool = True) -> None:
        argv = [*(self.as_user if user else []), str(self.bindir / tool), *args]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        if done.returncode:
            raise RuntimeError(f"{tool} failed: {done.stdout}{done.stderr}")

    def start(self) -> None:
        self.run("initdb", "-D", str(self.data), "-U", "grader", "--auth=trust", "-E", "UTF8", "--no-sync")
        options = f"-c listen_addresses='' -k {self.folder} -p 5432 -c fsync=off -c max_connections=40"
        self.run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.folder / "server.log"),
            "-w",
            "-t",
            "60",
            "-o",
            options,
            "start",
        )

    def database(self, name: str) -> str:
        """A new, empty database; its URL."""
        self.run("createdb", "-h", str(self.folder), "-p", "5432", "-U", "grader", name, user=False)
        return f"postgresql://grader@/{name}?host={self.folder}&port=5432"

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", "60", "stop")


@pytest.fixture(scope="module")
def server():
    """A running throwaway server (stopped, and its folder removed, whatever happens)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable("psycopg (3) is not installed (pip install -e '.[classroom]')")
    bindir = _pg_bin()
    if bindir is None or not (bindir / "initdb").exists():
        _unavailable("PostgreSQL's initdb and pg_ctl are not installed (Debian: apt-get install postgresql)")
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb and postgres refuse to run as root
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            _unavailable("running as root, and there is no 'postgres' user to run the server as")
        runuser = shutil.which("runuser")
        if runuser is None:
            _unavailable("running as root, and `runuser` (util-linux) is missing to run the server as 'postgres'")
        as_user = [runuser, "-u", "postgres", "--"]
    # In /tmp, not $TMPDIR: short (a socket path has at most 107 bytes) and reachable by the postgres user.
    folder = Path(tempfile.mkdtemp(prefix="course-pg-", dir="/tmp" if os.path.isdir("/tmp") else None))
    if as_user:
        shutil.chown(folder, "postgres", "postgres")
    pg = Server(bindir, folder, as_user)
    try:
        try:
            pg.start()
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            _unavailable(f"a PostgreSQL server could not be started: {exc}")
        yield pg
    finally:
        try:
            pg.stop()
        finally:
            shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """The fixture course with its assignment generated (in SQLite), copied by each test."""
    return generated_course(tmp_path_factory.mktemp("classroom") / "course")


def _course(template: Path, tmp_path: Path, name: str, students: dict[str, str]) -> Path:
    course = clone(template, tmp_path / name)
    for student, kind in students.items():
        submit(course, student, ANSWERS[kind])
    return course


def test_postgres_gives_the_same_grades_as_sqlite(server, template, tmp_path):
    students = {f"s{i}": KINDS[i % 3] for i in range(3)}
    url = server.database("same_grades")
    lite, pg = _course(template, tmp_path, "lite", students), _course(template, tmp_path, "pg", students)
    assert main(["--course", str(lite), "autograde", "--workers", "2", *UNSAFE]) == 0
    assert main(["--course", str(pg), "--db-url", url, "autograde", "--workers", "2", *UNSAFE]) == 0
    expected = {s: EXPECTED[k] for s, k in students.items()}
    assert gradebook_scores(f"sqlite:///{lite / 'gradebook.db'}") == expected
    assert gradebook_scores(url) == expected
    assert gradebook_scores(f"sqlite:///{pg / 'gradebook.db'}") == {}, "the PostgreSQL run wrote into SQLite"
    assert main(["--course", str(pg), "--db-url", url, "export", "--to", str(pg / "grades.csv")]) == 0
    rows = {r["student_id"]: float(r["score"]) for r in csv.DictReader((pg / "grades.csv").open())}
    assert rows == {s: sum(EXPECTED[k].values()) for s, k in students.items()}
    parts = {r["student_id"]: r for r in csv.DictReader((pg / "grades_parts.csv").open())}
    assert {s: float(parts[s][f"{UNIT}/{UNIT}:double_test"]) for s in students} == {
        s: EXPECTED[k]["double_test"] for s, k in students.items()
    }
    # the class report reads the same PostgreSQL gradebook: failures per part as the answers say
    assert main(["--course", str(pg), "--db-url", url, "report", "--unit", UNIT]) == 0
    report = {r["part"]: r for r in csv.DictReader((pg / "reports" / f"{UNIT}_parts.csv").open())}
    for grade_id in ("double_test", "greet_test"):
        failing = sum(EXPECTED[k][grade_id] < EXPECTED["right"][grade_id] for k in students.values())
        assert int(report[f"{UNIT}:{grade_id}"]["failures"]) == failing, report
    assert report[f"{UNIT}:greet_test"]["top_hint"] == "AssertionError: greet('ada')", report
    assert main(["--course", str(lite), "report", "--unit", UNIT]) == 0, "and the SQLite one"


def test_two_graders_writing_one_gradebook_at_once_lose_nothing(server, template, tmp_path):
    students = {f"p{i}": KINDS[i % 3] for i in range(6)}
    url = server.database("concurrent")
    course = _course(template, tmp_path, "shared", students)
    nbgrader_command(course, "generate_assignment", UNIT, "--force", db_url=url)  # the assignment, once
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    halves = [sorted(students)[0::2], sorted(students)[1::2]]
    graders = [
        subprocess.Popen(
            [sys.executable, "-m", "grader", "--course", str(course), "--db-url", url, "autograde", UNIT]
            + ["--workers", "1", *UNSAFE, *[a for s in half for a in ("--student", s)]],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for half in halves
    ]
    try:
        outputs = [g.communicate(timeout=240)[0] for g in graders]
    finally:
        for g in graders:
            g.kill()
    for g, out, half in zip(graders, outputs, halves):
        assert g.returncode == 0, out
        assert sorted(line.split()[1] for line in out.splitlines() if line.startswith(UNIT)) == half, out
    assert gradebook_scores(url) == {s: EXPECTED[k] for s, k in students.items()}
    assert sorted(p.parent.name for p in course.glob(f"autograded/*/{UNIT}")) == sorted(students)


@pytest.mark.parametrize(
    "url, says",
    [
        ("not a url", "is not a database URL"),
        ("mysql://grader@db.example/course", "SQLite or PostgreSQL, not 'mysql'"),
        ("postgresql://grader:s3cret@db.example", "names no database"),
        ("postgresql+nosuchdriver://grader@db.example/course", "unknown database driver"),
    ],
)
def test_a_malformed_db_url_is_refused_in_one_line(url, says, capsys, tmp_path):
    with pytest.raises(ValueError, match=says):
        check_db_url(url)
    assert main(["--course", str(tmp_path), "--db-url", url, "export"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: db_url") or err.startswith("error: the gradebook"), err
    assert says in err and "Traceback" not in err and "s3cret" not in err
