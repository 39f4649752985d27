"""What the checks of a test cell cost: each solution test cell timed with its checks on and off.

    python -m benchmarks.check_cost [--units 04_rnn_bptt 10_beyond_attention] [--repeats 3]

For every test cell of the chosen units (all by default), the reference solution is run through the very test
code nbgrader runs (``tests/banks/notebook_cells.py``: setup cells, answer cells, then the one test cell),
twice: as graded, with the call guard (``forbid``: its profile hook, its torch-function mode and its watch at
the dispatcher), the work watch and ``check_method`` on; and with all three switched off (``checks_off``), the
cell's own reference computations and value checks still running. It prints the best of ``--repeats`` runs of
the test cell alone (the setup and answer cells run once beforehand, as the grader runs them, and are not
timed), the ratio, each unit's total and the grand total. ``--without-layer`` times the checks without the
guard's watch at the dispatcher, to show what that watch adds. Prints, never asserts; run it on an otherwise
idle machine.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "banks"))

from notebook_cells import _checks_switched_off, load_cells  # noqa: E402

from benchmarks.machine import machine_line  # noqa: E402


def _namespace(cells, unit: str) -> dict:
    """The setup and answer cells run once, as run_test_cell runs them."""
    namespace: dict = {"__name__": "__main__"}
    for cell in cells:
        if cell.kind in ("setup", "answer"):
            exec(compile(cell.source, f"<{unit}:{cell.grade_id}>", "exec"), namespace)
    return namespace


def _time_cell(cell, namespace: dict, repeats: int) -> float:
    """Best of ``repeats`` runs of the test cell alone, each in a fresh copy of the namespace."""
    code = compile(cell.source, f"<{cell.grade_id}>", "exec")
    exec(code, dict(namespace))  # warm-up: first-call imports and allocations
    best = float("inf")
    for _ in range(repeats):
        scope = dict(namespace)
        start = time.perf_counter()
        exec(code, scope)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", nargs="*", default=None, help="units to time (default: every unit)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--without-layer",
        action="store_true",
        help="checks on, but the guard without its watch at the dispatcher (what that watch adds)",
    )
    args = parser.parse_args()
    if args.without_layer:
        import course_utils.testing.guard as guard

        guard.function_layer_required = lambda **options: contextlib.nullcontext()
    units = args.units or sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir())
    print(f"{machine_line()}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    print(f"{'unit':<24} {'test cell':<18} {'checks on':>10} {'checks off':>11} {'ratio':>6}")
    total_on = total_off = 0.0
    for unit in units:
        unit_on = unit_off = 0.0
        cells = load_cells(unit)
        with contextlib.redirect_stdout(io.StringIO()):
            checked = _namespace(cells, unit)
            with _checks_switched_off():
                unchecked = _namespace(cells, unit)
        for cell in cells:
            if cell.kind != "test":
                continue
            with contextlib.redirect_stdout(io.StringIO()):
                on = _time_cell(cell, checked, args.repeats)
                with _checks_switched_off():
                    off = _time_cell(cell, unchecked, args.repeats)
            unit_on, unit_off = unit_on + on, unit_off + off
            print(f"{unit:<24} {cell.grade_id:<18} {on:>9.3f}s {off:>10.3f}s {on / off:>5.2f}x", flush=True)
        total_on, total_off = total_on + unit_on, total_off + unit_off
        print(f"{unit:<24} {'(all test cells)':<18} {unit_on:>9.3f}s {unit_off:>10.3f}s {unit_on / unit_off:>5.2f}x")
    print(f"{'all':<24} {'':<18} {total_on:>9.3f}s {total_off:>10.3f}s {total_on / total_off:>5.2f}x")


if __name__ == "__main__":
    main()
