"""Grade every submission of a unit: hand each notebook to a pool, save each student's results (orchestration).

For each notebook of the unit, the notebook that runs is built from the nbgrader source
(``solutions/``): its setup and test cells (hidden tests included), points and grade ids; only the
student's answer cells are spliced in, matched by grade id (``grader.plan``: a missing one is
replaced by the release stub; extra, reordered or re-labelled cells in the submission are ignored;
written answers are kept for the formgrader). Each notebook becomes a ``grader.grade.Job``, run in
the sandbox by a pool (``grader.pools``: threads on this machine, or Dask workers given a
scheduler); the verdict comes from the runner's verified records and the review flags from
``grader.review`` (the course library is indexed once per run). This process alone writes
``autograded/`` and the gradebook (``grader.gradebook``), so stock ``nbgrader formgrader``,
``generate_feedback`` and ``export`` keep working.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from grader.course import (
    STUDENT_ID,
    data_files,
    ensure_gradebook,
    load_course,
    read_files,
    read_submission,
    source_dir,
    sqlite_path,
    stage_files,
    submissions,
    unit_notebooks,
)
from grader.grade import Graded, Job
from grader.gradebook import save
from grader.plan import plan
from grader.pools import DaskPool, LocalPool, check_scheduler
from grader.redact import hidden_lines
from grader.review import library_index
from grader.sandbox import UNSAFE_FLAG, Limits, SandboxUnavailable, sandbox_problem


def _refuse(problem: str, where: str = "") -> SandboxUnavailable:
    return SandboxUnavailable(
        f"cannot create the grading sandbox{where}: {problem}. Refusing to run untrusted student code with "
        f"your rights. Install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) or grade inside a "
        f"throwaway VM with {UNSAFE_FLAG}."
    )


def _open_pool(scheduler, workers: int, sandbox: bool, forbidden: list[str], bwrap: str | None):
    """The pool for this run: ``LocalPool`` when ``scheduler`` is None, else a ``DaskPool`` whose workers'
    sandboxes were checked (``SandboxUnavailable`` when one cannot create it)."""
    if scheduler is None:
        return LocalPool(workers, library=library_index())  # read once per run (and cached)
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
    return pool


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

    ``db_url`` overrides the configured gradebook (see ``grader.course.load_course``). ``scheduler``
    hands the notebooks to Dask workers (``grader.pools``: ``tcp://host:port``, or ``local`` for a
    local cluster of ``workers`` processes) instead of this machine's threads. Raises ``ValueError``
    for a malformed ``db_url`` or ``scheduler``, and ``SandboxUnavailable`` when ``sandbox`` is on and
    no sandbox can be created (here, or on any Dask worker).
    """
    from nbgrader.api import Gradebook

    coursedir = load_course(course, db_url)
    limits = limits or Limits()
    forbidden = [coursedir.root] + [p for p in [sqlite_path(coursedir.db_url)] if p]
    if scheduler is not None:
        check_scheduler(scheduler)
    elif sandbox:
        problem = sandbox_problem(forbidden, bwrap)
        if problem:
            raise _refuse(problem)
    source_root = source_dir(coursedir, ".")
    units = units or sorted(p.name for p in source_root.iterdir() if p.is_dir() and submissions(coursedir, p.name))
    if not workers:
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    pool = _open_pool(scheduler, workers, sandbox, forbidden, bwrap)
    jobs: dict = {}
    results: list[Graded] = []
    failures: list[str] = []
    with pool, tempfile.TemporaryDirectory(prefix="grade-data-") as staging:
        for unit in units:
            ensure_gradebook(coursedir, unit, course)
            notebooks = unit_notebooks(coursedir, unit)
            release = {n: r for n, (_, r) in notebooks.items()}
            hidden = {n: hidden_lines(s, r) for n, (s, r) in notebooks.items()}
            parts = {n: plan(s, r) for n, (s, r) in notebooks.items()}
            folder = source_dir(coursedir, unit)
            # the data files go to a copy of their own, never the source folder itself
            files_dir = stage_files(read_files(folder, data_files(coursedir, folder)), Path(staging) / unit)
            for student_dir in submissions(coursedir, unit):
                student = student_dir.parent.name
                if (students and student not in students) or not STUDENT_ID.match(student):
                    continue
                if not force and Path(coursedir.format_path(coursedir.autograded_directory, student, unit)).exists():
                    continue
                for name in notebooks:
                    job = Job(
                        student,
                        name,
                        parts[name],
                        release[name],
                        read_submission(student_dir / f"{name}.ipynb"),
                        limits,
                        files_dir,
                        sandbox,
                        tuple(forbidden),
                        bwrap,
                    )
                    future = pool.submit(job, key=f"grade-{unit}-{student}-{name}")
                    jobs[future] = (unit, student, release, hidden, len(notebooks))
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
                save(gb, coursedir, unit, student, batch, release, hidden)
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
