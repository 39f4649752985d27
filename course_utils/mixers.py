"""Unit 10: one small language model with four interchangeable token mixers, for an equal-steps comparison.

``MixerLM`` is a Pre-LN stack ``x + mixer(norm(x))``, ``x + mlp(norm(x))`` over token embeddings, with
the token mixer chosen by ``MixerLMConfig.mixer``:

- ``"softmax"``  causal multi-head softmax attention (``F.scaled_dot_product_attention``); its
  generation state is a key-value cache that grows by ``2 · D`` numbers per layer and token;
- ``"linear"``   linear attention with ``elu + 1`` features (Katharopoulos et al. 2020), chunkwise in
  parallel, its state ``(S, z)`` per head;
- ``"gated"``    gated linear attention with a data-dependent decay per head and step (in the manner
  of GLA, Yang et al. 2023, and Mamba-2, Dao & Gu 2024), an RMS norm per head and an output gate;
- ``"rwkv"``     RWKV blocks (time mix with WKV, then channel mix in place of the MLP; Peng et al. 2023).

The recurrent mixers carry a state whose size does not depend on how many tokens came before. Only
``"softmax"`` uses position embeddings (learned, ``seq_len`` of them) unless ``position`` says otherwise.

    config = MixerLMConfig(vocab_size=65, seq_len=128, d_model=64, num_heads=4, num_layers=2, mixer="gated")
    model = MixerLM(config)
    logits = model(idx)                                   # (B, T) -> (B, T, V)
    logits, state = model(idx, return_state=True)         # ... and the state to continue from
    logits, state = model(next_ids, state=state, return_state=True)   # (B, 1) -> (B, 1, V)
    ids = generate(model, prompt, 100)                    # greedy unless temperature > 0
    state_bytes(state)                                    # bytes held to generate the next token
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .decoding import sample_next
from .gated import count_parameters
from .linear_attention import (
    decay_recurrence,
    elu_feature_map,
    gated_chunkwise,
    linear_attention_chunkwise,
    linear_attention_recurrent,
)
from .rwkv import RWKVBlock
from .transformer import FeedForward

MIXERS = ("softmax", "linear", "gated", "rwkv")


@dataclass
class MixerLMConfig:
    vocab_size: int
    seq_len: int = 128  # training context; the softmax model cannot go past it
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2
    mixer: str = "softmax"  # one of MIXERS
    ffn_hidden: int | None = None  # default 4 D (the RWKV channel mix uses it too)
    chunk_size: int = 32  # for the chunkwise parallel forms
    position: str | None = None  # "learned" or "none"; default: learned for softmax only

    def __post_init__(self) -> None:
        if self.mixer not in MIXERS:
            raise ValueError(f"mixer must be one of {MIXERS}, got {self.mixer!r}")
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}")
        if self.position is None:
            self.position = "learned" if self.mixer == "softmax" else "none"
        if self.position not in ("learned", "none"):
            raise ValueError(f"position must be 'learned' or 'none', got {self.position!r}")
        if self.ffn_hidden is None:
            self.ffn_hidden = 4 * self.d_model


class _Heads(nn.Module):
    """Shared parts of the attention-like mixers: ``q, k, v`` projections split into heads, and the output."""

    def __init__(self, config: MixerLMConfig):
        super().__init__()
        self.num_heads, self.d_head = config.num_heads, config.d_model // config.num_heads
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model, bias=False)
        self.proj = nn.Linear(config.d_model, config.d_model, bias=False)
        self.chunk_size = config.chunk_size

    def heads(self, x: torch.Tensor):
        batch_size, seq_len, d_model = x.shape
        q, k, v = self.qkv(x).split(d_model, dim=-1)  # (B, T, D) each
        return (t.view(batch_size, seq_len, self.num_heads, self.d_head).transpose(1, 2) for t in (q, k, v))

    def merge(self, out: torch.Tensor) -> torch.Tensor:
        batch_size, _, seq_len, _ = out.shape
        return out.transpose(1, 2).reshape(batch_size, seq_len, -1)  # (B, T, D)


class SoftmaxMixer(_Heads):
    """Causal softmax attention; state: the cached ``(keys, values)``, each ``(B, H, T_past, d_head)``."""

    def forward(self, x: torch.Tensor, state=None):
        q, k, v = self.heads(x)  # (B, H, T, d_head)
        if state is None:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, d_head)
        else:
            past = state[0].shape[2]
            k, v = torch.cat([state[0], k], dim=2), torch.cat([state[1], v], dim=2)  # (B, H, T_past + T, d_head)
            mask = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=x.device).tril(past)  # (T, T_past + T)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, T, d_head)
        return self.proj(self.merge(out)), (k, v)


class LinearMixer(_Heads):
    """Normalised linear attention with ``elu + 1`` features; state ``(S (B, H, d, d), z (B, H, d))``."""

    def forward(self, x: torch.Tensor, state=None):
        q, k, v = self.heads(x)  # (B, H, T, d_head)
        if state is None and x.shape[1] > 1:
            out = linear_attention_chunkwise(q, k, v, self.chunk_size)  # (B, H, T, d_head)
            state = _linear_state(k, v)  # to continue step by step
        else:
            out, state = linear_attention_recurrent(q, k, v, state=state, return_state=True)
        return self.proj(self.merge(out)), state


def _linear_state(k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The state of linear attention after ``k (B, H, T, d)``, ``v (B, H, T, d_v)``: ``S = φ(K)ᵀ V``, ``z = Σ φ(k)``."""
    fk = elu_feature_map(k)  # (B, H, T, d)
    return fk.transpose(-2, -1) @ v, fk.sum(dim=2)  # (B, H, d, d_v), (B, H, d)


class GatedMixer(_Heads):
    """Gated linear attention: ``S_t = a_t S_{t-1} + k_t v_tᵀ`` with ``a_t = σ(w_h · x_t + b_h)^(1/16)`` per head,
    ``q`` scaled by ``1/√d_head``, an RMS norm per head, and an output gate ``silu(W_g x)``. State ``S (B, H, d, d)``.

    The bias starts the decays between 0.9 and 0.999 across heads (memories of ~10 to ~1000 steps)."""

    def __init__(self, config: MixerLMConfig):
        super().__init__(config)
        self.decay = nn.Linear(config.d_model, config.num_heads)
        self.gate = nn.Linear(config.d_model, config.d_model, bias=False)
        self.norm = nn.RMSNorm(self.d_head, eps=1e-6)
        self.temperature = 16.0
        target = 1 - torch.logspace(-1, -3, config.num_heads)  # (H,): a at initialisation
        with torch.no_grad():  # logsigmoid(b) / 16 = log a  ->  b = logit(a^16)
            self.decay.bias.copy_(torch.logit(target**self.temperature))

    def forward(self, x: torch.Tensor, state=None):
        q, k, v = self.heads(x)  # (B, H, T, d_head)
        q = q / math.sqrt(self.d_head)
        log_decay = F.logsigmoid(self.decay(x)).transpose(1, 2) / self.temperature  # (B, H, T)
        if state is None and x.shape[1] > 1:
            out, state = gated_chunkwise(q, k, v, log_decay, self.chunk_size, return_state=True)  # (B, H, T, d_head)
        else:
            out, state = decay_recurrence(q, k, v, log_decay, state=state)  # (B, H, T, d_head)
        out = self.merge(self.norm(out)) * F.silu(self.gate(x))  # (B, T, D)
        return self.proj(out), state


class _Block(nn.Module):
    """Pre-LN block ``x + mixer(norm(x))``, ``x + mlp(norm(x))``; ``forward(x, state) -> (x, state)``."""

    def __init__(self, config: MixerLMConfig):
        super().__init__()
        mixer = {"softmax": SoftmaxMixer, "linear": LinearMixer, "gated": GatedMixer}[config.mixer]
        self.norm1, self.mixer = nn.LayerNorm(config.d_model), mixer(config)
        self.norm2 = nn.LayerNorm(config.d_model)
        self.ffn = FeedForward(config.d_model, config.ffn_hidden, activation="gelu", bias=False)

    def forward(self, x: torch.Tensor, state=None):
        out, state = self.mixer(self.norm1(x), state)
        x = x + out  # (B, T, D)
        return x + self.ffn(self.norm2(x)), state


class MixerLM(nn.Module):
    """Token embedding (+ learned positions) -> ``num_layers`` blocks -> LayerNorm -> tied output projection.

    ``forward(idx (B, T), state=None, return_state=False)`` -> ``logits (B, T, V)`` (and the new state).
    With ``state`` (what an earlier call returned) the tokens continue that sequence, one or several at a time.
    """

    def __init__(self, config: MixerLMConfig):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.pos_emb = nn.Embedding(config.seq_len, config.d_model) if config.position == "learned" else None
        if config.mixer == "rwkv":
            fracs = [i / max(config.num_layers - 1, 1) for i in range(config.num_layers)]
            self.blocks = nn.ModuleList(RWKVBlock(config.d_model, f, hidden=config.ffn_hidden) for f in fracs)
        else:
            self.blocks = nn.ModuleList(_Block(config) for _ in range(config.num_layers))
        self.norm_f = nn.LayerNorm(config.d_model)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.apply(self._init_weights)
        self.head.weight = self.tok_emb.weight

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)

    def num_parameters(self) -> int:
        return count_parameters(self)

    def forward(self, idx: torch.Tensor, state: list | None = None, return_state: bool = False):
        if not isinstance(idx, torch.Tensor) or idx.dim() != 2 or idx.dtype != torch.long:
            raise ValueError(f"idx must be (B, T) long, got {getattr(idx, 'shape', idx)!r} {getattr(idx, 'dtype', '')}")
        start = 0 if state is None else state[0]
        if self.pos_emb is not None and start + idx.shape[1] > self.config.seq_len:
            raise ValueError(f"positions {start}..{start + idx.shape[1] - 1} exceed seq_len={self.config.seq_len}")
        x = self.tok_emb(idx)  # (B, T, D)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(start, start + idx.shape[1], device=idx.device))  # (B, T, D)
        layer_states = [None] * len(self.blocks) if state is None else state[1]
        new_states = []
        for block, layer_state in zip(self.blocks, layer_states):
            if self.config.mixer == "rwkv":
                x, layer_state = block(x, layer_state, mode="parallel" if layer_state is None else "recurrent")
            else:
                x, layer_state = block(x, layer_state)
            new_states.append(layer_state)
        logits = self.head(self.norm_f(x))  # (B, T, V)
        return (logits, [start + idx.shape[1], new_states]) if return_state else logits

    def loss(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy in nats; ``targets (B, T)`` are ``idx`` shifted by one."""
        logits = self(idx)  # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def state_bytes(state) -> int:
    """Bytes of every tensor in a (nested) generation state, as returned by ``MixerLM(..., return_state=True)``."""
    if isinstance(state, torch.Tensor):
        return state.numel() * state.element_size()
    if isinstance(state, (list, tuple)):
        return sum(state_bytes(s) for s in state)
    return 0


@torch.no_grad()
def generate(
    model: MixerLM, prompt: torch.Tensor, max_new_tokens: int, temperature: float = 0.0, generator=None
) -> torch.Tensor:
    """Append ``max_new_tokens`` tokens to ``prompt (B, T0)``: one parallel pass over the prompt, then one
    step per token with the carried state. Returns ``(B, T0 + max_new_tokens)``; ``temperature`` 0 is greedy."""
    if not isinstance(prompt, torch.Tensor) or prompt.dim() != 2 or prompt.shape[1] < 1:
        raise ValueError(f"prompt must be a (B, T0) long tensor with T0 >= 1, got {getattr(prompt, 'shape', prompt)!r}")
    was_training = model.training
    model.eval()
    logits, state = model(prompt, return_state=True)  # (B, T0, V)
    idx = prompt
    for step in range(max_new_tokens):
        last = logits[:, -1].float()  # (B, V)
        next_id = last.argmax(-1) if temperature == 0 else sample_next(last, temperature, generator=generator)  # (B,)
        idx = torch.cat([idx, next_id[:, None]], dim=1)  # (B, T + 1)
        if step + 1 < max_new_tokens:
            logits, state = model(next_id[:, None], state=state, return_state=True)  # (B, 1, V)
    model.train(was_training)
    return idx
