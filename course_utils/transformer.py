"""Unit 07: the transformer's building blocks, batch-first, on top of ``course_utils.attention``.

* positions: :func:`sinusoidal_positions` (Vaswani et al., base 10000, sin on even and cos on
  odd features), :func:`shift_matrix` (``P[t + k] = P[t] @ shift_matrix(k).T``), and two
  modules that add positions to embeddings: :class:`SinusoidalPositionalEncoding`,
  :class:`LearnedPositionalEmbedding`;
* layers: :class:`FeedForward` (position-wise MLP), :class:`EncoderLayer` and
  :class:`DecoderLayer` with Post-LN (``norm_first=False``, the 2017 paper) or Pre-LN; their
  ``from_torch`` copies the weights of ``nn.TransformerEncoderLayer`` / ``DecoderLayer``;
* models: :class:`TransformerClassifier` (encoder, masked pooling, linear head) and
  :class:`TransformerSeq2Seq`, which follows the seq2seq convention of ``course_utils.seq2seq``:
  ``logits = model(src, src_lengths, tgt_in)``.

Masks are bool, True = attend, and broadcast against scores ``(B, H, T_q, T_k)``;
:func:`padding_mask` turns lengths into the ``(B, 1, 1, T_k)`` key mask. Decoding (beam search,
sampling filters) and BERT's masking live in ``course_utils.decoding``.

    P = sinusoidal_positions(seq_len=50, d_model=16)         # (50, 16)
    layer = EncoderLayer(d_model=32, num_heads=2, d_ff=128)
    y = layer(x, padding_mask(lengths, x.shape[1]))          # (B, T, 32)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import MultiHeadAttention
from .gated import TextClassifierConfig, _check_ids
from .primitives import causal_mask, masked_pool, padding_mask
from .text import PAD_ID


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU with the tanh approximation (GPT-2's ``gelu_new``): ``(...) -> (...)``, same shape."""
    return F.gelu(x, approximate="tanh")


ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": gelu_tanh}


# --------------------------------------------------------------------------- positions


def _frequencies(d_model: int, base: float) -> torch.Tensor:
    """``(D/2,)`` float64: the turning rate ``base^(-2j/D)`` of feature pair ``j``; ``D`` must be even."""
    if not isinstance(d_model, int) or d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be a positive even int, got {d_model!r}")
    return base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)


def sinusoidal_positions(
    seq_len: int, d_model: int, base: float = 10000.0, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """The sinusoidal position table ``P (T, D)`` of "Attention Is All You Need".

    ``P[i, 2j] = sin(i / base^(2j/D))`` and ``P[i, 2j+1] = cos(i / base^(2j/D))`` for positions
    ``i = 0 .. T-1``; feature pair ``(2j, 2j+1)`` turns at frequency ``base^(-2j/D)``. ``D`` must
    be even. Computed in float64, returned as ``dtype``.
    """
    if not isinstance(seq_len, int) or seq_len < 1:
        raise ValueError(f"seq_len must be a positive int, got {seq_len!r}")
    freq = _frequencies(d_model, base)  # (D/2,)
    position = torch.arange(seq_len, dtype=torch.float64)[:, None]  # (T, 1)
    angle = position * freq  # (T, D/2)
    P = torch.empty(seq_len, d_model, dtype=torch.float64)
    P[:, 0::2] = torch.sin(angle)
    P[:, 1::2] = torch.cos(angle)
    return P.to(dtype)  # (T, D)


def shift_matrix(k: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The ``(D, D)`` float64 block-diagonal rotation ``R(k)`` with ``P[t + k] = R(k) P[t]``.

    Block ``j`` acts on the pair ``(sin, cos)`` of frequency ``w_j = base^(-2j/D)``:
    ``[[cos(w_j k), sin(w_j k)], [-sin(w_j k), cos(w_j k)]]``. It does not depend on ``t``:
    a shift by ``k`` positions is one linear map, whatever the position.
    """
    freq = _frequencies(d_model, base)  # (D/2,)
    c, s = torch.cos(freq * k), torch.sin(freq * k)  # (D/2,)
    R = torch.zeros(d_model, d_model, dtype=torch.float64)
    even = torch.arange(0, d_model, 2)
    R[even, even], R[even, even + 1] = c, s
    R[even + 1, even], R[even + 1, even + 1] = -s, c
    return R


def _check_embedded(x: torch.Tensor, d_model: int, max_len: int, name: str) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(f"{name}: x must be (B, T, {d_model}), got {getattr(x, 'shape', type(x).__name__)}")
    if x.shape[1] > max_len:
        raise ValueError(f"{name}: sequence of length {x.shape[1]} is longer than max_len={max_len}")


class SinusoidalPositionalEncoding(nn.Module):
    """``x (B, T, D) -> x + P[:T]`` with the fixed table of :func:`sinusoidal_positions` (no parameters)."""

    def __init__(self, d_model: int, max_len: int = 1024, base: float = 10000.0):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.register_buffer("P", sinusoidal_positions(max_len, d_model, base), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_embedded(x, self.d_model, self.max_len, "SinusoidalPositionalEncoding")
        return x + self.P[: x.shape[1]].to(x.dtype)  # (B, T, D)


class LearnedPositionalEmbedding(nn.Module):
    """``x (B, T, D) -> x + E[0..T-1]`` with a trained table ``E (max_len, D)`` (as in BERT, GPT).

    ``E`` starts as N(0, 1), the scale of ``nn.Embedding`` token embeddings: a table much smaller
    than the tokens (GPT-2 draws both with std 0.02) is drowned out and learns slowly.
    """

    def __init__(self, d_model: int, max_len: int = 1024):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.embed = nn.Embedding(max_len, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_embedded(x, self.d_model, self.max_len, "LearnedPositionalEmbedding")
        positions = torch.arange(x.shape[1], device=x.device)  # (T,)
        return x + self.embed(positions)  # (B, T, D)


# --------------------------------------------------------------------------- layers


class FeedForward(nn.Module):
    """Position-wise MLP ``linear2(dropout(act(linear1(x))))``: ``(..., D) -> (..., D)``, width ``d_ff``.

    The same weights act on every position separately (a 1x1 convolution over time). ``activation``
    is ``"relu"`` (the 2017 paper), ``"gelu"`` (BERT, GPT, ViT) or ``"gelu_tanh"`` (GPT-2's approximation);
    ``bias=False`` drops both biases (as ``course_utils.gpt`` does by default). The gated variants are
    ``course_utils.taming.GLUFeedForward``.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu", bias: bool = True):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.activation = ACTIVATIONS[activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.dropout(self.activation(self.linear1(x))))  # (..., D)


class _ResidualLayer(nn.Module):
    """What the encoder and decoder layers share: self-attention, optionally cross-attention, a
    :class:`FeedForward`, ``num_norms`` LayerNorms and one dropout, built in that order (so the
    random initialisation follows the same sequence as before the two layers shared it)."""

    cross_attention = False
    num_norms = 2

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        activation: str = "relu",
        layer_norm_eps: float = 1e-5,
    ):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        if self.cross_attention:
            self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.ffn = FeedForward(d_model, d_ff, dropout, activation)
        for k in range(1, self.num_norms + 1):
            setattr(self, f"norm{k}", nn.LayerNorm(d_model, eps=layer_norm_eps))
        self.dropout = nn.Dropout(dropout)

    def _sa(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        return self.dropout(self.self_attn(x, x, x, mask)[0])  # (B, T, D)

    @torch.no_grad()
    def _copy_from(self, reference: nn.Module) -> None:
        """Copy self-attention, the MLP and the norms of a ``nn.TransformerEncoderLayer`` / ``DecoderLayer``."""
        if reference.norm_first != self.norm_first:
            raise ValueError(f"reference has norm_first={reference.norm_first}, this layer {self.norm_first}")
        activation = getattr(reference, "activation", None)
        if callable(activation) and not isinstance(activation, nn.Module) and activation is not self.ffn.activation:
            raise ValueError(
                f"reference uses activation {activation.__name__}, this layer {self.ffn.activation.__name__}"
            )
        self.self_attn.from_torch(reference.self_attn)
        for name in ("linear1", "linear2"):
            getattr(self.ffn, name).load_state_dict(getattr(reference, name).state_dict())
        for k in range(1, self.num_norms + 1):
            getattr(self, f"norm{k}").load_state_dict(getattr(reference, f"norm{k}").state_dict())


class EncoderLayer(_ResidualLayer):
    """Self-attention and a position-wise MLP, each wrapped in a residual connection and LayerNorm.

    ``EncoderLayer(d_model, num_heads, d_ff, dropout=0.0, norm_first=False, activation="relu",
    layer_norm_eps=1e-5)``.
    Post-LN (``norm_first=False``): ``x = norm1(x + SA(x)); x = norm2(x + FFN(x))``.
    Pre-LN (``norm_first=True``):  ``x = x + SA(norm1(x)); x = x + FFN(norm2(x))``.
    ``forward(x (B, T, D), mask)`` -> ``(B, T, D)``; ``mask`` broadcastable to ``(B, H, T, T)``,
    True = attend (e.g. :func:`padding_mask`, or a causal mask for a decoder-only model).
    Dropout sits on each sublayer's output (and inside the MLP), as in ``nn.TransformerEncoderLayer``.
    """

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.norm_first:
            x = x + self._sa(self.norm1(x), mask)
            return x + self.dropout(self.ffn(self.norm2(x)))  # (B, T, D)
        x = self.norm1(x + self._sa(x, mask))
        return self.norm2(x + self.dropout(self.ffn(x)))  # (B, T, D)

    def from_torch(self, reference: nn.TransformerEncoderLayer) -> EncoderLayer:
        """Copy the weights of a ``nn.TransformerEncoderLayer`` (same sizes and ``norm_first``)."""
        self._copy_from(reference)
        return self


class DecoderLayer(_ResidualLayer):
    """Causal self-attention, cross-attention to the encoder's output, and an MLP (add & norm each).

    Built with the arguments of :class:`EncoderLayer`.
    Post-LN: ``y = norm1(y + SA(y)); y = norm2(y + CA(y, memory)); y = norm3(y + FFN(y))``;
    Pre-LN puts each norm on the sublayer's input instead. ``forward(y (B, T, D), memory (B, S, D),
    self_mask, memory_mask)`` -> ``(B, T, D)``; ``self_mask`` broadcastable to ``(B, H, T, T)``
    (a causal mask: :func:`course_utils.primitives.causal_mask`), ``memory_mask`` to ``(B, H, T, S)``.
    ``cross_weights`` keeps the cross-attention weights ``(B, H, T, S)`` of the last call, for plots.
    """

    cross_attention = True
    num_norms = 3
    cross_weights: torch.Tensor | None = None

    def _ca(self, y: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        out, weights = self.cross_attn(y, memory, memory, mask)  # (B, T, D), (B, H, T, S)
        self.cross_weights = weights.detach()
        return self.dropout(out)

    def forward(
        self,
        y: torch.Tensor,
        memory: torch.Tensor,
        self_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if self.norm_first:
            y = y + self._sa(self.norm1(y), self_mask)
            y = y + self._ca(self.norm2(y), memory, memory_mask)
            return y + self.dropout(self.ffn(self.norm3(y)))  # (B, T, D)
        y = self.norm1(y + self._sa(y, self_mask))
        y = self.norm2(y + self._ca(y, memory, memory_mask))
        return self.norm3(y + self.dropout(self.ffn(y)))  # (B, T, D)

    def from_torch(self, reference: nn.TransformerDecoderLayer) -> DecoderLayer:
        """Copy the weights of a ``nn.TransformerDecoderLayer`` (its ``multihead_attn`` is our ``cross_attn``)."""
        self._copy_from(reference)
        with torch.no_grad():
            self.cross_attn.from_torch(reference.multihead_attn)
        return self


# --------------------------------------------------------------------------- models


def _positions(kind: str, d_model: int, max_len: int) -> nn.Module:
    if kind == "sinusoidal":
        return SinusoidalPositionalEncoding(d_model, max_len)
    if kind == "learned":
        return LearnedPositionalEmbedding(d_model, max_len)
    if kind == "none":
        return nn.Identity()
    raise ValueError(f"positions must be 'sinusoidal', 'learned' or 'none', got {kind!r}")


@dataclass
class TransformerClassifierConfig(TextClassifierConfig):
    """:class:`TransformerClassifier`'s configuration: unit 05's text-classifier fields (vocabulary,
    classes, width D, layers, pooling, dropout, padding id) with a transformer encoder's."""

    pooling: str = "max"  # "mean" | "max" over the real tokens
    dropout: float = 0.1
    num_heads: int = 2  # H
    d_ff: int = 128  # MLP width, 4 D
    max_len: int = 512
    positions: str = "sinusoidal"  # "sinusoidal" | "learned" | "none"
    norm_first: bool = False


ClassifierConfig = TransformerClassifierConfig  # unit 07's name for it (lecture 07 calls tfm.ClassifierConfig)


class TransformerClassifier(nn.Module):
    """Encoder-only classifier: embedding + positions -> encoder layers -> masked pooling -> linear.

    ``forward(ids (B, T) long, lengths (B,) long) -> logits (B, C)``. Padding is masked as a key
    in every attention and left out of the pooling.
    """

    def __init__(self, config: TransformerClassifierConfig):
        super().__init__()
        if config.pooling not in ("mean", "max"):
            raise ValueError(f"pooling must be 'mean' or 'max', got {config.pooling!r}")
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_id)
        self.positions = _positions(config.positions, config.d_model, config.max_len)
        self.dropout = nn.Dropout(config.dropout)
        self.layers = nn.ModuleList(
            EncoderLayer(config.d_model, config.num_heads, config.d_ff, config.dropout, config.norm_first)
            for _ in range(config.num_layers)
        )
        self.norm = nn.LayerNorm(config.d_model) if config.norm_first else nn.Identity()
        self.head = nn.Linear(config.d_model, config.num_classes)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        _check_ids(ids, lengths, "ids")
        x = self.dropout(self.positions(self.embed(ids)))  # (B, T, D)
        mask = padding_mask(lengths.to(ids.device), ids.shape[1])  # (B, 1, 1, T)
        for layer in self.layers:
            x = layer(x, mask)  # (B, T, D)
        pooled = masked_pool(self.norm(x), mask[:, 0, 0], self.config.pooling)  # (B, D)
        return self.head(pooled)  # (B, C)


class TransformerSeq2Seq(nn.Module):
    """Encoder-decoder transformer (Vaswani et al., 2017) for ``course_utils.seq2seq``.

    ``forward(src (B, S), src_lengths (B,), tgt_in (B, T)) -> logits (B, T, V_tgt)``: the whole
    target prefix is decoded in one pass under a causal mask (teacher forcing). :meth:`encode`
    and :meth:`decode` split the two halves, so beam search encodes the source once. Embeddings
    are not multiplied by sqrt(D): ``nn.Embedding`` starts at N(0, 1), the scale of the positions
    (the paper scales because its embeddings, shared with the output layer, start near 1/sqrt(D)).
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 64,
        num_heads: int = 4,
        num_layers: int = 2,
        d_ff: int = 128,
        dropout: float = 0.1,
        max_len: int = 128,
        norm_first: bool = True,
        positions: str = "sinusoidal",
    ):
        super().__init__()
        self.d_model = d_model
        self.src_embed = nn.Embedding(src_vocab_size, d_model, padding_idx=PAD_ID)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model, padding_idx=PAD_ID)
        self.src_positions = _positions(positions, d_model, max_len)
        self.tgt_positions = _positions(positions, d_model, max_len)
        self.dropout = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(
            EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first) for _ in range(num_layers)
        )
        self.decoder = nn.ModuleList(
            DecoderLayer(d_model, num_heads, d_ff, dropout, norm_first) for _ in range(num_layers)
        )
        final_norm = (lambda: nn.LayerNorm(d_model)) if norm_first else nn.Identity  # Pre-LN needs one at the top
        self.enc_norm, self.dec_norm = final_norm(), final_norm()
        self.out = nn.Linear(d_model, tgt_vocab_size)

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``src (B, S)``, ``src_lengths (B,)`` -> ``memory (B, S, D)`` and its key mask ``(B, 1, 1, S)``."""
        _check_ids(src, src_lengths, "src")
        src_mask = padding_mask(src_lengths.to(src.device), src.shape[1])  # (B, 1, 1, S)
        x = self.dropout(self.src_positions(self.src_embed(src)))  # (B, S, D)
        for layer in self.encoder:
            x = layer(x, src_mask)
        return self.enc_norm(x), src_mask

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """``tgt_in (B, T)``, ``memory (B, S, D)``, ``src_mask (B, 1, 1, S)`` -> ``logits (B, T, V)``."""
        if not isinstance(tgt_in, torch.Tensor) or tgt_in.dim() != 2 or tgt_in.is_floating_point():
            raise ValueError(f"tgt_in must be a (B, T) integer tensor, got {getattr(tgt_in, 'shape', tgt_in)!r}")
        y = self.dropout(self.tgt_positions(self.tgt_embed(tgt_in)))  # (B, T, D)
        self_mask = causal_mask(tgt_in.shape[1], device=tgt_in.device)  # (T, T)
        for layer in self.decoder:
            y = layer(y, memory, self_mask, src_mask)
        return self.out(self.dec_norm(y))  # (B, T, V)

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        memory, src_mask = self.encode(src, src_lengths)
        return self.decode(tgt_in, memory, src_mask)  # (B, T, V)
