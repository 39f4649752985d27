"""Grade one notebook: a ``Job`` in, a ``Graded`` out (splice, run in the sandbox, score, flag; touches no files).

A ``Job`` holds everything one student's notebook needs: the plan of the notebook that runs
(``grader.plan``), the release, the submission, the limits, the folder of the exercise's data files
and the sandbox settings. ``grade_notebook`` is pure in the sense that matters here: its inputs in, a
``Graded`` out, nothing written outside its own scratch folders; so the pools of ``grader.pools`` can
run it on any thread of this machine or on any Dask worker, and only the caller saves the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grader.plan import Part, score, splice
from grader.review import LibraryIndex, review_flags
from grader.sandbox import Limits
from grader.session import RunResult, run_cells


@dataclass(frozen=True)
class Job:
    """One student's notebook to grade (picklable: a Dask pool ships it to a worker).

    ``parts`` is the plan (``grader.plan.plan``) of notebook ``notebook``, ``release`` its release
    notebook dict, ``submitted`` the student's notebook dict (None when unreadable). ``files_dir`` is a
    folder of data files readable by the sandbox's user (None: none); ``forbidden`` lists host paths
    the sandbox must not see; ``bwrap`` overrides the bubblewrap executable.
    """

    student: str
    notebook: str
    parts: list[Part]
    release: dict
    submitted: dict | None
    limits: Limits = field(default_factory=Limits)
    files_dir: str | None = None
    sandbox: bool = True
    forbidden: tuple[str, ...] = ()
    bwrap: str | None = None


@dataclass
class Graded:
    """The outcome of one student's notebook."""

    student: str
    notebook: str
    parts: list[Part]
    run: RunResult
    scores: dict[str, float | None] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)


def grade_notebook(job: Job, library: LibraryIndex | None = None) -> Graded:
    """Splice, run in the sandbox, score and flag one student's notebook (thread-safe; touches no files).

    ``library`` is the course library as ``grader.review.library_index`` reads it (read when not given).
    Returns a ``Graded`` whose ``scores`` has one entry per test cell (by grade id).
    """
    spliced, notes = splice(job.parts, job.release, job.submitted)
    cells = [(p.role, p.index, p.grade_id, p.source) for p in spliced if p.role in ("setup", "answer", "test")]
    run = run_cells(
        cells, job.limits, files_dir=job.files_dir, sandbox=job.sandbox, forbidden=list(job.forbidden), bwrap=job.bwrap
    )
    graded = Graded(job.student, job.notebook, spliced, run, flags=notes + review_flags(spliced, library))
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
