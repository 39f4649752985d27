"""Tests of course_utils.ssm: zero-order hold against the matrix exponential, the S4 convolution against
its recurrence, the selective scan sequential against associative."""

import pytest
import torch
import torch.nn.functional as F

from course_utils.ssm import (
    associative_scan,
    discretize_zoh,
    selective_scan_parallel,
    selective_scan_sequential,
    ssm_convolution,
    ssm_kernel,
    ssm_recurrent,
)


def s4_params(channels=4, state=6, dtype=torch.float64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    A = -(torch.rand(channels, state, generator=gen) + 0.1).to(dtype)
    B = torch.randn(channels, state, generator=gen).to(dtype)
    C = torch.randn(channels, state, generator=gen).to(dtype)
    return A, B, C


def test_zoh_equals_matrix_exponential_and_exact_solution():
    A, B, _ = s4_params()
    delta = 0.3
    A_bar, B_bar = discretize_zoh(A, B, delta)
    # the augmented-matrix identity: expm([[A, B], [0, 0]] Δ) = [[Ā, B̄], [0, 1]], per (channel, state) scalar
    for d in range(4):
        for n in range(6):
            block = torch.tensor([[A[d, n], B[d, n]], [0.0, 0.0]], dtype=torch.float64) * delta
            expm = torch.linalg.matrix_exp(block)
            torch.testing.assert_close(A_bar[d, n], expm[0, 0])
            torch.testing.assert_close(B_bar[d, n], expm[0, 1])
    # step delta (D, 1) per channel broadcasts
    per_channel = torch.tensor([[0.1], [0.2], [0.3], [0.4]], dtype=torch.float64)
    A_bar2, _ = discretize_zoh(A, B, per_channel)
    torch.testing.assert_close(A_bar2[2], A_bar[2])
    with pytest.raises(ValueError, match="positive"):
        discretize_zoh(A, B, 0.0)
    with pytest.raises(ValueError, match="zero"):
        discretize_zoh(torch.zeros(2, 2), torch.ones(2, 2), 0.1)
    with pytest.raises(ValueError, match="one shape"):
        discretize_zoh(A, B[:, :3], 0.1)


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-4)])
def test_ssm_convolution_equals_recurrence(dtype, tol):
    A, B, C = s4_params(dtype=dtype)
    A_bar, B_bar = discretize_zoh(A, B, 0.5)
    u = torch.randn(3, 40, 4, generator=torch.Generator().manual_seed(1)).to(dtype)
    K = ssm_kernel(A_bar, B_bar, C, 40)
    assert K.shape == (4, 40)
    torch.testing.assert_close(K[1, 3], (C[1] * A_bar[1] ** 3 * B_bar[1]).sum())
    recurrent = ssm_recurrent(u, A_bar, B_bar, C)
    torch.testing.assert_close(ssm_convolution(u, K), recurrent, rtol=tol, atol=tol)
    direct = torch.stack([sum(K[:, s] * u[:, t - s] for s in range(t + 1)) for t in range(40)], dim=1)
    torch.testing.assert_close(recurrent, direct, rtol=tol, atol=tol)


def test_ssm_rejects_bad_shapes():
    A, B, C = s4_params()
    u = torch.randn(3, 10, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"\(D, T\)"):
        ssm_convolution(u, torch.zeros(4, 9, dtype=torch.float64))
    with pytest.raises(ValueError, match="3-D"):
        ssm_convolution(u[0], torch.zeros(4, 10, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"\(D, N\)"):
        ssm_recurrent(u, A[:3], B[:3], C[:3])
    with pytest.raises(ValueError, match="seq_len"):
        ssm_kernel(A, B, C, 0)


@pytest.mark.parametrize("length", [1, 2, 7, 16, 33])
def test_associative_scan_equals_loop(length):
    gen = torch.Generator().manual_seed(length)
    a, b = (
        torch.rand(3, length, 5, generator=gen, dtype=torch.float64),
        torch.randn(3, length, 5, generator=gen, dtype=torch.float64),
    )
    h, expected = torch.zeros(3, 5, dtype=torch.float64), []
    for t in range(length):
        h = a[:, t] * h + b[:, t]
        expected.append(h)
    torch.testing.assert_close(associative_scan(a, b, dim=1), torch.stack(expected, 1), rtol=0, atol=1e-12)
    torch.testing.assert_close(associative_scan(a.transpose(0, 1), b.transpose(0, 1), dim=0), torch.stack(expected, 0))
    with pytest.raises(ValueError, match="one shape"):
        associative_scan(a, b[..., :1])


def selective_inputs(dtype=torch.float64, seq_len=37, channels=4, state=6, seed=0):
    gen = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return torch.randn(*shape, generator=gen).to(dtype)

    u, delta = rand(2, seq_len, channels), F.softplus(rand(2, seq_len, channels))
    A = -torch.rand(channels, state, generator=gen).to(dtype) - 0.05
    return u, delta, A, rand(2, seq_len, state), rand(2, seq_len, state), rand(channels)


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-4)])
def test_selective_scan_sequential_equals_parallel(dtype, tol):
    u, delta, A, B, C, D = selective_inputs(dtype)
    sequential = selective_scan_sequential(u, delta, A, B, C, D)
    torch.testing.assert_close(selective_scan_parallel(u, delta, A, B, C, D), sequential, rtol=tol, atol=tol)
    without_skip = selective_scan_sequential(u, delta, A, B, C)
    torch.testing.assert_close(sequential - without_skip, D * u, rtol=tol, atol=tol)


def test_selective_scan_with_constant_parameters_is_an_s4_model():
    # Δ, B, C the same at every step: a time-invariant SSM with Ā = exp(ΔA) and B̄ = Δ B (Euler for B)
    u, _, A, B, C, _ = selective_inputs(seq_len=12)
    delta = torch.full_like(u, 0.3)
    B = B[:1, :1].expand(2, 12, 6)
    C = C[:1, :1].expand(2, 12, 6)
    y = selective_scan_parallel(u, delta, A, B, C)
    A_bar, B_bar, C_full = torch.exp(0.3 * A), 0.3 * B[0, 0].expand(4, 6), C[0, 0].expand(4, 6)
    torch.testing.assert_close(y, ssm_recurrent(u, A_bar, B_bar, C_full), rtol=0, atol=1e-12)


def test_selective_scan_rejects_bad_shapes():
    u, delta, A, B, C, D = selective_inputs()
    with pytest.raises(ValueError, match="delta"):
        selective_scan_sequential(u, delta[:, :3], A, B, C)
    with pytest.raises(ValueError, match=r"B must be \(B, T, N\)"):
        selective_scan_parallel(u, delta, A, B[..., :2], C)
    with pytest.raises(ValueError, match=r"A must be \(D, N\)"):
        selective_scan_parallel(u, delta, A[:2], B, C)
    with pytest.raises(ValueError, match=r"D must be"):
        selective_scan_parallel(u, delta, A, B, C, D[:2])
