"""Tests of course_utils.xlstm: the mLSTM's parallel form equals its stabilised recurrence and the textbook
formula; the sLSTM's stabiliser changes no output."""

import math

import pytest
import torch

from course_utils import xlstm as xl
from course_utils.xlstm import SLSTMCell

F64 = dict(rtol=0, atol=1e-10)
F32 = dict(rtol=1e-4, atol=1e-4)


def qkv(dtype=torch.float64, seq_len=29, d_k=6, d_v=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(2, 3, seq_len, d, generator=gen).to(dtype) for d in (d_k, d_k, d_v))


def per_step(seed, scale=1.0, dtype=torch.float64, seq_len=29):
    return (scale * torch.randn(2, 3, seq_len, generator=torch.Generator().manual_seed(seed))).to(dtype)


# --------------------------------------------------------------------------- mLSTM


@pytest.mark.parametrize("forget_gate", ["sigmoid", "exp"])
@pytest.mark.parametrize("dtype,tol", [(torch.float64, F64), (torch.float32, F32)])
def test_mlstm_parallel_equals_recurrent(forget_gate, dtype, tol):
    q, k, v = qkv(dtype)
    i_pre = per_step(5, 2.0, dtype)
    f_pre = per_step(6, 2.0, dtype) + (3.0 if forget_gate == "sigmoid" else -0.5)
    out, (C, n, m) = xl.mlstm_recurrent(q, k, v, i_pre, f_pre, forget_gate, return_state=True)
    torch.testing.assert_close(xl.mlstm_parallel(q, k, v, i_pre, f_pre, forget_gate), out, **tol)
    assert C.shape == (2, 3, 6, 4) and n.shape == (2, 3, 6) and m.shape == (2, 3)


def test_mlstm_equals_unstabilised_formula_and_survives_huge_gates():
    q, k, v = qkv(seq_len=8)
    i_pre, f_pre = per_step(7, seq_len=8), per_step(8, seq_len=8)
    C = torch.zeros(2, 3, 6, 4, dtype=torch.float64)
    n = torch.zeros(2, 3, 6, dtype=torch.float64)
    expected = []
    for t in range(8):  # the textbook mLSTM, no stabiliser
        f, i = torch.sigmoid(f_pre[:, :, t]), i_pre[:, :, t].exp()
        C = f[..., None, None] * C + i[..., None, None] * k[:, :, t, :, None] * v[:, :, t, None, :] / math.sqrt(6)
        n = f[..., None] * n + i[..., None] * k[:, :, t] / math.sqrt(6)
        den = (n * q[:, :, t]).sum(-1).abs().clamp_min(1.0)
        expected.append((q[:, :, t, :, None] * C).sum(-2) / den[..., None])
    torch.testing.assert_close(xl.mlstm_recurrent(q, k, v, i_pre, f_pre), torch.stack(expected, 2), **F64)
    huge = 500 + 0 * i_pre.float()  # exp(500) overflows float32 (and float64 soon after)
    q32, k32, v32 = (x.float() for x in (q, k, v))
    for out in (
        xl.mlstm_recurrent(q32, k32, v32, huge, f_pre.float()),
        xl.mlstm_parallel(q32, k32, v32, huge, f_pre.float()),
    ):
        assert torch.isfinite(out).all()


def test_mlstm_rejects_bad_gates():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="i_pre"):
        xl.mlstm_parallel(q, k, v, torch.zeros(2, 29), torch.zeros(2, 3, 29))
    with pytest.raises(ValueError, match="forget_gate"):
        xl.mlstm_recurrent(q, k, v, torch.zeros(2, 3, 29), torch.zeros(2, 3, 29), forget_gate="tanh")


# --------------------------------------------------------------------------- sLSTM


def unstabilised_slstm(cell, x):
    """The sLSTM equations without the stabiliser, in float64: ``h_t = o c_t / n_t``."""
    h = c = n = torch.zeros(x.shape[0], cell.hidden_size, dtype=torch.float64)
    outs = []
    for t in range(x.shape[1]):
        z, i, f, o = (cell.W(x[:, t]) + cell.R(h)).chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + i.exp() * torch.tanh(z)
        n = torch.sigmoid(f) * n + i.exp()
        h = torch.sigmoid(o) * c / n
        outs.append(h)
    return torch.stack(outs, 1)


def test_slstm_stabiliser_changes_no_output_and_prevents_overflow():
    torch.manual_seed(0)
    cell = SLSTMCell(3, 5).double()
    x = torch.randn(2, 15, 3, dtype=torch.float64)
    state, outs = None, []
    for t in range(15):
        h, state = cell(x[:, t], state)
        outs.append(h)
    torch.testing.assert_close(torch.stack(outs, 1), unstabilised_slstm(cell, x), rtol=0, atol=1e-10)
    assert all(s.shape == (2, 5) for s in state)
    with torch.no_grad():
        cell.W.bias[5:10] = 400.0  # input-gate pre-activation ~400: exp overflows float32, and float64 in steps
    cell32, state, x32 = cell.float(), None, x.float()
    for t in range(15):
        h, state = cell32(x32[:, t], state)
        assert torch.isfinite(h).all() and (h.abs() <= 1).all()  # |o c / n| <= 1: c/n is a mean of tanh values
    with pytest.raises(ValueError, match=r"\(B, 3\)"):
        cell32(torch.zeros(2, 4))
    with pytest.raises(ValueError, match="forget_gate"):
        SLSTMCell(3, 5, forget_gate="relu")
