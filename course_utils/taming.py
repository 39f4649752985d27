"""Unit 08: the tricks that make transformers train, one small function or module each.

* schedules: :func:`warmup_cosine` (the multiplier of a linear warm-up followed by a cosine decay)
  and :func:`warmup_cosine_scheduler` (the same as a ``torch.optim.lr_scheduler.LambdaLR``);
* normalisation and residuals: :class:`RMSNorm` (Zhang and Sennrich, equal to ``nn.RMSNorm``),
  :class:`ReZero` (Bachlechner et al.: ``x + alpha * f(x)`` with ``alpha`` starting at 0) and
  :func:`layernorm_jacobian_norm` (how much LayerNorm shrinks gradients: ``sqrt(D) / ||x - mean||``);
* feed-forward: :class:`GLUFeedForward` (Shazeer, "GLU Variants Improve Transformer": SwiGLU, GEGLU);
* relative positions: :func:`t5_buckets` and :class:`RelativePositionBias` (Raffel et al., T5),
  :func:`alibi_slopes` and :func:`alibi_bias` (Press et al., "Train Short, Test Long"); RoPE lives
  in ``course_utils.gpt`` (:func:`~course_utils.gpt.apply_rope`);
* optimisation: :func:`radam_rectification` (Liu et al., RAdam), :func:`weight_decay_groups`
  (AdamW, Loshchilov and Hutter), :func:`label_smoothed_cross_entropy` (equal to
  ``F.cross_entropy(..., label_smoothing=eps)``) and :func:`accumulate_gradients` (gradient
  accumulation whose gradient equals the large batch's).

    scheduler = warmup_cosine_scheduler(optimizer, warmup_steps=50, total_steps=400, min_ratio=0.1)
    bias = alibi_bias(num_heads=4, seq_len=64)           # (H, T, T), -inf above the diagonal
    ffn = GLUFeedForward(d_model=64, d_hidden=176, activation="swiglu")
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch
import torch.nn as nn
import torch.nn.functional as F

from .primitives import causal_mask

# --------------------------------------------------------------------------- learning-rate schedule


def warmup_cosine(
    step: float,
    warmup_steps: float,
    total_steps: float | None,
    min_ratio: float = 0.0,
    *,
    offset: float = 1.0,
    progress: float | None = None,
) -> float:
    """Learning-rate multiplier at optimizer step ``step`` (0-based): a float in ``[min_ratio, 1]``.

    Linear warm-up ``(step + 1) / warmup_steps`` for ``step < warmup_steps`` (so the first step
    already moves), then a cosine from 1 down to ``min_ratio`` over the remaining
    ``total_steps - warmup_steps`` steps, and ``min_ratio`` after ``total_steps``.

    Two options for a run whose length is a time budget (``benchmarks/``), where the number of
    steps is not known in advance:

    * ``offset``: the warm-up is ``(step + offset) / warmup_steps``. With ``offset=0`` the three
      positions can be read on a continuous clock, e.g. ``step`` the fraction of the budget spent,
      ``warmup_steps`` the fraction spent warming up and ``total_steps=1``.
    * ``progress``: the fraction of the run done, in ``[0, 1]``. When given, the cosine follows it
      from the start of the run (1 at ``progress=0``, ``min_ratio`` at 1) instead of counting steps
      from the end of the warm-up, which still counts steps; ``total_steps`` is not used (pass None).
    """
    if warmup_steps < 0 or (
        progress is None and (total_steps is None or total_steps <= 0 or warmup_steps > total_steps)
    ):
        raise ValueError(
            f"need 0 <= warmup_steps <= total_steps and total_steps > 0, "
            f"got warmup_steps={warmup_steps}, total_steps={total_steps}"
        )
    if not 0.0 <= min_ratio <= 1.0:
        raise ValueError(f"min_ratio must be in [0, 1], got {min_ratio}")
    if step < 0 or (progress is not None and progress < 0):
        raise ValueError(f"step and progress must be >= 0, got step={step}, progress={progress}")
    if step < warmup_steps:
        return (step + offset) / warmup_steps
    if progress is None:
        span = total_steps - warmup_steps
        progress = (step - warmup_steps) / (span if span > 0 else 1)
    progress = min(1.0, progress)
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def warmup_cosine_scheduler(
    optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int, min_ratio: float = 0.0
) -> torch.optim.lr_scheduler.LambdaLR:
    """A ``LambdaLR`` whose multiplier is :func:`warmup_cosine`; call ``scheduler.step()`` after each
    ``optimizer.step()``. The learning rate of every group is its initial ``lr`` times the multiplier."""
    warmup_cosine(0, warmup_steps, total_steps, min_ratio)  # validates the arguments now
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: warmup_cosine(step, warmup_steps, total_steps, min_ratio)
    )


# --------------------------------------------------------------------------- normalisation, residuals


class RMSNorm(nn.Module):
    """Root-mean-square normalisation: ``y = x / sqrt(mean(x^2) + eps) * weight`` over the last axis.

    No mean subtraction and no bias (Zhang and Sennrich, "Root Mean Square Layer Normalization").
    ``x (..., D)`` -> ``(..., D)``; equals ``nn.RMSNorm(D, eps=eps)``.
    """

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        if d_model < 1:
            raise ValueError(f"d_model must be positive, got {d_model}")
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))  # (D,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.weight.shape[0]:
            raise ValueError(f"last axis of x must be {self.weight.shape[0]}, got shape {tuple(x.shape)}")
        rms = x.pow(2).mean(dim=-1, keepdim=True).add(self.eps).rsqrt()  # (..., 1)
        return x * rms * self.weight  # (..., D)


class ReZero(nn.Module):
    """``x + alpha * dropout(sublayer(x))`` with one learned scalar ``alpha`` initialised to 0 and no norm.

    At initialisation every block is the identity (Bachlechner et al., "ReZero is All You Need").
    ``x (..., D)`` -> ``(..., D)``; extra positional/keyword arguments go to ``sublayer``.
    ``dropout`` (probability, default 0: none) acts on the sublayer's output, as in a transformer block.
    """

    def __init__(self, sublayer: nn.Module, alpha: float = 0.0, dropout: float = 0.0):
        super().__init__()
        self.sublayer = sublayer
        self.alpha = nn.Parameter(torch.tensor(float(alpha)))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        return x + self.alpha * self.dropout(self.sublayer(x, *args, **kwargs))


def layernorm_jacobian_norm(x: torch.Tensor, eps: float = 1e-5) -> float:
    """Spectral norm of the Jacobian of ``F.layer_norm`` (no affine) at the vector ``x (D,)``.

    Computed with autograd; theory says it is ``1 / sigma = sqrt(D) / ||x - mean(x)||`` (for
    ``sigma^2 >> eps``): the larger the activations entering a LayerNorm, the smaller the gradient
    that flows back through it.
    """
    if not isinstance(x, torch.Tensor) or x.dim() != 1 or not x.is_floating_point():
        raise ValueError(f"x must be a 1-D float tensor, got {type(x).__name__} {tuple(getattr(x, 'shape', ()))}")
    jacobian = torch.autograd.functional.jacobian(lambda v: F.layer_norm(v, v.shape, eps=eps), x)  # (D, D)
    return torch.linalg.matrix_norm(jacobian, ord=2).item()


# --------------------------------------------------------------------------- gated feed-forward

GLU_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "swiglu": F.silu,
    "geglu": F.gelu,
    "reglu": F.relu,
    "glu": torch.sigmoid,
    "bilinear": lambda z: z,
}


class GLUFeedForward(nn.Module):
    """A gated position-wise MLP: ``down(act(gate(x)) * up(x))`` (Shazeer, "GLU Variants Improve Transformer").

    ``activation``: ``"swiglu"`` (SiLU/Swish), ``"geglu"`` (GELU), ``"reglu"`` (ReLU), ``"glu"``
    (sigmoid, Dauphin et al.) or ``"bilinear"`` (none). Three ``D x F`` matrices instead of two, so
    ``d_hidden = 8/3 D`` keeps the parameter count of a ``4 D`` ReLU MLP. ``x (..., D)`` -> ``(..., D)``.
    """

    def __init__(self, d_model: int, d_hidden: int, activation: str = "swiglu", bias: bool = False):
        super().__init__()
        if activation not in GLU_ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(GLU_ACTIVATIONS)}, got {activation!r}")
        self.activation = activation
        self.gate = nn.Linear(d_model, d_hidden, bias=bias)
        self.up = nn.Linear(d_model, d_hidden, bias=bias)
        self.down = nn.Linear(d_hidden, d_model, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = GLU_ACTIVATIONS[self.activation](self.gate(x)) * self.up(x)  # (..., F)
        return self.down(h)  # (..., D)


# --------------------------------------------------------------------------- relative positions


def t5_buckets(
    relative_position: torch.Tensor, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128
) -> torch.Tensor:
    """T5's bucket ids for integer offsets ``key - query``, any shape -> same shape, long.

    Half the buckets (or all, if not ``bidirectional``) cover one direction; of those, the first
    half are exact offsets ``0, 1, ...`` and the rest grow logarithmically up to ``max_distance``
    (all farther offsets share the last bucket). Not bidirectional: future offsets map to bucket 0.
    """
    if relative_position.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"relative_position must be an integer tensor, got {relative_position.dtype}")
    if num_buckets < 4 or max_distance < 2:
        raise ValueError(f"need num_buckets >= 4 and max_distance >= 2, got {num_buckets}, {max_distance}")
    n = -relative_position.long()  # > 0: the key lies in the past
    buckets = torch.zeros_like(n)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (n < 0).long() * num_buckets
        n = n.abs()
    else:
        n = n.clamp_min(0)
    max_exact = num_buckets // 2
    log_ratio = torch.log(n.float().clamp_min(1) / max_exact) / math.log(max_distance / max_exact)
    large = (max_exact + (log_ratio * (num_buckets - max_exact)).long()).clamp_max(num_buckets - 1)
    return buckets + torch.where(n < max_exact, n, large)


class RelativePositionBias(nn.Module):
    """A learned scalar per (head, bucket of ``key - query``), added to attention scores (T5).

    ``forward(query_len, key_len)`` -> ``(H, T_q, T_k)`` float bias; add it to the scores
    ``(B, H, T_q, T_k)`` before the softmax. Shared by all layers in T5.
    """

    def __init__(self, num_heads: int, num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = False):
        super().__init__()
        self.num_buckets, self.max_distance, self.bidirectional = num_buckets, max_distance, bidirectional
        self.embedding = nn.Embedding(num_buckets, num_heads)

    def forward(self, query_len: int, key_len: int) -> torch.Tensor:
        device = self.embedding.weight.device
        offset = (
            torch.arange(key_len, device=device)[None, :] - torch.arange(query_len, device=device)[:, None]
        )  # (T_q, T_k)
        buckets = t5_buckets(offset, self.bidirectional, self.num_buckets, self.max_distance)  # (T_q, T_k)
        return self.embedding(buckets).permute(2, 0, 1)  # (H, T_q, T_k)


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """ALiBi's head slopes ``(H,)`` float32: the geometric sequence ``2^(-8/H), 2^(-16/H), ..., 2^-8``.

    For ``H`` not a power of two, Press et al. take the slopes of the closest smaller power of two
    ``n`` and add every other slope of ``2n`` heads. ``H = 8`` gives ``1/2, 1/4, ..., 1/256``.
    """
    if not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"num_heads must be a positive int, got {num_heads!r}")

    def power_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]

    closest = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = power_of_two(closest) + power_of_two(2 * closest)[0::2][: num_heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(num_heads: int, seq_len: int, causal: bool = True) -> torch.Tensor:
    """ALiBi's additive attention bias ``(H, T, T)`` float32: ``-slope_h * |i - j|`` for query ``i``, key ``j``.

    With ``causal`` the future (``j > i``) is ``-inf``, so the result can be passed as the float
    ``attn_mask`` of ``F.scaled_dot_product_attention`` (with ``is_causal=False``).
    """
    if not isinstance(seq_len, int) or seq_len < 1:
        raise ValueError(f"seq_len must be a positive int, got {seq_len!r}")
    position = torch.arange(seq_len)
    distance = (position[:, None] - position[None, :]).abs().float()  # (T, T)
    bias = -alibi_slopes(num_heads)[:, None, None] * distance  # (H, T, T)
    if causal:
        future = ~causal_mask(seq_len)  # (T, T): key j after query i
        bias = bias.masked_fill(future, float("-inf"))
    return bias


# --------------------------------------------------------------------------- optimisation


def radam_rectification(step: int, beta2: float = 0.999, threshold: float = 5.0) -> float | None:
    """RAdam's variance rectification ``r_t`` at step ``t >= 1`` (Liu et al.), or ``None`` while the
    length of the approximated simple moving average ``rho_t <= threshold`` (then RAdam takes a plain
    momentum step). ``threshold`` 5 is PyTorch's choice (the paper uses 4)."""
    if step < 1 or not 0.0 < beta2 < 1.0:
        raise ValueError(f"need step >= 1 and 0 < beta2 < 1, got step={step}, beta2={beta2}")
    rho_inf = 2.0 / (1.0 - beta2) - 1.0
    rho_t = rho_inf - 2.0 * step * beta2**step / (1.0 - beta2**step)
    if rho_t <= threshold:
        return None
    return math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))


def weight_decay_groups(model: nn.Module, weight_decay: float, no_decay: Iterable[str] = ()) -> list[dict]:
    """Two optimizer parameter groups: matrices (``dim >= 2``: linear maps, embeddings) decay,
    vectors (biases, norm gains, ReZero's alpha) do not. For ``torch.optim.AdamW(groups, lr=...)``.

    ``no_decay``: names, as in ``model.named_parameters()``, of parameters that never decay whatever
    their shape, e.g. a ViT's ``("cls_token", "pos_embedding")``. Parameters that do not require
    gradients are left out; each group keeps the order of ``model.parameters()``."""
    if weight_decay < 0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
    names = dict(model.named_parameters(remove_duplicate=False))  # tied weights under every name
    unknown = set(no_decay) - names.keys()
    if unknown:
        raise ValueError(f"no_decay names no parameter of the model: {sorted(unknown)}")
    excluded = {id(names[name]) for name in no_decay}
    params = [p for p in model.parameters() if p.requires_grad]
    decays = [p.dim() >= 2 and id(p) not in excluded for p in params]
    return [
        {"params": [p for p, d in zip(params, decays) if d], "weight_decay": weight_decay},
        {"params": [p for p, d in zip(params, decays) if not d], "weight_decay": 0.0},
    ]


def label_smoothed_cross_entropy(
    logits: torch.Tensor, targets: torch.Tensor, smoothing: float = 0.1, ignore_index: int = -100
) -> torch.Tensor:
    """Mean cross-entropy against ``(1 - smoothing) * one_hot + smoothing / V`` (Szegedy et al.).

    ``logits (N, V)`` float, ``targets (N,)`` long -> scalar; positions whose target is
    ``ignore_index`` are left out of the mean. Equals
    ``F.cross_entropy(logits, targets, label_smoothing=smoothing, ignore_index=ignore_index)``.
    """
    if logits.dim() != 2 or targets.shape != logits.shape[:1] or targets.dtype != torch.long:
        raise ValueError(
            f"need logits (N, V) and long targets (N,), got {tuple(logits.shape)} and "
            f"{tuple(targets.shape)} {targets.dtype}"
        )
    if not 0.0 <= smoothing <= 1.0:
        raise ValueError(f"smoothing must be in [0, 1], got {smoothing}")
    keep = targets != ignore_index  # (N,)
    log_probs = logits[keep].log_softmax(dim=-1)  # (N', V)
    nll = -log_probs.gather(1, targets[keep][:, None]).squeeze(1)  # (N',)
    uniform = -log_probs.mean(dim=-1)  # (N',)
    return ((1.0 - smoothing) * nll + smoothing * uniform).mean()


def accumulate_gradients(
    model: nn.Module,
    loss_fn: Callable[..., torch.Tensor],
    inputs: torch.Tensor,
    targets: torch.Tensor,
    micro_batch_size: int,
) -> float:
    """Backpropagate the mean loss of a large batch in micro-batches; returns that mean loss (float).

    ``inputs`` and ``targets`` share their first (batch) axis ``B``; ``loss_fn(model, x, y)`` returns
    the MEAN loss of a micro-batch. Each micro-batch's loss is weighted by ``b / B`` before
    ``backward()``, so the gradients left in ``.grad`` (added to whatever was there) equal those of
    ``loss_fn(model, inputs, targets)`` on the whole batch, also when ``B`` is not a multiple of
    ``micro_batch_size``. Call ``optimizer.zero_grad()`` before and ``optimizer.step()`` after.
    """
    batch_size = inputs.shape[0]
    if targets.shape[0] != batch_size or micro_batch_size < 1:
        raise ValueError(
            f"inputs and targets need the same batch size and micro_batch_size >= 1, got "
            f"{batch_size}, {targets.shape[0]}, {micro_batch_size}"
        )
    total = 0.0
    for start in range(0, batch_size, micro_batch_size):
        x, y = inputs[start : start + micro_batch_size], targets[start : start + micro_batch_size]
        loss = loss_fn(model, x, y) * (x.shape[0] / batch_size)
        loss.backward()
        total += loss.item()
    return total
