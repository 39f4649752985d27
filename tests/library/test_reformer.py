"""Tests of course_utils.reformer: LSH buckets against brute force, bucketed attention against a mask."""

import math

import pytest
import torch

from course_utils.fast_attention import naive_attention
from course_utils.memory import PeakMemory
from course_utils.reformer import (
    chunked_feed_forward,
    lsh_attention,
    lsh_attention_chunked,
    lsh_buckets,
    top_key_recall,
)


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


def dense_chunked_rule(qk, v, n_buckets, chunk_size, seed, n_rounds, causal):
    """The rule of lsh_attention_chunked built pair by pair with Python sorting, then one dense softmax."""
    batch, heads, seq_len, d_k = qk.shape
    generator = torch.Generator().manual_seed(seed)
    rounds = [lsh_buckets(qk, n_buckets, generator) for _ in range(n_rounds)]  # each (B, H, T)
    out = torch.zeros(*qk.shape[:3], v.shape[-1], dtype=qk.dtype)
    keys = qk / qk.norm(dim=-1, keepdim=True)
    for b in range(batch):
        for h in range(heads):
            found = [set() for _ in range(seq_len)]
            for buckets in rounds:
                order = sorted(range(seq_len), key=lambda t: (int(buckets[b, h, t]), t))
                chunk = {t: i // chunk_size for i, t in enumerate(order)}
                for t in range(seq_len):
                    for s in range(seq_len):
                        near = chunk[t] - chunk[s] in (0, 1)
                        if near and buckets[b, h, s] == buckets[b, h, t] and (s <= t or not causal) and s != t:
                            found[t].add(s)
            for t in range(seq_len):
                union = sorted(found[t]) or [t]  # itself only when no round found another key
                weights = torch.softmax(qk[b, h, t] @ keys[b, h, union].T / math.sqrt(d_k), dim=0)
                out[b, h, t] = weights @ v[b, h, union]
    return out


def test_lsh_attention_chunked_equals_its_dense_rule():
    gen = torch.Generator().manual_seed(4)
    qk = torch.randn(2, 2, 32, 6, generator=gen, dtype=torch.float64)
    v = torch.randn(2, 2, 32, 3, generator=gen, dtype=torch.float64)
    for n_buckets, chunk_size, n_rounds, causal in (
        (4, 4, 1, True),
        (4, 4, 3, True),
        (8, 8, 2, False),
        (2, 32, 2, True),
    ):
        out = lsh_attention_chunked(qk, v, n_buckets, chunk_size, torch.Generator().manual_seed(9), n_rounds, causal)
        reference = dense_chunked_rule(qk, v, n_buckets, chunk_size, 9, n_rounds, causal)
        torch.testing.assert_close(out, reference, rtol=0, atol=1e-12)
    # gradients through the in-place chunked computation equal autograd through the dense rule
    grads = []
    for fn in (lsh_attention_chunked, dense_chunked_rule):
        a, b = qk.clone().requires_grad_(), v.clone().requires_grad_()
        seed = torch.Generator().manual_seed(9) if fn is lsh_attention_chunked else 9
        fn(a, b, 4, 4, seed, 3, True).sin().sum().backward()
        grads.append((a.grad, b.grad))
    for got, want in zip(*grads):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


def test_lsh_attention_chunked_with_one_chunk_is_lsh_attention_with_self_mask():
    # a single chunk holds every bucket whole: the rule is the dense lsh_attention's, keys = normalised queries
    gen = torch.Generator().manual_seed(5)
    qk = torch.randn(1, 3, 48, 8, generator=gen, dtype=torch.float64)
    v = torch.randn(1, 3, 48, 4, generator=gen, dtype=torch.float64)
    for n_rounds in (1, 2):
        chunked = lsh_attention_chunked(qk, v, 4, 48, torch.Generator().manual_seed(2), n_rounds)
        keys = qk / qk.norm(dim=-1, keepdim=True)
        dense = lsh_attention(qk, keys, v, 4, torch.Generator().manual_seed(2), n_rounds, mask_self=True)
        torch.testing.assert_close(chunked, dense, rtol=0, atol=1e-12)


def test_lsh_attention_chunked_memory_is_linear_in_t_and_gradients_flow():
    def peak(seq_len, n_rounds=1, fn=lsh_attention_chunked):
        qk = torch.randn(1, 2, seq_len, 16, generator=torch.Generator().manual_seed(0))
        with PeakMemory() as memory:
            if fn is naive_attention:
                fn(qk, qk, qk[..., :8])
            else:
                fn(qk, qk[..., :8], 8, 32, torch.Generator().manual_seed(0), n_rounds=n_rounds)
        return memory.peak

    for n_rounds in (1, 2):  # O(T · chunk_size); a (T, T) tensor would make it 4
        assert 1.8 < peak(1024, n_rounds) / peak(512, n_rounds) < 2.2
    assert 3.6 < peak(1024, fn=naive_attention) / peak(512, fn=naive_attention) < 4.4
    assert peak(1024, 2) < peak(1024, fn=naive_attention) / 4
    qk = torch.randn(1, 2, 64, 8, dtype=torch.float64, requires_grad=True)
    v = torch.randn(1, 2, 64, 4, dtype=torch.float64, requires_grad=True)
    lsh_attention_chunked(qk, v, 8, 8, torch.Generator().manual_seed(1), n_rounds=2).square().sum().backward()
    assert qk.grad.isfinite().all() and v.grad.isfinite().all() and v.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="chunk_size"):
        lsh_attention_chunked(qk, v, 8, 7, torch.Generator().manual_seed(1))
    with pytest.raises(ValueError, match="n_rounds"):
        lsh_attention_chunked(qk, v, 8, 8, torch.Generator().manual_seed(1), n_rounds=0)


def test_chunked_feed_forward_equals_ff_and_bounds_the_hidden():
    torch.manual_seed(0)
    ff = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.GELU(), torch.nn.Linear(64, 16)).double()
    x = torch.randn(2, 100, 16, dtype=torch.float64)
    for chunk_size in (1, 7, 32, 100, 500):
        torch.testing.assert_close(chunked_feed_forward(ff, x, chunk_size), ff(x), rtol=0, atol=1e-12)

    def peak(fn):
        with torch.no_grad(), PeakMemory() as memory:
            fn(x32 * 1)  # the input made inside the block, so that both counts include it
        return memory.peak

    ff32, x32 = ff.float(), torch.randn(2, 1024, 16)
    full, chunked = peak(ff32), peak(lambda x: chunked_feed_forward(ff32, x, 64))
    data = 2 * 1024 * 16 * 4  # input or output, (B, T, D) float32
    hidden = 2 * 1024 * 64 * 4  # (B, T, 4D) float32
    assert full >= data + 2 * hidden  # the input and the hidden before and after the GELU, all T positions
    assert chunked <= 2 * data + 4 * hidden * 64 // 1024  # input, output and a few chunk-sized tensors
    assert chunked < full / 2
    with pytest.raises(ValueError, match="chunk_size"):
        chunked_feed_forward(ff, x, 0)
    with pytest.raises(ValueError, match="keep"):
        chunked_feed_forward(lambda c: c.sum(1), x, 10)
    with pytest.raises(ValueError, match="3-D"):
        chunked_feed_forward(ff, x[0], 10)
