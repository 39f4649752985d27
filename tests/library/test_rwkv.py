"""Tests of course_utils.rwkv: the WKV operator's three forms against its formula, their behaviour where
the naive form overflows, and the RWKV block's parallel ("GPT") mode against its step ("RNN") mode."""

import pytest
import torch

from course_utils.memory import PeakMemory
from course_utils.rwkv import (
    RWKVBlock,
    token_shift,
    wkv_by_matmul,
    wkv_chunkwise,
    wkv_final_state,
    wkv_naive,
    wkv_parallel,
    wkv_stable,
)


def wkv_inputs(dtype=torch.float64, seq_len=23, channels=5, seed=0, k_scale=1.0):
    gen = torch.Generator().manual_seed(seed)
    w = torch.rand(channels, generator=gen).to(dtype) * 2  # decay rates >= 0, one of them ~0
    w[0] = 0.0
    u = torch.randn(channels, generator=gen).to(dtype)
    k = (k_scale * torch.randn(2, seq_len, channels, generator=gen)).to(dtype)
    v = torch.randn(2, seq_len, channels, generator=gen).to(dtype)
    return w, u, k, v


def brute_force(w, u, k, v):
    out = torch.empty_like(v)
    for t in range(k.shape[1]):
        num = (u + k[:, t]).exp() * v[:, t]
        den = (u + k[:, t]).exp()
        for i in range(t):
            weight = (-(t - 1 - i) * w + k[:, i]).exp()
            num, den = num + weight * v[:, i], den + weight
        out[:, t] = num / den
    return out


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-5)])
def test_wkv_forms_equal_the_formula(dtype, tol):
    w, u, k, v = wkv_inputs(dtype)
    expected = brute_force(*(x.double() for x in (w, u, k, v))).to(dtype)
    naive = wkv_naive(w, u, k, v)
    torch.testing.assert_close(naive, expected, rtol=tol, atol=tol)
    torch.testing.assert_close(wkv_parallel(w, u, k, v), naive, rtol=tol, atol=tol)
    torch.testing.assert_close(wkv_by_matmul(w, u, k, v), naive, rtol=tol, atol=tol)
    stable, state = wkv_stable(w, u, k, v)
    torch.testing.assert_close(stable, naive, rtol=tol, atol=tol)
    assert all(s.shape == (2, 5) for s in state)


def test_wkv_stable_stays_finite_where_naive_overflows():
    w, u, k, v = wkv_inputs(torch.float32, k_scale=60.0)  # |k| up to ~150: e^k overflows float32
    naive = wkv_naive(w, u, k, v)
    assert not torch.isfinite(naive).all()
    stable, _ = wkv_stable(w, u, k, v)
    assert torch.isfinite(stable).all()
    reference = wkv_parallel(*(x.double() for x in (w, u, k, v)))  # float64 holds e^150
    torch.testing.assert_close(stable.double(), reference, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(wkv_parallel(w, u, k, v).double(), reference, rtol=1e-4, atol=1e-4)
    # a weighted mean of values: each output lies within the range of the values seen so far
    assert (stable <= v.cummax(dim=1).values + 1e-4).all() and (stable >= v.cummin(dim=1).values - 1e-4).all()


def test_wkv_state_continues_and_final_state_matches():
    w, u, k, v = wkv_inputs()
    whole, final = wkv_stable(w, u, k, v)
    first, mid = wkv_stable(w, u, k[:, :9], v[:, :9])
    second, end = wkv_stable(w, u, k[:, 9:], v[:, 9:], mid)
    torch.testing.assert_close(torch.cat([first, second], dim=1), whole, rtol=0, atol=1e-12)
    for got, expected in zip(wkv_final_state(w, k, v), final):
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-5)])
def test_wkv_chunkwise_equals_the_other_forms(dtype, tol):
    w, u, k, v = wkv_inputs(dtype)  # T = 23: chunks of 4, 5, 10 leave a short last chunk
    stable, _ = wkv_stable(w, u, k, v)
    for chunk in (1, 4, 5, 10, 23, 64):
        torch.testing.assert_close(wkv_chunkwise(w, u, k, v, chunk), stable, rtol=tol, atol=tol)
    torch.testing.assert_close(wkv_chunkwise(w, u, k, v, 8), wkv_parallel(w, u, k, v), rtol=tol, atol=tol)


def test_wkv_chunkwise_stays_finite_where_naive_overflows():
    w, u, k, v = wkv_inputs(torch.float32, seq_len=60, k_scale=60.0)
    assert not torch.isfinite(wkv_naive(w, u, k, v)).all()
    got = wkv_chunkwise(w, u, k, v, 16)
    assert torch.isfinite(got).all()
    reference = wkv_parallel(*(x.double() for x in (w, u, k, v)))
    torch.testing.assert_close(got.double(), reference, rtol=1e-4, atol=1e-4)


def test_wkv_chunkwise_memory_grows_linearly():
    peaks = {}
    for seq_len in (256, 512):
        w, u, k, v = wkv_inputs(torch.float32, seq_len=seq_len, channels=16)
        for name, fn in (("parallel", wkv_parallel), ("chunkwise", lambda *x: wkv_chunkwise(*x, chunk_size=32))):
            with PeakMemory() as memory:
                fn(w, u, k, v)
            peaks[name, seq_len] = memory.peak
    assert peaks["chunkwise", 512] <= 2.2 * peaks["chunkwise", 256]
    assert 3.6 < peaks["parallel", 512] / peaks["parallel", 256] < 4.4
    assert peaks["chunkwise", 512] < peaks["parallel", 512] / 10


def test_wkv_rejects_bad_shapes():
    w, u, k, v = wkv_inputs()
    with pytest.raises(ValueError, match=r"\(C,\)"):
        wkv_naive(w[:3], u, k, v)
    with pytest.raises(ValueError, match="same shape"):
        wkv_stable(w, u, k, v[:, :5])
    with pytest.raises(ValueError, match="B, T, C"):
        wkv_parallel(w, u, k[0], v[0])
    with pytest.raises(ValueError, match="chunk_size"):
        wkv_chunkwise(w, u, k, v, 0)


def test_token_shift():
    x = torch.arange(12.0).view(1, 4, 3)
    shifted = token_shift(x)
    assert torch.equal(shifted[0, 0], torch.zeros(3)) and torch.equal(shifted[0, 1:], x[0, :3])
    assert torch.equal(token_shift(x, last=torch.ones(1, 3))[0, 0], torch.ones(3))


def test_rwkv_block_parallel_equals_step_by_step():
    torch.manual_seed(0)
    block = RWKVBlock(d_model=16).double()
    x = torch.randn(2, 12, 16, dtype=torch.float64)
    parallel, _ = block(x)
    recurrent, _ = block(x, mode="recurrent")
    torch.testing.assert_close(recurrent, parallel, rtol=0, atol=1e-10)
    state, steps = None, []
    for t in range(12):
        y, state = block(x[:, t : t + 1], state, mode="recurrent")
        steps.append(y)
    torch.testing.assert_close(torch.cat(steps, dim=1), parallel, rtol=0, atol=1e-10)
    # a parallel pass over a prompt hands over to steps
    _, state = block(x[:, :7])
    rest = [block(x[:, t : t + 1], state, mode="recurrent")[0] for t in [7]]
    torch.testing.assert_close(rest[0], parallel[:, 7:8], rtol=0, atol=1e-10)
    with pytest.raises(ValueError, match="mode"):
        block(x, mode="gpt")
    with pytest.raises(ValueError, match=r"\(B, T, 16\)"):
        block(x[..., :8])
