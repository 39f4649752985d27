"""The long-context benchmark runs end to end on tiny sizes and prints its tables (no timed assertions);
what its new rows run is right (the training methods' gradients, the delta rule's decoding step)."""

import math

import pytest
import torch
import torch.nn.functional as F

from benchmarks.long_context import BACKWARD, METHODS, forward_fn, inputs, predicted, slope
from course_utils.linear_attention import decay_recurrence, deltanet_chunkwise


def test_slope_and_prediction():
    xs = [256, 512, 1024, 2048]
    assert slope(xs, [3e-9 * x**2 for x in xs]) == pytest.approx(2.0)
    assert slope(xs, [5.0 for _ in xs]) == pytest.approx(0.0)
    assert predicted([(256, 1.0)], 512, 2) == pytest.approx(4.0)
    assert predicted([(256, 1.0), (512, 8.0)], 1024, 1) == pytest.approx(64.0)  # local growth 3 beats nominal 1


def test_benchmark_prints_every_table_and_exponents(capsys):
    from benchmarks.long_context import main

    # three methods, so three child processes measure memory; the parent runs here (it never calls mallopt)
    methods = ["naive", "delta-chunk", "tiled-bwd"]
    main(["--device", "cpu", "--min-len", "64", "--max-len", "256", "--heads", "1", "--d-head", "8"]
         + ["--repeats", "1", "--fit-from", "64", "--budget", "5", "--methods", *methods])  # fmt: skip
    text = capsys.readouterr().out
    assert text.startswith("machine: ") and "cap: 5 s per pass" in text
    for title in ("forward pass, ms", "peak MiB", "one generated token, ms", "held between generated tokens"):
        assert title in text
    for title in ("forward + backward pass (training), ms", "forward + backward pass (training), peak MiB"):
        assert title in text
    headers = [line.split("|")[2:-1] for line in text.splitlines() if line.startswith("| T |")]
    assert headers == 4 * [[" naive ", " delta-chunk "]] + 2 * [[" tiled-bwd "]]
    rows = [line for line in text.splitlines() if line.startswith("| 256 |")]
    assert len(rows) == 6 and all("-" not in cell for row in rows for cell in row.split("|")[2:-1])
    exponents = [line for line in text.splitlines() if line.startswith("| exponent")]
    assert len(exponents) == 5  # time, memory, token time; training time and memory
    assert all(math.isfinite(float(cell)) for line in exponents for cell in line.split("|")[2:-1])
    check = next(line for line in text.splitlines() if line.startswith("peak memory:"))
    if "reads as" in check:  # Linux: the resident-set method measured a 64 MiB tensor
        assert 60 < float(check.split("reads as ")[1].split()[0]) < 76  # 64 MiB, within the page-level noise
    # what a generated token holds: the KV cache doubles with T, a recurrent state does not change
    held = {int(line.split("|")[1]): line.split("|")[2:-1] for line in text.split("held between")[1].splitlines()[3:6]}
    assert float(held[128][0]) == pytest.approx(2 * float(held[64][0]), rel=0.01) and held[128][1] == held[64][1]
    assert set(METHODS) >= {"naive", "sdpa", "tiled", "lin-rec", "lin-chunk"}


def test_training_methods_return_the_same_gradients():
    class Args:
        batch, heads, d_head = 2, 2, 8

    grads = {}
    for method in BACKWARD:
        data = inputs(method, 200, Args, torch.device("cpu"))  # the same numbers for every method (seeded by T)
        grads[method] = forward_fn(method, data)()  # (dq, dk, dv), each (B, H, T, d_head)
        assert all(g.shape == (2, 2, 200, 8) for g in grads[method])
    for method in ("naive-bwd", "tiled-bwd"):
        for got, expected in zip(grads[method], grads["sdpa-bwd"]):
            torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)


def test_delta_decoding_step_continues_the_chunkwise_form():
    gen = torch.Generator().manual_seed(0)
    q, v = torch.randn(2, 3, 21, 4, generator=gen, dtype=torch.float64), torch.randn(2, 3, 21, 5, dtype=torch.float64)
    k = F.normalize(torch.randn(2, 3, 21, 4, generator=gen, dtype=torch.float64), dim=-1)
    beta = torch.rand(2, 3, 21, generator=gen, dtype=torch.float64)
    everything = deltanet_chunkwise(q, k, v, beta, chunk_size=8)  # (B, H, 21, d_v)
    _, state = deltanet_chunkwise(q[:, :, :20], k[:, :, :20], v[:, :, :20], beta[..., :20], return_state=True)
    out, new_state = decay_recurrence(q[:, :, 20:], k[:, :, 20:], v[:, :, 20:], beta=beta[..., 20:], state=state)
    torch.testing.assert_close(out[:, :, 0], everything[:, :, 20], rtol=0, atol=1e-12)  # the benchmark's decoding step
    assert new_state.shape == (2, 3, 4, 5)
