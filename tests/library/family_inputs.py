"""Inputs shared by the tests of linear attention's family (test_linear_attention.py, test_xlstm.py):
seeded ``q, k, v`` and per-step gates, and the tolerances of the two dtypes."""

import torch

F64 = dict(rtol=0, atol=1e-10)
F32 = dict(rtol=1e-4, atol=1e-4)


def qkv(dtype=torch.float64, seq_len=29, d_k=6, d_v=4, seed=0):
    """``q, k (2, 3, seq_len, d_k)``, ``v (2, 3, seq_len, d_v)``, standard normal from ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(2, 3, seq_len, d, generator=gen).to(dtype) for d in (d_k, d_k, d_v))


def per_step(seed, scale=1.0, dtype=torch.float64, seq_len=29):
    """One number per batch element, head and step: ``(2, 3, seq_len)``."""
    return (scale * torch.randn(2, 3, seq_len, generator=torch.Generator().manual_seed(seed))).to(dtype)
