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
  decoding with :class:`course_utils.gpt.GPT`, with and without a key-value cache; same tokens;

The Reformer's approximation by hashing is in :mod:`course_utils.reformer`.

    out, lse = tiled_attention(q, k, v, block_size=64, return_lse=True)   # (B, H, T, d_v), (B, H, T)
    dq, dk, dv = tiled_attention_backward(q, k, v, out, lse, grad_out)     # each like its input
    flash_attention(q, k, v).sum().backward()                              # the same, through autograd
    ids = generate_with_cache(model, prompt, max_new_tokens=50)            # (B, T0 + 50)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .attention import causal_mask
from .decoding import sample_next
from .gpt import apply_rope


def check_qkv(q: object, k: object, v: object, same_length: bool = True) -> None:
    """Raise ``ValueError`` unless ``q, k (B, H, T, d_k)``, ``v (B, H, T, d_v)`` are floating tensors that fit."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor) or x.dim() != 4 or not x.is_floating_point():
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            dtype = x.dtype if isinstance(x, torch.Tensor) else ""
            raise ValueError(f"{name} must be a 4-D floating tensor (B, H, T, d), got {shape} {dtype}")
    if q.shape[:2] != k.shape[:2] or k.shape[:3] != v.shape[:3] or q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"shapes do not fit: q {tuple(q.shape)} (B, H, T, d_k), k {tuple(k.shape)} (B, H, T, d_k), "
            f"v {tuple(v.shape)} (B, H, T, d_v)"
        )
    if same_length and q.shape[2] != k.shape[2]:
        raise ValueError(f"causal attention needs as many queries as keys: q {tuple(q.shape)}, k {tuple(k.shape)}")
    if not q.dtype == k.dtype == v.dtype:
        raise ValueError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """``softmax(q kᵀ / √d_k) v``, materialising the scores ``(B, H, T_q, T_k)``.

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


class KVCache:
    """Keys and values of every layer of a :class:`course_utils.gpt.GPT`, preallocated for ``max_len`` tokens.

    ``keys[i]``, ``values[i]``: ``(B, H, max_len, d_head)``; ``length`` tokens are filled.
    :meth:`append` writes new entries of layer ``i`` and returns that layer's filled keys and values.
    Memory: ``2 * num_layers * B * H * max_len * d_head`` numbers (:attr:`nbytes`), linear in the length.
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
        self.length += num_tokens


def _cached_attention(attn, x: torch.Tensor, cache: KVCache, layer: int, rope, bias) -> torch.Tensor:
    """``course_utils.gpt.CausalSelfAttention`` on new tokens ``x (B, T_new, D)`` attending to the cache too."""
    batch_size, seq_len, d_model = x.shape
    q, k, v = attn.qkv(x).split(d_model, dim=-1)  # (B, T_new, D) each
    q, k, v = (t.view(batch_size, seq_len, attn.num_heads, -1).transpose(1, 2) for t in (q, k, v))  # (B, H, T_new, dh)
    if rope is not None:
        q, k = apply_rope(q, *rope), apply_rope(k, *rope)
    keys, values = cache.append(layer, k, v)  # (B, H, L + T_new, d_head)
    if bias is None:  # new token i sits at position L + i and may see keys 0 .. L + i
        bias = torch.ones(seq_len, keys.shape[2], dtype=torch.bool, device=x.device).tril(cache.length)
    out = F.scaled_dot_product_attention(
        q, keys, values, attn_mask=bias if bias.dtype == torch.bool else bias.to(q.dtype)
    )
    return attn.proj(out.transpose(1, 2).reshape(batch_size, seq_len, d_model))  # (B, T_new, D)


@torch.no_grad()
def forward_with_cache(model, idx: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Logits ``(B, T_new, V)`` of a ``GPT`` for new tokens ``idx (B, T_new)`` that follow the ``cache.length``
    tokens already cached; the new keys and values are added to ``cache``. Works for every ``GPTConfig``
    (learned/RoPE/ALiBi positions, Pre-/Post-LN, ReZero) by calling the model's own submodules."""
    config = model.config
    start, seq_len = cache.length, idx.shape[1]
    if start + seq_len > config.block_size:
        raise ValueError(f"{start} cached + {seq_len} new tokens exceed block_size={config.block_size}")
    x = model.tok_emb(idx)  # (B, T_new, D)
    rope = bias = None
    if model.pos_emb is not None:
        x = x + model.pos_emb(torch.arange(start, start + seq_len, device=idx.device))  # (B, T_new, D)
    elif config.position == "rope":
        rope = (model.rope_cos[start : start + seq_len], model.rope_sin[start : start + seq_len])  # (T_new, d_head)
    else:
        bias = model.alibi[:, start : start + seq_len, : start + seq_len]  # (H, T_new, L + T_new)
    for layer, block in enumerate(model.blocks):
        if block.rezero:
            x = x + block.attn.alpha * _cached_attention(block.attn.sublayer, x, cache, layer, rope, bias)
            x = block.ffn(x)
        elif block.norm_first:
            x = x + _cached_attention(block.attn, block.norm1(x), cache, layer, rope, bias)
            x = x + block.ffn(block.norm2(x))
        else:
            x = block.norm1(x + _cached_attention(block.attn, x, cache, layer, rope, bias))
            x = block.norm2(x + block.ffn(x))
    cache.advance(seq_len)
    return model.head(model.norm_f(x))  # (B, T_new, V)


def _check_prompt(model, idx: object, max_new_tokens: int) -> None:
    if not isinstance(idx, torch.Tensor) or idx.dim() != 2 or idx.dtype != torch.long or idx.shape[1] < 1:
        raise ValueError(f"prompt must be a (B, T0) long tensor with T0 >= 1, got {getattr(idx, 'shape', idx)!r}")
    if idx.shape[1] + max_new_tokens > model.config.block_size:
        raise ValueError(
            f"prompt {idx.shape[1]} + {max_new_tokens} new tokens exceed block_size={model.config.block_size}"
        )


def _pick(logits: torch.Tensor, temperature: float, generator) -> torch.Tensor:
    if temperature == 0:
        return logits.argmax(-1)  # (B,)
    return sample_next(logits, temperature, generator=generator)  # (B,)


@torch.no_grad()
def generate_with_cache(
    model, idx: torch.Tensor, max_new_tokens: int, temperature: float = 0.0, generator=None
) -> torch.Tensor:
    """Decode ``max_new_tokens`` after ``idx (B, T0)`` with a :class:`KVCache`: one forward pass over the
    prompt, then one token per step. Returns ``(B, T0 + max_new_tokens)``. ``temperature`` 0 is greedy.
    The whole sequence must fit in ``model.config.block_size``."""
    _check_prompt(model, idx, max_new_tokens)
    was_training = model.training
    model.eval()
    config = model.config
    param = next(model.parameters())
    cache = KVCache(
        config.num_layers, idx.shape[0], config.num_heads, idx.shape[1] + max_new_tokens,
        config.d_model // config.num_heads, dtype=param.dtype, device=param.device,
    )  # fmt: skip
    logits = forward_with_cache(model, idx, cache)[:, -1].float()  # (B, V)
    for _ in range(max_new_tokens):
        next_id = _pick(logits, temperature, generator)  # (B,)
        idx = torch.cat([idx, next_id[:, None]], dim=1)  # (B, T + 1)
        if idx.shape[1] < cache.max_len:
            logits = forward_with_cache(model, next_id[:, None], cache)[:, -1].float()  # (B, V)
    model.train(was_training)
    return idx


@torch.no_grad()
def generate_without_cache(
    model, idx: torch.Tensor, max_new_tokens: int, temperature: float = 0.0, generator=None
) -> torch.Tensor:
    """The same decoding as :func:`generate_with_cache`, recomputing the whole prefix at every step
    (``T`` forward passes over ``1, 2, ... T`` tokens: quadratic work). Returns ``(B, T0 + max_new_tokens)``."""
    _check_prompt(model, idx, max_new_tokens)
    was_training = model.training
    model.eval()
    for _ in range(max_new_tokens):
        logits = model(idx)[:, -1].float()  # (B, V)
        idx = torch.cat([idx, _pick(logits, temperature, generator)[:, None]], dim=1)  # (B, T + 1)
    model.train(was_training)
    return idx
