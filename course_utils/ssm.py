"""Unit 10: state-space models (S4's two views, Mamba's selective scan).

A linear state-space model maps an input channel ``u(t)`` through a state ``x(t)`` of size ``N``:
``x' = A x + B u``, ``y = C x``. S4 (Gu et al. 2021) takes ``A`` diagonal plus low rank (DPLR), initialised
from HiPPO; S4D (Gu et al. 2022) and Mamba take it diagonal, as this module does. With a diagonal ``A`` and a
step ``Δ``, the zero-order hold gives ``x_t = Ā x_{t-1} + B̄ u_t``, ``y_t = C x_t`` with ``Ā = e^{ΔA}`` and
``B̄ = (e^{ΔA} - 1) / A · B``. Unrolled, ``y = K * u`` with the kernel ``K_l = Σ_n C_n Ā_n^l B̄_n``:

- :func:`discretize_zoh`, :func:`ssm_kernel`, :func:`ssm_convolution` (FFT), :func:`ssm_recurrent`
  (the same outputs, one step at a time). Shapes: ``A, B, C (D, N)`` (one SSM per channel),
  ``u (B, T, D)``, kernel ``(D, T)``.

Mamba (Gu & Dao 2023) makes ``Δ, B, C`` functions of the input, so there is no fixed kernel; the
recurrence ``h_t = a_t ⊙ h_{t-1} + b_t`` is still associative and can be computed in ``log T`` steps:

- :func:`associative_scan` (Hillis-Steele), :func:`selective_scan_sequential`,
  :func:`selective_scan_parallel`. Shapes: ``u, delta (B, T, D)``, ``A (D, N)``, ``B, C (B, T, N)``.
"""

from __future__ import annotations

import torch
from torch import Tensor


def _float(x: object, name: str, dims: int) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.dim() != dims or not x.is_floating_point():
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{name} must be a {dims}-D floating tensor, got {shape}")
    return x


# --------------------------------------------------------------------------- S4's two views


def discretize_zoh(A: torch.Tensor, B: torch.Tensor, delta: torch.Tensor | float) -> tuple[torch.Tensor, torch.Tensor]:
    """Zero-order hold for a diagonal ``A``: ``Ā = exp(Δ A)``, ``B̄ = (Ā - 1) / A · B`` (elementwise).

    ``A`` (non-zero entries, negative real part for a stable system) and ``B`` of the same shape, e.g.
    ``(D, N)``; ``delta`` a positive number or a tensor broadcasting against them (``(D, 1)``: one step per
    channel). Returns ``A_bar, B_bar`` of that shape. Exact for an input held constant over each step.
    """
    if not isinstance(A, torch.Tensor) or not isinstance(B, torch.Tensor) or A.shape != B.shape:
        raise ValueError(
            f"A and B must be tensors of one shape, got {getattr(A, 'shape', A)}, {getattr(B, 'shape', B)}"
        )
    if (A == 0).any():
        raise ValueError("A has a zero entry: (exp(delta A) - 1) / A is undefined there")
    if isinstance(delta, torch.Tensor):
        if not (delta > 0).all():
            raise ValueError("delta must be positive")
    elif not delta > 0:
        raise ValueError(f"delta must be positive, got {delta!r}")
    A_bar = torch.exp(delta * A)  # (D, N)
    return A_bar, (A_bar - 1) / A * B  # (D, N) each


def ssm_kernel(A_bar: torch.Tensor, B_bar: torch.Tensor, C: torch.Tensor, seq_len: int) -> torch.Tensor:
    """The convolution kernel ``K (D, T)``, ``K[d, l] = Σ_n C[d, n] Ā[d, n]^l B̄[d, n]``, from ``(D, N)`` parameters."""
    for name, x in (("A_bar", A_bar), ("B_bar", B_bar), ("C", C)):
        _float(x, name, 2)
    if not A_bar.shape == B_bar.shape == C.shape:
        raise ValueError(f"A_bar, B_bar, C must all be (D, N), got {A_bar.shape}, {B_bar.shape}, {C.shape}")
    if not isinstance(seq_len, int) or seq_len < 1:
        raise ValueError(f"seq_len must be a positive int, got {seq_len!r}")
    powers = A_bar[..., None] ** torch.arange(seq_len, device=A_bar.device)  # (D, N, T)
    return ((C * B_bar)[..., None] * powers).sum(dim=1)  # (D, T)


def ssm_convolution(u: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """Causal convolution ``y_t = Σ_{l≤t} K_l u_{t-l}`` per channel, by FFT: ``u (B, T, D)``, ``K (D, T)``
    -> ``(B, T, D)``.

    Both are zero-padded to ``2T`` so the circular FFT convolution does not wrap around: ``O(T log T)``.
    """
    _float(u, "u", 3)
    _float(K, "K", 2)
    seq_len = u.shape[1]
    if K.shape != (u.shape[2], seq_len):
        raise ValueError(f"K must be (D, T) = ({u.shape[2]}, {seq_len}), got {tuple(K.shape)}")
    u_f = torch.fft.rfft(u.transpose(1, 2), n=2 * seq_len)  # (B, D, T + 1) complex
    k_f = torch.fft.rfft(K, n=2 * seq_len)  # (D, T + 1) complex
    y = torch.fft.irfft(u_f * k_f, n=2 * seq_len)[..., :seq_len]  # (B, D, T)
    return y.transpose(1, 2).to(u.dtype)  # (B, T, D)


def ssm_recurrent(
    u: torch.Tensor, A_bar: torch.Tensor, B_bar: torch.Tensor, C: torch.Tensor, state: torch.Tensor | None = None
) -> torch.Tensor:
    """The same SSM as an RNN: ``x_t = Ā ⊙ x_{t-1} + B̄ u_t``, ``y_t = Σ_n C ⊙ x_t``; ``u (B, T, D)`` -> ``(B, T, D)``.
    State ``x (B, D, N)`` starts at ``state`` or zeros."""
    _float(u, "u", 3)
    if not A_bar.shape == B_bar.shape == C.shape or A_bar.dim() != 2 or A_bar.shape[0] != u.shape[2]:
        raise ValueError(f"A_bar, B_bar, C must all be (D, N) with D = {u.shape[2]}, got {tuple(A_bar.shape)}")
    x = u.new_zeros(u.shape[0], *A_bar.shape) if state is None else state  # (B, D, N)
    outs = []
    for t in range(u.shape[1]):
        x = A_bar * x + B_bar * u[:, t, :, None]  # (B, D, N)
        outs.append((C * x).sum(dim=-1))  # (B, D)
    return torch.stack(outs, dim=1)  # (B, T, D)


# --------------------------------------------------------------------------- the selective scan


def associative_scan(a: torch.Tensor, b: torch.Tensor, dim: int = 1) -> torch.Tensor:
    """All ``h_t = a_t h_{t-1} + b_t`` (``h_{-1} = 0``) along ``dim``, in ``ceil(log2 T)`` parallel steps.

    ``a, b`` of one shape; returns ``h`` of that shape. The pairs ``(a, b)`` compose associatively,
    ``(a1, b1) then (a2, b2) = (a2 a1, a2 b1 + b2)``; Hillis & Steele's scan combines each position with the
    one ``2^j`` back at step ``j``. Work ``O(T log T)`` (Blelloch's scan does ``O(T)``), depth ``O(log T)``.
    """
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.shape != b.shape:
        raise ValueError(
            f"a and b must be tensors of one shape, got {getattr(a, 'shape', a)}, {getattr(b, 'shape', b)}"
        )
    if not -a.dim() <= dim < a.dim():
        raise ValueError(f"dim={dim} is out of range for a {a.dim()}-D tensor")
    a, b = a.movedim(dim, 0), b.movedim(dim, 0)  # (T, ...)
    offset = 1
    while offset < a.shape[0]:
        # position t takes in the segment that ends at t - offset
        b = torch.cat([b[:offset], a[offset:] * b[:-offset] + b[offset:]])  # (T, ...)
        a = torch.cat([a[:offset], a[offset:] * a[:-offset]])  # (T, ...)
        offset *= 2
    return b.movedim(0, dim)


def _check_selective(u, delta, A, B, C, D) -> None:
    _float(u, "u", 3)
    batch_size, seq_len, channels = u.shape
    if not isinstance(delta, torch.Tensor) or delta.shape != u.shape:
        raise ValueError(f"delta must be (B, T, D) = {tuple(u.shape)}, got {getattr(delta, 'shape', delta)!r}")
    _float(A, "A", 2)
    if A.shape[0] != channels:
        raise ValueError(f"A must be (D, N) with D = {channels}, got {tuple(A.shape)}")
    for name, x in (("B", B), ("C", C)):
        if not isinstance(x, torch.Tensor) or x.shape != (batch_size, seq_len, A.shape[1]):
            raise ValueError(
                f"{name} must be (B, T, N) = {(batch_size, seq_len, A.shape[1])}, got {getattr(x, 'shape', x)!r}"
            )
    if D is not None and (not isinstance(D, torch.Tensor) or D.shape != (channels,)):
        raise ValueError(f"D must be (D,) = ({channels},), got {getattr(D, 'shape', D)!r}")


def _selective_terms(u, delta, A, B):
    a = torch.exp(delta[..., None] * A)  # (B, T, D, N): Ā_t = exp(Δ_t A)
    b = (delta * u)[..., None] * B[:, :, None, :]  # (B, T, D, N): B̄_t u_t ≈ Δ_t B_t u_t (Mamba's simplification)
    return a, b


def selective_scan_sequential(
    u: torch.Tensor,
    delta: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mamba's selective SSM step by step: ``h_t = exp(Δ_t A) ⊙ h_{t-1} + Δ_t B_t u_t``, ``y_t = C_t · h_t + D u_t``.

    ``u, delta (B, T, D)`` (``delta > 0``, e.g. a softplus), ``A (D, N)`` (negative), ``B, C (B, T, N)``,
    ``D (D,)`` or ``None`` -> ``y (B, T, D)``. The state ``h (B, D, N)`` is all that is carried from step to step.
    """
    _check_selective(u, delta, A, B, C, D)
    h = u.new_zeros(u.shape[0], *A.shape)  # (B, D, N)
    y = u.new_empty(u.shape)  # (B, T, D), filled step by step
    for t in range(u.shape[1]):  # the step's factors are formed inside the loop: memory O(B D N), not O(B T D N)
        a_t, b_t = _selective_terms(u[:, t : t + 1], delta[:, t : t + 1], A, B[:, t : t + 1])  # (B, 1, D, N) each
        h = a_t[:, 0] * h + b_t[:, 0]  # (B, D, N)
        y[:, t] = (h * C[:, t, None, :]).sum(dim=-1)  # (B, D)
    return y if D is None else y + D * u


def selective_scan_parallel(
    u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None = None
) -> Tensor:
    """The same outputs as :func:`selective_scan_sequential` (``(B, T, D)``) through :func:`associative_scan`
    over time: every state ``(B, T, D, N)`` at once, in ``log2 T`` steps."""
    _check_selective(u, delta, A, B, C, D)
    a, b = _selective_terms(u, delta, A, B)  # (B, T, D, N) each
    h = associative_scan(a, b, dim=1)  # (B, T, D, N)
    y = (h * C[:, :, None, :]).sum(dim=-1)  # (B, T, D)
    return y if D is None else y + D * u
