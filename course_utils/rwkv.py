"""Unit 10: RWKV's WKV operator and a small RWKV-style block (Peng et al. 2023, "RWKV: Reinventing RNNs").

WKV is attention with a fixed exponential decay per channel instead of query-key scores. For channel
``c``, decay rate ``w_c ≥ 0`` and a bonus ``u_c`` for the current token::

    wkv_t = (Σ_{i<t} e^{-(t-1-i) w + k_i} v_i + e^{u + k_t} v_t) / (Σ_{i<t} e^{-(t-1-i) w + k_i} + e^{u + k_t})

- :func:`wkv_naive` computes the formula as written ("GPT mode", all ``t`` at once): ``e^{k}`` overflows
  for large ``k`` (float32: ``k`` > 88);
- :func:`wkv_parallel` is the same ``(T, T)`` computation with each row's largest exponent subtracted;
- :func:`wkv_by_matmul` is GPT mode again as one ``(T, T)`` matrix per channel times the batch: fast for
  training on short windows;
- :func:`wkv_stable` is the recurrent form ("RNN mode"): numerator ``a`` and denominator ``b`` carried
  as a state, scaled by ``e^{-p}`` with ``p`` the running maximum exponent, so no ``exp`` ever sees a
  positive argument. Constant memory per token.
- :func:`wkv_chunkwise` is in between: the parallel form inside chunks of ``L`` steps, the stable state
  ``(a, b, p)`` carried between them. Linear in ``T`` where the two forms above are ``O(T² C)``.

Shapes: ``w, u (C,)``, ``k, v (B, T, C)``, outputs ``(B, T, C)``; states ``(a, b, p)`` each ``(B, C)``.
:class:`RWKVBlock` (time mix with token shift, then channel mix) runs in parallel or step by step.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from .primitives import causal_mask


def _check_wkv(w: object, u: object, k: object, v: object) -> None:
    for name, x in (("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or not x.is_floating_point():
            raise ValueError(f"{name} must be a floating (B, T, C) tensor, got {getattr(x, 'shape', x)!r}")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape (B, T, C), got {tuple(k.shape)} and {tuple(v.shape)}")
    for name, x in (("w", w), ("u", u)):
        if not isinstance(x, torch.Tensor) or x.shape != k.shape[-1:]:
            raise ValueError(f"{name} must be a (C,) = ({k.shape[-1]},) tensor, got {getattr(x, 'shape', x)!r}")


def _log_weights(w: torch.Tensor, u: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Exponents ``(B, T, T, C)``: ``-(t-1-i) w + k_i`` for ``i < t``, ``u + k_t`` for ``i = t``, ``-inf`` after."""
    seq_len = k.shape[1]
    pos = torch.arange(seq_len, device=k.device)
    lag = (pos[:, None] - 1 - pos[None, :]).to(k.dtype)  # (T, T): t - 1 - i
    logw = -lag[..., None] * w.to(k.dtype) + k[:, None, :, :]  # (B, T, T, C)
    diagonal = (u.to(k.dtype) + k)[:, :, None, :]  # (B, T, 1, C)
    eye = torch.eye(seq_len, dtype=torch.bool, device=k.device)[None, :, :, None]  # (1, T, T, 1)
    logw = torch.where(eye, diagonal, logw)
    future = ~causal_mask(seq_len, k.device)[None, :, :, None]  # (1, T, T, 1)
    return logw.masked_fill(future, float("-inf"))  # (B, T, T, C)


def wkv_naive(w: torch.Tensor, u: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """WKV by the formula, every ``e^{...}`` taken as it stands: ``(B, T, C)``. Holds ``(B, T, T, C)``.
    Returns NaN or inf once an exponent passes the dtype's range (``k`` > 88 in float32)."""
    _check_wkv(w, u, k, v)
    weights = _log_weights(w, u, k).exp()  # (B, T, T, C)
    return (weights * v[:, None]).sum(dim=2) / weights.sum(dim=2)  # (B, T, C)


def wkv_parallel(w: torch.Tensor, u: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """WKV in parallel with each row's largest exponent subtracted first (a softmax over ``i ≤ t``):
    equal to :func:`wkv_naive` where that is finite, and finite everywhere. ``(B, T, C)``."""
    _check_wkv(w, u, k, v)
    weights = _log_weights(w, u, k).softmax(dim=2)  # (B, T, T, C)
    return (weights * v[:, None]).sum(dim=2)  # (B, T, C)


def wkv_by_matmul(w: torch.Tensor, u: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """RWKV's WKV in parallel, as one ``(T, T)`` weight matrix per channel times the batch: ``(B, T, C)``.

    The same numbers as :func:`wkv_parallel` (``w, u (C,)``, ``k, v (B, T, C)``), but the
    weights ``e^{-(t-1-i) w_c}`` (``i < t``) and ``e^{u_c}`` (``i = t``) do not depend on the batch, so they are
    a ``(C, T, T)`` tensor multiplied into ``e^{k} v`` and ``e^{k}`` (``(C, T, B)``), never the ``(B, T, T, C)``
    tensor of ``wkv_parallel``: the fast GPT mode for training on short windows. ``k`` is shifted by its maximum
    over time first, which cancels in the ratio; unlike :func:`wkv_stable` it can still underflow to ``0 / 0`` when
    a key lies far (about 80 in float32) below the largest one or ``w (t - i)`` grows that large: short ``T`` only.
    """
    if not isinstance(k, torch.Tensor) or k.dim() != 3 or not isinstance(v, torch.Tensor) or v.shape != k.shape:
        raise ValueError(f"k and v must be (B, T, C) tensors of one shape, got {getattr(k, 'shape', k)!r}")
    seq_len, channels = k.shape[1], k.shape[2]
    if not all(isinstance(x, torch.Tensor) and x.shape == (channels,) for x in (w, u)):
        raise ValueError(f"w and u must be ({channels},) tensors")
    steps = torch.arange(seq_len, device=k.device)
    lag = (steps[:, None] - 1 - steps[None, :]).to(k.dtype)  # (T, T): t - 1 - i
    weights = torch.exp(-lag.clamp(min=0) * w.to(k.dtype)[:, None, None])  # (C, T, T)
    weights = torch.where(lag == -1, u.to(k.dtype).exp()[:, None, None], weights)  # (C, T, T): the bonus at i = t
    weights = weights.masked_fill(lag < -1, 0.0)  # (C, T, T): nothing from the future
    ek = torch.exp(k - k.amax(dim=1, keepdim=True)).permute(2, 1, 0)  # (C, T, B), every entry <= 1
    numerator = weights @ (ek * v.permute(2, 1, 0))  # (C, T, B)
    return (numerator / (weights @ ek)).permute(2, 1, 0)  # (B, T, C)


def wkv_stable(
    w: torch.Tensor,
    u: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    state: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """WKV as an RNN with a running maximum: returns ``out (B, T, C)`` and the state ``(a, b, p)``, each ``(B, C)``.

    The true numerator and denominator over past tokens are ``a e^{p}`` and ``b e^{p}``. At step ``t``:
    output ``q = max(p, u + k_t)``, ``(e^{p-q} a + e^{u+k_t-q} v_t) / (e^{p-q} b + e^{u+k_t-q})``; then
    decay and add ``k_t``: ``p' = max(p - w, k_t)``, ``a ← e^{p-w-p'} a + e^{k_t-p'} v_t``, likewise ``b``.
    Start from ``state`` (``None``: ``a = b = 0``, ``p = -inf``) to continue a sequence.
    """
    _check_wkv(w, u, k, v)
    batch_size, seq_len, channels = k.shape
    w, u = w.to(k.dtype), u.to(k.dtype)
    if state is None:
        a, b = k.new_zeros(batch_size, channels), k.new_zeros(batch_size, channels)  # (B, C) each
        p = k.new_full((batch_size, channels), float("-inf"))  # (B, C)
    else:
        a, b, p = state
    outs = []
    for t in range(seq_len):
        k_t, v_t = k[:, t], v[:, t]  # (B, C)
        q = torch.maximum(p, u + k_t)  # (B, C)
        e_past, e_now = (p - q).exp(), (u + k_t - q).exp()
        outs.append((e_past * a + e_now * v_t) / (e_past * b + e_now))  # (B, C)
        p_new = torch.maximum(p - w, k_t)  # (B, C)
        e_past, e_now = (p - w - p_new).exp(), (k_t - p_new).exp()
        a, b, p = e_past * a + e_now * v_t, e_past * b + e_now, p_new
    return torch.stack(outs, dim=1), (a, b, p)  # (B, T, C)


def wkv_final_state(
    w: torch.Tensor, k: torch.Tensor, v: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The state ``(a, b, p)`` (each ``(B, C)``) that :func:`wkv_stable` holds after ``k, v (B, T, C)``,
    computed without a loop: ``p = max_i (k_i - (T-1-i) w)``, ``a = Σ_i e^{k_i - (T-1-i) w - p} v_i``,
    ``b`` the same without ``v_i``. Lets a parallel pass over a prompt hand over to step-by-step decoding."""
    lag = torch.arange(k.shape[1] - 1, -1, -1, device=k.device, dtype=k.dtype)  # (T,): T-1-i
    expo = k - lag[:, None] * w.to(k.dtype)  # (B, T, C)
    p = expo.amax(dim=1)  # (B, C)
    weights = (expo - p[:, None]).exp()  # (B, T, C)
    return (weights * v).sum(dim=1), weights.sum(dim=1), p


def wkv_chunkwise(
    w: torch.Tensor, u: torch.Tensor, k: torch.Tensor, v: torch.Tensor, chunk_size: int = 64
) -> torch.Tensor:
    """WKV by chunks of ``L = chunk_size`` steps, linear in ``T``: ``(B, T, C)``, equal to :func:`wkv_stable`.

    "GPT mode" as :func:`wkv_parallel` computes it holds a ``(B, T, T, C)`` tensor: ``O(T² C)`` time and memory.
    Because RWKV-4's decay is fixed, the weight of token ``i`` at step ``t`` depends on ``t - i`` alone, and the
    tokens before a chunk enter every step of it through one state: with ``(a, b, p)`` as in :func:`wkv_stable`
    after step ``t_0 - 1``, the last before the chunk, their part of the numerator at ``t`` is ``e^{p - (t - t_0) w} a``
    (likewise ``b``). Inside the chunk an ``(L, L)`` block of exponents per channel, as in :func:`wkv_parallel`;
    every exponential is taken after subtracting each row's maximum over both parts, so nothing overflows. The
    state then moves over the chunk as :func:`wkv_final_state` computes it, merged with the decayed old one.
    Memory ``O(B L² C)`` per chunk plus the output, work ``O(T L C)``.
    """
    _check_wkv(w, u, k, v)
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    batch_size, seq_len, channels = k.shape
    w, u = w.to(k.dtype), u.to(k.dtype)
    a, b = k.new_zeros(batch_size, channels), k.new_zeros(batch_size, channels)  # (B, C) each
    p = k.new_full((batch_size, channels), float("-inf"))  # (B, C)
    out = torch.empty_like(v)  # (B, T, C), filled chunk by chunk
    for c0 in range(0, seq_len, chunk_size):
        kc, vc = k[:, c0 : c0 + chunk_size], v[:, c0 : c0 + chunk_size]  # (B, L, C)
        size = kc.shape[1]
        steps = torch.arange(size, device=k.device, dtype=k.dtype)  # (L,): t - t_0
        inside = _log_weights(w, u, kc)  # (B, L, L, C)
        past = p[:, None] - steps[:, None] * w  # (B, L, C): exponent of the earlier tokens' state at each step
        top = torch.maximum(inside.amax(dim=2), past)  # (B, L, C)
        weights = (inside - top[:, :, None]).exp()  # (B, L, L, C)
        e_past = (past - top).exp()  # (B, L, C)
        num = (weights * vc[:, None]).sum(dim=2) + e_past * a[:, None]  # (B, L, C)
        den = weights.sum(dim=2) + e_past * b[:, None]  # (B, L, C)
        out[:, c0 : c0 + size] = num / den
        a_c, b_c, p_c = wkv_final_state(w, kc, vc)  # (B, C) each: the chunk alone
        p_new = torch.maximum(p - size * w, p_c)  # (B, C)
        e_old, e_new = (p - size * w - p_new).exp(), (p_c - p_new).exp()
        a, b, p = e_old * a + e_new * a_c, e_old * b + e_new * b_c, p_new
    return out


# --------------------------------------------------------------------------- an RWKV-style block


def token_shift(x: torch.Tensor, last: torch.Tensor | None = None) -> torch.Tensor:
    """The previous token's features: ``x (B, T, D)`` -> ``(B, T, D)`` with row ``t`` = ``x_{t-1}``,
    row 0 = ``last (B, D)`` (zeros when ``None``: the start of a sequence)."""
    first = x.new_zeros(x.shape[0], 1, x.shape[2]) if last is None else last[:, None]  # (B, 1, D)
    return torch.cat([first, x[:, :-1]], dim=1)  # (B, T, D)


class TimeMix(nn.Module):
    """RWKV's time mixing: ``x (B, T, D)`` -> ``(B, T, D)``.

    Token shift interpolates each channel between ``x_t`` and ``x_{t-1}`` (learned ``mix_*``); then
    ``k, v`` by linear maps, a receptance gate ``r = σ(W_r x)``, and ``out = W_o (r ⊙ wkv(w, u, k, v))`` with
    ``w = exp(time_decay) > 0`` per channel and bonus ``u = time_first``.
    """

    def __init__(self, d_model: int, layer_frac: float = 0.5):
        super().__init__()
        ramp = torch.arange(d_model) / max(d_model - 1, 1)  # (D,): 0 .. 1
        self.time_decay = nn.Parameter(-5 + 8 * ramp ** (0.7 + 1.3 * layer_frac))  # log w: slow .. fast decays
        self.time_first = nn.Parameter(torch.full((d_model,), 0.5))
        self.mix_k = nn.Parameter(ramp.clone())
        self.mix_v = nn.Parameter(ramp.clone())
        self.mix_r = nn.Parameter(0.5 * ramp)
        self.key, self.value, self.receptance = (nn.Linear(d_model, d_model, bias=False) for _ in range(3))
        self.output = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor, state: tuple | None = None, mode: str = "parallel"):
        """``x (B, T, D)``, ``state`` ``(last_x (B, D), (a, b, p))`` or ``None`` -> ``(out (B, T, D), state)``.
        ``mode`` ``"parallel"`` (:func:`wkv_parallel`; only from the start, ``state=None``) or ``"recurrent"``."""
        last, wkv_state = (None, None) if state is None else state
        prev = token_shift(x, last)  # (B, T, D)
        xk = x * self.mix_k + prev * (1 - self.mix_k)  # (B, T, D)
        xv = x * self.mix_v + prev * (1 - self.mix_v)
        xr = x * self.mix_r + prev * (1 - self.mix_r)
        k, v, r = self.key(xk), self.value(xv), torch.sigmoid(self.receptance(xr))  # (B, T, D) each
        w = self.time_decay.exp()  # (D,)
        if mode == "parallel" and state is None:
            wkv = wkv_parallel(w, self.time_first, k, v)  # (B, T, D)
            wkv_state = wkv_final_state(w, k, v)  # to continue step by step
        elif mode in ("parallel", "recurrent"):
            wkv, wkv_state = wkv_stable(w, self.time_first, k, v, wkv_state)  # (B, T, D)
        else:
            raise ValueError(f"mode must be 'parallel' or 'recurrent', got {mode!r}")
        return self.output(r * wkv), (x[:, -1], wkv_state)  # (B, T, D)


class ChannelMix(nn.Module):
    """RWKV's channel mixing, a gated MLP with token shift: ``σ(W_r x_r) ⊙ W_v relu(W_k x_k)²``; ``(B, T, D)``."""

    def __init__(self, d_model: int, hidden: int | None = None):
        super().__init__()
        hidden = hidden or 4 * d_model
        ramp = torch.arange(d_model) / max(d_model - 1, 1)
        self.mix_k = nn.Parameter(ramp.clone())
        self.mix_r = nn.Parameter(ramp.clone())
        self.key = nn.Linear(d_model, hidden, bias=False)
        self.value = nn.Linear(hidden, d_model, bias=False)
        self.receptance = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor, last: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``x (B, T, D)``, ``last (B, D)`` or ``None`` -> ``(out (B, T, D), x[:, -1] (B, D))``."""
        prev = token_shift(x, last)  # (B, T, D)
        xk = x * self.mix_k + prev * (1 - self.mix_k)
        xr = x * self.mix_r + prev * (1 - self.mix_r)
        hidden = torch.relu(self.key(xk)) ** 2  # (B, T, 4D)
        return torch.sigmoid(self.receptance(xr)) * self.value(hidden), x[:, -1]  # (B, T, D)


class RWKVBlock(nn.Module):
    """``x + TimeMix(LN(x))``, then ``x + ChannelMix(LN(x))``: ``x (B, T, D)`` -> ``(B, T, D)`` and a state.

    ``forward(x, state=None, mode="parallel")`` returns ``(y, state)``; feeding tokens one at a time
    with the returned state (``mode="recurrent"``) gives the same outputs as one parallel pass.
    """

    def __init__(self, d_model: int, layer_frac: float = 0.5, hidden: int | None = None):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.time_mix, self.channel_mix = TimeMix(d_model, layer_frac), ChannelMix(d_model, hidden)

    def forward(self, x: torch.Tensor, state: tuple | None = None, mode: str = "parallel"):
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != self.ln1.normalized_shape[0]:
            raise ValueError(f"x must be (B, T, {self.ln1.normalized_shape[0]}), got {getattr(x, 'shape', x)!r}")
        tm_state, cm_last = (None, None) if state is None else state
        out, tm_state = self.time_mix(self.ln1(x), tm_state, mode)
        x = x + out  # (B, T, D)
        out, cm_last = self.channel_mix(self.ln2(x), cm_last)
        return x + out, (tm_state, cm_last)  # (B, T, D)
