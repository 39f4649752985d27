"""The long-context benchmark runs end to end on tiny sizes and prints its tables (no timed assertions)."""

import math

import pytest

from benchmarks.long_context import METHODS, predicted, slope


def test_slope_and_prediction():
    xs = [256, 512, 1024, 2048]
    assert slope(xs, [3e-9 * x**2 for x in xs]) == pytest.approx(2.0)
    assert slope(xs, [5.0 for _ in xs]) == pytest.approx(0.0)
    assert predicted([(256, 1.0)], 512, 2) == pytest.approx(4.0)
    assert predicted([(256, 1.0), (512, 8.0)], 1024, 1) == pytest.approx(64.0)  # local growth 3 beats nominal 1


def test_benchmark_prints_every_table_and_exponents(capsys):
    from benchmarks.long_context import main

    # two methods, so two child processes measure memory; the parent runs here (it never calls mallopt)
    main(["--device", "cpu", "--min-len", "64", "--max-len", "256", "--heads", "1", "--d-head", "8"]
         + ["--repeats", "1", "--fit-from", "64", "--budget", "5", "--methods", "naive", "lin-rec"])  # fmt: skip
    text = capsys.readouterr().out
    assert text.startswith("machine: ") and "cap: 5 s per pass" in text
    for title in ("forward pass, ms", "peak MiB", "one generated token, ms", "held between generated tokens"):
        assert title in text
    header = next(line for line in text.splitlines() if line.startswith("| T |"))
    assert header.split("|")[2:-1] == [" naive ", " lin-rec "]
    rows = [line for line in text.splitlines() if line.startswith("| 256 |")]
    assert len(rows) == 4 and all("-" not in row.split("|")[2] for row in rows)
    exponents = [line for line in text.splitlines() if line.startswith("| exponent")]
    assert len(exponents) == 3
    assert all(math.isfinite(float(cell)) for cell in exponents[0].split("|")[2:-1])
    check = next(line for line in text.splitlines() if line.startswith("peak memory:"))
    if "reads as" in check:  # Linux: the resident-set method measured a 64 MiB tensor
        assert 60 < float(check.split("reads as ")[1].split()[0]) < 76  # 64 MiB, within the page-level noise
    # what a generated token holds: the KV cache doubles with T, a recurrent state does not change
    held = {int(line.split("|")[1]): line.split("|")[2:-1] for line in text.split("held between")[1].splitlines()[3:6]}
    assert float(held[128][0]) == pytest.approx(2 * float(held[64][0]), rel=0.01) and held[128][1] == held[64][1]
    assert set(METHODS) >= {"naive", "sdpa", "tiled", "lin-rec", "lin-chunk"}
