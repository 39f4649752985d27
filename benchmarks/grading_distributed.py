"""Submissions per second: the local thread pool vs Dask workers on this machine, and the scheduler's cost.

    python -m benchmarks.grading_distributed [--unit 01_tokenization] [--submissions 12] [--workers 1 2 4]

A temporary copy of the course receives ``--submissions`` copies of the unit's solution (each runs every
hidden test). The same batch is graded, sandboxed, by ``grader.autograde.autograde`` in this process:
with the local pool (``--workers`` 1 and 2 threads) and through a Dask ``LocalCluster`` of 1, 2 and 4
single-threaded worker processes on 127.0.0.1 (``scheduler=`` its address). Each configuration is
warmed up with one submission first (imports, the course library each worker reads for its review),
then timed end to end: throughput is submissions / seconds. The cluster's start-up is timed on its
own. The scheduler's overhead is given two ways: the round trip of a trivial task (submit, run on a
worker, result back; sequential), and the time per submission of 1 Dask worker minus that of the
local pool with 1 thread. Each process uses one thread (``OMP_NUM_THREADS=1``), as in the test suite.
Prints, never asserts.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _cpu() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        return next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def _quiet(_: str) -> None:
    pass


def _noop(i: int) -> int:
    return i


def make_batch(unit: str, submissions: int, workdir: Path) -> Path:
    """A course copy with ``submissions`` copies of ``unit``'s solution submitted and the assignment generated."""
    from grader.course import nbgrader_command

    course = workdir / "course"
    shutil.copytree(ROOT / "solutions" / unit, course / "solutions" / unit)
    shutil.copy(ROOT / "nbgrader_config.py", course)
    nbgrader_command(course, "generate_assignment", unit, "--force")
    for i in range(submissions):
        dest = course / "submitted" / f"s{i:02d}" / unit
        dest.mkdir(parents=True)
        shutil.copy(ROOT / "solutions" / unit / f"{unit}.ipynb", dest)
        (dest / "timestamp.txt").write_text("2026-01-01 12:00:00.000000 UTC")
    return course


def timed(course: Path, unit: str, submissions: int, workers: int, scheduler: str | None = None) -> float:
    """Seconds to grade the batch, after grading its first submission once to warm up."""
    from grader.autograde import autograde

    autograde(course, [unit], ["s00"], workers=workers, scheduler=scheduler, log=_quiet)
    started = time.perf_counter()
    graded = autograde(course, [unit], workers=workers, scheduler=scheduler, log=_quiet)
    elapsed = time.perf_counter() - started
    assert len(graded) == submissions, f"graded {len(graded)} of {submissions}"
    return elapsed


def round_trip_ms(address: str, tasks: int = 200) -> float:
    """Milliseconds per trivial task submitted to the scheduler at ``address`` and waited for, one at a time."""
    from distributed import Client

    with Client(address) as client:
        client.submit(_noop, -1, pure=False).result()
        started = time.perf_counter()
        for i in range(tasks):
            client.submit(_noop, i, pure=False).result()
        return (time.perf_counter() - started) / tasks * 1000


def main() -> None:
    """Run the benchmark (see the module docstring) and print its table."""
    from distributed import LocalCluster

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--unit", default="01_tokenization")
    parser.add_argument("--submissions", type=int, default=12)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4], help="Dask worker processes")
    args = parser.parse_args()
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    n = args.submissions
    print(f"{n} copies of {args.unit}'s solution, sandboxed; {os.cpu_count()} CPU cores ({_cpu()})")
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-distributed-") as tmp:
        course = make_batch(args.unit, n, Path(tmp))
        local = {w: timed(course, args.unit, n, w) for w in (1, 2)}
        rows += [(f"local pool, {w} thread{'s' if w > 1 else ''}", s) for w, s in local.items()]
        dask, startup, trip = {}, {}, None
        for w in args.workers:
            started = time.perf_counter()
            with LocalCluster(
                n_workers=w,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"},
            ) as cluster:
                startup[w] = time.perf_counter() - started
                dask[w] = timed(course, args.unit, n, w, cluster.scheduler_address)
                if trip is None:
                    trip = round_trip_ms(cluster.scheduler_address)
            rows.append((f"Dask, {w} worker process{'es' if w > 1 else ''}", dask[w]))
    print(f"{'how':28} {'seconds':>8} {'subs/s':>7} {'s/sub':>6}")
    for how, seconds in rows:
        print(f"{how:28} {seconds:8.2f} {n / seconds:7.3f} {seconds / n:6.2f}")
    print("cluster start-up: " + ", ".join(f"{w} worker(s) {s:.2f} s" for w, s in startup.items()))
    if trip is not None:
        print(f"scheduler round trip of a trivial task: {trip:.2f} ms")
    if 1 in dask:
        print(f"Dask 1 worker - local 1 thread, per submission: {(dask[1] - local[1]) / n * 1000:+.0f} ms")


if __name__ == "__main__":
    main()
