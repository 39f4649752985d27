"""Unit 04: recurrent neural networks and backpropagation through time (BPTT).

- :func:`rnn_forward`: the Elman cell ``h_t = tanh(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)`` as an
  explicit loop over time, equal to ``nn.RNN(batch_first=True)`` with the same weights.
- :func:`linear_rnn_forward`, :func:`linear_rnn_loss`, :func:`bptt_grads`: the *linear* RNN
  ``h_t = W_hx x_t + W_hh h_{t-1}``, ``o_t = W_qh h_t`` with the squared-error loss
  ``L = 1/(B T) sum_{b,t} 1/2 ||o_t - y_t||^2`` and its gradients computed by hand (BPTT).
- :func:`spectral_radius`: ``max_i |lambda_i(W)|``, which decides whether ``(W^T)^k`` shrinks or grows.
- :func:`clip_grad_norm`: global-norm gradient clipping ``g <- min(1, c / ||g||) g``.
- :func:`stream_batches`: cut one long token stream into batches for truncated BPTT, so that row
  ``b`` of batch ``k + 1`` continues row ``b`` of batch ``k`` (the hidden state can be carried).
- :class:`CharRNNLM`: embedding -> ``nn.RNN`` -> linear, a character-level language model with
  :meth:`CharRNNLM.sample`; :func:`stream_nll` scores it on a stream, carrying the state.

Shapes are batch-first: ``B`` batch, ``T`` time, ``D`` input width, ``H`` hidden width,
``Q`` output width, ``V`` vocabulary.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F


def _need_tensor(t: object, name: str, dim: int | None = None) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if dim is not None and t.dim() != dim:
        raise ValueError(f"{name} must be {dim}-D, got shape {tuple(t.shape)}")
    return t


def _need_shape(t: object, shape: tuple[int, ...], name: str) -> torch.Tensor:
    t = _need_tensor(t, name)
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(t.shape)}")
    return t


def _check_recurrence(x: object, W_in: object, W_hh: object, in_name: str) -> tuple[int, int, int]:
    """Check ``x (B, T, D)``, the input weights ``W_in (H, D)`` and ``W_hh (H, H)``; return ``(B, T, H)``."""
    _need_tensor(x, "x", dim=3)
    batch_size, seq_len, d_in = x.shape
    _need_tensor(W_in, in_name, dim=2)
    hidden = W_in.shape[0]
    _need_shape(W_in, (hidden, d_in), in_name)
    _need_shape(W_hh, (hidden, hidden), "W_hh")
    return batch_size, seq_len, hidden


def _initial_state(x: torch.Tensor, h0: object, hidden: int) -> torch.Tensor:
    """``h0 (B, H)`` checked, or zeros ``(B, H)`` when it is None."""
    return x.new_zeros(x.shape[0], hidden) if h0 is None else _need_shape(h0, (x.shape[0], hidden), "h0")


# ---------------------------------------------------------------------- the Elman RNN as a loop


def rnn_forward(
    x: torch.Tensor,
    h0: torch.Tensor | None,
    W_ih: torch.Tensor,
    W_hh: torch.Tensor,
    b_ih: torch.Tensor | None = None,
    b_hh: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run a one-layer tanh RNN over ``x`` with an explicit loop over time.

    Args:
        x: float tensor ``(B, T, D)``.
        h0: initial state ``(B, H)``, or None for zeros.
        W_ih: ``(H, D)``; W_hh: ``(H, H)``; b_ih, b_hh: ``(H,)`` or None (no bias), the same
            layout as ``nn.RNN``'s ``weight_ih_l0``, ``weight_hh_l0``, ``bias_ih_l0``, ``bias_hh_l0``.

    Returns ``(outputs, h_T)``: ``outputs`` ``(B, T, H)`` holds ``h_1 .. h_T``; ``h_T`` ``(B, H)``
    is the last state (``nn.RNN`` returns it as ``(num_layers, B, H)``).
    """
    _, seq_len, hidden = _check_recurrence(x, W_ih, W_hh, "W_ih")
    for bias, name in ((b_ih, "b_ih"), (b_hh, "b_hh")):
        if bias is not None:
            _need_shape(bias, (hidden,), name)
    h = _initial_state(x, h0, hidden)  # (B, H)
    bias = x.new_zeros(hidden)
    if b_ih is not None:
        bias = bias + b_ih
    if b_hh is not None:
        bias = bias + b_hh
    x_proj = x @ W_ih.T + bias  # (B, T, H): the input part of every step at once
    outputs = []
    for t in range(seq_len):
        h = torch.tanh(x_proj[:, t] + h @ W_hh.T)  # (B, H)
        outputs.append(h)
    if not outputs:
        raise ValueError("x must have at least one time step (T >= 1)")
    return torch.stack(outputs, dim=1), h  # (B, T, H), (B, H)


# ---------------------------------------------------------------------- the linear RNN and BPTT


def linear_rnn_forward(
    x: torch.Tensor,
    W_hx: torch.Tensor,
    W_hh: torch.Tensor,
    W_qh: torch.Tensor,
    h0: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The linear RNN ``h_t = W_hx x_t + W_hh h_{t-1}``, ``o_t = W_qh h_t`` (no bias, no tanh).

    Args: x ``(B, T, D)``, W_hx ``(H, D)``, W_hh ``(H, H)``, W_qh ``(Q, H)``, h0 ``(B, H)`` or
    None for zeros. Returns ``(h, o)``: the states ``h_1..h_T`` ``(B, T, H)`` and outputs ``(B, T, Q)``.
    """
    _, seq_len, hidden = _check_recurrence(x, W_hx, W_hh, "W_hx")
    _need_tensor(W_qh, "W_qh", dim=2)
    if W_qh.shape[1] != hidden:
        raise ValueError(f"W_qh must have shape (Q, {hidden}), got {tuple(W_qh.shape)}")
    if seq_len < 1:
        raise ValueError("x must have at least one time step (T >= 1)")
    h = _initial_state(x, h0, hidden)  # (B, H)
    states = []
    for t in range(seq_len):
        h = x[:, t] @ W_hx.T + h @ W_hh.T  # (B, H)
        states.append(h)
    hs = torch.stack(states, dim=1)  # (B, T, H)
    return hs, hs @ W_qh.T  # (B, T, H), (B, T, Q)


def linear_rnn_loss(o: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Squared error averaged over batch and time: ``L = 1/(B T) sum_{b,t} 1/2 ||o_bt - y_bt||^2``.

    o, y: ``(B, T, Q)``. Returns a scalar tensor. With ``B = 1`` this is the lecture's
    ``L = (1/T) sum_t l(o_t, y_t)`` with ``l(o, y) = 1/2 ||o - y||^2``.
    """
    _need_tensor(o, "o", dim=3)
    _need_shape(y, tuple(o.shape), "y")
    return 0.5 * (o - y).pow(2).sum(-1).mean()


class BPTTGrads(NamedTuple):
    """Gradients of the linear-RNN loss: dL/dW_qh ``(Q, H)``, dL/dW_hx ``(H, D)``,
    dL/dW_hh ``(H, H)`` and the total derivatives dL/dh_t for every step ``(B, T, H)``."""

    W_qh: torch.Tensor
    W_hx: torch.Tensor
    W_hh: torch.Tensor
    h: torch.Tensor


def bptt_grads(
    x: torch.Tensor,
    y: torch.Tensor,
    W_hx: torch.Tensor,
    W_hh: torch.Tensor,
    W_qh: torch.Tensor,
    h0: torch.Tensor | None = None,
) -> BPTTGrads:
    """Backpropagation through time by hand for :func:`linear_rnn_forward` + :func:`linear_rnn_loss`.

    x ``(B, T, D)``, y ``(B, T, Q)``, weights as in :func:`linear_rnn_forward`. No autograd:

    - ``dL/do_t = (o_t - y_t) / (B T)``
    - ``dL/dh_T = W_qh^T dL/do_T`` and, going back, ``dL/dh_t = W_hh^T dL/dh_{t+1} + W_qh^T dL/do_t``
    - ``dL/dW_qh = sum_t dL/do_t h_t^T``, ``dL/dW_hx = sum_t dL/dh_t x_t^T``,
      ``dL/dW_hh = sum_t dL/dh_t h_{t-1}^T`` (sums also over the batch; ``h_0 = h0`` or zeros).

    In the batch-first row layout a column vector ``W^T v`` is the row ``v @ W``.
    Returns a :class:`BPTTGrads`.
    """
    with torch.no_grad():
        hs, o = linear_rnn_forward(x, W_hx, W_hh, W_qh, h0)  # (B, T, H), (B, T, Q)
        _need_shape(y, tuple(o.shape), "y")
        batch_size, seq_len, hidden = hs.shape
        d_o = (o - y) / (batch_size * seq_len)  # (B, T, Q)
        d_h = torch.zeros_like(hs)  # (B, T, H)
        carry = hs.new_zeros(batch_size, hidden)  # dL/dh_{t+1} (zero after the last step)
        for t in reversed(range(seq_len)):
            carry = carry @ W_hh + d_o[:, t] @ W_qh  # (B, H): W_hh^T dh_{t+1} + W_qh^T do_t
            d_h[:, t] = carry
        first = hs.new_zeros(batch_size, 1, hidden) if h0 is None else h0[:, None]  # (B, 1, H)
        h_prev = torch.cat([first, hs[:, :-1]], dim=1)  # (B, T, H): h_0 .. h_{T-1}
        g_qh = torch.einsum("btq,bth->qh", d_o, hs)  # (Q, H)
        g_hx = torch.einsum("bth,btd->hd", d_h, x)  # (H, D)
        g_hh = torch.einsum("bth,btk->hk", d_h, h_prev)  # (H, H)
    return BPTTGrads(g_qh, g_hx, g_hh, d_h)


def spectral_radius(W: torch.Tensor) -> float:
    """``max_i |lambda_i|`` over the (complex) eigenvalues of a square matrix ``W`` ``(H, H)``.

    Returns a Python float. It is not the largest singular value (``||W||_2``), which is larger
    for non-normal matrices; ``||W^k||^(1/k) -> rho(W)`` as ``k -> inf`` (Gelfand's formula).
    """
    _need_tensor(W, "W", dim=2)
    if W.shape[0] != W.shape[1]:
        raise ValueError(f"W must be square, got shape {tuple(W.shape)}")
    if not W.is_floating_point():
        raise ValueError(f"W must be a float tensor, got {W.dtype}")
    eig = torch.linalg.eigvals(W.detach().to("cpu", torch.float64))  # (H,) complex
    return float(eig.abs().max())


# ---------------------------------------------------------------------- gradient clipping


def clip_grad_norm(params: Iterable[torch.Tensor] | torch.Tensor, max_norm: float) -> torch.Tensor:
    """Clip the gradients of ``params`` by their *global* L2 norm, in place.

    ``g <- min(1, max_norm / (||g|| + 1e-6)) g`` where ``||g||`` is the norm of all gradients
    concatenated (parameters whose ``.grad`` is None are skipped). Same result as
    ``torch.nn.utils.clip_grad_norm_``. Returns the total norm *before* clipping (0-d tensor).
    """
    if isinstance(params, torch.Tensor):
        params = [params]
    grads = [p.grad for p in params if p.grad is not None]
    if not isinstance(max_norm, (int, float)) or isinstance(max_norm, bool) or not max_norm > 0:
        raise ValueError(f"max_norm must be a positive number, got {max_norm!r}")
    if not grads:
        return torch.tensor(0.0)
    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.detach(), 2) for g in grads]), 2)
    scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        g.detach().mul_(scale.to(g.device, g.dtype))
    return total


# ---------------------------------------------------------------------- truncated-BPTT batches


def stream_batches(ids: torch.Tensor, batch_size: int, seq_len: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Cut a token stream into ``(x, y)`` batches for truncated BPTT ("sequential partitioning").

    The stream ``ids`` ``(N,)`` (integer tensor) is split into ``batch_size`` contiguous rows of
    ``n = (N - 1) // batch_size`` tokens: row ``b`` reads ``ids[b n : (b + 1) n]`` and its targets
    are the next tokens ``ids[b n + 1 : (b + 1) n + 1]``. Batch ``k`` holds columns
    ``[k T, (k + 1) T)`` of every row, for ``k < n // T`` (a shorter remainder is dropped), so
    row ``b`` of batch ``k + 1`` continues exactly where row ``b`` of batch ``k`` stopped:
    ``x_{k+1}[b, 0] == y_k[b, -1]``. Returns a list of ``(x, y)`` pairs, each ``(B, T)`` int64.
    """
    _need_tensor(ids, "ids", dim=1)
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise ValueError(f"ids must be an integer tensor, got {ids.dtype}")
    for value, name in ((batch_size, "batch_size"), (seq_len, "seq_len")):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    n = (len(ids) - 1) // batch_size
    num_batches = n // seq_len
    if num_batches == 0:
        raise ValueError(
            f"a stream of {len(ids)} tokens is too short for batch_size={batch_size} and seq_len={seq_len}: "
            f"need at least {batch_size * seq_len + 1}"
        )
    ids = ids.long()
    inputs = ids[: batch_size * n].view(batch_size, n)  # (B, n)
    targets = ids[1 : batch_size * n + 1].view(batch_size, n)  # (B, n)
    return [
        (inputs[:, k * seq_len : (k + 1) * seq_len], targets[:, k * seq_len : (k + 1) * seq_len])  # (B, T) each
        for k in range(num_batches)
    ]


# ---------------------------------------------------------------------- a character-level RNN LM


@dataclass
class CharRNNConfig:
    vocab_size: int
    d_model: int = 32  # embedding width D
    hidden_size: int = 128  # state width H
    num_layers: int = 1


class CharRNNLM(nn.Module):
    """Embedding -> ``nn.RNN`` (tanh, batch-first) -> linear: next-token logits at every step."""

    def __init__(self, config: CharRNNConfig) -> None:
        super().__init__()
        if config.vocab_size < 1 or config.d_model < 1 or config.hidden_size < 1 or config.num_layers < 1:
            raise ValueError(f"all sizes in {config} must be positive")
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.rnn = nn.RNN(config.d_model, config.hidden_size, num_layers=config.num_layers, batch_first=True)
        self.head = nn.Linear(config.hidden_size, config.vocab_size)

    def forward(self, x: torch.Tensor, h: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """x: int64 ``(B, T)``; h: ``(num_layers, B, H)`` or None. Returns logits ``(B, T, V)`` and
        the new state ``(num_layers, B, H)`` (detach it before carrying it to the next batch)."""
        _need_tensor(x, "x", dim=2)
        if x.dtype != torch.long:
            raise ValueError(f"x must hold int64 token ids, got {x.dtype}")
        out, h = self.rnn(self.embed(x), h)  # (B, T, H), (L, B, H)
        return self.head(out), h  # (B, T, V)

    @torch.no_grad()
    def sample(
        self,
        prompt: Sequence[int] | torch.Tensor,
        num_tokens: int,
        temperature: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> list[int]:
        """Continue ``prompt`` (non-empty token ids) by ``num_tokens`` ids drawn from
        ``softmax(logits / temperature)``; returns the new ids only (a list of int)."""
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        prompt = torch.as_tensor(prompt, dtype=torch.long).flatten()
        if prompt.numel() == 0:
            raise ValueError("prompt must contain at least one token")
        was_training = self.training
        self.eval()
        device = next(self.parameters()).device
        logits, h = self(prompt[None].to(device))  # (1, T0, V)
        out = []
        for _ in range(num_tokens):
            probs = F.softmax(logits[0, -1].float().cpu() / temperature, dim=-1)  # (V,)
            nxt = int(torch.multinomial(probs, 1, generator=generator))
            out.append(nxt)
            logits, h = self(torch.tensor([[nxt]], device=device), h)  # (1, 1, V)
        self.train(was_training)
        return out


@torch.no_grad()
def stream_nll(model: CharRNNLM, batches: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """Mean next-token NLL (nats/token) of ``model`` over ``stream_batches`` output, carrying the
    hidden state from batch to batch as in training. ``math.exp`` of it is the perplexity."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    h, total, count = None, 0.0, 0
    for x, y in batches:
        logits, h = model(x.to(device), h)  # (B, T, V)
        total += F.cross_entropy(logits.flatten(0, 1), y.to(device).flatten(), reduction="sum").item()
        count += y.numel()
    model.train(was_training)
    if count == 0:
        raise ValueError("no batches to score")
    return total / count


__all__ = [
    "BPTTGrads",
    "CharRNNConfig",
    "CharRNNLM",
    "bptt_grads",
    "clip_grad_norm",
    "linear_rnn_forward",
    "linear_rnn_loss",
    "rnn_forward",
    "spectral_radius",
    "stream_batches",
    "stream_nll",
]
