"""Grade every submission of a unit: splice, run in the sandbox, score, flag, save (the trusted side).

For each notebook of the unit, the notebook that runs is built here, from the nbgrader source
(``solutions/``): its setup and test cells (hidden tests included), points and grade ids; only the
student's answer cells are spliced in, matched by grade id (``grader.plan``: a missing one is
replaced by the release stub; extra, reordered or re-labelled cells in the submission are ignored;
written answers are kept for the formgrader). It runs in ``grader.sandbox``; the verdict is
decided here from the runner's verified records, the review flags come from ``grader.review``
(the course library is indexed once per run), and this process alone writes ``autograded/`` and
the gradebook, so stock ``nbgrader formgrader``, ``generate_feedback`` and ``export`` keep working.
The runs go to a pool of threads on this machine, or, given a Dask scheduler, to Dask workers
(``grader.distributed``); the gradebook is nbgrader's ``db_url`` (``grader.gradebook``).
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import as_completed as _as_completed
from dataclasses import dataclass, field
from pathlib import Path

from grader.gradebook import check_db_url, sqlite_path
from grader.plan import Part, autograded_notebook, hidden_lines, plan, score, splice
from grader.review import LibraryIndex, library_index, review_flags
from grader.sandbox import UNSAFE_FLAG, Limits, SandboxUnavailable, sandbox_problem
from grader.session import RunResult, run_cells

LOG_NAME = "autograde.log"  # nbgrader's ignore list holds "*.log": feedback never copies it to students
STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+-]{0,99}$")


@dataclass
class Graded:
    """The outcome of one student's notebook."""

    student: str
    notebook: str
    parts: list[Part]
    run: RunResult
    scores: dict[str, float | None] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)


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


def grade_notebook(
    student: str,
    name: str,
    parts: list[Part],
    release_nb: dict,
    submitted: dict | None,
    limits: Limits,
    files_dir: str | None,
    sandbox: bool,
    forbidden: list[str],
    bwrap: str | None,
    library: LibraryIndex | None = None,
) -> Graded:
    """Splice, run in the sandbox, score and flag one student's notebook (thread-safe; touches no files).

    ``library`` is the course library as ``grader.review.library_index`` reads it (read when not given).
    """
    spliced, notes = splice(parts, release_nb, submitted)
    job = [(p.role, p.index, p.grade_id, p.source) for p in spliced if p.role in ("setup", "answer", "test")]
    run = run_cells(job, limits, files_dir=files_dir, sandbox=sandbox, forbidden=forbidden, bwrap=bwrap)
    graded = Graded(student, name, spliced, run, flags=notes + review_flags(spliced, library))
    for part in spliced:
        if part.role == "test":
            graded.scores[part.grade_id] = score(part, run.records.get(part.index))
    if run.forged:
        graded.flags.append(f"{run.forged} unverified report lines")
    statuses = {r.get("status") for r in run.records.values()}
    graded.flags += [s for s in ("tampered", "timeout") if s in statuses]
    if run.outcome != "completed":
        graded.flags.append(run.outcome)
    return graded


def _save(
    gb,
    coursedir,
    unit: str,
    student: str,
    results: list[Graded],
    release: dict[str, dict],
    hidden: dict[str, list[str]],
) -> None:
    """Write autograded/<student>/<unit>/ and the grades into the open gradebook ``gb``, as stock
    ``nbgrader autograde`` does."""
    from nbformat import from_dict
    from nbformat.v4 import writes
    from nbgrader.preprocessors import AssignLatePenalties
    from nbgrader.utils import compute_checksum

    dest = Path(coursedir.format_path(coursedir.autograded_directory, student, unit))
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    source_dir = Path(coursedir.format_path(coursedir.source_directory, ".", unit))
    for path in _data_files(coursedir, source_dir):
        (dest / path.relative_to(source_dir)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, dest / path.relative_to(source_dir))
    submitted = Path(coursedir.format_path(coursedir.submitted_directory, student, unit))
    # As stock autograde: generate_feedback copies these on to feedback/, where release_feedback reads them
    # (the submission time, and the secret that only the submitter's fetch_feedback can match).
    for name in ("timestamp.txt", "submission_secret.txt"):
        if (submitted / name).is_file():
            shutil.copy(submitted / name, dest / name)
    timestamp = coursedir.get_existing_timestamp(str(submitted))
    warnings.filterwarnings("ignore", message=".*not in session.*")  # nbgrader's SQLAlchemy noise
    gb.update_or_create_student(student)
    # as stock `nbgrader autograde`: a regraded submission keeps its rows (and any manual grades)
    submission = gb.update_or_create_submission(unit, student, **({"timestamp": timestamp} if timestamp else {}))
    late = submission.assignment.duedate is not None and submission.total_seconds_late > 0
    for graded in results:
        nb = from_dict(autograded_notebook(graded.parts, graded.run, release[graded.notebook], hidden[graded.notebook]))
        # one query for each notebook's grade and comment rows, rather than one per cell
        record = next(n for n in submission.notebooks if n.name == graded.notebook)
        grades, comments = {g.name: g for g in record.grades}, {c.name: c for c in record.comments}
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            unchanged = meta.get("checksum") == compute_checksum(cell) if "grade_id" in meta else False
            if meta.get("grade"):
                grade = grades[meta["grade_id"]]
                auto = graded.scores.get(meta["grade_id"]) if not meta.get("solution") else (0.0 if unchanged else None)
                grade.auto_score, grade.needs_manual_grade = auto, auto is None
            if meta.get("solution") or meta.get("task"):
                comments[meta["grade_id"]].auto_comment = "No response." if unchanged and not meta.get("task") else None
        record.late_submission_penalty = None
        gb.db.commit()
        path = dest / f"{graded.notebook}.ipynb"
        path.write_text(writes(nb), encoding="utf-8")  # built here from trusted parts: skip re-validation
        path.chmod(0o444)
        if late:  # nbgrader's own late-penalty step, with its configured plugin
            resources = {
                "nbgrader": {
                    "notebook": graded.notebook,
                    "assignment": unit,
                    "student": student,
                    "db_url": coursedir.db_url,
                }
            }
            AssignLatePenalties(config=coursedir.config).preprocess(nb, resources)
    (dest / LOG_NAME).write_text(json.dumps([_log(g) for g in results], indent=1))


def _log(graded: Graded) -> dict:
    run = graded.run
    return {
        "student": graded.student,
        "notebook": graded.notebook,
        "scores": graded.scores,
        "flags": graded.flags,
        "outcome": run.outcome,
        "detail": run.detail,
        "seconds": round(run.seconds, 2),
        "forged_lines": run.forged,
        "cells": {
            i: {k: r.get(k) for k in ("grade_id", "status", "ename", "evalue", "traceback")}
            for i, r in run.records.items()
        },
        "stderr": run.stderr,
    }


def _data_files(coursedir, source_dir: Path) -> list[Path]:
    from nbgrader.utils import find_all_files

    return [Path(p) for p in find_all_files(str(source_dir), coursedir.ignore + ["*.ipynb"])]


class LocalPool:
    """The default pool: ``workers`` threads on this machine, each driving one sandbox at a time."""

    def __init__(self, workers: int, *, sandbox: bool, forbidden: list[str], bwrap: str | None, library) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers)
        self._sandbox, self._forbidden, self._bwrap, self._library = sandbox, forbidden, bwrap, library

    def submit(self, student, name, parts, release_nb, submitted, limits, files_dir, key="grade"):
        """A future of ``grade_notebook`` for one student's notebook (``key`` is for Dask's pool only)."""
        return self._pool.submit(
            grade_notebook,
            student,
            name,
            parts,
            release_nb,
            submitted,
            limits,
            files_dir,
            self._sandbox,
            self._forbidden,
            self._bwrap,
            self._library,
        )

    @staticmethod
    def as_completed(futures):
        """The futures in the order they finish."""
        return _as_completed(futures)

    def close(self) -> None:
        """Wait for the running notebooks, then stop the threads."""
        self._pool.shutdown(wait=True)

    def __enter__(self) -> LocalPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _refuse(problem: str, where: str = "") -> SandboxUnavailable:
    return SandboxUnavailable(
        f"cannot create the grading sandbox{where}: {problem}. Refusing to run untrusted student code with "
        f"your rights. Install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) or grade inside a "
        f"throwaway VM with {UNSAFE_FLAG}."
    )


def autograde(
    course: Path,
    units: list[str] | None = None,
    students: list[str] | None = None,
    *,
    workers: int | None = None,
    limits: Limits | None = None,
    sandbox: bool = True,
    force: bool = True,
    bwrap: str | None = None,
    db_url: str | None = None,
    scheduler: str | None = None,
    log=print,
) -> list[Graded]:
    """Grade every submission of ``units`` (default: all with submissions) in parallel; return results.

    ``db_url`` overrides the configured gradebook (see ``load_course``). ``scheduler`` hands the
    notebooks to Dask workers (``grader.distributed``: ``tcp://host:port``, or ``local`` for a local
    cluster of ``workers`` processes) instead of this machine's threads. Raises ``ValueError`` for a
    malformed ``db_url`` or ``scheduler``, and ``SandboxUnavailable`` when ``sandbox`` is on and no
    sandbox can be created (here, or on any Dask worker).
    """
    from nbgrader.api import Gradebook

    coursedir = load_course(course, db_url)
    limits = limits or Limits()
    forbidden = [coursedir.root] + [p for p in [sqlite_path(coursedir.db_url)] if p]
    if scheduler is not None:
        from grader.distributed import check_scheduler

        check_scheduler(scheduler)
    elif sandbox:
        problem = sandbox_problem(forbidden, bwrap)
        if problem:
            raise _refuse(problem)
    source_root = Path(coursedir.format_path(coursedir.source_directory, ".", ".")).resolve()
    units = units or sorted(p.name for p in source_root.iterdir() if p.is_dir() and _submissions(coursedir, p.name))
    if not workers:
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if scheduler is None:
        library = library_index()  # read once per run (and cached): every review compares with it
        pool = LocalPool(workers, sandbox=sandbox, forbidden=forbidden, bwrap=bwrap, library=library)
    else:
        from grader.distributed import DaskPool

        pool = DaskPool(scheduler, workers, sandbox=sandbox, forbidden=forbidden, bwrap=bwrap)
        try:
            problems = {w: p for w, p in pool.check_workers().items() if p}
        except BaseException:
            pool.close()
            raise
        if problems:
            pool.close()
            worker, problem = next(iter(problems.items()))
            raise _refuse(problem, f" on Dask worker {worker}")
    jobs: dict = {}
    results: list[Graded] = []
    failures: list[str] = []
    with pool, tempfile.TemporaryDirectory(prefix="grade-data-") as staging:
        for unit in units:
            _ensure_gradebook(coursedir, unit, course)
            release_dir = Path(coursedir.format_path(coursedir.release_directory, ".", unit))
            source_dir = source_root / unit
            names = sorted(p.stem for p in source_dir.glob("*.ipynb"))
            release = {n: trusted_notebook(release_dir / f"{n}.ipynb") for n in names}
            sources = {n: trusted_notebook(source_dir / f"{n}.ipynb") for n in names}
            hidden = {n: hidden_lines(sources[n], release[n]) for n in names}
            parts = {n: plan(sources[n], release[n]) for n in names}
            files_dir = _stage_data(coursedir, source_dir, Path(staging) / unit)  # never the source folder itself
            for student_dir in _submissions(coursedir, unit):
                student = student_dir.parent.name
                if (students and student not in students) or not STUDENT_ID.match(student):
                    continue
                if not force and Path(coursedir.format_path(coursedir.autograded_directory, student, unit)).exists():
                    continue
                for name in names:
                    future = pool.submit(
                        student,
                        name,
                        parts[name],
                        release[name],
                        _read(student_dir / f"{name}.ipynb"),
                        limits,
                        files_dir,
                        key=f"grade-{unit}-{student}-{name}",
                    )
                    jobs[future] = (unit, student, release, hidden, len(names))
        done: dict[tuple, list[Graded]] = {}
        gb = Gradebook(coursedir.db_url, coursedir.course_id)  # one connection for every save
        for future in pool.as_completed(jobs):
            unit, student, release, hidden, count = jobs[future]
            batch = done.setdefault((unit, student), [])
            try:
                batch.append(future.result())
            except Exception as exc:  # noqa: BLE001 - e.g. a task that killed every Dask worker it ran on
                failures.append(f"{unit}/{student}: not graded: {exc!r}")
                log(f"{unit:20} {student:20} NOT GRADED: {exc!r}")
                continue
            if len(batch) < count:
                continue
            try:
                _save(gb, coursedir, unit, student, batch, release, hidden)
            except Exception as exc:  # noqa: BLE001 - one failure must not lose the other students' grades
                gb.db.rollback()
                failures.append(f"{unit}/{student}: {exc!r}")
                log(f"{unit:20} {student:20} NOT SAVED: {exc!r}")
                continue
            for g in batch:
                total, most = sum(v or 0 for v in g.scores.values()), sum(p.points for p in g.parts if p.role == "test")
                log(
                    f"{unit:20} {student:20} {total:5.1f}/{most:<5.1f} {g.run.seconds:6.1f} s  {g.run.outcome}"
                    + (f"  review: {', '.join(g.flags)}" if g.flags else "")
                )
            results += batch
        gb.close()
    if failures:
        raise RuntimeError("could not grade or save some submissions:\n" + "\n".join(failures))
    return results


def trusted_notebook(path: Path) -> dict:
    """An instructor's notebook (source or release) as a plain dict with string sources."""
    import nbformat

    return nbformat.read(str(path), as_version=4)


def _submissions(coursedir, unit: str) -> list[Path]:
    return sorted(Path(p) for p in glob.glob(coursedir.format_path(coursedir.submitted_directory, "*", unit)))


def _stage_data(coursedir, source_dir: Path, staging: Path) -> str | None:
    """Copy the exercise's data files (not its notebooks) to ``staging``; None when there are none."""
    files = _data_files(coursedir, source_dir)
    for path in files:
        (staging / path.relative_to(source_dir)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, staging / path.relative_to(source_dir))
    for path in [staging, *staging.parents[:1], *staging.rglob("*")] if files else []:
        path.chmod(0o755 if path.is_dir() else 0o644)  # readable by the sandbox's unprivileged user
    return str(staging) if files else None


def _read(path: Path) -> dict | None:
    try:
        if path.stat().st_size > 64 * 2**20:
            return None
        nb = json.loads(path.read_text(encoding="utf-8"))
        return nb if isinstance(nb, dict) else None
    except (OSError, ValueError):
        return None


def _ensure_gradebook(coursedir, unit: str, course: Path) -> None:
    """Generate the assignment (release + gradebook entries) when the gradebook does not know it."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        try:
            gb.find_assignment(unit)
            return
        except MissingEntry:
            pass
    nbgrader_command(course, "generate_assignment", unit, "--force", db_url=coursedir.db_url)


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
