"""Multi-head self-attention with one fused projection for queries, keys and values, and a key-value cache.

The GPT (:mod:`course_utils.gpt`, unit 07) and the ViT (:mod:`course_utils.vit`, unit 09) compute their
queries, keys and values with one ``Linear(D, 3 D)`` and mix the heads back with one ``Linear(D, D)``; they
differ only in what they attend to (causal or not, with positions or not). :class:`FusedSelfAttention`
holds the two projections and the reshaping around them; each model's attention subclasses it and says how
the heads attend. :class:`KVCache` keeps the keys and values of every layer while a decoder generates
(unit 10), so that each new token is projected once.

    attn = FusedSelfAttention(d_model=64, num_heads=4)
    q, k, v = attn.project(x)                    # (B, T, 64) -> 3 x (B, 4, T, 16)
    y = attn.merge(out)                          # (B, 4, T, 16) -> (B, T, 64), through attn.proj
    cache = KVCache(num_layers=2, batch_size=B, num_heads=4, max_len=100, d_head=16)
    keys, values = cache.append(0, k, v)         # layer 0's keys and values so far: (B, 4, L + T, 16) each
    cache.advance(T)                             # once every layer has appended its T new tokens

This module imports only ``torch``.
"""

from __future__ import annotations

import torch
import torch.nn as nn


class FusedSelfAttention(nn.Module):
    """The projections of multi-head self-attention: ``qkv = Linear(D, 3 D)`` and ``proj = Linear(D, D)``.

    Features ``0..D-1`` of ``qkv(x)`` are the queries, ``D..2D-1`` the keys, ``2D..3D-1`` the values; within
    each, head ``h`` owns features ``h * d_head .. (h + 1) * d_head - 1`` (``d_head = D / num_heads``). Subclasses
    write ``forward``: :meth:`project`, attend, :meth:`merge`. The two Linear layers are created in this order,
    ``qkv`` then ``proj``, so that a seeded model draws the same initial weights as before they were shared.
    """

    def __init__(self, d_model: int, num_heads: int, bias: bool = True, dropout: float = 0.0):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.d_model, self.num_heads, self.dropout = d_model, num_heads, dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.proj = nn.Linear(d_model, d_model, bias=bias)

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``x (B, T, D)`` -> ``q, k, v``, each ``(B, H, T, d_head)`` (views of one ``(B, T, 3 D)`` tensor)."""
        if x.dim() != 3 or x.shape[-1] != self.d_model:  # not qkv's attributes: LoRA may wrap the layer
            raise ValueError(f"x must be (B, T, {self.d_model}), got shape {tuple(x.shape)}")
        batch_size, seq_len, d_model = x.shape
        q, k, v = self.qkv(x).split(d_model, dim=-1)  # (B, T, D) each
        return tuple(t.view(batch_size, seq_len, self.num_heads, -1).transpose(1, 2) for t in (q, k, v))

    def merge(self, out: torch.Tensor) -> torch.Tensor:
        """The heads' outputs ``out (B, H, T, d_head)`` side by side, through ``proj``: ``(B, T, D)``."""
        batch_size, num_heads, seq_len, d_head = out.shape
        return self.proj(out.transpose(1, 2).reshape(batch_size, seq_len, num_heads * d_head))  # (B, T, D)

    def dropout_p(self) -> float:
        """The attention-weight dropout probability to use now: ``dropout`` in training mode, else 0."""
        return self.dropout if self.training else 0.0


class KVCache:
    """Keys and values of every layer of a decoder, preallocated for ``max_len`` tokens.

    ``keys[i]``, ``values[i]``: ``(B, H, max_len, d_head)``; the first ``length`` positions are filled.
    :meth:`append` writes new entries of layer ``i`` and returns that layer's filled keys and values;
    :meth:`advance` moves ``length`` on once every layer has appended. ``tensor_kw`` (``dtype``, ``device``)
    go to ``torch.zeros``. Memory: ``2 * num_layers * B * H * max_len * d_head`` numbers (:attr:`nbytes`),
    linear in the length.
    """

    def __init__(self, num_layers: int, batch_size: int, num_heads: int, max_len: int, d_head: int, **tensor_kw):
        shape = (batch_size, num_heads, max_len, d_head)
        self.keys = [torch.zeros(shape, **tensor_kw) for _ in range(num_layers)]
        self.values = [torch.zeros(shape, **tensor_kw) for _ in range(num_layers)]
        self.max_len, self.length = max_len, 0

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.keys + self.values)

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store ``k, v (B, H, T_new, d_head)`` after the ``length`` cached tokens of ``layer``;
        return ``(B, H, length + T_new, d_head)`` each. Call :meth:`advance` once all layers are done."""
        end = self.length + k.shape[2]
        if end > self.max_len:
            raise ValueError(f"cache holds {self.max_len} tokens; {self.length} + {k.shape[2]} do not fit")
        self.keys[layer][:, :, self.length : end] = k
        self.values[layer][:, :, self.length : end] = v
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]

    def advance(self, num_tokens: int) -> None:
        """Count ``num_tokens`` more tokens as cached (after every layer has appended them)."""
        self.length += num_tokens
