"""Unit 10: the Reformer (Kitaev et al. 2020, "Reformer: The Efficient Transformer") and its tricks.

- :func:`lsh_buckets`, :func:`lsh_attention`, :func:`top_key_recall`: hashing by random rotations and
  attention restricted to a bucket. Shapes ``q, k (B, H, T, d_k)``, ``v (B, H, T, d_v)``.
"""

from __future__ import annotations

import math

import torch

from .attention import causal_mask, masked_softmax
from .fast_attention import check_qkv

# --------------------------------------------------------------------------- LSH (Reformer)


def lsh_buckets(x: torch.Tensor, n_buckets: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Angular LSH: bucket of each vector of ``x (B, H, T, d)`` -> ``(B, H, T)`` long in ``0 .. n_buckets-1``.

    Draws a random matrix ``R (d, n_buckets / 2)`` with ``generator`` and takes ``argmax([xR, -xR])``
    (Kitaev et al. 2020, after Andoni et al. 2015): vectors at a small angle usually share a bucket.
    One ``R`` serves every batch element and head; call again (same generator) for another round.
    """
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or not x.is_floating_point():
        raise ValueError(f"x must be a 4-D floating tensor (B, H, T, d), got {getattr(x, 'shape', x)!r}")
    if not isinstance(n_buckets, int) or n_buckets < 2 or n_buckets % 2:
        raise ValueError(f"n_buckets must be an even int >= 2, got {n_buckets!r}")
    where = generator.device if generator is not None else "cpu"
    rotation = torch.randn(x.shape[-1], n_buckets // 2, generator=generator, dtype=x.dtype, device=where)  # (d, n/2)
    projected = x @ rotation.to(x.device)  # (B, H, T, n/2)
    return torch.cat([projected, -projected], dim=-1).argmax(dim=-1)  # (B, H, T)


def _same_bucket(q, k, n_buckets, n_rounds, generator) -> torch.Tensor:
    """``(B, H, T_q, T_k)`` bool: query and key share a bucket in at least one of ``n_rounds`` hashings."""
    if not isinstance(n_rounds, int) or n_rounds < 1:
        raise ValueError(f"n_rounds must be a positive int, got {n_rounds!r}")
    if not isinstance(generator, torch.Generator):
        raise ValueError("pass a torch.Generator: queries and keys must be hashed with the same rotation")
    together = torch.zeros(*q.shape[:3], k.shape[2], dtype=torch.bool, device=q.device)  # (B, H, T_q, T_k)
    for _ in range(n_rounds):
        state = generator.get_state()
        bq = lsh_buckets(q, n_buckets, generator)  # (B, H, T_q)
        generator.set_state(state)  # keys are hashed with the same rotation
        bk = lsh_buckets(k, n_buckets, generator)  # (B, H, T_k)
        together |= bq[..., :, None] == bk[..., None, :]
    return together


def _mask_self(allowed: torch.Tensor) -> torch.Tensor:
    """``allowed (..., T, T)`` bool -> the same with the diagonal kept only in rows with nothing else allowed."""
    eye = torch.eye(allowed.shape[-1], dtype=torch.bool, device=allowed.device)  # (T, T)
    others = allowed & ~eye  # (..., T, T)
    alone = ~others.any(dim=-1, keepdim=True)  # (..., T, 1)
    return others | (allowed & eye & alone)  # (..., T, T)


def lsh_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    n_buckets: int,
    generator: torch.Generator,
    n_rounds: int = 1,
    causal: bool = True,
    mask_self: bool = False,
) -> torch.Tensor:
    """Softmax attention in which a query sees only keys of its own LSH bucket (in any of ``n_rounds``).

    ``q, k (B, H, T, d_k)``, ``v (B, H, T, d_v)`` -> ``(B, H, T, d_v)``. With shared queries and keys
    (``k is q``, as in the Reformer) a query always shares its own bucket. A query left with no key
    gets a zero output. This version states the rule with a ``(T, T)`` mask, to be checked against;
    the Reformer gets its savings by sorting positions by bucket and attending within fixed-size chunks.

    ``mask_self=True`` is the Reformer's rule for shared QK: a query's own position (``q · q`` is its
    largest score) is allowed only when no other key is allowed for it in any round; needs ``T_q == T_k``.
    """
    check_qkv(q, k, v, same_length=causal or mask_self)
    allowed = _same_bucket(q, k, n_buckets, n_rounds, generator)  # (B, H, T, T)
    if causal:
        allowed &= causal_mask(q.shape[2], q.device)  # (T, T): causal needs T_q == T_k
    if mask_self:
        allowed = _mask_self(allowed)  # (B, H, T, T)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T, T)
    return masked_softmax(scores, allowed) @ v  # (B, H, T, d_v)


def top_key_recall(
    q: torch.Tensor,
    k: torch.Tensor,
    n_buckets: int,
    n_rounds: int = 1,
    top: int = 1,
    generator: torch.Generator | None = None,
) -> float:
    """Fraction of (query, true top key) pairs that share an LSH bucket in at least one round.

    ``q (B, H, T_q, d)``, ``k (B, H, T_k, d)``; a query's true top keys are the ``top`` keys of largest
    score ``q · k`` (no causal mask). 1.0 means bucketed attention would never miss its largest weights.
    """
    if not isinstance(q, torch.Tensor) or not isinstance(k, torch.Tensor) or q.dim() != 4 or k.shape[:2] != q.shape[:2]:
        raise ValueError(f"q and k must be (B, H, T, d) with the same B, H; got {getattr(q, 'shape', q)!r}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k widths differ: {tuple(q.shape)} vs {tuple(k.shape)}")
    if not isinstance(top, int) or not 1 <= top <= k.shape[2]:
        raise ValueError(f"top must be an int in 1..{k.shape[2]}, got {top!r}")
    if generator is None:
        generator = torch.Generator().manual_seed(0)
    best = (q @ k.transpose(-2, -1)).topk(top, dim=-1).indices  # (B, H, T_q, top)
    together = _same_bucket(q, k, n_buckets, n_rounds, generator)  # (B, H, T_q, T_k)
    return together.gather(-1, best).float().mean().item()
