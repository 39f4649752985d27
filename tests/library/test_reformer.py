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


def test_lsh_attention_mask_self_uses_own_position_only_when_alone():
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(2, 2, 20, 6, generator=gen, dtype=torch.float64)
    v = torch.randn(2, 2, 20, 3, generator=gen, dtype=torch.float64)
    for n_rounds, causal in ((1, True), (2, True), (2, False)):
        out = lsh_attention(
            q,
            q,
            v,
            n_buckets=8,
            generator=torch.Generator().manual_seed(3),
            n_rounds=n_rounds,
            causal=causal,
            mask_self=True,
        )
        rounds_gen = torch.Generator().manual_seed(3)
        buckets = [lsh_buckets(q, 8, rounds_gen) for _ in range(n_rounds)]  # each (2, 2, 20)
        alone_seen = 0
        for b in range(2):
            for h in range(2):
                for t in range(20):
                    visible = range(t + 1) if causal else range(20)
                    keys = [s for s in visible if s != t and any(r[b, h, s] == r[b, h, t] for r in buckets)]
                    if not keys:  # nothing else is visible: the query attends to itself alone
                        keys, alone_seen = [t], alone_seen + 1
                    weights = torch.softmax(q[b, h, t] @ q[b, h, keys].T / math.sqrt(6), dim=0)
                    torch.testing.assert_close(out[b, h, t], weights @ v[b, h, keys])
        assert alone_seen >= (4 if causal else 0)  # causal: position 0 of each (b, h) is alone at least
        assert alone_seen < 80 // 2  # most queries have another key: both branches of the rule ran
    # the default keeps the own position: position 0 then still sees itself, and outputs differ elsewhere
    plain = lsh_attention(q, q, v, n_buckets=8, generator=torch.Generator().manual_seed(3))
    masked = lsh_attention(q, q, v, n_buckets=8, generator=torch.Generator().manual_seed(3), mask_self=True)
    torch.testing.assert_close(plain[:, :, 0], masked[:, :, 0])
    assert (plain - masked).abs().max() > 1e-3
    with pytest.raises(ValueError, match="as many queries as keys"):
        lsh_attention(q, q[:, :, :5], v[:, :, :5], 8, torch.Generator().manual_seed(0), causal=False, mask_self=True)
