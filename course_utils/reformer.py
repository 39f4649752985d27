"""Unit 10: the Reformer (Kitaev et al. 2020, "Reformer: The Efficient Transformer") and its tricks.

- :func:`lsh_buckets`, :func:`lsh_attention`, :func:`top_key_recall`: hashing by random rotations and
  attention restricted to a bucket, stated with a dense ``(T, T)`` mask. Shapes ``q, k (B, H, T, d_k)``,
  ``v (B, H, T, d_v)``;
- :func:`lsh_attention_chunked`: the same idea as the Reformer computes it, positions sorted by bucket
  and cut into chunks, each chunk attending to itself and the chunk before: memory ``O(T · chunk_size)``;
- :func:`chunked_feed_forward`: a position-wise module applied a chunk of positions at a time, so its
  wide hidden activation exists for one chunk only.

The reversible residual layers the Reformer also uses are in :mod:`course_utils.reversible`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .primitives import causal_mask, check_qkv, masked_softmax

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


def _check_rounds(n_rounds, generator) -> None:
    if not isinstance(n_rounds, int) or n_rounds < 1:
        raise ValueError(f"n_rounds must be a positive int, got {n_rounds!r}")
    if not isinstance(generator, torch.Generator):
        raise ValueError("pass a torch.Generator: queries and keys must be hashed with the same rotation")


def _same_bucket(q, k, n_buckets, n_rounds, generator) -> torch.Tensor:
    """``(B, H, T_q, T_k)`` bool: query and key share a bucket in at least one of ``n_rounds`` hashings."""
    _check_rounds(n_rounds, generator)
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


# --------------------------------------------------------------------------- sort and chunk


def _chunks(x: torch.Tensor, chunk_size: int) -> torch.Tensor:
    """``(B, H, T, ...)`` in sorted order -> ``(B, H, T / C, C, ...)``: consecutive chunks of ``C`` positions."""
    return x.reshape(*x.shape[:2], x.shape[2] // chunk_size, chunk_size, *x.shape[3:])


def _look_back(chunks: torch.Tensor) -> torch.Tensor:
    """``(B, H, n_c, C, ...)`` -> ``(B, H, n_c, 2C, ...)``: each chunk preceded by the chunk before it.

    Chunk 0 gets the last chunk in front (a roll); callers mask those ``C`` slots out.
    """
    return torch.cat([chunks.roll(1, dims=2), chunks], dim=3)


def lsh_attention_chunked(
    qk: torch.Tensor,
    v: torch.Tensor,
    n_buckets: int,
    chunk_size: int,
    generator: torch.Generator,
    n_rounds: int = 1,
    causal: bool = True,
) -> torch.Tensor:
    """The Reformer's shared-QK LSH attention by sorting and chunking: ``(B, H, T, d_v)``, no ``(T, T)`` tensor.

    ``qk (B, H, T, d_k)`` serves as the queries; the keys are ``qk`` normalised to unit length, so a query
    ``q_t`` scores ``q_t · q̂_s / √d_k``. ``v (B, H, T, d_v)``. In each of ``n_rounds`` hashings
    (:func:`lsh_buckets`, one rotation per round drawn from ``generator``) the positions are sorted by
    (bucket, position) and cut into chunks of ``chunk_size`` (which must divide ``T``). Query ``t`` may
    see key ``s`` in that round when ``s`` lies in ``t``'s chunk or the chunk before it, in the same
    bucket, and ``s ≤ t`` if ``causal``. Its own position is allowed only when no other key is allowed
    for it in any round (its score ``|q_t|`` would otherwise dominate). The result is softmax attention
    over the union of the rounds' sets: a key that several rounds find has its score lowered by the log
    of that count in each, and the rounds' outputs are combined with weights ``softmax_r(lse_r)`` of
    their log-sum-exps. Memory ``O(n_rounds · T · chunk_size)``.
    """
    check_qkv(qk, qk, v, same_length=True)
    _check_rounds(n_rounds, generator)
    batch, heads, seq_len, d_k = qk.shape
    if not isinstance(chunk_size, int) or chunk_size < 1 or seq_len % chunk_size:
        raise ValueError(f"chunk_size must be a positive int dividing T = {seq_len}, got {chunk_size!r}")
    keys = F.normalize(qk, dim=-1)  # (B, H, T, d_k)
    positions = torch.arange(seq_len, device=qk.device).expand(batch, heads, seq_len)  # (B, H, T)
    rounds = []  # per round: order, rank, bucket and chunk index of each position, each (B, H, T)
    for _ in range(n_rounds):
        buckets = lsh_buckets(qk, n_buckets, generator)  # (B, H, T)
        order = (buckets * seq_len + positions).argsort(dim=-1)  # (B, H, T): sorted index -> position
        rank = torch.empty_like(order).scatter_(-1, order, positions)  # (B, H, T): position -> sorted index
        rounds.append((order, rank, buckets, torch.div(rank, chunk_size, rounding_mode="floor")))
    n_chunks = seq_len // chunk_size
    first = torch.zeros(n_chunks, 1, 2 * chunk_size, dtype=torch.bool, device=qk.device)  # (n_c, 1, 2C)
    first[0, :, :chunk_size] = True  # chunk 0 has no chunk before it

    def window(order):
        # positions of queries (B, H, n_c, C) and of the keys they may look at (B, H, n_c, 2C)
        q_pos = _chunks(order, chunk_size)
        return q_pos, _look_back(q_pos)

    def visible(q_pos, k_pos, buckets, chunk_of):
        # (B, H, n_c, C, 2C): key k_pos in query q_pos's window of a round, same bucket, causal, not itself
        def at(x, pos):
            return x.gather(-1, pos.flatten(2)).view(pos.shape)

        q_chunk, k_chunk = (
            at(chunk_of, q_pos)[..., :, None],
            at(chunk_of, k_pos)[..., None, :],
        )  # (.., C, 1), (.., 1, 2C)
        seen = (k_chunk == q_chunk) | (k_chunk == q_chunk - 1)  # (B, H, n_c, C, 2C): own chunk or the one before
        seen &= at(buckets, q_pos)[..., :, None] == at(buckets, k_pos)[..., None, :]
        if causal:
            seen &= k_pos[..., None, :] <= q_pos[..., :, None]
        return seen & (k_pos[..., None, :] != q_pos[..., :, None])

    has_other = torch.zeros(batch, heads, seq_len, dtype=torch.bool, device=qk.device)  # (B, H, T)
    for order, _, buckets, chunk_of in rounds:
        q_pos, k_pos = window(order)
        seen = visible(q_pos, k_pos, buckets, chunk_of) & ~first  # (B, H, n_c, C, 2C)
        has_other |= torch.zeros_like(has_other).scatter_(-1, order, seen.any(dim=-1).flatten(2))
    outputs, lses = [], []
    for order, rank, buckets, chunk_of in rounds:
        q_pos, k_pos = window(order)
        itself = (k_pos[..., None, :] == q_pos[..., :, None]) & ~first  # (B, H, n_c, C, 2C)
        alone = itself & ~has_other.gather(-1, order).view(q_pos.shape)[..., None]  # (B, H, n_c, C, 2C)
        allowed = (visible(q_pos, k_pos, buckets, chunk_of) & ~first) | alone  # (B, H, n_c, C, 2C)
        q_sorted = _chunks(qk.gather(2, order[..., None].expand(-1, -1, -1, d_k)), chunk_size)  # (B, H, n_c, C, d_k)
        k_window = _look_back(_chunks(keys.gather(2, order[..., None].expand(-1, -1, -1, d_k)), chunk_size))
        v_window = _look_back(_chunks(v.gather(2, order[..., None].expand(-1, -1, -1, v.shape[-1])), chunk_size))
        scores = q_sorted @ k_window.transpose(-2, -1)  # (B, H, n_c, C, 2C)
        scores.mul_(1 / math.sqrt(d_k))  # in place: the scores are the largest tensors here
        if n_rounds > 1:  # a pair found by n rounds counts once: its score lowered by log n in each round
            count = alone.to(torch.int16) * n_rounds  # itself, when alone, is found in every round
            for _, _, other_buckets, other_chunk_of in rounds:
                count += visible(q_pos, k_pos, other_buckets, other_chunk_of)
            scores.sub_(count.clamp_(min=1).to(qk.dtype).log_())
            del count
        found = allowed.any(dim=-1, keepdim=True)  # (B, H, n_c, C, 1): False where this round finds nothing
        scores.masked_fill_(~(allowed | ~found), float("-inf"))  # such rows stay finite; their weight is 0 below
        top = scores.amax(dim=-1, keepdim=True)  # (B, H, n_c, C, 1)
        weights = (scores - top).exp_()  # (B, H, n_c, C, 2C), unnormalised
        del scores
        total = weights.sum(dim=-1, keepdim=True)  # (B, H, n_c, C, 1)
        out = (weights @ v_window) / total  # (B, H, n_c, C, d_v)
        del weights
        lse = (top + total.log()).masked_fill(~found, float("-inf"))  # (B, H, n_c, C, 1)
        outputs.append(out.flatten(2, 3).gather(2, rank[..., None].expand(-1, -1, -1, v.shape[-1])))  # (B, H, T, d_v)
        lses.append(lse.flatten(2).gather(-1, rank))  # (B, H, T)
    weights = torch.stack(lses).softmax(dim=0)  # (n_rounds, B, H, T)
    return (weights[..., None] * torch.stack(outputs)).sum(dim=0)  # (B, H, T, d_v)


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


# --------------------------------------------------------------------------- chunked feed-forward


def chunked_feed_forward(ff, x: torch.Tensor, chunk_size: int) -> torch.Tensor:
    """``ff`` applied to ``x (B, T, D)`` a chunk of ``chunk_size`` positions at a time -> ``(B, T, D_out)``.

    ``ff`` must be position-wise (a module mapping ``(B, c, D) -> (B, c, D_out)`` that mixes no positions,
    such as a transformer's feed-forward), so the result equals ``ff(x)`` up to rounding. A feed-forward's
    hidden activation ``(B, c, 4D)`` then exists for one chunk at a time: without autograd the peak memory
    holds the output and one chunk's hidden, not ``(B, T, 4D)``. Under autograd every chunk's hidden is
    saved for the backward pass, so the saving needs the forward recomputed in the backward as well
    (checkpointing, or the reversible layers of :mod:`course_utils.reversible`).
    """
    if not callable(ff):
        raise ValueError(f"ff must be a callable module (B, c, D) -> (B, c, D_out), got {type(ff).__name__}")
    if not isinstance(x, torch.Tensor) or x.dim() != 3 or not x.is_floating_point():
        raise ValueError(f"x must be a 3-D floating tensor (B, T, D), got {getattr(x, 'shape', x)!r}")
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    batch, seq_len, _ = x.shape
    out = None
    for start in range(0, seq_len, chunk_size):
        y = ff(x[:, start : start + chunk_size])  # (B, c, D_out)
        if y.dim() != 3 or y.shape[:2] != x[:, start : start + chunk_size].shape[:2]:
            raise ValueError(f"ff must keep (B, c) of its input (B, c, D); it returned {tuple(y.shape)}")
        if out is None:
            out = y.new_empty(batch, seq_len, y.shape[-1])  # (B, T, D_out)
        out[:, start : start + chunk_size] = y
    return out
