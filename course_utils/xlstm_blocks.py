"""Unit 10: the xLSTM paper's blocks (Beck et al. 2024), built around the cells of :mod:`course_utils.xlstm`.

- :class:`MLSTMBlock` (pre-up-projection: up, causal conv, mLSTM, group norm, skip, output gate, down) and
  :class:`SLSTMBlock` (post-up-projection: sLSTM at model width, then a gated MLP), both ``(B, T, D) ->
  (B, T, D)`` in parallel and ``(B, D) -> (B, D)`` per token with :meth:`step`;
- :class:`XLSTMStack` stacks them in a layout such as ``"msms"`` (the paper's xLSTM[a:b], a mLSTM blocks per
  b sLSTM blocks);
- their parts: :class:`BlockDiagonalLinear` (the q, k, v projections), :class:`CausalConv`.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .xlstm import SLSTMCell, _check_heads, _check_sequence, mlstm_parallel, mlstm_recurrent, slstm_sequence

# --------------------------------------------------------------------------- the blocks


class BlockDiagonalLinear(nn.Module):
    """``x (..., width) -> (..., width)``, weight block-diagonal with ``width / block`` blocks of ``block × block``
    (the xLSTM code's projections to ``q, k, v``, block 4), plus a bias: ``width · block + width`` parameters."""

    def __init__(self, width: int, block: int):
        super().__init__()
        if not isinstance(block, int) or block < 1 or width % block:
            raise ValueError(f"qkv_blocksize must be a positive int dividing the inner width {width}, got {block!r}")
        self.block = block
        self.weight = nn.Parameter(torch.empty(width // block, block, block).uniform_(-(block**-0.5), block**-0.5))
        self.bias = nn.Parameter(torch.zeros(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        blocks = x.unflatten(-1, (-1, self.block))  # (..., width / block, block)
        return torch.einsum("aij,...aj->...ai", self.weight, blocks).flatten(-2) + self.bias  # (..., width)


class CausalConv(nn.Module):
    """Depthwise causal convolution over time: ``forward(x (B, T, C)) -> (B, T, C)``, output ``t`` reads
    inputs ``t - kernel + 1 .. t``; :meth:`step` does one position from a buffer of the last ``kernel - 1``."""

    def __init__(self, channels: int, kernel: int):
        super().__init__()
        if not isinstance(kernel, int) or kernel < 1:
            raise ValueError(f"conv_kernel must be a positive int, got {kernel!r}")
        self.kernel = kernel
        self.conv = nn.Conv1d(channels, channels, kernel, groups=channels, padding=kernel - 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x.transpose(1, 2))[..., : x.shape[1]].transpose(1, 2)  # (B, T, C)

    def step(self, x_t: torch.Tensor, buffer: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``x_t (B, C)``, ``buffer (B, kernel - 1, C)`` -> ``(y_t (B, C), new buffer)``."""
        window = torch.cat([buffer, x_t[:, None]], dim=1)  # (B, kernel, C), oldest first
        y_t = (window * self.conv.weight[:, 0].T).sum(dim=1) + self.conv.bias  # (B, C)
        return y_t, window[:, 1:]


def _start(block: nn.Module, x_t: object, state: tuple | None) -> tuple:
    _check_sequence(x_t, block.d_model, "x_t", dims=2)
    return state if state is not None else block.initial_state(x_t.shape[0], dtype=x_t.dtype, device=x_t.device)


def _head_norm(norm: nn.GroupNorm, h: torch.Tensor) -> torch.Tensor:
    return norm(h.reshape(-1, h.shape[-1])).reshape(h.shape)  # normalised within each head's channels


class MLSTMBlock(nn.Module):
    """The xLSTM paper's mLSTM block (pre-up-projection): ``x + down(mLSTM(...) ⊙ swish(z))``.

    ``LN(x)`` is projected up to two branches of width ``inner = proj_factor * d_model``: ``x_m`` and the
    output gate's ``z``. ``x_c = swish(causal_conv(x_m))`` feeds ``q, k``; ``v`` comes from ``x_m`` (each through
    a :class:`BlockDiagonalLinear` with blocks of ``qkv_blocksize``; ``inner``: a dense matrix); the
    gates ``ĩ, f̃`` (one per head) from ``[q, k, v]``. The multi-head mLSTM's output is group-normed per
    head, plus a learnable skip ``s ⊙ x_c``, gated by ``swish(z)``, projected down, added to ``x``.
    ``forward(x (B, T, D)) -> (B, T, D)`` with :func:`mlstm_parallel`; :meth:`step` ``(B, D) -> (B, D)``
    with :func:`mlstm_recurrent`, carrying ``(conv buffer (B, K-1, inner), C (B, H, d_h, d_h), n, m)``.
    """

    def __init__(
        self, d_model: int, num_heads: int, proj_factor: float = 2, conv_kernel: int = 4, qkv_blocksize: int = 4
    ):
        super().__init__()
        inner = int(round(proj_factor * d_model))
        _check_heads(inner, num_heads, "proj_factor * d_model")
        self.d_model, self.inner, self.num_heads = d_model, inner, num_heads
        self.norm = nn.LayerNorm(d_model)
        self.up = nn.Linear(d_model, 2 * inner)
        self.conv = CausalConv(inner, conv_kernel)
        self.q, self.k, self.v = (BlockDiagonalLinear(inner, qkv_blocksize) for _ in range(3))
        self.gates = nn.Linear(3 * inner, 2 * num_heads)  # ĩ, f̃ per head
        with torch.no_grad():  # as the paper's code: forget gates start open (bias 3..6), input gates near 0
            self.gates.bias[:num_heads].normal_(0.0, 0.1)
            self.gates.bias[num_heads:].copy_(torch.linspace(3.0, 6.0, num_heads))
        self.head_norm = nn.GroupNorm(num_heads, inner)
        self.skip = nn.Parameter(torch.ones(inner))
        self.down = nn.Linear(inner, d_model)

    def _mix(self, x):  # x (..., D) -> x_m, z (..., inner)
        return self.up(self.norm(x)).chunk(2, dim=-1)

    def _qkv(self, x_m, x_c):  # (B, T, inner) each -> q, k, v (B, H, T, d_h), i_pre, f_pre (B, H, T)
        q, k, v = self.q(x_c), self.k(x_c), self.v(x_m)  # (B, T, inner)
        i_pre, f_pre = self.gates(torch.cat([q, k, v], dim=-1)).transpose(1, 2).chunk(2, dim=1)  # (B, H, T)
        heads = (self.num_heads, self.inner // self.num_heads)
        q, k, v = (y.unflatten(-1, heads).transpose(1, 2) for y in (q, k, v))  # (B, H, T, d_h)
        return q, k, v, i_pre, f_pre

    def _out(self, h, x_c, z):  # h (B, H, T, d_h), x_c, z (B, T, inner) -> (B, T, D)
        h = h.transpose(1, 2).flatten(-2)  # (B, T, inner)
        return self.down((_head_norm(self.head_norm, h) + self.skip * x_c) * F.silu(z))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_sequence(x, self.d_model, "x")
        x_m, z = self._mix(x)
        x_c = F.silu(self.conv(x_m))  # (B, T, inner)
        q, k, v, i_pre, f_pre = self._qkv(x_m, x_c)
        return x + self._out(mlstm_parallel(q, k, v, i_pre, f_pre), x_c, z)

    def initial_state(self, batch_size: int, **tensor_kw) -> tuple[torch.Tensor, ...]:
        d_h = self.inner // self.num_heads
        return (
            torch.zeros(batch_size, self.conv.kernel - 1, self.inner, **tensor_kw),  # conv buffer
            torch.zeros(batch_size, self.num_heads, d_h, d_h, **tensor_kw),  # C
            torch.zeros(batch_size, self.num_heads, d_h, **tensor_kw),  # n
            torch.full((batch_size, self.num_heads), float("-inf"), **tensor_kw),  # m
        )

    def step(self, x_t: torch.Tensor, state: tuple[torch.Tensor, ...] | None = None):
        """One token: ``x_t (B, D)`` -> ``(y_t (B, D), state)``; equals :meth:`forward` position by position."""
        buffer, *memory = _start(self, x_t, state)
        x_m, z = self._mix(x_t)  # (B, inner) each
        x_c, buffer = self.conv.step(x_m, buffer)
        x_c = F.silu(x_c)
        q, k, v, i_pre, f_pre = self._qkv(x_m[:, None], x_c[:, None])  # T = 1
        h, memory = mlstm_recurrent(q, k, v, i_pre, f_pre, return_state=True, state=tuple(memory))
        return x_t + self._out(h, x_c[:, None], z[:, None])[:, 0], (buffer, *memory)


class SLSTMBlock(nn.Module):
    """The xLSTM paper's sLSTM block (post-up-projection): ``x + GN(sLSTM(LN x))``, then ``x + MLP(LN x)``.

    The sLSTM runs at model width with ``num_heads`` heads (block-diagonal ``R``); its input and forget
    gates read ``swish(causal_conv(LN x))`` (``conv_kernel=0``: no convolution), ``z`` and ``o`` read ``LN x``.
    The gated MLP: ``down(GeLU(g) ⊙ u)`` with ``g, u`` of width ``ceil(ff_factor * D)``.
    ``forward(x (B, T, D)) -> (B, T, D)``; :meth:`step` ``(B, D) -> (B, D)`` carrying
    ``(conv buffer (B, K-1, D), h, c, n, m (B, D))``. Both run the sLSTM step by step (it has no other form).
    The input weights ``W`` are dense here (the paper's code makes them block-diagonal per head too).
    """

    def __init__(self, d_model: int, num_heads: int, conv_kernel: int = 4, ff_factor: float = 4 / 3):
        super().__init__()
        _check_heads(d_model, num_heads, "d_model")
        self.d_model, self.num_heads = d_model, num_heads
        self.norm = nn.LayerNorm(d_model)
        self.conv = CausalConv(d_model, conv_kernel) if conv_kernel else None
        self.cell = SLSTMCell(d_model, d_model, num_heads=num_heads)
        self.head_norm = nn.GroupNorm(num_heads, d_model)
        self.ff_norm = nn.LayerNorm(d_model)
        self.ff_width = math.ceil(ff_factor * d_model)
        self.ff_up = nn.Linear(d_model, 2 * self.ff_width)
        self.ff_down = nn.Linear(self.ff_width, d_model)

    def _ff(self, x):  # (..., D) -> (..., D)
        gate, up = self.ff_up(self.ff_norm(x)).chunk(2, dim=-1)  # (..., ff_width) each
        return x + self.ff_down(F.gelu(gate) * up)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_sequence(x, self.d_model, "x")
        u = self.norm(x)
        gate_input = F.silu(self.conv(u)) if self.conv is not None else u
        h, _ = slstm_sequence(self.cell, u, gate_input=gate_input)  # (B, T, D)
        return self._ff(x + _head_norm(self.head_norm, h))

    def initial_state(self, batch_size: int, **tensor_kw) -> tuple[torch.Tensor, ...]:
        kernel = self.conv.kernel if self.conv is not None else 1
        buffer = torch.zeros(batch_size, kernel - 1, self.d_model, **tensor_kw)
        return (buffer, *self.cell.initial_state(batch_size, **tensor_kw))

    def step(self, x_t: torch.Tensor, state: tuple[torch.Tensor, ...] | None = None):
        """One token: ``x_t (B, D)`` -> ``(y_t (B, D), state)``; equals :meth:`forward` position by position."""
        buffer, *cell_state = _start(self, x_t, state)
        u = self.norm(x_t)
        gate_input = u
        if self.conv is not None:
            gate_input, buffer = self.conv.step(u, buffer)
            gate_input = F.silu(gate_input)
        h, cell_state = slstm_sequence(self.cell, u[:, None], tuple(cell_state), gate_input[:, None])
        return self._ff(x_t + _head_norm(self.head_norm, h[:, 0])), (buffer, *cell_state)


class XLSTMStack(nn.Module):
    """Residual xLSTM blocks in a ``layout`` of ``"m"`` (:class:`MLSTMBlock`) and ``"s"`` (:class:`SLSTMBlock`),
    then a final LayerNorm: ``"msms"`` is the paper's xLSTM[1:1] with four blocks, ``"mmms"`` xLSTM[3:1].

    ``forward(x (B, T, D)) -> (B, T, D)``; :meth:`step` ``(B, D) -> (B, D)`` with one state per block.
    Keywords: ``conv_kernel`` goes to both blocks, ``proj_factor, qkv_blocksize`` to mLSTM, ``ff_factor`` to sLSTM.
    """

    def __init__(self, d_model: int, num_heads: int, layout: str = "msms", **kw):
        super().__init__()
        if not isinstance(layout, str) or not layout or set(layout) - {"m", "s"}:
            raise ValueError(f"layout must be a non-empty string of 'm' and 's', got {layout!r}")
        self.layout, self.d_model = layout, d_model
        self.blocks = nn.ModuleList(
            MLSTMBlock(d_model, num_heads, **{k: v for k, v in kw.items() if k != "ff_factor"})
            if kind == "m"
            else SLSTMBlock(
                d_model, num_heads, **{k: v for k, v in kw.items() if k not in ("proj_factor", "qkv_blocksize")}
            )
            for kind in layout
        )
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_sequence(x, self.d_model, "x")
        for block in self.blocks:
            x = block(x)  # (B, T, D)
        return self.norm(x)

    def step(self, x_t: torch.Tensor, states: list | None = None):
        """One token: ``x_t (B, D)`` -> ``(y_t (B, D), states)``, one state per block."""
        states, new_states = states if states is not None else [None] * len(self.blocks), []
        for block, state in zip(self.blocks, states, strict=True):
            x_t, state = block.step(x_t, state)  # (B, D)
            new_states.append(state)
        return self.norm(x_t), new_states
