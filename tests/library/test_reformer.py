"""Tests of course_utils.reformer: LSH buckets against brute force, bucketed attention against a mask."""

import math

import pytest
import torch

from course_utils.fast_attention import naive_attention
from course_utils.reformer import lsh_attention, lsh_buckets, top_key_recall


def test_lsh_buckets_are_argmax_of_random_rotation():
    x = torch.randn(2, 2, 10, 6, generator=torch.Generator().manual_seed(0))
    buckets = lsh_buckets(x, 8, torch.Generator().manual_seed(5))
    rotation = torch.randn(6, 4, generator=torch.Generator().manual_seed(5))
    projected = x @ rotation
    assert buckets.shape == (2, 2, 10) and buckets.dtype == torch.long
    assert torch.equal(buckets, torch.cat([projected, -projected], -1).argmax(-1))
    assert torch.equal(lsh_buckets(3 * x, 8, torch.Generator().manual_seed(5)), buckets)  # angle only
    assert torch.equal(lsh_buckets(-x, 8, torch.Generator().manual_seed(5)), (buckets + 4) % 8)
    with pytest.raises(ValueError, match="even"):
        lsh_buckets(x, 7)
    with pytest.raises(ValueError, match="4-D"):
        lsh_buckets(x[0], 8)


def test_lsh_attention_is_attention_within_buckets():
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 2, 24, 8, generator=gen, dtype=torch.float64)
    v = torch.randn(1, 2, 24, 3, generator=gen, dtype=torch.float64)
    out = lsh_attention(q, q, v, n_buckets=4, generator=torch.Generator().manual_seed(7))  # shared QK
    buckets = lsh_buckets(q, 4, torch.Generator().manual_seed(7))
    for h in range(2):
        for t in range(24):
            keys = [s for s in range(t + 1) if buckets[0, h, s] == buckets[0, h, t]]
            weights = torch.softmax(q[0, h, t] @ q[0, h, keys].T / math.sqrt(8), dim=0)
            torch.testing.assert_close(out[0, h, t], weights @ v[0, h, keys])
    # vectors pointing one way share one bucket: plain causal attention
    same = q[:, :, :1] * torch.rand(1, 2, 24, 1, generator=gen, dtype=torch.float64).add(0.5)  # (1, 2, 24, 8)
    full = lsh_attention(same, same, v, n_buckets=8, generator=torch.Generator().manual_seed(0), n_rounds=2)
    torch.testing.assert_close(full, naive_attention(same, same, v))
    with pytest.raises(ValueError, match="Generator"):
        lsh_attention(q, q, v, n_buckets=4, generator=None)


def test_top_key_recall_grows_with_rounds_and_falls_with_buckets():
    gen = torch.Generator().manual_seed(0)
    k = torch.randn(1, 4, 64, 16, generator=gen)
    q = k + 0.3 * torch.randn(1, 4, 64, 16, generator=gen)  # each query's top key is probably its own
    one = top_key_recall(q, k, n_buckets=16, n_rounds=1, generator=torch.Generator().manual_seed(1))
    many = top_key_recall(q, k, n_buckets=16, n_rounds=8, generator=torch.Generator().manual_seed(1))
    assert 0.0 < one < many <= 1.0
    assert top_key_recall(q, k, n_buckets=2, n_rounds=1, generator=torch.Generator().manual_seed(1)) > one
    with pytest.raises(ValueError, match="top"):
        top_key_recall(q, k, 4, top=0)
