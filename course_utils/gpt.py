"""A decoder-only transformer language model (GPT), configurable with the choices units 07-08 teach.

One ``GPTConfig`` selects between the original and the modern ingredients, so that an ablation
is a change of one field:

- ``norm_first``  Pre-LN (GPT-2: ``x + f(norm(x))``) or Post-LN (Vaswani et al.: ``norm(x + f(x))``)
- ``norm``        ``"layer"`` (LayerNorm) or ``"rms"`` (RMSNorm, Zhang and Sennrich)
- ``ffn``         ``"gelu"`` (two linear maps around a GELU: ``transformer.FeedForward``), ``"swiglu"``
                  or ``"geglu"`` (Shazeer, "GLU Variants Improve Transformer": ``taming.GLUFeedForward``)
- ``position``    ``"learned"`` absolute embeddings (GPT-2), ``"rope"`` rotary embeddings applied to
                  queries and keys (Su et al., "RoFormer") or ``"alibi"`` linear distance penalties
                  added to the attention scores (Press et al., "Train Short, Test Long")
- ``residual``    ``"plain"`` or ``"rezero"`` (``x + alpha * f(x)``, alpha starting at 0 and no norm
                  inside the blocks; Bachlechner et al.: ``taming.ReZero`` around each sublayer)
- ``init``        ``"gpt2"`` or ``"default"`` (PyTorch's own initialisation of each layer; unit 08)

Initialisation ``"gpt2"`` follows GPT-2: normal with std 0.02, and the projections that write into the
residual stream scaled by ``1/sqrt(2 * num_layers)``. Attention runs through ``F.scaled_dot_product_attention``
with ``is_causal=True`` (unit 06 shows it equals attention written by hand).

    config = GPTConfig(vocab_size=65, block_size=64, num_layers=4, num_heads=4, d_model=128)
    model = GPT(config)
    logits = model(idx)                                  # (B, T) long -> (B, T, V)
    loss = model.loss(idx, targets)                      # mean cross-entropy, nats per token
    text_ids = generate(model, prompt, 100, temperature=0.8, top_k=20)
    text_ids = generate(model, prompt, 100, use_cache=True)   # the same tokens, each run through once
    logits = model(next_ids, cache)                      # with cache = model.new_cache(B, max_len): unit 10
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .decoding import sample_next
from .primitives import count_parameters
from .self_attention import FusedSelfAttention, KVCache
from .taming import GLUFeedForward, ReZero, alibi_bias
from .transformer import FeedForward


@dataclass
class GPTConfig:
    vocab_size: int
    block_size: int = 64  # longest context T the model sees
    num_layers: int = 4
    num_heads: int = 4
    d_model: int = 128
    dropout: float = 0.0
    bias: bool = False  # biases in Linear and LayerNorm
    norm_first: bool = True  # Pre-LN (True) or Post-LN (False)
    norm: str = "layer"  # "layer" or "rms"
    ffn: str = "gelu"  # "gelu", "swiglu" or "geglu"
    ffn_hidden: int | None = None  # default: 4 D for gelu, the same parameter count (8/3 D) for the GLUs
    position: str = "learned"  # "learned", "rope" or "alibi"
    rope_base: float = 10000.0
    tie_weights: bool = True  # output projection shares the token embedding matrix
    residual: str = "plain"  # "plain" or "rezero"
    init: str = "gpt2"  # "gpt2" (std 0.02, depth-scaled projections) or "default" (PyTorch's)
    gelu: str = "exact"  # "exact" erf GELU, or "tanh" (GPT-2's approximation, for loading its weights exactly)

    def __post_init__(self) -> None:
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}")
        for name, allowed in (
            ("norm", ("layer", "rms")),
            ("ffn", ("gelu", "swiglu", "geglu")),
            ("position", ("learned", "rope", "alibi")),
            ("residual", ("plain", "rezero")),
            ("init", ("gpt2", "default")),
            ("gelu", ("exact", "tanh")),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.position == "rope" and (self.d_model // self.num_heads) % 2:
            raise ValueError("RoPE needs an even head width d_model / num_heads")
        if self.ffn_hidden is None:
            self.ffn_hidden = 4 * self.d_model if self.ffn == "gelu" else _round_up(8 * self.d_model // 3, 8)


def _round_up(n: int, multiple: int) -> int:
    return (n + multiple - 1) // multiple * multiple


def make_norm(config: GPTConfig) -> nn.Module:
    if config.norm == "rms":
        return nn.RMSNorm(config.d_model, eps=1e-6)
    return nn.LayerNorm(config.d_model, bias=config.bias)


# --------------------------------------------------------------------------- rotary positions


def rope_tables(seq_len: int, d_head: int, base: float = 10000.0, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """``cos, sin`` of shape ``(T, d_head)``: angle ``t * base^(-2i/d_head)`` for pair ``i``, repeated
    for both halves (the "rotate half" pairing of feature ``i`` with feature ``i + d_head/2``)."""
    inv_freq = base ** (-torch.arange(0, d_head, 2, device=device, dtype=torch.float32) / d_head)  # (d_head/2,)
    angles = torch.arange(seq_len, device=device, dtype=torch.float32)[:, None] * inv_freq  # (T, d_head/2)
    angles = torch.cat([angles, angles], dim=-1)  # (T, d_head)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x (..., T, d_head)`` by the position-dependent angles in ``cos, sin (T, d_head)``."""
    x1, x2 = x.chunk(2, dim=-1)  # (..., T, d_head/2) each
    rotated = torch.cat([-x2, x1], dim=-1)  # (..., T, d_head)
    return x * cos.to(x.dtype) + rotated * sin.to(x.dtype)


# --------------------------------------------------------------------------- the blocks


class CausalSelfAttention(FusedSelfAttention):
    """Causal multi-head self-attention of a GPT block, through ``F.scaled_dot_product_attention``.

    ``forward(x (B, T, D), rope, bias, cache, layer) -> (B, T, D)``. ``rope``: ``cos, sin (T, d_head)``
    to rotate queries and keys; ``bias (H, T, L + T)``, if given, is added to the scores and already
    holds ``-inf`` above the diagonal (ALiBi). With a :class:`~course_utils.self_attention.KVCache`, the
    ``T`` new tokens follow ``L = cache.length`` cached ones: their keys and values join layer ``layer``
    of the cache, and token ``i`` attends to keys ``0 .. L + i``.
    """

    def __init__(self, config: GPTConfig):
        super().__init__(config.d_model, config.num_heads, bias=config.bias, dropout=config.dropout)
        self.proj.residual = True  # scaled at initialisation

    def forward(
        self,
        x: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor] | None = None,
        bias: torch.Tensor | None = None,
        cache: KVCache | None = None,
        layer: int = 0,
    ) -> torch.Tensor:
        q, k, v = self.project(x)  # (B, H, T, d_head) each
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        if cache is not None:
            k, v = cache.append(layer, k, v)  # (B, H, L + T, d_head)
            if bias is None:  # new token i sits at position L + i and may see keys 0 .. L + i
                bias = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=x.device).tril(cache.length)
            mask = bias if bias.dtype == torch.bool else bias.to(q.dtype)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.dropout_p())
        elif bias is None:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.dropout_p())
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype), dropout_p=self.dropout_p())
        return self.merge(out)  # (B, T, D)


def make_ffn(config: GPTConfig) -> nn.Module:
    """The position-wise MLP of a block, ``(B, T, D) -> (B, T, D)``: unit 07's two linear maps around a
    GELU (``transformer.FeedForward``) or unit 08's gated SwiGLU/GEGLU (``taming.GLUFeedForward``),
    of hidden width ``config.ffn_hidden``; its output projection is marked for the depth-scaled init."""
    if config.ffn == "gelu":
        activation = "gelu_tanh" if config.gelu == "tanh" else "gelu"
        ffn = FeedForward(config.d_model, config.ffn_hidden, activation=activation, bias=config.bias)
        ffn.linear2.residual = True
    else:
        ffn = GLUFeedForward(config.d_model, config.ffn_hidden, activation=config.ffn, bias=config.bias)
        ffn.down.residual = True
    return ffn


class Block(nn.Module):
    """One transformer block, ``forward(x (B, T, D), rope, bias, cache, layer) -> (B, T, D)``: causal
    self-attention, then the MLP, each in a residual connection (Pre-LN, Post-LN or ReZero, as ``config``
    says). ``rope``, ``bias``, ``cache`` and ``layer`` go to :class:`CausalSelfAttention`."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.norm_first, self.rezero = config.norm_first, config.residual == "rezero"
        if self.rezero:  # no norms; each residual branch scaled by alpha = 0
            self.attn = ReZero(CausalSelfAttention(config), dropout=config.dropout)
            self.ffn = ReZero(make_ffn(config), dropout=config.dropout)
        else:
            self.norm1, self.attn = make_norm(config), CausalSelfAttention(config)
            self.norm2, self.ffn = make_norm(config), make_ffn(config)
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, rope=None, bias=None, cache: KVCache | None = None, layer: int = 0):
        if self.rezero:  # ReZero: x + alpha f(x)
            return self.ffn(self.attn(x, rope, bias, cache, layer))
        if self.norm_first:  # Pre-LN: the residual stream is never normalised
            x = x + self.drop(self.attn(self.norm1(x), rope, bias, cache, layer))
            return x + self.drop(self.ffn(self.norm2(x)))
        x = self.norm1(x + self.drop(self.attn(x, rope, bias, cache, layer)))  # Post-LN: normalise after each sum
        return self.norm2(x + self.drop(self.ffn(x)))


class GPT(nn.Module):
    """Token embedding -> ``num_layers`` blocks -> (final norm, for Pre-LN) -> logits over the vocabulary."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.pos_emb = nn.Embedding(config.block_size, config.d_model) if config.position == "learned" else None
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.num_layers))
        self.norm_f = make_norm(config) if config.norm_first else nn.Identity()
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_weights:
            self.head.weight = self.tok_emb.weight
        if config.position == "rope":
            cos, sin = rope_tables(config.block_size, config.d_model // config.num_heads, config.rope_base)
            self.register_buffer("rope_cos", cos, persistent=False)  # (T, d_head)
            self.register_buffer("rope_sin", sin, persistent=False)
        if config.position == "alibi":
            self.register_buffer(
                "alibi", alibi_bias(config.num_heads, config.block_size), persistent=False
            )  # (H, T, T)
        if config.init == "gpt2":
            self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            std = 0.02 / math.sqrt(2 * self.config.num_layers) if getattr(module, "residual", False) else 0.02
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)

    def num_parameters(self) -> int:
        return count_parameters(self)

    def forward(self, idx: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """``idx (B, T)`` long token ids -> ``logits (B, T, V)``; ``T <= block_size``.

        With a ``cache`` (:meth:`new_cache`), the ``T`` tokens follow the ``L = cache.length`` tokens already
        cached (positions ``L .. L + T - 1``, ``L + T <= block_size``); their keys and values are added to
        it, so that decoding runs each token through the model once.
        """
        if idx.dim() != 2 or idx.dtype != torch.long:
            raise ValueError(f"idx must be (B, T) long, got shape {tuple(idx.shape)} dtype {idx.dtype}")
        start, seq_len = (0 if cache is None else cache.length), idx.shape[1]
        if start + seq_len > self.config.block_size:
            raise ValueError(
                f"{start} cached + {seq_len} new tokens exceed block_size={self.config.block_size}"
                if cache is not None
                else f"sequence of length {seq_len} is longer than block_size={self.config.block_size}"
            )
        end = start + seq_len
        x = self.tok_emb(idx)  # (B, T, D)
        rope = bias = None
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(start, end, device=idx.device))  # (B, T, D)
        elif self.config.position == "rope":
            rope = (self.rope_cos[start:end], self.rope_sin[start:end])  # (T, d_head) each
        else:
            bias = self.alibi[:, start:end, :end]  # (H, T, L + T)
        x = self.drop(x)
        for layer, block in enumerate(self.blocks):
            x = block(x, rope, bias, cache, layer)  # (B, T, D)
        if cache is not None:
            cache.advance(seq_len)
        return self.head(self.norm_f(x))  # (B, T, V)

    def new_cache(self, batch_size: int, max_len: int) -> KVCache:
        """An empty :class:`~course_utils.self_attention.KVCache` for ``batch_size`` sequences of up to
        ``max_len`` tokens, in the dtype and on the device of the model's parameters."""
        config, param = self.config, next(self.parameters())
        return KVCache(
            config.num_layers, batch_size, config.num_heads, max_len, config.d_model // config.num_heads,
            dtype=param.dtype, device=param.device,
        )  # fmt: skip

    def loss(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy in nats: ``targets (B, T)`` are ``idx`` shifted by one."""
        logits = self(idx)  # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


# --------------------------------------------------------------------------- sampling


def check_fits(model: GPT, idx: object, max_new_tokens: int) -> None:
    """Raise ``ValueError`` unless ``idx`` is a ``(B, T0)`` long prompt, ``T0 >= 1``, and ``T0 + max_new_tokens``
    tokens fit in ``model.config.block_size`` (what decoding with a key-value cache needs: no cropping)."""
    if not isinstance(idx, torch.Tensor) or idx.dim() != 2 or idx.dtype != torch.long or idx.shape[1] < 1:
        raise ValueError(f"prompt must be a (B, T0) long tensor with T0 >= 1, got {getattr(idx, 'shape', idx)!r}")
    if idx.shape[1] + max_new_tokens > model.config.block_size:
        raise ValueError(
            f"prompt {idx.shape[1]} + {max_new_tokens} new tokens exceed block_size={model.config.block_size}"
        )


@torch.no_grad()
def generate(
    model: GPT,
    idx: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    use_cache: bool = False,
) -> torch.Tensor:
    """Append ``max_new_tokens`` sampled tokens to ``idx (B, T0)``; returns ``(B, T0 + max_new_tokens)``.

    ``temperature`` 0 means greedy; otherwise each token is drawn by unit 07's
    :func:`course_utils.decoding.sample_next` (temperature, then top-k, then top-p). Without a cache, every
    step runs the whole context again, cropped to its last ``block_size`` tokens. With ``use_cache`` (unit
    10), the prompt runs once and each new token once, its keys and values kept in a
    :class:`~course_utils.self_attention.KVCache`; the whole sequence must then fit in ``block_size``
    (:func:`check_fits`). Both ways write the same tokens.
    """
    if use_cache:
        check_fits(model, idx, max_new_tokens)
    was_training = model.training
    model.eval()
    cache = model.new_cache(idx.shape[0], idx.shape[1] + max_new_tokens) if use_cache else None
    for _ in range(max_new_tokens):
        if cache is None:
            logits = model(idx[:, -model.config.block_size :])[:, -1].float()  # (B, V)
        else:  # the tokens not yet cached: the prompt at first, then the last token
            logits = model(idx[:, cache.length :], cache)[:, -1].float()  # (B, V)
        if temperature == 0:
            next_id = logits.argmax(-1)  # (B,)
        else:
            next_id = sample_next(logits, temperature, top_k, top_p, generator)  # (B,)
        idx = torch.cat([idx, next_id[:, None]], dim=1)  # (B, T + 1)
    model.train(was_training)
    return idx
