"""The ground floor of the library: masks, pooling, argument checks and parameter counts.

Every other module may import from here; this module imports nothing from ``course_utils``
(only ``torch``), so a small helper never drags a model along with it.

Masks are boolean and say where attention is ALLOWED (True = attend), like the ``attn_mask`` of
``F.scaled_dot_product_attention``; they broadcast against scores ``(..., T_q, T_k)``.

    causal_mask(4)                        # (4, 4) bool, lower triangle
    lengths_to_mask(torch.tensor([2, 3])) # (2, 3) bool, True on the first lengths[b] steps
    padding_mask(lengths, T)              # (B, 1, 1, T): the same as a key mask for (B, H, T_q, T_k)
    masked_softmax(scores, mask)          # softmax over the keys; masked keys get weight 0
    masked_pool(outputs, mask, "mean")    # (B, T, H) -> (B, H) over the real steps
    check_qkv(q, k, v)                    # ValueError unless (B, H, T, d) floating tensors that fit
    count_parameters(model)               # int; trainable_parameters(model) counts requires_grad only
"""

from __future__ import annotations

import operator

import torch
import torch.nn as nn

POOLINGS = ("last", "mean", "max")


# --------------------------------------------------------------------------- masks


def causal_mask(seq_len: int, device: torch.device | str | None = None, diagonal: int = 0) -> torch.Tensor:
    """``(T, T)`` bool, True on and below the diagonal: position t may attend to 0..t only.

    ``diagonal=-1`` gives the strictly lower triangle (``s < t``), as ``torch.tril`` counts diagonals.
    """
    try:
        seq_len = operator.index(seq_len)
    except TypeError:
        raise ValueError(f"seq_len must be an int, got {type(seq_len).__name__}") from None
    if seq_len < 0:
        raise ValueError(f"seq_len must be non-negative, got {seq_len}")
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril(diagonal)


def lengths_to_mask(lengths: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """``lengths (B,)`` integer -> ``mask (B, T)`` bool, True on the first ``lengths[b]`` steps.

    ``T`` is ``max_len``, or the longest length when ``max_len`` is None (right padding).
    """
    if not isinstance(lengths, torch.Tensor) or lengths.dim() != 1 or lengths.is_floating_point():
        raise ValueError(f"lengths must be a 1-D integer tensor, got {getattr(lengths, 'shape', lengths)!r}")
    max_len = int(lengths.max()) if max_len is None else max_len
    return torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]  # (B, T)


def padding_mask(lengths: torch.Tensor, seq_len: int) -> torch.Tensor:
    """``lengths (B,)`` -> key mask ``(B, 1, 1, T)`` bool, True on real tokens (broadcasts over H, T_q).

    The same concept as :func:`lengths_to_mask`, shaped for multi-head scores ``(B, H, T_q, T_k)``.
    """
    return lengths_to_mask(lengths, seq_len)[:, None, None, :]


def check_mask(mask: torch.Tensor | None, scores: torch.Tensor) -> None:
    """Raise ``ValueError`` unless ``mask`` is None or a bool tensor broadcastable to ``scores (..., T_q, T_k)``."""
    if mask is None:
        return
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor (True = attend), got {getattr(mask, 'dtype', type(mask))}")
    try:
        torch.broadcast_shapes(mask.shape, scores.shape)
    except RuntimeError:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast against scores of shape "
            f"{tuple(scores.shape)} (..., T_q, T_k); a (B, T_k) padding mask needs mask[:, None, :]"
        ) from None


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the LAST axis (the keys) of ``scores (..., T_q, T_k)``, ignoring masked keys.

    Masked positions (``mask == False``) get weight exactly 0. A query whose keys are all
    masked gets all-zero weights instead of NaN. Returns weights of the shape of ``scores``.
    """
    check_mask(mask, scores)
    if mask is None:
        return scores.softmax(dim=-1)
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights.nan_to_num(0.0)  # rows with every key masked: 0/0 -> 0


# --------------------------------------------------------------------------- pooling


def masked_pool(outputs: torch.Tensor, mask: torch.Tensor, how: str = "last") -> torch.Tensor:
    """Pool ``outputs (B, T, H)`` over the valid steps given by ``mask (B, T)`` bool -> ``(B, H)``.

    ``mask`` must be a right-padded prefix mask (True then False) with at least one True per
    row. ``"last"``: the output at the last valid step ``length - 1``; ``"mean"``: average of the
    valid steps; ``"max"``: elementwise max over the valid steps (padding never wins).
    """
    if how not in POOLINGS:
        raise ValueError(f"how must be one of {POOLINGS}, got {how!r}")
    if not isinstance(outputs, torch.Tensor) or outputs.dim() != 3:
        raise ValueError(f"outputs must be (B, T, H), got {getattr(outputs, 'shape', type(outputs).__name__)}")
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or tuple(mask.shape) != tuple(outputs.shape[:2]):
        raise ValueError(
            f"mask must be a bool tensor of shape {tuple(outputs.shape[:2])}, "
            f"got {getattr(mask, 'dtype', None)} {tuple(getattr(mask, 'shape', ()))}"
        )
    lengths = mask.sum(dim=1)  # (B,)
    if (lengths == 0).any():
        raise ValueError("every row of mask needs at least one True (an empty sequence cannot be pooled)")
    if how == "last":
        index = (lengths - 1).view(-1, 1, 1).expand(-1, 1, outputs.shape[2])  # (B, 1, H)
        return outputs.gather(1, index).squeeze(1)  # (B, H)
    m = mask.unsqueeze(-1)  # (B, T, 1)
    if how == "mean":
        return (outputs * m).sum(dim=1) / lengths.unsqueeze(-1).to(outputs.dtype)  # (B, H)
    return outputs.masked_fill(~m, float("-inf")).amax(dim=1)  # (B, H)


# --------------------------------------------------------------------------- argument checks


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


# --------------------------------------------------------------------------- models


def count_parameters(module: nn.Module) -> int:
    """Number of scalar parameters of ``module`` (``sum(p.numel())``)."""
    if not isinstance(module, nn.Module):
        raise ValueError(f"count_parameters needs an nn.Module, got {type(module).__name__}")
    return sum(p.numel() for p in module.parameters())


def trainable_parameters(module: nn.Module) -> int:
    """Number of scalar parameters of ``module`` with ``requires_grad``: what an optimiser would change."""
    if not isinstance(module, nn.Module):
        raise ValueError(f"trainable_parameters needs an nn.Module, got {type(module).__name__}")
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
