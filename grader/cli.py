"""The instructor's commands, ``python -m grader`` (run from the course root, or pass ``--course``).

    python -m grader import UNIT FOLDER     # FOLDER/alice.ipynb -> submitted/alice/UNIT/UNIT.ipynb
    python -m grader autograde [UNIT ...]   # every submission, in parallel, sandboxed (grader.autograde)
    python -m grader feedback [UNIT ...]    # nbgrader generate_feedback, then a leak check
    python -m grader export [--to FILE]     # nbgrader export plus a review_flags column, and FILE_parts.csv
    python -m grader report [--unit UNIT]   # reports/UNIT.html + UNIT_parts.csv (all units: + course.html)

``--db-url URL`` (before the command) names the gradebook, e.g. a shared PostgreSQL database
(``grader.course.check_db_url``); ``autograde --scheduler tcp://HOST:8786`` grades on Dask workers
(``grader.pools``; ``--scheduler local`` starts a local cluster of ``--workers`` processes).
Each command is implemented where its stage lives: import in ``grader.course``, autograde in
``grader.autograde``, feedback in ``grader.feedback``, export in ``grader.gradebook``, report in ``grader.report``.

They work on nbgrader's own folders and gradebook, so the formgrader and stock ``nbgrader
generate_feedback`` / ``export`` keep working next to them.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

from grader.autograde import autograde
from grader.course import check_db_url, import_submissions
from grader.feedback import feedback
from grader.gradebook import export
from grader.pools import check_scheduler
from grader.report import write_course, write_unit
from grader.sandbox import UNSAFE_FLAG, Limits, SandboxUnavailable


def main(argv: list[str] | None = None) -> int:
    """Parse the command line (``--help`` lists the options), run the command; return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m grader", description=__doc__.split("\n\n")[0])
    parser.add_argument("--course", type=Path, default=Path.cwd(), help="course root (default: here)")
    parser.add_argument(
        "--db-url",
        help="the gradebook, e.g. postgresql://USER@HOST/DB (default: nbgrader_config.py's, else gradebook.db)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    imp = sub.add_parser("import", help="copy FOLDER/<student_id>.ipynb into submitted/")
    imp.add_argument("unit")
    imp.add_argument("folder", type=Path)
    ag = sub.add_parser("autograde", help="grade submissions in the sandbox")
    ag.add_argument("units", nargs="*")
    ag.add_argument("--student", action="append", help="only this student (repeatable)")
    ag.add_argument("--workers", type=int, help="parallel submissions (default: one per core)")
    ag.add_argument("--cell-timeout", type=float, default=600.0)
    ag.add_argument("--timeout", type=float, default=1800.0, help="seconds per submission")
    ag.add_argument("--memory-mb", type=int, default=8192, help="address space per process")
    ag.add_argument("--no-force", action="store_true", help="skip submissions already autograded")
    ag.add_argument(
        "--scheduler",
        help="grade on Dask workers: a scheduler's address (tcp://HOST:8786) or 'local' (--workers processes here)",
    )
    ag.add_argument(
        UNSAFE_FLAG,
        dest="unsafe",
        action="store_true",
        help="run student code WITHOUT the sandbox (only inside a throwaway VM or container)",
    )
    ag.add_argument("--bwrap", help=argparse.SUPPRESS)
    fb = sub.add_parser("feedback", help="generate feedback HTML without hidden tests")
    fb.add_argument("units", nargs="+")
    ex = sub.add_parser("export", help="grades CSV with a review_flags column, and a per-part CSV next to it")
    ex.add_argument("--to", type=Path, default=Path("grades.csv"))
    rp = sub.add_parser(
        "report",
        help="the instructor's class report in reports/ (regenerated: overwrites the previous report)",
        description="Write reports/UNIT.html and reports/UNIT_parts.csv (without --unit: every graded unit and "
        "reports/course.html). Reports are regenerated outputs: each run overwrites the previous one. "
        "They name students: for the instructor only.",
    )
    rp.add_argument("--unit", help="one unit (default: every graded unit, plus the course page)")
    rp.add_argument("--out", type=Path, help="folder of the reports (default: COURSE/reports)")
    args = parser.parse_args(argv)
    course = args.course.resolve()
    warnings.filterwarnings("ignore", message=".*not in session.*")  # nbgrader's SQLAlchemy noise
    try:  # bad addresses are the user's to fix: one line, no stack trace
        if args.db_url is not None:
            check_db_url(args.db_url)
        if getattr(args, "scheduler", None) is not None:
            check_scheduler(args.scheduler)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.command == "import":
        print(f"imported {len(import_submissions(course, args.unit, args.folder))} submissions of {args.unit}")
    elif args.command == "autograde":
        limits = Limits(cell_timeout=args.cell_timeout, timeout=args.timeout, memory_mb=args.memory_mb)
        started = time.monotonic()
        try:
            graded = autograde(
                course,
                args.units,
                args.student,
                workers=args.workers,
                limits=limits,
                sandbox=not args.unsafe,
                force=not args.no_force,
                bwrap=args.bwrap,
                db_url=args.db_url,
                scheduler=args.scheduler,
            )
        except (SandboxUnavailable, ConnectionError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"graded {len(graded)} notebooks in {time.monotonic() - started:.1f} s")
    elif args.command == "feedback":
        leaked = feedback(course, args.units, args.db_url)
        for page in leaked:
            print(f"error: removed {page}: it quoted hidden test code", file=sys.stderr)
        return 1 if leaked else 0
    elif args.command == "report":
        out = args.out.resolve() if args.out else None
        try:
            paths = (
                write_unit(course, args.unit, args.db_url, out) if args.unit else write_course(course, args.db_url, out)
            )
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        for path in paths:
            print(f"wrote {path}")
    else:
        print(f"wrote {export(course, args.to.resolve() if not args.to.is_absolute() else args.to, args.db_url)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
