"""Unit 05: attention from scratch.

Attention reads a soft dictionary: each query is compared with every key, the scores become
weights through a softmax, and the answer is the weighted mean of the values. Everything is
batch-first; a leading ``...`` stands for any batch dimensions, e.g. ``(B,)`` or ``(B, H)``.

Masks are boolean and say where attention is ALLOWED (True = attend), like the ``attn_mask``
of ``F.scaled_dot_product_attention``; they broadcast against the scores ``(..., T_q, T_k)``:
a key-padding mask ``(B, T_k)`` becomes ``mask[:, None, :]`` for single-head scores
``(B, T_q, T_k)`` and ``mask[:, None, None, :]`` for multi-head scores ``(B, H, T_q, T_k)``.

    out, weights = scaled_dot_product_attention(q, k, v, mask)   # (B, T_q, d_v), (B, T_q, T_k)
    mha = MultiHeadAttention(d_model=64, num_heads=4)
    out, weights = mha(x, x, x, causal_mask(T))                    # self-attention, (B, T, 64)
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn


def _check_mask(mask: torch.Tensor | None, scores: torch.Tensor) -> None:
    if mask is None:
        return
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor (True = attend), got {getattr(mask, 'dtype', type(mask))}")
    try:
        torch.broadcast_shapes(mask.shape, scores.shape)
    except RuntimeError:
        raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast against scores of shape "
                         f"{tuple(scores.shape)} (..., T_q, T_k); a (B, T_k) padding mask needs mask[:, None, :]") from None


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the LAST axis (the keys) of ``scores (..., T_q, T_k)``, ignoring masked keys.

    Masked positions (``mask == False``) get weight exactly 0. A query whose keys are all
    masked gets all-zero weights instead of NaN. Returns weights of the shape of ``scores``.
    """
    _check_mask(mask, scores)
    if mask is None:
        return scores.softmax(dim=-1)
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights.nan_to_num(0.0)  # rows with every key masked: 0/0 -> 0


def scaled_dot_product_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``softmax(q kᵀ / √d_k) v`` with an optional mask.

    ``query (..., T_q, d_k)``, ``key (..., T_k, d_k)``, ``value (..., T_k, d_v)``, ``mask``
    broadcastable to ``(..., T_q, T_k)``. Returns ``output (..., T_q, d_v)`` and
    ``weights (..., T_q, T_k)`` (each row sums to 1, or is 0 when all its keys are masked).
    """
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ValueError(f"shapes do not fit: query {tuple(query.shape)} (..., T_q, d_k), key {tuple(key.shape)} "
                         f"(..., T_k, d_k), value {tuple(value.shape)} (..., T_k, d_v)")
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])  # (..., T_q, T_k)
    weights = masked_softmax(scores, mask)                                # (..., T_q, T_k)
    return weights @ value, weights                                       # (..., T_q, d_v)


def causal_mask(seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """``(T, T)`` bool, True on and below the diagonal: position t may attend to 0..t only."""
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(B, T, D)`` -> ``(B, H, T, D / H)``: head h gets features ``h*d_head .. (h+1)*d_head - 1``."""
    batch_size, seq_len, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.view(batch_size, seq_len, num_heads, d_model // num_heads).transpose(1, 2)  # (B, H, T, d_head)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """``(B, H, T, d_head)`` -> ``(B, T, H * d_head)``, the inverse of :func:`split_heads`."""
    batch_size, num_heads, seq_len, d_head = x.shape
    return x.transpose(1, 2).reshape(batch_size, seq_len, num_heads * d_head)  # (B, T, D)


class MultiHeadAttention(nn.Module):
    """Multi-head attention (Vaswani et al., "Attention Is All You Need"), batch-first.

    Project queries, keys and values with ``D x D`` linear maps, split into ``H`` heads of
    width ``D / H``, attend in each head, merge, and project with ``out_proj``.
    :meth:`from_torch` copies the weights of an ``nn.MultiheadAttention``.
    """

    def __init__(self, d_model: int, num_heads: int, bias: bool = True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.d_model, self.num_heads = d_model, num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``query (B, T_q, D)``, ``key``/``value (B, T_k, D)``, ``mask`` broadcastable to
        ``(B, H, T_q, T_k)`` -> ``output (B, T_q, D)`` and ``weights (B, H, T_q, T_k)``."""
        for name, x in (("query", query), ("key", key), ("value", value)):
            if x.dim() != 3 or x.shape[-1] != self.d_model:
                raise ValueError(f"{name} must be (B, T, {self.d_model}), got {tuple(x.shape)}")
        q = split_heads(self.q_proj(query), self.num_heads)  # (B, H, T_q, d_head)
        k = split_heads(self.k_proj(key), self.num_heads)    # (B, H, T_k, d_head)
        v = split_heads(self.v_proj(value), self.num_heads)  # (B, H, T_k, d_head)
        out, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T_q, d_head), (B, H, T_q, T_k)
        return self.out_proj(merge_heads(out)), weights      # (B, T_q, D)

    @torch.no_grad()
    def from_torch(self, reference: nn.MultiheadAttention) -> "MultiHeadAttention":
        """Copy the weights of ``reference`` (same ``embed_dim``, ``num_heads``, bias setting)."""
        if reference.embed_dim != self.d_model or reference.num_heads != self.num_heads:
            raise ValueError(f"reference has embed_dim={reference.embed_dim}, num_heads={reference.num_heads}; "
                             f"this module has {self.d_model}, {self.num_heads}")
        w_q, w_k, w_v = reference.in_proj_weight.chunk(3)  # each (D, D)
        for proj, w in zip((self.q_proj, self.k_proj, self.v_proj), (w_q, w_k, w_v)):
            proj.weight.copy_(w)
        self.out_proj.weight.copy_(reference.out_proj.weight)
        if reference.in_proj_bias is not None and self.q_proj.bias is not None:
            for proj, b in zip((self.q_proj, self.k_proj, self.v_proj), reference.in_proj_bias.chunk(3)):
                proj.bias.copy_(b)
            self.out_proj.bias.copy_(reference.out_proj.bias)
        return self


class AdditiveAttention(nn.Module):
    """Additive scoring (Bahdanau, Cho and Bengio, "Neural Machine Translation by Jointly
    Learning to Align and Translate"): ``score(q, k) = w_vᵀ tanh(W_q q + W_k k)``.

    Works when queries and keys have different widths (``query_size``, ``key_size``).
    """

    def __init__(self, query_size: int, key_size: int, hidden_size: int):
        super().__init__()
        self.W_q = nn.Linear(query_size, hidden_size, bias=False)
        self.W_k = nn.Linear(key_size, hidden_size, bias=False)
        self.w_v = nn.Linear(hidden_size, 1, bias=False)

    def scores(self, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        """``query (B, T_q, d_q)``, ``key (B, T_k, d_k)`` -> ``scores (B, T_q, T_k)``."""
        features = torch.tanh(self.W_q(query)[:, :, None, :] + self.W_k(key)[:, None, :, :])  # (B, T_q, T_k, h)
        return self.w_v(features).squeeze(-1)  # (B, T_q, T_k)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """-> ``output (B, T_q, d_v)`` and ``weights (B, T_q, T_k)``; ``mask`` as for the scores."""
        weights = masked_softmax(self.scores(query, key), mask)  # (B, T_q, T_k)
        return weights @ value, weights                          # (B, T_q, d_v)
