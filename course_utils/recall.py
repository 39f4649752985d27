"""Unit 10: associative recall (MQAR), the test of what a fixed-size state can hold.

Multi-query associative recall (Arora et al. 2023, "Zoology: Measuring and Improving Recall in Efficient
Language Models"): a sequence lists key-value pairs ``k1 v1 k2 v2 ...`` and then asks for some of the keys
again; at each query the model must output the value that was paired with that key. Softmax attention
keeps every pair in its cache; a model with a fixed state ``(d_k, d_v)`` per head must squeeze all pairs
into it, and lecture 10 section 4 showed that such a matrix holds about ``d_k`` of them.

- :func:`mqar_batch` draws a batch: ``inputs (B, T)`` and ``targets (B, T)`` (``-100`` where nothing is asked);
- :class:`RecallModel`: embedding plus a token shift (the previous token's own embedding: a causal
  convolution of width 2 over the one-hot tokens, the same front end for every mixer, the role Zoology's
  and Based's short convolutions play) -> one or more blocks of (token mixer, MLP) -> head, the mixer one of
  :data:`MIXERS`, each built from the course's own functions (:mod:`course_utils.linear_attention`,
  :mod:`course_utils.rwkv`);
- :func:`train_recall` and :func:`recall_accuracy` train and score it.

With ``num_heads * d_k == d_model`` (the default) every mixer has four ``D x D`` projections (query, key,
value, output; RWKV: key, value, receptance, output), so the models differ in parameters only by the few
gate weights: a decay gate (``D H + H``), a write-strength gate (``D H + H``) or RWKV's ``5 D`` decay,
bonus and mixing coefficients.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import linear_attention as la
from .primitives import trainable_parameters
from .progress import progress
from .rwkv import TimeMix, token_shift, wkv_by_matmul

MIXERS = ("softmax", "linear", "gated", "deltanet", "rwkv")
IGNORE = -100  # the target where nothing is asked (F.cross_entropy's ignore_index)
GATED_DECAY_BIAS = 6.0  # the gated mixer's decay starts at σ(6) ≈ 0.998: 48 steps keep 0.88 of a pair


def _positive_int(value: object, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


# --------------------------------------------------------------------------- the task


def mqar_batch(
    batch_size: int,
    n_pairs: int,
    n_queries: int,
    vocab_size: int,
    generator: torch.Generator,
    seq_len: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of multi-query associative recall: ``(inputs (B, T), targets (B, T))``, both ``long``.

    Token 0 is a filler; keys are drawn from ``1 .. V/2 - 1`` (``n_pairs`` distinct keys per sequence),
    values from ``V/2 .. V - 1`` (with repeats). The sequence is ``k1 v1 k2 v2 ... kn vn`` followed by
    ``n_queries`` distinct keys of that sequence in random order. With ``seq_len=None``, ``T = 2 n + n_queries``
    and the queries follow the pairs directly; with ``seq_len``, the queries sit at random positions (in
    order) among the ``seq_len - 2 n`` positions after the pairs, the rest filler, as in Zoology.
    ``targets`` holds the value paired with each query at the query's position, ``-100`` everywhere else.
    """
    batch_size = _positive_int(batch_size, "batch_size")
    n_pairs = _positive_int(n_pairs, "n_pairs")
    n_queries = _positive_int(n_queries, "n_queries")
    vocab_size = _positive_int(vocab_size, "vocab_size")
    if vocab_size % 2 or n_pairs > vocab_size // 2 - 1:
        raise ValueError(
            f"vocab_size must be even with n_pairs <= vocab_size / 2 - 1 distinct keys, got vocab_size={vocab_size}, "
            f"n_pairs={n_pairs}"
        )
    if n_queries > n_pairs:
        raise ValueError(f"n_queries must be at most n_pairs (distinct keys), got {n_queries} > {n_pairs}")
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    context = 2 * n_pairs
    length = context + n_queries if seq_len is None else seq_len
    if not isinstance(length, int) or length < context + n_queries:
        raise ValueError(f"seq_len must be an int >= 2 n_pairs + n_queries = {context + n_queries}, got {seq_len!r}")
    half = vocab_size // 2
    keys = torch.rand(batch_size, half - 1, generator=generator).argsort(dim=1)[:, :n_pairs] + 1  # (B, n): distinct
    values = torch.randint(half, vocab_size, (batch_size, n_pairs), generator=generator)  # (B, n)
    asked = torch.rand(batch_size, n_pairs, generator=generator).argsort(dim=1)[:, :n_queries]  # (B, m): pair index
    inputs = torch.zeros(batch_size, length, dtype=torch.long)  # (B, T), filler everywhere
    targets = torch.full((batch_size, length), IGNORE, dtype=torch.long)  # (B, T)
    inputs[:, 0:context:2], inputs[:, 1:context:2] = keys, values
    if seq_len is None:
        where = torch.arange(context, length).expand(batch_size, n_queries)  # (B, m)
    else:
        slots = torch.rand(batch_size, length - context, generator=generator).argsort(dim=1)[:, :n_queries]
        where = slots.sort(dim=1).values + context  # (B, m): positions after the pairs, in order
    inputs.scatter_(1, where, keys.gather(1, asked))
    targets.scatter_(1, where, values.gather(1, asked))
    return inputs, targets


# --------------------------------------------------------------------------- the model


class _TimeMixByMatmul(TimeMix):
    """:class:`course_utils.rwkv.TimeMix` in parallel only, with :func:`course_utils.rwkv.wkv_by_matmul`:
    ``x (B, T, D)`` -> ``(B, T, D)``. Same parameters, same outputs as ``TimeMix(x)[0]``, less memory."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        prev = token_shift(x)  # (B, T, D)
        xk = x * self.mix_k + prev * (1 - self.mix_k)
        xv = x * self.mix_v + prev * (1 - self.mix_v)
        xr = x * self.mix_r + prev * (1 - self.mix_r)
        k, v, r = self.key(xk), self.value(xv), torch.sigmoid(self.receptance(xr))  # (B, T, D) each
        return self.output(r * wkv_by_matmul(self.time_decay.exp(), self.time_first, k, v))  # (B, T, D)


class RecallMixer(nn.Module):
    """One token-mixing layer, ``x (B, T, D)`` -> ``(B, T, D)``, of kind ``mixer`` (one of :data:`MIXERS`).

    ``num_heads`` heads with ``d_k`` query/key features and ``d_v = D / H`` value features each:

    - ``softmax``: causal softmax attention (SDPA), scores scaled by ``1/√d_k``;
    - ``linear``: :func:`~course_utils.linear_attention.linear_attention_parallel`, ``φ = elu + 1``, normalised;
    - ``gated``: :func:`~course_utils.linear_attention.gated_parallel` with a scalar decay per head and step,
      ``a_t = σ(w_hᵀ x_t + b_h)`` (Mamba-2 style), keys scaled by ``1/√d_k``; ``b_h`` starts at
      :data:`GATED_DECAY_BIAS`, so the model starts as linear attention that barely forgets and learns to forget;
    - ``deltanet``: :func:`~course_utils.linear_attention.deltanet_parallel` with queries and keys
      ``normalize(silu(·))`` (unit length, as Yang et al. 2024) and ``β_t = σ(w_hᵀ x_t + b_h)``, near 1/2 at first;
    - ``rwkv``: :class:`~course_utils.rwkv.TimeMix` (token shift, per-channel decay WKV, receptance gate).
    """

    def __init__(self, mixer: str, d_model: int, num_heads: int, d_k: int | None = None):
        super().__init__()
        if mixer not in MIXERS:
            raise ValueError(f"mixer must be one of {MIXERS}, got {mixer!r}")
        d_model, num_heads = _positive_int(d_model, "d_model"), _positive_int(num_heads, "num_heads")
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
        self.mixer, self.num_heads = mixer, num_heads
        self.d_k = d_model // num_heads if d_k is None else _positive_int(d_k, "d_k")
        self.d_v = d_model // num_heads
        if mixer == "rwkv":
            self.time_mix = _TimeMixByMatmul(d_model)
            return
        self.query = nn.Linear(d_model, num_heads * self.d_k, bias=False)
        self.key = nn.Linear(d_model, num_heads * self.d_k, bias=False)
        self.value = nn.Linear(d_model, d_model, bias=False)
        self.output = nn.Linear(d_model, d_model, bias=False)
        if mixer in ("gated", "deltanet"):
            self.gate = nn.Linear(d_model, num_heads)  # decay a_t (gated) or write strength β_t (deltanet)
            if mixer == "gated":
                nn.init.constant_(self.gate.bias, GATED_DECAY_BIAS)  # start as linear attention: a_t ≈ 0.998

    def state_numbers(self) -> int:
        """Numbers the layer carries from token to token when it generates (per sequence): ``H d_k d_v``
        for the matrix-state mixers (plus ``H d_k`` for linear attention's normaliser), ``4 D`` for RWKV
        (the previous input and WKV's ``a, b, p``); softmax attention's cache grows with the context: 0 here."""
        if self.mixer == "rwkv":
            return 4 * self.time_mix.output.in_features
        if self.mixer == "softmax":
            return 0
        matrix = self.num_heads * self.d_k * self.d_v
        return matrix + (self.num_heads * self.d_k if self.mixer == "linear" else 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mixer == "rwkv":
            return self.time_mix(x)  # (B, T, D)
        batch_size, seq_len, _ = x.shape
        heads = (batch_size, seq_len, self.num_heads, -1)
        q = self.query(x).view(heads).transpose(1, 2)  # (B, H, T, d_k)
        k = self.key(x).view(heads).transpose(1, 2)  # (B, H, T, d_k)
        v = self.value(x).view(heads).transpose(1, 2)  # (B, H, T, d_v)
        if self.mixer == "softmax":
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, d_v)
        elif self.mixer == "linear":
            out = la.linear_attention_parallel(q, k, v)  # (B, H, T, d_v)
        elif self.mixer == "gated":
            log_decay = F.logsigmoid(self.gate(x)).transpose(1, 2)  # (B, H, T)
            out = la.gated_parallel(q, k / math.sqrt(self.d_k), v, log_decay)  # (B, H, T, d_v)
        else:
            beta = torch.sigmoid(self.gate(x)).transpose(1, 2)  # (B, H, T)
            q, k = F.normalize(F.silu(q), dim=-1), F.normalize(F.silu(k), dim=-1)  # (B, H, T, d_k), unit length
            out = la.deltanet_parallel(q, k, v, beta)  # (B, H, T, d_v)
        return self.output(out.transpose(1, 2).flatten(2))  # (B, T, D)


class RecallModel(nn.Module):
    """A small model for associative recall: ``inputs (B, T)`` long -> logits ``(B, T, V)``.

    The token's embedding plus a second embedding of the token before it (so each position also sees
    its predecessor: at a value, the key it belongs to; a width-2 causal convolution of one-hot tokens), then
    ``num_layers`` Pre-LN blocks ``x + mixer(LN x)``, ``x + MLP(LN x)`` (hidden ``2 D``), a final
    LayerNorm and a linear head. Everything but the mixer is the same for every ``mixer``.

    ``matched_init`` (default): the previous-token embedding starts as a copy of the token embedding and each
    mixer's key projection as a copy of its query projection, so that from the first step a query token
    tends to score the position just after the same token (where its value sits) above the others (RWKV has
    no query: only the embeddings are copied). Without it, the gated and delta-rule mixers sit on a plateau for hundreds
    of steps before they find the lookup, and a short run measures how fast they train, not what their
    state holds.
    """

    def __init__(
        self,
        mixer: str,
        vocab_size: int,
        d_model: int = 32,
        num_heads: int = 2,
        d_k: int | None = None,
        num_layers: int = 1,
        matched_init: bool = True,
    ):
        super().__init__()
        vocab_size, d_model = _positive_int(vocab_size, "vocab_size"), _positive_int(d_model, "d_model")
        num_layers = _positive_int(num_layers, "num_layers")
        self.mixer_name, self.vocab_size = mixer, vocab_size
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.previous = nn.Embedding(vocab_size, d_model)  # token shift: what the token before adds
        self.mixers = nn.ModuleList(RecallMixer(mixer, d_model, num_heads, d_k) for _ in range(num_layers))
        self.mlps = nn.ModuleList(
            nn.Sequential(nn.Linear(d_model, 2 * d_model), nn.GELU(), nn.Linear(2 * d_model, d_model))
            for _ in range(num_layers)
        )
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(2 * num_layers + 1))
        self.head = nn.Linear(d_model, vocab_size)
        if matched_init:
            with torch.no_grad():
                self.previous.weight.copy_(self.embedding.weight)
                for mixer_layer in self.mixers:
                    if mixer_layer.mixer != "rwkv":
                        mixer_layer.key.weight.copy_(mixer_layer.query.weight)

    def state_numbers(self) -> int:
        """Numbers all layers carry from token to token (see :meth:`RecallMixer.state_numbers`)."""
        return sum(m.state_numbers() for m in self.mixers)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        if not isinstance(inputs, torch.Tensor) or inputs.dim() != 2 or inputs.dtype != torch.long:
            raise ValueError(f"inputs must be a long (B, T) tensor, got {getattr(inputs, 'shape', inputs)!r}")
        seq_len = inputs.shape[1]
        shifted = F.pad(inputs, (1, 0))[:, :seq_len]  # (B, T): the token before, filler 0 at the start
        x = self.embedding(inputs) + self.previous(shifted)  # (B, T, D)
        for i, (mixer, mlp) in enumerate(zip(self.mixers, self.mlps)):
            x = x + mixer(self.norms[2 * i](x))  # (B, T, D)
            x = x + mlp(self.norms[2 * i + 1](x))  # (B, T, D)
        return self.head(self.norms[-1](x))  # (B, T, V)


parameter_count = trainable_parameters  # the name lecture 10b calls: trainable parameters of a model


# --------------------------------------------------------------------------- training and scoring


def recall_accuracy(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> float:
    """The fraction of queries in ``batch = (inputs (B, T), targets (B, T))`` whose argmax logit is the
    target value (positions with target ``-100`` are not counted). Runs in eval mode without gradients."""
    inputs, targets = batch
    if not isinstance(targets, torch.Tensor) or targets.shape != getattr(inputs, "shape", None):
        raise ValueError(f"inputs and targets must be (B, T) tensors of one shape, got {getattr(targets, 'shape', '')}")
    asked = targets != IGNORE  # (B, T)
    if not asked.any():
        raise ValueError("the batch asks nothing: every target is -100")
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    with torch.no_grad():
        predicted = model(inputs.to(device)).argmax(dim=-1).cpu()  # (B, T)
    model.train(was_training)
    return (predicted[asked] == targets[asked]).double().mean().item()


def train_recall(
    model: RecallModel,
    n_pairs: int | Sequence[int],
    steps: int,
    lr: float,
    generator: torch.Generator,
    batch_size: int = 32,
    n_queries: int | None = None,
    weight_decay: float = 0.0,
    desc: str = "",
    show_progress: bool = True,
) -> list[float]:
    """Train ``model`` on fresh MQAR batches for ``steps`` AdamW steps; returns the loss of every step.

    ``n_pairs``: an int, or a sequence that the steps cycle through (a mixture of lengths, as Zoology
    trains); each step asks ``n_queries`` keys (``None``: all ``n`` pairs). The learning rate warms up
    linearly over the first 10% of the steps and decays linearly to 0. Batches are drawn on the CPU from
    ``generator`` and moved to the model's device.
    """
    steps = _positive_int(steps, "steps")
    sizes = [n_pairs] if isinstance(n_pairs, int) else list(n_pairs)
    if not sizes or any(not isinstance(n, int) or n < 1 for n in sizes):
        raise ValueError(f"n_pairs must be a positive int or a non-empty sequence of them, got {n_pairs!r}")
    if not isinstance(lr, (int, float)) or lr <= 0:
        raise ValueError(f"lr must be a positive number, got {lr!r}")
    device = next(model.parameters()).device
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=weight_decay, foreach=True)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / (steps - warmup + 1)))
    )
    model.train()
    losses = []
    bar = progress(range(steps), desc=desc or f"{model.mixer_name}", unit="step", disable=not show_progress)
    for step in bar:
        n = sizes[step % len(sizes)]
        inputs, targets = mqar_batch(
            batch_size, n, n if n_queries is None else min(n_queries, n), model.vocab_size, generator
        )
        logits = model(inputs.to(device))  # (B, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.to(device).flatten(), ignore_index=IGNORE)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        schedule.step()
        losses.append(loss.item())
    if show_progress:
        bar.set_postfix(loss=f"{sum(losses[-10:]) / len(losses[-10:]):.3f}")
        bar.close()
    return losses
