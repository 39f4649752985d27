"""Wall time of every lecture's validation ("Run All" under nbval) and of the whole suite.

    python -m benchmarks.notebook_times            # each lecture, then the full test suite
    python -m benchmarks.notebook_times --no-suite # lectures only
    python -m benchmarks.notebook_times lectures/01_tokenization.ipynb

Each lecture runs alone in one pytest process (one kernel), as a student's "Run All" would;
the suite runs exactly as `make test` does (two workers). Budget: each lecture <= ~120 s on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = 120.0
NBVAL = ["--nbval", "--nbval-sanitize-with", "tests/sanitize.cfg", "-p", "no:cacheprovider", "-q"]


def timed(cmd: list[str]) -> tuple[float, int]:
    # Same environment as `make test`: offline, one thread per process (lectures are executed
    # for commit that way, so nbval compares like with like; a lone Run All may use more cores).
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_EVALUATE_OFFLINE="1",
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    start = time.perf_counter()
    result = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start, result.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", help="lectures to time (default: all)")
    parser.add_argument("--no-suite", action="store_true", help="skip timing the whole test suite")
    args = parser.parse_args()
    notebooks = [Path(n) for n in args.notebooks] or sorted((ROOT / "lectures").glob("*.ipynb"))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    failures = 0
    for nb in notebooks:
        seconds, rc = timed([sys.executable, "-m", "pytest", *NBVAL, str(nb)])
        flag = "ok" if rc == 0 else "FAILED"
        over = "  OVER BUDGET" if seconds > BUDGET_S else ""
        print(f"{nb.name:40s} {seconds:7.1f} s  {flag}{over}")
        failures += rc != 0
    if not args.no_suite:
        seconds, rc = timed([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadscope",
                             *NBVAL, "lectures", "tests"])
        print(f"{'whole suite (make test, no install)':40s} {seconds:7.1f} s  {'ok' if rc == 0 else 'FAILED'}")
        failures += rc != 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
