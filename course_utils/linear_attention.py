"""Unit 10: linear attention and its family, written as one recurrence over a matrix state.

Every member keeps a state ``S_t (d_k, d_v)`` per head and reads it with the query::

    S_t = a_t * S_{t-1} + k_t v_tᵀ        o_t = S_tᵀ q_t        (S_0 = 0)

(the seeds write ``S = a S + v kᵀ, o = S q``: the same thing transposed). The members differ in one line:

- linear attention (Katharopoulos et al. 2020, "Transformers are RNNs"): ``a_t = 1``, feature maps
  ``φ(q), φ(k)`` (``elu + 1``) and a normaliser ``z_t = Σ φ(k_s)`` in the denominator;
- RetNet (Sun et al. 2023): a fixed decay ``a_t = γ_h`` per head;
- a data-dependent scalar ``a_t`` per head: Mamba-2 (Dao & Gu 2024, ``a_t = exp(Δ_t A_h)`` with ``A_h < 0``
  and ``Δ_t`` also in the write, ``Δ_t B_t x_tᵀ``) or a sigmoid gate; GLA (Yang et al. 2023) uses a vector
  ``a_t`` per key channel, which this module does not implement (exercise 10 asks for its chunkwise form);
- DeltaNet (Schlag et al. 2021; Yang et al. 2024): the delta rule, ``S_t = S_{t-1} + β_t k_t (v_t - S_{t-1}ᵀ k_t)ᵀ``,
  and gated DeltaNet (Yang, Kautz & Hatamizadeh 2024): a decay first, then the delta correction;
- mLSTM (Beck et al. 2024, xLSTM): exponential input gate, forget gate, normaliser and stabiliser; it lives
  in :mod:`course_utils.xlstm`, next to the sLSTM.

Each has a parallel form (a masked ``(T, T)`` matrix, like attention) equal to its recurrent form
(constant memory per generated token), and linear attention, gated attention and the (gated) delta rule a
chunkwise form in between.
Shapes: ``q, k (B, H, T, d_k)``, ``v (B, H, T, d_v)``, outputs ``(B, H, T, d_v)``, decays ``(B, H, T)``.
No function here scales ``q`` by ``1/√d_k`` (the mLSTM's do, as xLSTM does): scale ``q`` yourself.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from .primitives import causal_mask, check_qkv

FeatureMap = Callable[[torch.Tensor], torch.Tensor] | None


def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """``φ(x) = elu(x) + 1`` (Katharopoulos et al. 2020), any shape: ``x + 1`` for ``x > 0``, ``e^x`` below.
    Computed in that second form, so it stays positive where ``elu(x) + 1`` would round to 0 (float32, x < -17)."""
    return torch.where(x > 0, x + 1, torch.exp(torch.clamp(x, max=0)))


def _features(q, k, feature_map: FeatureMap):
    return (q, k) if feature_map is None else (feature_map(q), feature_map(k))


def _per_step(x: object, q: torch.Tensor, name: str) -> torch.Tensor:
    """Check that ``x`` is a floating ``(B, H, T)`` tensor matching ``q (B, H, T, d)``."""
    if not isinstance(x, torch.Tensor) or x.shape != q.shape[:3] or not x.is_floating_point():
        raise ValueError(
            f"{name} must be a floating (B, H, T) = {tuple(q.shape[:3])} tensor, got {getattr(x, 'shape', x)!r}"
        )
    return x.to(q.dtype)


# --------------------------------------------------------------------------- linear attention


def linear_attention_parallel(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, normalize: bool = True, feature_map: FeatureMap = elu_feature_map
) -> torch.Tensor:
    """Causal linear attention through the masked ``(T, T)`` matrix ``φ(q) φ(k)ᵀ``: ``(B, H, T, d_v)``.

    ``o_t = Σ_{s≤t} (φ(q_t)·φ(k_s)) v_s``, divided by ``Σ_{s≤t} φ(q_t)·φ(k_s)`` when ``normalize``
    (which needs positive features). ``feature_map=None`` uses ``q, k`` as they are.
    """
    check_qkv(q, k, v)
    fq, fk = _features(q, k, feature_map)
    weights = (fq @ fk.transpose(-2, -1)).masked_fill(~causal_mask(q.shape[2], q.device), 0.0)  # (B, H, T, T)
    out = weights @ v  # (B, H, T, d_v)
    return out / weights.sum(dim=-1, keepdim=True) if normalize else out


def linear_attention_recurrent(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    normalize: bool = True,
    feature_map: FeatureMap = elu_feature_map,
    state: tuple[torch.Tensor, torch.Tensor] | None = None,
    return_state: bool = False,
):
    """Causal linear attention as an RNN: ``S_t = S_{t-1} + φ(k_t) v_tᵀ``, ``z_t = z_{t-1} + φ(k_t)``,
    ``o_t = S_tᵀ φ(q_t) / (z_t · φ(q_t))``. Returns ``(B, H, T, d_v)``, and with ``return_state`` also
    ``(S (B, H, d_k, d_v), z (B, H, d_k))`` to continue from: memory per step does not grow with ``T``."""
    check_qkv(q, k, v)
    fq, fk = _features(q, k, feature_map)
    batch_size, num_heads, seq_len, d_k = q.shape
    if state is None:
        S = q.new_zeros(batch_size, num_heads, d_k, v.shape[-1])  # (B, H, d_k, d_v)
        z = q.new_zeros(batch_size, num_heads, d_k)  # (B, H, d_k)
    else:
        S, z = state
    out = q.new_empty(batch_size, num_heads, seq_len, v.shape[-1])  # (B, H, T, d_v), filled step by step
    for t in range(seq_len):
        S = S + fk[:, :, t, :, None] * v[:, :, t, None, :]  # (B, H, d_k, d_v)
        z = z + fk[:, :, t]  # (B, H, d_k)
        o = (fq[:, :, t, :, None] * S).sum(dim=-2)  # (B, H, d_v)
        if normalize:
            o = o / (fq[:, :, t] * z).sum(dim=-1, keepdim=True)
        out[:, :, t] = o
    return (out, (S, z)) if return_state else out


def linear_attention_chunkwise(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    chunk_size: int = 64,
    normalize: bool = True,
    feature_map: FeatureMap = elu_feature_map,
) -> torch.Tensor:
    """Causal linear attention by chunks of ``chunk_size`` steps: ``(B, H, T, d_v)``.

    Inside a chunk, the parallel form (a ``(C, C)`` masked matrix); across chunks, the state ``S``
    carried as in the recurrent form. Work ``O(T C d + T d²)``, memory ``O(C² + d²)`` per head.
    """
    check_qkv(q, k, v)
    _check_chunk(chunk_size)
    fq, fk = _features(q, k, feature_map)
    batch_size, num_heads, seq_len, d_k = q.shape
    S = q.new_zeros(batch_size, num_heads, d_k, v.shape[-1])  # (B, H, d_k, d_v)
    z = q.new_zeros(batch_size, num_heads, 1, d_k)  # (B, H, 1, d_k)
    outs = []
    for c0 in range(0, seq_len, chunk_size):
        qc, kc, vc = fq[:, :, c0 : c0 + chunk_size], fk[:, :, c0 : c0 + chunk_size], v[:, :, c0 : c0 + chunk_size]
        weights = (qc @ kc.transpose(-2, -1)).masked_fill(~causal_mask(qc.shape[2], q.device), 0.0)  # (B, H, C, C)
        num = weights @ vc + qc @ S  # (B, H, C, d_v)
        if normalize:
            num = num / (weights.sum(dim=-1, keepdim=True) + qc @ z.transpose(-2, -1))  # (B, H, C, d_v)
        outs.append(num)
        S = S + kc.transpose(-2, -1) @ vc  # (B, H, d_k, d_v)
        z = z + kc.sum(dim=2, keepdim=True)  # (B, H, 1, d_k)
    return torch.cat(outs, dim=2)  # (B, H, T, d_v)


def _check_chunk(chunk_size: object) -> None:
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")


# --------------------------------------------------------------------------- the family as one recurrence


def decay_recurrence(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    log_decay: torch.Tensor | None = None,
    beta: torch.Tensor | None = None,
    state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The family's recurrent form, one step at a time: returns ``out (B, H, T, d_v)`` and the final
    ``S (B, H, d_k, d_v)`` (start from ``state`` if given, else zeros).

    ``a_t = exp(log_decay)``: ``log_decay`` is ``None`` (``a = 1``), ``(H,)`` (fixed per head, RetNet) or
    ``(B, H, T)`` (data-dependent, GLA / Mamba-2), all ``≤ 0``. Without ``beta``:
    ``S_t = a_t S_{t-1} + k_t v_tᵀ``. With ``beta (B, H, T)`` the delta rule replaces the write: the
    value stored under ``k_t`` in the decayed state moves a fraction ``β_t`` toward ``v_t``,
    ``S_t = a_t S_{t-1} + β_t k_t (v_t - a_t S_{t-1}ᵀ k_t)ᵀ`` (DeltaNet for ``a = 1``; with decay, the
    gated delta rule of Yang, Kautz & Hatamizadeh 2024). Keep ``‖k_t‖ = 1`` and ``0 < β_t ≤ 1`` for
    a stable state. Read-out ``o_t = S_tᵀ q_t``.
    """
    check_qkv(q, k, v)
    batch_size, num_heads, seq_len, d_k = q.shape
    if log_decay is not None:
        if isinstance(log_decay, torch.Tensor) and log_decay.shape == (num_heads,):
            log_decay = log_decay.to(q.dtype)[None, :, None].expand(batch_size, num_heads, seq_len)  # (B, H, T)
        log_decay = _per_step(log_decay, q, "log_decay (or (H,) for a fixed decay)")
    if beta is not None:
        beta = _per_step(beta, q, "beta")
    S = q.new_zeros(batch_size, num_heads, d_k, v.shape[-1]) if state is None else state  # (B, H, d_k, d_v)
    outs = []
    for t in range(seq_len):
        if log_decay is not None:
            S = log_decay[:, :, t, None, None].exp() * S  # (B, H, d_k, d_v)
        k_t, v_t = k[:, :, t], v[:, :, t]  # (B, H, d_k), (B, H, d_v)
        if beta is not None:
            old = (k_t[..., None] * S).sum(dim=-2)  # (B, H, d_v): what S recalls under k_t
            v_t = beta[:, :, t, None] * (v_t - old)  # (B, H, d_v)
        S = S + k_t[..., :, None] * v_t[..., None, :]  # (B, H, d_k, d_v)
        outs.append((q[:, :, t, :, None] * S).sum(dim=-2))  # (B, H, d_v)
    return torch.stack(outs, dim=2), S  # (B, H, T, d_v), (B, H, d_k, d_v)


def _decay_matrix(cum: torch.Tensor) -> torch.Tensor:
    """``D[t, s] = exp(cum_t - cum_s)`` for ``s ≤ t``, else 0, from cumulative log decays ``cum (..., T)``."""
    seq_len = cum.shape[-1]
    diff = cum[..., :, None] - cum[..., None, :]  # (..., T, T)
    diff = diff.masked_fill(~causal_mask(seq_len, cum.device), float("-inf"))  # exp(-inf) = 0: no overflow above
    return diff.exp()  # (..., T, T)


def retnet_parallel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    """Retention (Sun et al. 2023) in parallel: ``o = ((q kᵀ) ⊙ D) v`` with ``D[t, s] = γ_h^(t-s)`` for ``s ≤ t``.

    ``gamma (H,)`` in ``(0, 1]``, one decay per head -> ``(B, H, T, d_v)``. Equals
    ``decay_recurrence(q, k, v, log_decay=gamma.log())``. (RetNet's group norm comes after, in the model.)
    """
    check_qkv(q, k, v)
    if not isinstance(gamma, torch.Tensor) or gamma.shape != (q.shape[1],) or not ((gamma > 0) & (gamma <= 1)).all():
        raise ValueError(
            f"gamma must be a (H,) = ({q.shape[1]},) tensor in (0, 1], got {getattr(gamma, 'shape', gamma)!r}"
        )
    position = torch.arange(q.shape[2], device=q.device, dtype=q.dtype)  # (T,)
    cum = gamma.to(q.dtype).log()[:, None] * position  # (H, T): t log γ
    return ((q @ k.transpose(-2, -1)) * _decay_matrix(cum)) @ v  # (B, H, T, d_v)


def gated_parallel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, log_decay: torch.Tensor) -> torch.Tensor:
    """Gated linear attention in parallel: ``D[t, s] = Π_{s<j≤t} a_j = exp(c_t - c_s)`` with ``c`` the
    cumulative sum of ``log_decay (B, H, T)`` -> ``(B, H, T, d_v)``; equals ``decay_recurrence``."""
    check_qkv(q, k, v)
    cum = _per_step(log_decay, q, "log_decay").cumsum(dim=-1)  # (B, H, T)
    return ((q @ k.transpose(-2, -1)) * _decay_matrix(cum)) @ v  # (B, H, T, d_v)


def gated_chunkwise(
    q: Tensor, k: Tensor, v: Tensor, log_decay: Tensor, chunk_size: int = 64, return_state: bool = False
):
    """Gated linear attention by chunks: ``(B, H, T, d_v)`` (and the final ``S (B, H, d_k, d_v)``).

    With ``b_t`` the cumulative log decay inside the chunk (``b`` at the chunk's last step: ``b_C``):
    intra-chunk ``((q kᵀ) ⊙ exp(b_t - b_s))_{s≤t} v``; from earlier chunks ``exp(b_t) q_tᵀ S``;
    then ``S ← exp(b_C) S + Σ_s exp(b_C - b_s) k_s v_sᵀ``. Every exponent is ``≤ 0``: nothing overflows.
    """
    check_qkv(q, k, v)
    _check_chunk(chunk_size)
    log_decay = _per_step(log_decay, q, "log_decay")
    batch_size, num_heads, seq_len, d_k = q.shape
    S = q.new_zeros(batch_size, num_heads, d_k, v.shape[-1])  # (B, H, d_k, d_v)
    outs = []
    for c0 in range(0, seq_len, chunk_size):
        sl = slice(c0, c0 + chunk_size)
        qc, kc, vc = q[:, :, sl], k[:, :, sl], v[:, :, sl]  # (B, H, C, d)
        b = log_decay[:, :, sl].cumsum(dim=-1)  # (B, H, C)
        intra = ((qc @ kc.transpose(-2, -1)) * _decay_matrix(b)) @ vc  # (B, H, C, d_v)
        inter = (qc * b[..., None].exp()) @ S  # (B, H, C, d_v)
        outs.append(intra + inter)
        b_last = b[..., -1:]  # (B, H, 1)
        S = (
            b_last[..., None].exp() * S + (kc * (b_last - b)[..., None].exp()).transpose(-2, -1) @ vc
        )  # (B, H, d_k, d_v)
    out = torch.cat(outs, dim=2)  # (B, H, T, d_v)
    return (out, S) if return_state else out


def deltanet_parallel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """DeltaNet without a loop over time: ``(B, H, T, d_v)``, equal to ``decay_recurrence(q, k, v, beta=beta)``.

    Each step writes ``k_t u_tᵀ`` with the pseudo-value ``u_t = β_t (v_t - Σ_{j<t} (k_j·k_t) u_j)``
    (so ``S_t = Σ_{j≤t} k_j u_jᵀ``). Stacked, ``(I + diag(β) tril(K Kᵀ, -1)) U = diag(β) V``: one unit
    lower-triangular solve (the role the WY / UT representation plays in Yang et al. 2024's chunked
    kernel). Then ``o = tril(Q Kᵀ) U``.
    """
    check_qkv(q, k, v)
    beta = _per_step(beta, q, "beta")
    seq_len = q.shape[2]
    strict = causal_mask(seq_len, q.device, -1)  # (T, T): j < t
    system = (beta[..., None] * (k @ k.transpose(-2, -1))).masked_fill(~strict, 0.0)  # (B, H, T, T)
    system = system + torch.eye(seq_len, dtype=q.dtype, device=q.device)  # (B, H, T, T)
    u = torch.linalg.solve_triangular(system, beta[..., None] * v, upper=False, unitriangular=True)  # (B, H, T, d_v)
    weights = (q @ k.transpose(-2, -1)).masked_fill(~causal_mask(seq_len, q.device), 0.0)  # (B, H, T, T)
    return weights @ u  # (B, H, T, d_v)


def deltanet_chunkwise(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    chunk_size: int = 64,
    log_decay: torch.Tensor | None = None,
    return_state: bool = False,
):
    """The (gated) delta rule by chunks: ``(B, H, T, d_v)`` (and the final ``S (B, H, d_k, d_v)``), equal to
    ``decay_recurrence(q, k, v, log_decay=log_decay, beta=beta)`` with no ``(T, T)`` tensor.

    Yang et al. 2024 ("Parallelizing Linear Transformers with the Delta Rule over Sequence Length"), with the
    decay of Yang, Kautz & Hatamizadeh 2024 ("Gated Delta Networks"). In a chunk of ``C`` steps starting from
    ``S_0``, let ``b_t`` be the cumulative log decay inside the chunk (``b = 0`` without ``log_decay``) and
    ``Γ_ts = exp(b_t - b_s)``. The state is ``S_t = exp(b_t) S_0 + Σ_{s≤t} Γ_ts k_s u_sᵀ`` with pseudo-values
    ``u_t = β_t (v_t - exp(b_t) S_0ᵀ k_t - Σ_{s<t} Γ_ts (k_s·k_t) u_s)``; stacked,
    ``A U = diag(β) (V - diag(e^b) K S_0)`` with ``A = I + diag(β) tril_{-1}(Γ ⊙ K Kᵀ)``, unit lower triangular.
    The UT transform solves it once per chunk for ``W = A⁻¹ diag(β e^b) K`` and ``U' = A⁻¹ diag(β) V``, so
    ``U = U' - W S_0``; then ``O = diag(e^b) Q S_0 + (Q Kᵀ ⊙ Γ)_{s≤t} U`` and
    ``S ← e^{b_C} S_0 + (K ⊙ e^{b_C - b})ᵀ U``. ``beta (B, H, T)``; ``log_decay`` ``None``, ``(H,)`` or
    ``(B, H, T)``, ``≤ 0``. Work ``O(T C d + T d_k d_v)``, memory ``O(C² + C d + d_k d_v)`` per head.
    """
    check_qkv(q, k, v)
    _check_chunk(chunk_size)
    beta = _per_step(beta, q, "beta")
    batch_size, num_heads, seq_len, d_k = q.shape
    if log_decay is None:
        log_decay = q.new_zeros(batch_size, num_heads, seq_len)  # (B, H, T): a = 1, DeltaNet
    elif isinstance(log_decay, torch.Tensor) and log_decay.shape == (num_heads,):
        log_decay = log_decay.to(q.dtype)[None, :, None].expand(batch_size, num_heads, seq_len)  # (B, H, T)
    log_decay = _per_step(log_decay, q, "log_decay (or (H,) for a fixed decay)")
    S = q.new_zeros(batch_size, num_heads, d_k, v.shape[-1])  # (B, H, d_k, d_v)
    outs = []
    for c0 in range(0, seq_len, chunk_size):
        sl = slice(c0, c0 + chunk_size)
        qc, kc, vc, bc = q[:, :, sl], k[:, :, sl], v[:, :, sl], beta[:, :, sl, None]  # (B, H, C, d), (B, H, C, 1)
        b = log_decay[:, :, sl].cumsum(dim=-1)  # (B, H, C)
        decay = _decay_matrix(b)  # (B, H, C, C): Γ, zero above the diagonal
        size = qc.shape[2]
        strict = (bc * (kc @ kc.transpose(-2, -1)) * decay).masked_fill(~causal_mask(size, q.device, -1), 0.0)
        system = strict + torch.eye(size, dtype=q.dtype, device=q.device)  # (B, H, C, C), unit lower triangular
        rhs = torch.cat([bc * b[..., None].exp() * kc, bc * vc], dim=-1)  # (B, H, C, d_k + d_v)
        solved = torch.linalg.solve_triangular(system, rhs, upper=False, unitriangular=True)  # (B, H, C, d_k + d_v)
        w, u = solved[..., :d_k], solved[..., d_k:]  # (B, H, C, d_k), (B, H, C, d_v)
        u = u - w @ S  # (B, H, C, d_v): the pseudo-values, corrected for what S_0 recalls
        inter = (qc * b[..., None].exp()) @ S  # (B, H, C, d_v)
        outs.append(inter + ((qc @ kc.transpose(-2, -1)) * decay) @ u)  # (B, H, C, d_v)
        b_last = b[..., -1:]  # (B, H, 1)
        S = b_last[..., None].exp() * S + (kc * (b_last - b)[..., None].exp()).transpose(-2, -1) @ u  # (B, H, d_k, d_v)
    out = torch.cat(outs, dim=2)  # (B, H, T, d_v)
    return (out, S) if return_state else out
