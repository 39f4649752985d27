"""Unit 06: attention from scratch.

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

:class:`BahdanauSeq2Seq` is a GRU encoder-decoder with additive attention that follows the
seq2seq calling convention of :mod:`course_utils.seq2seq` (``model(src, src_lengths, tgt_in)``).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .primitives import causal_mask, lengths_to_mask, masked_softmax  # noqa: F401 - causal_mask re-exported
from .text import PAD_ID


def scaled_dot_product_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``softmax(q kᵀ / √d_k) v`` with an optional mask.

    ``query (..., T_q, d_k)``, ``key (..., T_k, d_k)``, ``value (..., T_k, d_v)``, ``mask``
    broadcastable to ``(..., T_q, T_k)``. Returns ``output (..., T_q, d_v)`` and
    ``weights (..., T_q, T_k)`` (each row sums to 1, or is 0 when all its keys are masked).
    """
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"shapes do not fit: query {tuple(query.shape)} (..., T_q, d_k), key {tuple(key.shape)} "
            f"(..., T_k, d_k), value {tuple(value.shape)} (..., T_k, d_v)"
        )
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])  # (..., T_q, T_k)
    weights = masked_softmax(scores, mask)  # (..., T_q, T_k)
    return weights @ value, weights  # (..., T_q, d_v)


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

    def forward(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``query (B, T_q, D)``, ``key``/``value (B, T_k, D)``, ``mask`` broadcastable to
        ``(B, H, T_q, T_k)`` -> ``output (B, T_q, D)`` and ``weights (B, H, T_q, T_k)``."""
        for name, x in (("query", query), ("key", key), ("value", value)):
            if x.dim() != 3 or x.shape[-1] != self.d_model:
                raise ValueError(f"{name} must be (B, T, {self.d_model}), got {tuple(x.shape)}")
        q = split_heads(self.q_proj(query), self.num_heads)  # (B, H, T_q, d_head)
        k = split_heads(self.k_proj(key), self.num_heads)  # (B, H, T_k, d_head)
        v = split_heads(self.v_proj(value), self.num_heads)  # (B, H, T_k, d_head)
        out, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T_q, d_head), (B, H, T_q, T_k)
        return self.out_proj(merge_heads(out)), weights  # (B, T_q, D)

    @torch.no_grad()
    def from_torch(self, reference: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy the weights of ``reference`` (same ``embed_dim``, ``num_heads``, bias setting)."""
        if reference.embed_dim != self.d_model or reference.num_heads != self.num_heads:
            raise ValueError(
                f"reference has embed_dim={reference.embed_dim}, num_heads={reference.num_heads}; "
                f"this module has {self.d_model}, {self.num_heads}"
            )
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

    def forward(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """-> ``output (B, T_q, d_v)`` and ``weights (B, T_q, T_k)``; ``mask`` as for the scores."""
        weights = masked_softmax(self.scores(query, key), mask)  # (B, T_q, T_k)
        return weights @ value, weights  # (B, T_q, d_v)


# --------------------------------------------------------------------------- seq2seq with attention


class BahdanauSeq2Seq(nn.Module):
    """A GRU encoder-decoder with additive attention (Bahdanau, Cho and Bengio, 2015).

    The encoder is a bidirectional GRU over the embedded source; its outputs ``(B, S, 2H)`` are
    the keys and values. At each target step the decoder's previous state ``s_{t-1}`` is the
    query; the context ``c_t`` (weighted mean of encoder outputs, padded source positions
    masked) and the embedded previous token feed a ``GRUCell``; the logits come from
    ``[s_t; c_t; embedding]``. Follows the seq2seq calling convention of
    :mod:`course_utils.seq2seq`::

        logits = model(src, src_lengths, tgt_in)   # (B, S), (B,), (B, T) -> (B, T, V_tgt)
        model.last_attention                       # (B, T, S), weights of that forward pass
    """

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, embed_size: int = 32, hidden_size: int = 64):
        super().__init__()
        self.hidden_size = hidden_size
        self.src_embed = nn.Embedding(src_vocab_size, embed_size, padding_idx=PAD_ID)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, embed_size, padding_idx=PAD_ID)
        self.encoder = nn.GRU(embed_size, hidden_size, batch_first=True, bidirectional=True)
        self.init_state = nn.Linear(2 * hidden_size, hidden_size)
        self.attention = AdditiveAttention(hidden_size, 2 * hidden_size, hidden_size)
        self.decoder = nn.GRUCell(embed_size + 2 * hidden_size, hidden_size)
        self.out = nn.Linear(hidden_size + 2 * hidden_size + embed_size, tgt_vocab_size)
        self.last_attention: torch.Tensor | None = None

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``src (B, S)``, ``src_lengths (B,)`` -> encoder outputs ``(B, S, 2H)`` (zero on padding),
        source mask ``(B, S)`` bool and the decoder's initial state ``(B, H)``."""
        if not isinstance(src, torch.Tensor) or not isinstance(src_lengths, torch.Tensor):
            raise ValueError("src and src_lengths must be tensors")
        if src.dim() != 2 or src.dtype != torch.long:
            raise ValueError(f"src must be (B, S) long, got shape {tuple(src.shape)} dtype {src.dtype}")
        if src_lengths.shape != src.shape[:1] or int(src_lengths.min()) < 1 or int(src_lengths.max()) > src.shape[1]:
            raise ValueError(
                f"src_lengths must be (B,) = ({src.shape[0]},) with values in 1..{src.shape[1]}, "
                f"got {src_lengths.tolist()}"
            )
        packed = pack_padded_sequence(self.src_embed(src), src_lengths.cpu(), batch_first=True, enforce_sorted=False)
        enc, last = self.encoder(packed)  # last: (2, B, H)
        enc, _ = pad_packed_sequence(enc, batch_first=True, total_length=src.shape[1])  # (B, S, 2H)
        state = torch.tanh(self.init_state(torch.cat([last[0], last[1]], dim=-1)))  # (B, H)
        return enc, lengths_to_mask(src_lengths.to(src.device), src.shape[1]), state

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """``src (B, S)``, ``src_lengths (B,)``, ``tgt_in (B, T)`` (teacher forcing) -> ``logits (B, T, V_tgt)``."""
        if tgt_in.dim() != 2 or tgt_in.shape[0] != src.shape[0]:
            raise ValueError(f"tgt_in must be (B, T) with B = {src.shape[0]}, got {tuple(tgt_in.shape)}")
        enc, mask, state = self.encode(src, src_lengths)  # (B, S, 2H), (B, S), (B, H)
        keys = self.attention.W_k(enc)  # (B, S, H): projected once, reused every step
        embedded = self.tgt_embed(tgt_in)  # (B, T, E)
        features, weights = [], []
        for t in range(tgt_in.shape[1]):
            scores = self.attention.w_v(torch.tanh(self.attention.W_q(state)[:, None, :] + keys)).squeeze(-1)  # (B, S)
            alpha = masked_softmax(scores, mask)  # (B, S)
            context = (alpha[:, :, None] * enc).sum(dim=1)  # (B, 2H)
            state = self.decoder(torch.cat([embedded[:, t], context], dim=-1), state)  # (B, H)
            features.append(torch.cat([state, context, embedded[:, t]], dim=-1))  # (B, H + 2H + E)
            weights.append(alpha)
        self.last_attention = torch.stack(weights, dim=1).detach()  # (B, T, S)
        return self.out(torch.stack(features, dim=1))  # (B, T, V_tgt)
