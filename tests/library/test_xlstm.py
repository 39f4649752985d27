"""Tests of course_utils.xlstm: the mLSTM's parallel form equals its stabilised recurrence and the textbook
formula; the sLSTM's stabiliser changes no output."""

import math

import pytest
import torch
from family_inputs import F32, F64, per_step, qkv

from course_utils import xlstm as xl
from course_utils import xlstm_blocks as xb
from course_utils.xlstm import SLSTMCell

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


def test_mlstm_recurrent_continues_from_a_state():
    q, k, v = qkv()
    i_pre, f_pre = per_step(9, 2.0), per_step(10, 2.0)
    whole = xl.mlstm_recurrent(q, k, v, i_pre, f_pre)
    first, state = xl.mlstm_recurrent(q[:, :, :11], k[:, :, :11], v[:, :, :11], i_pre[..., :11], f_pre[..., :11],
                                      return_state=True)  # fmt: skip
    rest = xl.mlstm_recurrent(q[:, :, 11:], k[:, :, 11:], v[:, :, 11:], i_pre[..., 11:], f_pre[..., 11:], state=state)
    torch.testing.assert_close(torch.cat([first, rest], dim=2), whole, **F64)
    with pytest.raises(ValueError, match="state"):
        xl.mlstm_recurrent(q, k, v, i_pre, f_pre, state=(state[0][:, :1], state[1], state[2]))


# --------------------------------------------------------------------------- sLSTM heads


def randomised(module, scale=0.5, seed=0):
    """``module`` in float64 with every parameter drawn at random (no zero or one left by initialisation)."""
    gen = torch.Generator().manual_seed(seed)
    module = module.double()
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(scale * torch.randn(p.shape, generator=gen, dtype=torch.float64))
    return module


def test_recurrent_matrix_is_block_diagonal_per_gate():
    cell = randomised(SLSTMCell(3, 6, num_heads=3))
    dense = cell.R.dense()  # (24, 6)
    assert dense.shape == (24, 6) and cell.R.weight.shape == (4, 3, 2, 2)
    h = torch.randn(5, 6, dtype=torch.float64)
    torch.testing.assert_close(cell.R(h), h @ dense.T, **F64)
    rows, cols = torch.arange(24)[:, None], torch.arange(6)[None, :]
    off_block = (rows % 6) // 2 != cols // 2  # unit (row mod hidden) and input column in different heads
    assert (dense[off_block] == 0).all() and (dense[~off_block] != 0).all()
    assert sum(p.numel() for p in cell.R.parameters()) == 4 * 6 * 6 // 3


def test_slstm_heads_mix_only_within_a_head():
    cell = randomised(SLSTMCell(3, 6, num_heads=3), seed=1)
    x = torch.randn(2, 3, dtype=torch.float64)
    h0 = torch.randn(2, 6, dtype=torch.float64, requires_grad=True)
    state = (h0, torch.rand(2, 6, dtype=torch.float64), 1 + torch.rand(2, 6, dtype=torch.float64), torch.zeros(2, 6))
    h, _ = cell(x, state)
    for unit in range(6):
        (grad,) = torch.autograd.grad(h[:, unit].sum(), h0, retain_graph=True)
        head = unit // 2
        assert (grad[:, 2 * head : 2 * head + 2] != 0).all(), "a unit reads its own head's h_{t-1}"
        assert (torch.cat([grad[:, : 2 * head], grad[:, 2 * head + 2 :]], 1) == 0).all(), "and no other head's"
    with torch.no_grad():  # over a whole sequence, with W = 0 so that inputs do not couple the heads either
        cell.W.weight.zero_()
        xs = torch.randn(2, 12, 3, dtype=torch.float64)
        start = cell.initial_state(2, dtype=torch.float64)
        base, _ = xl.slstm_sequence(cell, xs, (start[0] + 0.3, *start[1:]))
        nudged_h = start[0] + 0.3
        nudged_h[:, 0] += 1.0  # head 0 only
        nudged, _ = xl.slstm_sequence(cell, xs, (nudged_h, *start[1:]))
    assert (nudged[..., :2] != base[..., :2]).any() and torch.equal(nudged[..., 2:], base[..., 2:])


def test_slstm_sequence_equals_the_cell_loop_and_a_dense_reference():
    cell = randomised(SLSTMCell(4, 6, num_heads=2), seed=2)
    x = torch.randn(3, 10, 4, dtype=torch.float64)
    h_seq, state = xl.slstm_sequence(cell, x)
    looped, loop_state = [], None
    for t in range(10):
        h, loop_state = cell(x[:, t], loop_state)
        looped.append(h)
    torch.testing.assert_close(h_seq, torch.stack(looped, 1), **F64)
    for a, b in zip(state, loop_state, strict=True):
        torch.testing.assert_close(a, b, **F64)
    # independent form: the unstabilised equations with a full matrix zeroed off the head blocks
    dense, h = cell.R.dense(), torch.zeros(3, 6, dtype=torch.float64)
    c = n = torch.zeros(3, 6, dtype=torch.float64)
    for t in range(10):
        z, i, f, o = (cell.W(x[:, t]) + h @ dense.T).chunk(4, dim=-1)
        c, n = torch.sigmoid(f) * c + i.exp() * torch.tanh(z), torch.sigmoid(f) * n + i.exp()
        h = torch.sigmoid(o) * c / n
        torch.testing.assert_close(h_seq[:, t], h, **F64)


def test_slstm_sequence_gate_input_feeds_only_the_input_and_forget_gates():
    cell = randomised(SLSTMCell(4, 6, num_heads=2), seed=3)
    x, g = torch.randn(2, 7, 4, dtype=torch.float64), torch.randn(2, 7, 4, dtype=torch.float64)
    routed, _ = xl.slstm_sequence(cell, x, gate_input=g)
    state, outs = None, []
    for t in range(7):
        wx, wg = cell.W(x[:, t]).chunk(4, -1), cell.W(g[:, t]).chunk(4, -1)
        h, state = cell.step(torch.cat([wx[0], wg[1], wg[2], wx[3]], -1), state)
        outs.append(h)
    torch.testing.assert_close(routed, torch.stack(outs, 1), **F64)
    torch.testing.assert_close(xl.slstm_sequence(cell, x, gate_input=x)[0], xl.slstm_sequence(cell, x)[0], **F64)
    with pytest.raises(ValueError, match="gate_input"):
        xl.slstm_sequence(cell, x, gate_input=g[:, :3])
    with pytest.raises(ValueError, match=r"\(B, T, 4\)"):
        xl.slstm_sequence(cell, x[:, :, :3])
    with pytest.raises(ValueError, match="num_heads"):
        SLSTMCell(4, 6, num_heads=4)


# --------------------------------------------------------------------------- the blocks


BLOCKS = {
    "mlstm": lambda: xb.MLSTMBlock(8, 2),
    "mlstm, proj 1.5, kernel 2": lambda: xb.MLSTMBlock(8, 4, proj_factor=1.5, conv_kernel=2),
    "slstm": lambda: xb.SLSTMBlock(8, 2),
    "slstm without conv": lambda: xb.SLSTMBlock(8, 4, conv_kernel=0),
    "stack 1:1": lambda: xb.XLSTMStack(8, 2, "msms"),
    "stack 3:1": lambda: xb.XLSTMStack(8, 2, "mmms", conv_kernel=3, proj_factor=1, qkv_blocksize=2, ff_factor=2),
    "mlstm, dense qkv": lambda: xb.MLSTMBlock(8, 2, qkv_blocksize=16),
}


@pytest.mark.parametrize("name", BLOCKS)
def test_block_parallel_equals_step_by_step(name):
    block = randomised(BLOCKS[name](), seed=4)
    x = torch.randn(3, 13, 8, dtype=torch.float64)
    parallel = block(x)
    assert parallel.shape == (3, 13, 8)
    state, outs = None, []
    for t in range(13):
        y, state = block.step(x[:, t], state)
        outs.append(y)
    torch.testing.assert_close(torch.stack(outs, 1), parallel, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["mlstm", "slstm", "stack 1:1"])
def test_block_is_causal(name):
    block = randomised(BLOCKS[name](), seed=5)
    x = torch.randn(2, 9, 8, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(block(x)[:, 4].sum(), x)
    assert (grad[:, 5:] == 0).all() and (grad[:, :5].abs().sum(-1) > 0).all()


def test_block_diagonal_linear_equals_a_dense_block_matrix():
    layer = randomised(xb.BlockDiagonalLinear(12, 4), seed=7)
    x = torch.randn(3, 5, 12, dtype=torch.float64)
    torch.testing.assert_close(layer(x), x @ torch.block_diag(*layer.weight).T + layer.bias, **F64)
    assert sum(p.numel() for p in layer.parameters()) == 12 * 4 + 12


def test_causal_conv_step_equals_forward():
    conv = randomised(xb.CausalConv(5, 3), seed=6)
    x = torch.randn(2, 8, 5, dtype=torch.float64)
    buffer, outs = torch.zeros(2, 2, 5, dtype=torch.float64), []
    for t in range(8):
        y, buffer = conv.step(x[:, t], buffer)
        outs.append(y)
    torch.testing.assert_close(torch.stack(outs, 1), conv(x), **F64)
    by_hand = conv.conv.weight[:, 0, 2] * x[:, 0] + conv.conv.bias  # the first output sees only x_0 (last tap)
    torch.testing.assert_close(conv(x)[:, 0], by_hand, **F64)


def test_parameter_counts():
    d, h, inner, kernel = 8, 2, 16, 4
    mlstm = (
        2 * d  # LayerNorm
        + d * 2 * inner + 2 * inner  # up-projection to x_m and z
        + inner * kernel + inner  # depthwise causal conv
        + 3 * (inner * 4 + inner)  # q, k, v: block-diagonal, blocks of 4 x 4
        + 3 * inner * 2 * h + 2 * h  # input and forget gate per head, from [q, k, v]
        + 2 * inner + inner  # group norm, learnable skip
        + inner * d + d  # down-projection
    )  # fmt: skip
    ff = math.ceil(4 / 3 * d)
    slstm = (
        2 * d + d * kernel + d  # LayerNorm, conv
        + d * 4 * d + 4 * d + 4 * d * d // h  # W and bias for z, i, f, o; block-diagonal R
        + 2 * d + 2 * d  # group norm, LayerNorm before the MLP
        + d * 2 * ff + 2 * ff + ff * d + d  # gated MLP up and down
    )  # fmt: skip

    def count(module):
        return sum(p.numel() for p in module.parameters())

    assert count(xb.MLSTMBlock(d, h)) == mlstm
    assert count(xb.SLSTMBlock(d, h)) == slstm
    assert count(xb.XLSTMStack(d, h, "msms")) == 2 * mlstm + 2 * slstm + 2 * d


def test_blocks_reject_bad_input():
    with pytest.raises(ValueError, match="num_heads"):
        xb.MLSTMBlock(8, 3)  # inner width 16 does not split into 3 heads
    with pytest.raises(ValueError, match="num_heads"):
        xb.SLSTMBlock(8, 3)
    with pytest.raises(ValueError, match="conv_kernel"):
        xb.MLSTMBlock(8, 2, conv_kernel=0)
    with pytest.raises(ValueError, match="qkv_blocksize"):
        xb.MLSTMBlock(8, 2, qkv_blocksize=3)
    with pytest.raises(ValueError, match="layout"):
        xb.XLSTMStack(8, 2, "mxs")
    for block in (xb.MLSTMBlock(8, 2), xb.SLSTMBlock(8, 2), xb.XLSTMStack(8, 2, "ms")):
        with pytest.raises(ValueError, match=r"\(B, T, 8\)"):
            block(torch.zeros(2, 5, 7))
        with pytest.raises(ValueError, match=r"\(B, T, 8\)"):
            block(torch.zeros(5, 8))
        with pytest.raises(ValueError, match=r"\(B, 8\)"):
            block.step(torch.zeros(2, 1, 8))
        with pytest.raises(ValueError, match="floating"):
            block(torch.zeros(2, 5, 8, dtype=torch.long))
