"""Unit 10: exact attention made cheaper: tiling with the online softmax, and a key-value cache.

Every function takes batch-first multi-head tensors ``q, k (B, H, T, d_k)`` and ``v (B, H, T, d_v)``,
float32 or float64, is causal unless told otherwise, and returns ``(B, H, T, d_v)``.

- :func:`naive_attention` builds the ``(T, T)`` score matrix: time and memory grow as ``T²``;
- :func:`tiled_attention` visits blocks of queries and keys with the online softmax (Milakov &
  Gimelshein 2018), the idea of FlashAttention (Dao et al. 2022): it equals
  ``F.scaled_dot_product_attention`` and never holds more than a ``(block, block)`` tile of scores;
- :func:`tiled_attention_backward` computes the gradients tile by tile from the saved log-sum-exp, and
  :func:`flash_attention` (the ``autograd.Function`` :class:`TiledAttention`) puts both passes together:
  the same gradients as autograd through SDPA, and no ``(T, T)`` tensor in either pass;
- :class:`KVCache`, :func:`generate_with_cache`, :func:`generate_without_cache`: greedy (or sampled)
  decoding with :class:`course_utils.gpt.GPT`, with and without a key-value cache; same tokens. The cache
  is an option of the GPT's own forward pass and of :func:`course_utils.gpt.generate` (``use_cache=True``);
  these names are kept for unit 10, and :class:`KVCache` lives in :mod:`course_utils.self_attention`;

The Reformer's approximation by hashing is in :mod:`course_utils.reformer`.

    out, lse = tiled_attention(q, k, v, block_size=64, return_lse=True)   # (B, H, T, d_v), (B, H, T)
    dq, dk, dv = tiled_attention_backward(q, k, v, out, lse, grad_out)     # each like its input
    flash_attention(q, k, v).sum().backward()                              # the same, through autograd
    ids = generate_with_cache(model, prompt, max_new_tokens=50)            # (B, T0 + 50)
"""

from __future__ import annotations

import math

import torch

from .gpt import GPT, check_fits, generate
from .primitives import causal_mask, check_qkv
from .self_attention import KVCache

__all__ = [
    "KVCache",
    "TiledAttention",
    "check_qkv",
    "flash_attention",
    "forward_with_cache",
    "generate_with_cache",
    "generate_without_cache",
    "naive_attention",
    "tiled_attention",
    "tiled_attention_backward",
]


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """``softmax(q kᵀ / √d_k) v``, materialising the scores ``(B, H, T_q, T_k)``: the baseline whose memory
    unit 10 measures.

    Not :func:`course_utils.attention.scaled_dot_product_attention`, on purpose: that one returns the
    weights, keeps the raw scores while it normalises them and zeroes rows whose keys are all masked, which
    holds one more ``(T_q, T_k)`` tensor at its peak (4.19 MiB against 2.25 MiB at T = 256). The causal rows
    here always see their own key, so the plain softmax is safe.

    ``q (B, H, T_q, d_k)``, ``k (B, H, T_k, d_k)``, ``v (B, H, T_k, d_v)`` -> ``(B, H, T_q, d_v)``;
    ``causal`` lets query ``t`` see keys ``0..t`` only (then ``T_q`` must equal ``T_k``).
    """
    check_qkv(q, k, v, same_length=causal)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T, T)
    if causal:
        scores = scores.masked_fill(~causal_mask(q.shape[2], q.device), float("-inf"))  # (B, H, T, T)
    return scores.softmax(dim=-1) @ v  # (B, H, T, d_v)


def tiled_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = True,
    block_size: int = 64,
    return_lse: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Exact attention by blocks with the online softmax; equals ``F.scaled_dot_product_attention``.

    ``q (B, H, T_q, d_k)``, ``k (B, H, T_k, d_k)``, ``v (B, H, T_k, d_v)`` -> ``out (B, H, T_q, d_v)``,
    and with ``return_lse`` also ``lse (B, H, T_q)``, the log-sum-exp of each query's scaled scores
    (what a backward pass needs to recompute the weights). For each block of queries it walks over the
    blocks of keys keeping, per query, the running maximum ``m``, the running sum ``l`` of
    ``exp(score - m)`` and the running weighted sum of values; when a new block raises the maximum, the
    old sums are rescaled by ``exp(m_old - m_new)``. Memory beyond the output: ``O(block_size²)``
    scores per head, never ``T²``. With ``causal``, key blocks wholly in a query block's future are skipped.
    """
    check_qkv(q, k, v, same_length=causal)
    if not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be a positive int, got {block_size!r}")
    batch_size, num_heads, len_q, d_k = q.shape
    len_k, d_v = k.shape[2], v.shape[-1]
    scale = 1.0 / math.sqrt(d_k)
    out = torch.empty(batch_size, num_heads, len_q, d_v, dtype=q.dtype, device=q.device)  # (B, H, T_q, d_v)
    lse = torch.empty(batch_size, num_heads, len_q, dtype=q.dtype, device=q.device)  # (B, H, T_q)
    for q0 in range(0, len_q, block_size):
        q1 = min(q0 + block_size, len_q)
        q_blk = q[:, :, q0:q1] * scale  # (B, H, bq, d_k)
        m = torch.full(q_blk.shape[:3], float("-inf"), dtype=q.dtype, device=q.device)  # (B, H, bq)
        denom = torch.zeros_like(m)  # (B, H, bq): running sum of exp(score - m)
        acc = torch.zeros(*q_blk.shape[:3], d_v, dtype=q.dtype, device=q.device)  # (B, H, bq, d_v)
        for k0 in range(0, q1 if causal else len_k, block_size):
            k1 = min(k0 + block_size, len_k)
            s = q_blk @ k[:, :, k0:k1].transpose(-2, -1)  # (B, H, bq, bk)
            if causal and k1 > q0 + 1:  # the block reaches past some query: hide its future keys
                future = torch.arange(k0, k1, device=q.device)[None, :] > torch.arange(q0, q1, device=q.device)[:, None]
                s = s.masked_fill(future, float("-inf"))  # (B, H, bq, bk)
            m_new = torch.maximum(m, s.amax(dim=-1))  # (B, H, bq); finite: key 0 is in the first block
            p = torch.exp(s - m_new[..., None])  # (B, H, bq, bk)
            rescale = torch.exp(m - m_new)  # (B, H, bq): exp(-inf) = 0 on the first block
            denom = denom * rescale + p.sum(dim=-1)  # (B, H, bq)
            acc = acc * rescale[..., None] + p @ v[:, :, k0:k1]  # (B, H, bq, d_v)
            m = m_new
        out[:, :, q0:q1] = acc / denom[..., None]  # (B, H, bq, d_v)
        lse[:, :, q0:q1] = m + torch.log(denom)  # (B, H, bq)
    return (out, lse) if return_lse else out


# --------------------------------------------------------------------------- the backward pass, tile by tile


def tiled_attention_backward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    grad_out: torch.Tensor,
    block_size: int = 64,
    causal: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of attention with respect to ``q, k, v``, recomputed tile by tile (Dao et al. 2022, 2023).

    ``q (B, H, T_q, d_k)``, ``k (B, H, T_k, d_k)``, ``v (B, H, T_k, d_v)``; ``out (B, H, T_q, d_v)`` and
    ``lse (B, H, T_q)`` from ``tiled_attention(..., return_lse=True)``; ``grad_out (B, H, T_q, d_v)`` the
    gradient of the loss with respect to ``out``. Returns ``dq (B, H, T_q, d_k)``, ``dk (B, H, T_k, d_k)``,
    ``dv (B, H, T_k, d_v)``.

    With ``S = q kᵀ / √d_k`` and ``P = softmax(S)``: ``dV = Pᵀ dO``, ``dP = dO Vᵀ``,
    ``dS = P ∘ (dP − D)`` where ``D = rowsum(dO ∘ O) = rowsum(P ∘ dP)`` (one number per query), then
    ``dQ = dS K / √d_k`` and ``dK = dSᵀ Q / √d_k``. ``P`` is never stored: each ``(block, block)`` tile of it
    is recomputed as ``exp(S − lse)``, so memory beyond the gradients is ``O(block_size²)`` per head. The
    outer loop runs over key blocks (their ``dK``, ``dV`` finish in one pass), the inner one over query
    blocks; with ``causal``, tiles wholly in the future of their queries are skipped.
    """
    check_qkv(q, k, v, same_length=causal)
    if not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be a positive int, got {block_size!r}")
    out_shape = (*q.shape[:3], v.shape[-1])
    for name, x, shape in (("out", out, out_shape), ("grad_out", grad_out, out_shape), ("lse", lse, q.shape[:3])):
        if not isinstance(x, torch.Tensor) or tuple(x.shape) != tuple(shape) or x.dtype != q.dtype:
            got = f"{tuple(x.shape)} {x.dtype}" if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"{name} must be a {q.dtype} tensor of shape {tuple(shape)}, got {got}")
    len_q, len_k = q.shape[2], k.shape[2]
    scale = 1.0 / math.sqrt(q.shape[-1])
    delta = (grad_out * out).sum(dim=-1)  # (B, H, T_q): D = rowsum(dO ∘ O)
    dq = torch.zeros_like(q)  # (B, H, T_q, d_k)
    dk = torch.zeros_like(k)  # (B, H, T_k, d_k)
    dv = torch.zeros_like(v)  # (B, H, T_k, d_v)
    for k0 in range(0, len_k, block_size):
        k1 = min(k0 + block_size, len_k)
        k_blk, v_blk = k[:, :, k0:k1], v[:, :, k0:k1]  # (B, H, bk, d_k), (B, H, bk, d_v)
        dk_blk = torch.zeros_like(k_blk)  # (B, H, bk, d_k)
        dv_blk = torch.zeros_like(v_blk)  # (B, H, bk, d_v)
        first_q = (k0 // block_size) * block_size if causal else 0  # earlier query blocks see none of these keys
        for q0 in range(first_q, len_q, block_size):
            q1 = min(q0 + block_size, len_q)
            q_blk = q[:, :, q0:q1]  # (B, H, bq, d_k)
            s = (q_blk * scale) @ k_blk.transpose(-2, -1)  # (B, H, bq, bk): the scores, recomputed
            if causal and k1 > q0 + 1:  # the tile reaches past some query: hide its future keys
                future = torch.arange(k0, k1, device=q.device)[None, :] > torch.arange(q0, q1, device=q.device)[:, None]
                s = s.masked_fill(future, float("-inf"))  # (B, H, bq, bk)
            p = torch.exp(s - lse[:, :, q0:q1, None])  # (B, H, bq, bk): the attention weights, recomputed
            do_blk = grad_out[:, :, q0:q1]  # (B, H, bq, d_v)
            dv_blk += p.transpose(-2, -1) @ do_blk  # (B, H, bk, d_v)
            dp = do_blk @ v_blk.transpose(-2, -1)  # (B, H, bq, bk)
            ds = p * (dp - delta[:, :, q0:q1, None])  # (B, H, bq, bk): the softmax's Jacobian applied
            dq[:, :, q0:q1] += (ds @ k_blk) * scale  # (B, H, bq, d_k)
            dk_blk += (ds.transpose(-2, -1) @ q_blk) * scale  # (B, H, bk, d_k)
        dk[:, :, k0:k1] = dk_blk
        dv[:, :, k0:k1] = dv_blk
    return dq, dk, dv


class TiledAttention(torch.autograd.Function):
    """Attention with a tiled forward and a tiled backward: ``TiledAttention.apply(q, k, v, block_size, causal)``.

    ``q, k (B, H, T, d_k)``, ``v (B, H, T, d_v)`` -> ``(B, H, T, d_v)``. The forward is
    :func:`tiled_attention` and saves only ``q, k, v``, the output and its log-sum-exp ``lse (B, H, T)``;
    the backward is :func:`tiled_attention_backward`. No ``(T, T)`` tensor exists in either pass.
    """

    @staticmethod
    def forward(ctx, q, k, v, block_size, causal):
        out, lse = tiled_attention(q, k, v, causal=causal, block_size=block_size, return_lse=True)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.block_size, ctx.causal = block_size, causal
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = tiled_attention_backward(
            q, k, v, out, lse, grad_out.contiguous(), block_size=ctx.block_size, causal=ctx.causal
        )
        return dq, dk, dv, None, None


def flash_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_size: int = 64, causal: bool = True
) -> torch.Tensor:
    """Exact attention, differentiable, in tiles both ways (the FlashAttention algorithm, in PyTorch).

    ``q (B, H, T_q, d_k)``, ``k (B, H, T_k, d_k)``, ``v (B, H, T_k, d_v)`` -> ``(B, H, T_q, d_v)``; equals
    ``F.scaled_dot_product_attention(q, k, v, is_causal=causal)`` and so do its gradients. Memory of the
    forward and backward passes grows linearly in ``T`` (see :class:`TiledAttention`).
    """
    check_qkv(q, k, v, same_length=causal)
    if not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be a positive int, got {block_size!r}")
    return TiledAttention.apply(q, k, v, block_size, causal)


# --------------------------------------------------------------------------- key-value cache for GPT


@torch.no_grad()
def forward_with_cache(model: GPT, idx: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Logits ``(B, T_new, V)`` of a :class:`~course_utils.gpt.GPT` for new tokens ``idx (B, T_new)`` that follow
    the ``cache.length`` tokens already cached; the new keys and values are added to ``cache``. It is
    ``model(idx, cache)`` without gradients: every ``GPTConfig`` works (learned/RoPE/ALiBi positions,
    Pre-/Post-LN, ReZero), since the cache is an option of the model's own forward pass."""
    return model(idx, cache)


def generate_with_cache(
    model: GPT, idx: torch.Tensor, max_new_tokens: int, temperature: float = 0.0, generator=None
) -> torch.Tensor:
    """Decode ``max_new_tokens`` after ``idx (B, T0)`` with a :class:`KVCache`: one forward pass over the
    prompt, then one token per step. Returns ``(B, T0 + max_new_tokens)``. ``temperature`` 0 is greedy.
    The whole sequence must fit in ``model.config.block_size``. It is
    ``course_utils.gpt.generate(..., use_cache=True)``."""
    return generate(model, idx, max_new_tokens, temperature, generator=generator, use_cache=True)


def generate_without_cache(
    model: GPT, idx: torch.Tensor, max_new_tokens: int, temperature: float = 0.0, generator=None
) -> torch.Tensor:
    """The same decoding as :func:`generate_with_cache`, recomputing the whole prefix at every step
    (``T`` forward passes over ``1, 2, ... T`` tokens: quadratic work). Returns ``(B, T0 + max_new_tokens)``;
    the whole sequence must fit in ``block_size`` here too, so that both see the same context."""
    check_fits(model, idx, max_new_tokens)
    return generate(model, idx, max_new_tokens, temperature, generator=generator)
