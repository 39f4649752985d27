"""Seconds per submission: stock ``nbgrader autograde`` vs the sandboxed grader, on the same submissions.

    python -m benchmarks.grading [--units 01_tokenization 05_lstm_gru] [--submissions 4]

For each unit, a temporary copy of the course receives ``--submissions`` copies of the solution
(each runs every hidden test), then the same batch is graded four ways, each timed end to end
(start-up included, divided by the number of submissions):

* ``stock``: ``nbgrader autograde UNIT --force`` (one Jupyter kernel per notebook, no sandbox);
* ``hardened, 1 worker``: ``python -m grader autograde UNIT --workers 1``;
* ``unsandboxed, 1 worker``: the same with ``--unsafe-no-sandbox`` (what the sandbox itself costs);
* ``hardened, 2 workers``: ``--workers 2``.

The hardened grader's fixed start-up (imports, gradebook, trial sandbox: a run that grades no
one) is also timed, to give the steady-state throughput of a class-sized batch, where it is
negligible. Targets: hardened ≤ 1.2 × stock per submission, and 2 workers ≥ 1.8 × the
throughput of one.
Each process uses one thread (``OMP_NUM_THREADS=1``), as in the test suite. Prints, never asserts.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(course: Path, *argv: str) -> float:
    env = dict(
        os.environ,
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        PYTHONWARNINGS="ignore",
    )
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", *argv], cwd=course, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return elapsed


def bench_unit(unit: str, submissions: int, workdir: Path) -> dict[str, float]:
    """Seconds per submission of each way of grading ``submissions`` copies of ``unit``'s solution."""
    course = workdir / unit
    shutil.copytree(ROOT / "solutions" / unit, course / "solutions" / unit)
    shutil.copy(ROOT / "nbgrader_config.py", course)
    _run(course, "nbgrader", "generate_assignment", unit, "--force", "--log-level=ERROR")
    for i in range(submissions):
        dest = course / "submitted" / f"s{i:02d}" / unit
        dest.mkdir(parents=True)
        shutil.copy(ROOT / "solutions" / unit / f"{unit}.ipynb", dest)
        (dest / "timestamp.txt").write_text("2026-01-01 12:00:00.000000 UTC")
    hardened = ("grader", "autograde", unit)
    startup = _run(course, *hardened, "--student", "nobody")
    times = {
        "stock": _run(course, "nbgrader", "autograde", unit, "--force", "--log-level=ERROR"),
        "hardened, 1 worker": _run(course, *hardened, "--workers", "1"),
        "unsandboxed, 1 worker": _run(course, *hardened, "--workers", "1", "--unsafe-no-sandbox"),
        "hardened, 2 workers": _run(course, *hardened, "--workers", "2"),
    }
    per_submission = {name: seconds / submissions for name, seconds in times.items()}
    per_submission["startup"] = startup
    per_submission["steady speed-up"] = (times["hardened, 1 worker"] - startup) / (
        times["hardened, 2 workers"] - startup
    )
    return per_submission


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--units", nargs="+", default=["01_tokenization", "05_lstm_gru"])
    parser.add_argument("--submissions", type=int, default=12)
    args = parser.parse_args()
    print(f"{args.submissions} copies of each solution; {os.cpu_count()} CPU cores; seconds per submission")
    print(
        f"{'unit':18} {'stock':>7} {'hardened':>9} {'no sandbox':>11} {'2 workers':>10} {'overhead':>9} "
        f"{'speed-up':>9} {'start-up':>9} {'steady':>7}"
    )
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        for unit in args.units:
            t = bench_unit(unit, args.submissions, Path(tmp))
            overhead = t["hardened, 1 worker"] / t["stock"]
            speedup = t["hardened, 1 worker"] / t["hardened, 2 workers"]
            print(
                f"{unit:18} {t['stock']:7.2f} {t['hardened, 1 worker']:9.2f} {t['unsandboxed, 1 worker']:11.2f} "
                f"{t['hardened, 2 workers']:10.2f} {overhead:8.2f}x {speedup:8.2f}x {t['startup']:8.2f}s "
                f"{t['steady speed-up']:6.2f}x",
                flush=True,
            )
    print(
        "overhead = hardened (1 worker) / stock, target <= 1.2x; speed-up = throughput of 2 workers / 1, end to end;\n"
        "start-up = the hardened command grading no one; steady = speed-up without it; target >= 1.8x"
    )


if __name__ == "__main__":
    main()
