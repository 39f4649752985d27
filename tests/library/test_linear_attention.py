"""Tests of course_utils.linear_attention: each parallel form equals its recurrent (and chunkwise) form,
in float64 to ~1e-10 and in float32 to a float32 tolerance, and each matches a brute-force formula."""

import pytest
import torch
import torch.nn.functional as F
from family_inputs import F32, F64, per_step, qkv

from course_utils import linear_attention as la

# --------------------------------------------------------------------------- linear attention


def test_elu_feature_map_is_positive():
    x = torch.linspace(-30, 5, 50)
    phi = la.elu_feature_map(x)
    assert (phi > 0).all()
    torch.testing.assert_close(phi, F.elu(x) + 1)
    torch.testing.assert_close(la.elu_feature_map(x.double()).float(), phi)


@pytest.mark.parametrize("dtype,tol", [(torch.float64, F64), (torch.float32, F32)])
@pytest.mark.parametrize("normalize", [True, False])
def test_linear_attention_parallel_recurrent_chunkwise_equal(dtype, tol, normalize):
    q, k, v = qkv(dtype)
    parallel = la.linear_attention_parallel(q, k, v, normalize=normalize)
    torch.testing.assert_close(la.linear_attention_recurrent(q, k, v, normalize=normalize), parallel, **tol)
    for chunk in (1, 5, 8, 29, 64):
        torch.testing.assert_close(la.linear_attention_chunkwise(q, k, v, chunk, normalize=normalize), parallel, **tol)


def test_linear_attention_matches_its_formula_and_carries_state():
    q, k, v = qkv()
    fq, fk = la.elu_feature_map(q), la.elu_feature_map(k)
    t = 11
    weights = fq[0, 1, t] @ fk[0, 1, : t + 1].T  # (t + 1,)
    expected = weights @ v[0, 1, : t + 1] / weights.sum()
    torch.testing.assert_close(la.linear_attention_parallel(q, k, v)[0, 1, t], expected)
    # two halves with the state handed over == one pass; the state has no time axis
    first, state = la.linear_attention_recurrent(q[:, :, :12], k[:, :, :12], v[:, :, :12], return_state=True)
    assert state[0].shape == (2, 3, 6, 4) and state[1].shape == (2, 3, 6)
    second = la.linear_attention_recurrent(q[:, :, 12:], k[:, :, 12:], v[:, :, 12:], state=state)
    torch.testing.assert_close(torch.cat([first, second], dim=2), la.linear_attention_recurrent(q, k, v), **F64)
    # feature_map=None uses q and k as given
    plain = la.linear_attention_parallel(fq, fk, v, feature_map=None)
    torch.testing.assert_close(plain, la.linear_attention_parallel(q, k, v), **F64)


# --------------------------------------------------------------------------- the family


@pytest.mark.parametrize("dtype,tol", [(torch.float64, F64), (torch.float32, F32)])
def test_retnet_parallel_equals_fixed_decay_recurrence(dtype, tol):
    q, k, v = qkv(dtype)
    gamma = torch.tensor([0.5, 0.9, 1.0], dtype=dtype)
    out, state = la.decay_recurrence(q, k, v, log_decay=gamma.log())
    torch.testing.assert_close(la.retnet_parallel(q, k, v, gamma), out, **tol)
    t = 7  # brute force: o_t = Σ_s γ^(t-s) (q_t · k_s) v_s
    expected = sum(0.9 ** (t - s) * (q[1, 1, t] @ k[1, 1, s]) * v[1, 1, s] for s in range(t + 1))
    torch.testing.assert_close(out[1, 1, t], expected, **tol)
    assert state.shape == (2, 3, 6, 4)
    # gamma = 1 is unnormalised linear attention without a feature map
    torch.testing.assert_close(
        out[:, 2], la.linear_attention_parallel(q, k, v, normalize=False, feature_map=None)[:, 2], **tol
    )


@pytest.mark.parametrize("dtype,tol", [(torch.float64, F64), (torch.float32, F32)])
def test_gated_parallel_chunkwise_equal_recurrence(dtype, tol):
    q, k, v = qkv(dtype)
    log_decay = F.logsigmoid(per_step(1, 2.0, dtype) + 2)  # data-dependent a_t in (0, 1)
    out, state = la.decay_recurrence(q, k, v, log_decay=log_decay)
    torch.testing.assert_close(la.gated_parallel(q, k, v, log_decay), out, **tol)
    for chunk in (1, 4, 10, 29, 64):
        got, got_state = la.gated_chunkwise(q, k, v, log_decay, chunk, return_state=True)
        torch.testing.assert_close(got, out, **tol)
        torch.testing.assert_close(got_state, state, **tol)


def test_gated_forms_stay_finite_with_strong_decay():
    q, k, v = qkv(torch.float32, seq_len=200)
    log_decay = torch.full((2, 3, 200), -5.0)  # cumulative sum reaches -1000: exp(+1000) if done naively
    out, _ = la.decay_recurrence(q, k, v, log_decay=log_decay)
    for got in (la.gated_parallel(q, k, v, log_decay), la.gated_chunkwise(q, k, v, log_decay, 64)):
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, out, **F32)


def test_decay_recurrence_state_continues():
    q, k, v = qkv()
    log_decay = -torch.rand(2, 3, 29, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    whole, final = la.decay_recurrence(q, k, v, log_decay)
    first, mid = la.decay_recurrence(q[:, :, :10], k[:, :, :10], v[:, :, :10], log_decay[..., :10])
    second, end = la.decay_recurrence(q[:, :, 10:], k[:, :, 10:], v[:, :, 10:], log_decay[..., 10:], state=mid)
    torch.testing.assert_close(torch.cat([first, second], dim=2), whole, **F64)
    torch.testing.assert_close(end, final, **F64)


@pytest.mark.parametrize("dtype,tol", [(torch.float64, F64), (torch.float32, F32)])
def test_deltanet_parallel_equals_delta_rule(dtype, tol):
    q, k, v = qkv(dtype)
    k = F.normalize(k, dim=-1)
    beta = torch.sigmoid(per_step(2, dtype=dtype))
    out, _ = la.decay_recurrence(q, k, v, beta=beta)
    torch.testing.assert_close(la.deltanet_parallel(q, k, v, beta), out, **tol)


def test_delta_rule_overwrites_the_value_under_a_key():
    # beta = 1 with a repeated unit key: the state then holds only the newest value under that key
    k = torch.zeros(1, 1, 3, 2, dtype=torch.float64)
    k[..., 0] = 1.0
    v = torch.tensor([[[[1.0, 2.0], [5.0, -1.0], [7.0, 3.0]]]], dtype=torch.float64)
    out, state = la.decay_recurrence(k, k, v, beta=torch.ones(1, 1, 3, dtype=torch.float64))
    torch.testing.assert_close(out[0, 0], v[0, 0])  # read back exactly what was last written
    torch.testing.assert_close(state[0, 0, 0], v[0, 0, 2])
    plain, _ = la.decay_recurrence(k, k, v)  # without the delta rule the values pile up
    torch.testing.assert_close(plain[0, 0, 2], v[0, 0].sum(0))


def test_gated_delta_rule_decays_before_correcting():
    q, k, v = qkv(seq_len=6)
    k = F.normalize(k, dim=-1)
    beta, log_decay = torch.sigmoid(per_step(4, seq_len=6)), -torch.rand(2, 3, 6, dtype=torch.float64)
    out, _ = la.decay_recurrence(q, k, v, log_decay=log_decay, beta=beta)
    S = torch.zeros(2, 3, 6, 4, dtype=torch.float64)
    for t in range(6):
        S = log_decay[:, :, t, None, None].exp() * S
        S = (
            S
            + beta[:, :, t, None, None]
            * k[:, :, t, :, None]
            * (v[:, :, t] - (k[:, :, t, :, None] * S).sum(-2))[..., None, :]
        )
        torch.testing.assert_close(out[:, :, t], (q[:, :, t, :, None] * S).sum(-2))


# --------------------------------------------------------------------------- bad input


def test_family_rejects_bad_shapes():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="shapes do not fit"):
        la.linear_attention_parallel(q, k[..., :3], v)
    with pytest.raises(ValueError, match="4-D"):
        la.linear_attention_recurrent(q[0], k[0], v[0])
    with pytest.raises(ValueError, match="chunk_size"):
        la.linear_attention_chunkwise(q, k, v, chunk_size=0)
    with pytest.raises(ValueError, match="log_decay"):
        la.decay_recurrence(q, k, v, log_decay=torch.zeros(2, 3))
    with pytest.raises(ValueError, match="beta"):
        la.deltanet_parallel(q, k, v, torch.ones(2, 3, 28))
    with pytest.raises(ValueError, match="gamma"):
        la.retnet_parallel(q, k, v, torch.tensor([0.5, 1.5, 0.9]))


# --------------------------------------------------------------------------- the delta rule by chunks


@pytest.mark.parametrize("dtype,tol", [(torch.float64, F64), (torch.float32, F32)])
@pytest.mark.parametrize("gated", [False, True])
def test_deltanet_chunkwise_equals_delta_rule(dtype, tol, gated):
    q, k, v = qkv(dtype)  # T = 29: no chunk size below divides it except 1 and 29
    k = F.normalize(k, dim=-1)
    beta = torch.sigmoid(per_step(5, dtype=dtype))
    log_decay = F.logsigmoid(per_step(6, 2.0, dtype) + 2) if gated else None
    out, state = la.decay_recurrence(q, k, v, log_decay=log_decay, beta=beta)
    for chunk in (1, 4, 8, 10, 29, 64):
        got, got_state = la.deltanet_chunkwise(q, k, v, beta, chunk, log_decay=log_decay, return_state=True)
        torch.testing.assert_close(got, out, **tol)
        torch.testing.assert_close(got_state, state, **tol)
    if not gated:
        torch.testing.assert_close(la.deltanet_chunkwise(q, k, v, beta, 8), la.deltanet_parallel(q, k, v, beta), **tol)


def test_deltanet_chunkwise_fixed_decay_and_long_sequence():
    q, k, v = qkv(seq_len=200)
    k = F.normalize(k, dim=-1)
    beta = torch.sigmoid(per_step(7, seq_len=200))
    gamma = torch.tensor(
        [0.5, 0.9, 1.0], dtype=torch.float64
    )  # (H,): a fixed decay per head, as decay_recurrence takes
    out, _ = la.decay_recurrence(q, k, v, log_decay=gamma.log(), beta=beta)
    torch.testing.assert_close(la.deltanet_chunkwise(q, k, v, beta, 64, log_decay=gamma.log()), out, **F64)
    strong = torch.full((2, 3, 200), -5.0, dtype=torch.float32)  # cumulative log decay -1000 inside a chunk of 200
    q32, k32, v32, beta32 = q.float(), k.float(), v.float(), beta.float()
    got = la.deltanet_chunkwise(q32, k32, v32, beta32, 200, log_decay=strong)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, la.decay_recurrence(q32, k32, v32, log_decay=strong, beta=beta32)[0], **F32)


def test_deltanet_chunkwise_builds_no_sequence_square():
    # the largest tensor it creates is a chunk's (C, C) system or the (T, d) output, never (T, T)
    from course_utils.memory import PeakMemory

    peaks = []
    for seq_len in (256, 512):
        q, k, v = qkv(torch.float32, seq_len=seq_len)
        beta = torch.sigmoid(per_step(8, dtype=torch.float32, seq_len=seq_len))
        with PeakMemory() as memory:
            la.deltanet_chunkwise(q, F.normalize(k, dim=-1), v, beta, 32)
        peaks.append(memory.peak)
    assert peaks[1] < 2.2 * peaks[0]
    assert peaks[1] < 2 * 3 * 512 * 512 * 4 / 4  # well below one (B, H, T, T) float32 tensor


def test_deltanet_chunkwise_rejects_bad_input():
    q, k, v = qkv()
    beta = torch.ones(2, 3, 29, dtype=torch.float64)
    with pytest.raises(ValueError, match="beta"):
        la.deltanet_chunkwise(q, k, v, beta[..., :5])
    with pytest.raises(ValueError, match="log_decay"):
        la.deltanet_chunkwise(q, k, v, beta, 8, log_decay=torch.zeros(2, 3))
    with pytest.raises(ValueError, match="chunk_size"):
        la.deltanet_chunkwise(q, k, v, beta, 0)
