"""Wall time of every lecture's validation ("Run All" under nbval) and of the whole suite.

    python -m benchmarks.notebook_times            # each lecture, then the full test suite
    python -m benchmarks.notebook_times --no-suite # lectures only
    python -m benchmarks.notebook_times lectures/01_tokenization.ipynb
    python -m benchmarks.notebook_times --isa avx2   # as an AVX2 CPU computes (tests/isa_env.py);
                                                     # also `make bench ISA=avx2`

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

from benchmarks.machine import cpu_model

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = 120.0
NBVAL = ["--nbval", "--nbval-sanitize-with", "tests/sanitize.cfg", "-p", "no:cacheprovider", "-q"]


def isa_settings(isa: str) -> dict[str, str]:
    """The environment of ``tests/isa_env.py ISA`` ({} for native)."""
    if isa == "native":
        return {}
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "isa_env.py"), isa], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"no ISA {isa!r} to emulate on this machine ({out.stderr.strip() or 'exit 3'})")
    return dict(pair.split("=", 1) for pair in out.stdout.split())


def timed(cmd: list[str], isa_env: dict[str, str]) -> tuple[float, int]:
    # Same environment as `make test`: offline, one thread per process (lectures are executed
    # for commit that way; a lone Run All may use more cores).
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_EVALUATE_OFFLINE="1",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        **isa_env,
    )
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    start = time.perf_counter()
    result = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start, result.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", help="lectures to time (default: all)")
    parser.add_argument("--no-suite", action="store_true", help="skip timing the whole test suite")
    parser.add_argument(
        "--isa",
        default="native",
        choices=["native", "avx2", "default", "other"],
        help="compute as another instruction set would (tests/isa_env.py)",
    )
    args = parser.parse_args()
    isa_env = isa_settings(args.isa)
    notebooks = [Path(n) for n in args.notebooks] or sorted((ROOT / "lectures").glob("*.ipynb"))
    import torch

    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"CPU {cpu_model()}, native ATen capability {torch.backends.cpu.get_cpu_capability()}, "
        f"settings: {' '.join(f'{k}={v}' for k, v in isa_env.items()) or 'native'}"
    )
    failures = 0
    for nb in notebooks:
        seconds, rc = timed([sys.executable, "-m", "pytest", *NBVAL, str(nb)], isa_env)
        flag = "ok" if rc == 0 else "FAILED"
        over = "  OVER BUDGET" if seconds > BUDGET_S else ""
        print(f"{nb.name:40s} {seconds:7.1f} s  {flag}{over}")
        failures += rc != 0
    if not args.no_suite:
        seconds, rc = timed(
            [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadscope", *NBVAL, "lectures", "tests"], isa_env
        )
        print(f"{'whole suite (make test, no install)':40s} {seconds:7.1f} s  {'ok' if rc == 0 else 'FAILED'}")
        failures += rc != 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
