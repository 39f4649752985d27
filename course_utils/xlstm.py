"""Unit 10: xLSTM's two cells (Beck et al. 2024, "xLSTM: Extended Long Short-Term Memory"), side by side.

- the **mLSTM**: a matrix memory ``C_t = f_t C_{t-1} + i_t k_t v_tᵀ`` with an exponential input gate, a
  normaliser ``n_t`` and a stabiliser ``m_t``; it has no memory mixing (no ``h_{t-1}`` in its gates), so
  it is a row of the linear-attention family and has a parallel form: :func:`mlstm_parallel`,
  :func:`mlstm_recurrent`. Shapes ``q, k (B, H, T, d_k)``, ``v (B, H, T, d_v)``, gates ``(B, H, T)``;
- the **sLSTM**: a scalar memory per unit whose gates read ``h_{t-1}`` through a recurrent matrix ``R``
  that is block-diagonal over heads (memory mixing within a head), so it runs step by step only:
  :class:`SLSTMCell` ``x (B, input_size) -> h (B, hidden)``, :func:`slstm_sequence` ``(B, T, input_size)``;

The paper's blocks built around the two cells are in :mod:`course_utils.xlstm_blocks`.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from .linear_attention import _per_step
from .primitives import causal_mask, check_qkv

# --------------------------------------------------------------------------- mLSTM (xLSTM)


def _log_forget(f_pre: torch.Tensor, forget_gate: str) -> torch.Tensor:
    if forget_gate == "sigmoid":
        return F.logsigmoid(f_pre)
    if forget_gate == "exp":
        return f_pre
    raise ValueError(f"forget_gate must be 'sigmoid' or 'exp', got {forget_gate!r}")


def mlstm_parallel(
    q: Tensor, k: Tensor, v: Tensor, i_pre: Tensor, f_pre: Tensor, forget_gate: str = "sigmoid"
) -> Tensor:
    """The mLSTM (Beck et al. 2024) in parallel: ``(B, H, T, d_v)``; equals :func:`mlstm_recurrent`.

    Gate pre-activations ``i_pre, f_pre (B, H, T)``: input gate ``exp(i_pre)``, forget gate
    ``sigmoid(f_pre)`` (or ``exp(f_pre)``). The log weight of key ``s`` for query ``t ≥ s`` is
    ``D̃[t, s] = Σ_{s<j≤t} log f_j + i_pre_s``; the stabiliser ``m_t = max_s D̃[t, s]`` is subtracted before
    ``exp``, and the normaliser is ``max(|Σ_s C[t, s]|, exp(-m_t))`` with ``C = (q kᵀ / √d_k) ⊙ exp(D̃ - m)``.
    """
    check_qkv(q, k, v)
    i_pre, f_pre = _per_step(i_pre, q, "i_pre"), _per_step(f_pre, q, "f_pre")
    cum = _log_forget(f_pre, forget_gate).cumsum(dim=-1)  # (B, H, T)
    log_d = cum[..., :, None] - cum[..., None, :] + i_pre[..., None, :]  # (B, H, T, T)
    log_d = log_d.masked_fill(~causal_mask(q.shape[2], q.device), float("-inf"))
    m = log_d.amax(dim=-1, keepdim=True)  # (B, H, T, 1)
    weights = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1]) * (log_d - m).exp()  # (B, H, T, T)
    normaliser = torch.maximum(weights.sum(dim=-1, keepdim=True).abs(), (-m).exp())  # (B, H, T, 1)
    return (weights / normaliser) @ v  # (B, H, T, d_v)


def mlstm_recurrent(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    i_pre: torch.Tensor,
    f_pre: torch.Tensor,
    forget_gate: str = "sigmoid",
    return_state: bool = False,
    state: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
):
    """The mLSTM step by step with its stabilised states: ``(B, H, T, d_v)`` (and ``(C, n, m)`` if asked).

    ``state``: the ``(C, n, m)`` an earlier call returned, to continue a sequence (default: the empty memory).

    ``m_t = max(log f_t + m_{t-1}, i_pre_t)``; ``i'_t = exp(i_pre_t - m_t)``, ``f'_t = exp(log f_t + m_{t-1} - m_t)``;
    ``C_t = f'_t C_{t-1} + i'_t k_t v_tᵀ / √d_k`` ``(B, H, d_k, d_v)``, ``n_t = f'_t n_{t-1} + i'_t k_t / √d_k``
    ``(B, H, d_k)``; ``h_t = C_tᵀ q_t / max(|n_t · q_t|, exp(-m_t))``. The stabiliser rescales ``C`` and ``n``
    by ``exp(-m_t)``, which cancels in ``h_t``: the output equals the unstabilised one, but never overflows.
    """
    check_qkv(q, k, v)
    i_pre, f_pre = _per_step(i_pre, q, "i_pre"), _per_step(f_pre, q, "f_pre")
    log_f = _log_forget(f_pre, forget_gate)  # (B, H, T)
    batch_size, num_heads, seq_len, d_k = q.shape
    if state is None:
        C = q.new_zeros(batch_size, num_heads, d_k, v.shape[-1])  # (B, H, d_k, d_v)
        n = q.new_zeros(batch_size, num_heads, d_k)  # (B, H, d_k)
        m = q.new_full((batch_size, num_heads), float("-inf"))  # (B, H)
    else:
        C, n, m = state
        shapes = ((batch_size, num_heads, d_k, v.shape[-1]), (batch_size, num_heads, d_k), (batch_size, num_heads))
        if tuple(tuple(x.shape) for x in state) != shapes:
            raise ValueError(f"state must be (C, n, m) of shapes {shapes}, got {[tuple(x.shape) for x in state]}")
    k = k / math.sqrt(d_k)
    outs = []
    for t in range(seq_len):
        m_new = torch.maximum(log_f[:, :, t] + m, i_pre[:, :, t])  # (B, H)
        f_gate = (log_f[:, :, t] + m - m_new).exp()  # (B, H); 0 at t = 0
        i_gate = (i_pre[:, :, t] - m_new).exp()  # (B, H)
        C = f_gate[..., None, None] * C + i_gate[..., None, None] * k[:, :, t, :, None] * v[:, :, t, None, :]
        n = f_gate[..., None] * n + i_gate[..., None] * k[:, :, t]  # (B, H, d_k)
        m = m_new
        num = (q[:, :, t, :, None] * C).sum(dim=-2)  # (B, H, d_v)
        den = torch.maximum((n * q[:, :, t]).sum(dim=-1).abs(), (-m).exp())  # (B, H)
        outs.append(num / den[..., None])
    out = torch.stack(outs, dim=2)  # (B, H, T, d_v)
    return (out, (C, n, m)) if return_state else out


# --------------------------------------------------------------------------- sLSTM (xLSTM)


def _check_sequence(x: object, width: int, name: str, dims: int = 3) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != dims or x.shape[-1] != width or not x.is_floating_point():
        wanted = "(B, T, " if dims == 3 else "(B, "
        got = f"{tuple(x.shape)} {x.dtype}" if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{name} must be a floating {wanted}{width}) tensor, got {got}")


def _check_heads(width: int, num_heads: int, name: str) -> None:
    if not isinstance(num_heads, int) or num_heads < 1 or width % num_heads:
        raise ValueError(f"num_heads must be a positive int dividing {name}={width}, got {num_heads!r}")


class BlockDiagonalRecurrence(nn.Module):
    """The sLSTM's recurrent matrices ``R_z, R_i, R_f, R_o``, each block-diagonal with one block per head.

    ``weight (4, H, d_h, d_h)`` with ``d_h = hidden / H``: ``forward(h (..., hidden)) -> (..., 4 hidden)``,
    gate-major (``z`` of every unit, then ``i``, ``f``, ``o``). Unit ``j`` of head ``a`` reads only the units
    of head ``a``: ``4 hidden² / H`` parameters instead of ``4 hidden²``.
    """

    def __init__(self, hidden_size: int, num_heads: int):
        super().__init__()
        self.num_heads, self.head_size = num_heads, hidden_size // num_heads
        bound = 1 / math.sqrt(self.head_size)
        self.weight = nn.Parameter(torch.empty(4, num_heads, self.head_size, self.head_size).uniform_(-bound, bound))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        heads = h.unflatten(-1, (self.num_heads, self.head_size))  # (..., H, d_h)
        out = torch.einsum("gaij,...aj->...gai", self.weight, heads)  # (..., 4, H, d_h)
        return out.flatten(-3)  # (..., 4 hidden)

    def dense(self) -> torch.Tensor:
        """The same map as one ``(4 hidden, hidden)`` matrix, zero off the head blocks: ``h @ dense().T``."""
        return torch.cat([torch.block_diag(*self.weight[g]) for g in range(4)])  # (4 hidden, hidden)


class SLSTMCell(nn.Module):
    """xLSTM's sLSTM cell (Beck et al. 2024): an LSTM with exponential input gate and a normaliser.

    ``z = tanh(·)``, ``o = σ(·)``, input gate ``exp(ĩ)``, forget gate ``σ(f̃)`` (or ``exp(f̃)``), each
    pre-activation ``W x + R h_{t-1} + b``, ``R`` block-diagonal with ``num_heads`` blocks
    (:class:`BlockDiagonalRecurrence`). States ``(h, c, n, m)``, each ``(B, hidden)``:
    ``m_t = max(log f_t + m_{t-1}, ĩ_t)`` (the stabiliser), ``i' = exp(ĩ - m_t)``, ``f' = exp(log f + m_{t-1} - m_t)``,
    ``c_t = f' c + i' z``, ``n_t = f' n + i'``, ``h_t = o ⊙ c_t / n_t``. ``c`` and ``n`` are the unstabilised
    ones times ``exp(-m_t)``, which cancels in ``c / n``: the stabiliser changes no output.
    ``forward(x (B, input_size), state=None) -> (h (B, hidden), state)``; :meth:`step` takes ``W x`` instead.
    """

    def __init__(self, input_size: int, hidden_size: int, forget_gate: str = "sigmoid", num_heads: int = 1):
        super().__init__()
        if forget_gate not in ("sigmoid", "exp"):
            raise ValueError(f"forget_gate must be 'sigmoid' or 'exp', got {forget_gate!r}")
        _check_heads(hidden_size, num_heads, "hidden_size")
        self.input_size, self.hidden_size, self.forget_gate = input_size, hidden_size, forget_gate
        self.num_heads = num_heads
        self.W = nn.Linear(input_size, 4 * hidden_size)  # z, i, f, o
        self.R = BlockDiagonalRecurrence(hidden_size, num_heads)

    def initial_state(self, batch_size: int, **tensor_kw) -> tuple[torch.Tensor, ...]:
        zeros = torch.zeros(batch_size, self.hidden_size, **tensor_kw)
        return zeros, zeros.clone(), zeros.clone(), torch.full_like(zeros, float("-inf"))  # h, c, n, m

    def forward(self, x: torch.Tensor, state: tuple[torch.Tensor, ...] | None = None):
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[1] != self.input_size:
            raise ValueError(f"x must be (B, {self.input_size}), got {getattr(x, 'shape', x)!r}")
        return self.step(self.W(x), state)

    def step(self, wx: torch.Tensor, state: tuple[torch.Tensor, ...] | None = None):
        """One step from the input's share of the pre-activations, ``wx = W x + b (B, 4 hidden)``."""
        if state is None:
            state = self.initial_state(wx.shape[0], dtype=wx.dtype, device=wx.device)
        h, c, n, m = state
        z_pre, i_pre, f_pre, o_pre = (wx + self.R(h)).chunk(4, dim=-1)  # (B, hidden) each
        log_f = F.logsigmoid(f_pre) if self.forget_gate == "sigmoid" else f_pre
        m_new = torch.maximum(log_f + m, i_pre)  # (B, hidden)
        i_gate, f_gate = (i_pre - m_new).exp(), (log_f + m - m_new).exp()  # f_gate = 0 at the first step
        c = f_gate * c + i_gate * torch.tanh(z_pre)  # (B, hidden)
        n = f_gate * n + i_gate  # (B, hidden), ≥ exp(ĩ_t - m_t) > 0
        h = torch.sigmoid(o_pre) * c / n  # (B, hidden)
        return h, (h, c, n, m_new)


def slstm_sequence(
    cell: SLSTMCell,
    x: torch.Tensor,
    state: tuple[torch.Tensor, ...] | None = None,
    gate_input: torch.Tensor | None = None,
):
    """Run ``cell`` over ``x (B, T, input_size)`` one step at a time: ``(h (B, T, hidden), final state)``.

    ``gate_input (B, T, input_size)``, if given, feeds the input and forget gates instead of ``x`` (the
    sLSTM block's convolved input); ``W x`` is computed for all steps at once, only ``R h`` waits for ``h``.
    """
    _check_sequence(x, cell.input_size, "x")
    wx = cell.W(x)  # (B, T, 4 hidden)
    if gate_input is not None:
        _check_sequence(gate_input, cell.input_size, "gate_input")
        if gate_input.shape != x.shape:
            raise ValueError(f"gate_input must have x's shape {tuple(x.shape)}, got {tuple(gate_input.shape)}")
        z_o, i_f = wx.unflatten(-1, (4, -1)), cell.W(gate_input).unflatten(-1, (4, -1))  # (B, T, 4, hidden)
        wx = torch.stack([z_o[..., 0, :], i_f[..., 1, :], i_f[..., 2, :], z_o[..., 3, :]], dim=-2).flatten(-2)
    outs = []
    for t in range(x.shape[1]):
        h, state = cell.step(wx[:, t], state)  # (B, hidden)
        outs.append(h)
    return torch.stack(outs, dim=1), state  # (B, T, hidden)
