"""Tests of course_utils.fast_attention: naive and tiled attention against PyTorch's, the tiled backward
pass against autograd through PyTorch's attention, the KV cache against decoding without it."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from course_utils.fast_attention import (
    KVCache,
    TiledAttention,
    flash_attention,
    forward_with_cache,
    generate_with_cache,
    generate_without_cache,
    naive_attention,
    tiled_attention,
    tiled_attention_backward,
)
from course_utils.gpt import GPT, GPTConfig
from course_utils.testing.work import watch_work


def qkv(seq_len=37, d_k=8, d_v=5, dtype=torch.float64, seed=0, len_k=None):
    gen = torch.Generator().manual_seed(seed)
    len_k = len_k or seq_len
    q = torch.randn(2, 3, seq_len, d_k, generator=gen, dtype=dtype)
    k = torch.randn(2, 3, len_k, d_k, generator=gen, dtype=dtype)
    v = torch.randn(2, 3, len_k, d_v, generator=gen, dtype=dtype)  # d_v != d_k
    return q, k, v


# --------------------------------------------------------------------------- naive and tiled attention


@pytest.mark.parametrize("causal", [True, False])
def test_naive_attention_equals_sdpa(causal):
    q, k, v = qkv()
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(naive_attention(q, k, v, causal=causal), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("block_size", [1, 8, 16, 37, 64])  # divides T or not, bigger than T
def test_tiled_attention_equals_sdpa_and_returns_logsumexp(causal, block_size):
    q, k, v = qkv()
    out, lse = tiled_attention(q, k, v, causal=causal, block_size=block_size, return_lse=True)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=causal), rtol=0, atol=1e-12)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        scores = scores.masked_fill(torch.ones(37, 37, dtype=torch.bool).triu(1), float("-inf"))
    assert lse.shape == (2, 3, 37)
    torch.testing.assert_close(lse, torch.logsumexp(scores, dim=-1), rtol=0, atol=1e-12)
    torch.testing.assert_close(tiled_attention(q, k, v, causal=causal, block_size=block_size), out, rtol=0, atol=0)


def test_tiled_attention_float32_large_scores_and_cross_lengths():
    q, k, v = qkv(seq_len=70, dtype=torch.float32, seed=1)
    q = 30 * q  # scores in the hundreds: a softmax without the running maximum would overflow
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(tiled_attention(q, k, v, block_size=16), expected, rtol=1e-5, atol=1e-5)
    q, k, v = qkv(seq_len=9, len_k=30, seed=2)  # non-causal: T_q != T_k is allowed
    torch.testing.assert_close(
        tiled_attention(q, k, v, causal=False, block_size=4), F.scaled_dot_product_attention(q, k, v)
    )


def test_tiled_attention_never_builds_a_full_score_matrix(monkeypatch):
    q, k, v = qkv(seq_len=64)
    biggest = []
    matmul = torch.Tensor.__matmul__

    def spy(a, b):
        out = matmul(a, b)
        biggest.append(out.shape[-1] * out.shape[-2])
        return out

    monkeypatch.setattr(torch.Tensor, "__matmul__", spy)
    tiled_attention(q, k, v, block_size=16)
    assert max(biggest) == 16 * 16  # tiles only, never 64 x 64


def test_attention_rejects_bad_shapes():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="4-D"):
        naive_attention(q[0], k[0], v[0])
    with pytest.raises(ValueError, match="shapes do not fit"):
        tiled_attention(q, k[..., :4], v)
    with pytest.raises(ValueError, match="shapes do not fit"):
        tiled_attention(q, k, v[:, :, :5])
    with pytest.raises(ValueError, match="as many queries as keys"):
        tiled_attention(q[:, :, :5], k, v)
    with pytest.raises(ValueError, match="block_size"):
        tiled_attention(q, k, v, block_size=0)
    with pytest.raises(ValueError, match="dtype"):
        naive_attention(q.float(), k, v)
    with pytest.raises(ValueError, match="floating"):
        naive_attention(q.long(), k, v)


# --------------------------------------------------------------------------- the tiled backward pass


def sdpa_grads(q, k, v, grad_out, causal):
    """The reference: autograd through PyTorch's own attention."""
    q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return torch.autograd.grad(out, (q, k, v), grad_out)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("block_size", [1, 8, 16, 37, 64])  # divides T = 37 or not, bigger than T
def test_tiled_backward_equals_autograd_through_sdpa(causal, block_size):
    q, k, v = qkv()  # float64, d_k = 8 != d_v = 5
    grad_out = torch.randn(2, 3, 37, 5, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    out, lse = tiled_attention(q, k, v, causal=causal, block_size=block_size, return_lse=True)
    grads = tiled_attention_backward(q, k, v, out, lse, grad_out, block_size=block_size, causal=causal)
    for got, expected, x in zip(grads, sdpa_grads(q, k, v, grad_out, causal), (q, k, v)):
        assert got.shape == x.shape and got.dtype == x.dtype
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-10)


@pytest.mark.parametrize("causal", [True, False])
def test_flash_attention_autograd_float32_and_cross_lengths(causal):
    q, k, v = qkv(seq_len=70, dtype=torch.float32, seed=3)
    q = 5 * q  # peaked weights: exp(S - lse) must not overflow or lose them
    grad_out = torch.randn(2, 3, 70, 5, generator=torch.Generator().manual_seed(4))
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    out = flash_attention(*leaves, block_size=16, causal=causal)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=causal), rtol=1e-5, atol=1e-5)
    out.backward(grad_out)
    for leaf, expected in zip(leaves, sdpa_grads(q, k, v, grad_out, causal)):
        torch.testing.assert_close(leaf.grad, expected, rtol=1e-4, atol=1e-4)
    q, k, v = qkv(seq_len=9, len_k=30, seed=5)  # non-causal: T_q != T_k
    grad_out = torch.randn(2, 3, 9, 5, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    grads = torch.autograd.grad(flash_attention(*leaves, block_size=4, causal=False), leaves, grad_out)
    for got, expected in zip(grads, sdpa_grads(q, k, v, grad_out, False)):
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-10)


@pytest.mark.parametrize("causal", [True, False])
def test_flash_attention_gradcheck(causal):
    q, k, v = (x.requires_grad_() for x in qkv(seq_len=7, d_k=3, d_v=2, seed=7))
    assert torch.autograd.gradcheck(lambda a, b, c: flash_attention(a, b, c, block_size=3, causal=causal), (q, k, v))
    # the Function called directly is what flash_attention runs
    out = TiledAttention.apply(q, k, v, 3, causal)
    assert torch.equal(out, flash_attention(q, k, v, block_size=3, causal=causal))


class Largest(TorchDispatchMode):
    """Records the largest tensor any operation returns, also those the autograd engine runs."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for x in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(x, torch.Tensor):
                self.largest = max(getattr(self, "largest", 0), x.numel())
        return out


def test_tiled_backward_never_builds_a_full_score_matrix():
    block, batch_heads, d = 16, 2 * 3, 8
    largest = {}
    for seq_len in (64, 128, 256):
        q, k, v = qkv(seq_len=seq_len, d_k=d, d_v=d)
        out, lse = tiled_attention(q, k, v, block_size=block, return_lse=True)
        grad_out = torch.ones_like(out)
        with watch_work() as work:
            tiled_attention_backward(q, k, v, out, lse, grad_out, block_size=block)
        # the biggest tensors are the gradients (B, H, T, d) themselves; a tile is (B, H, 16, 16)
        assert work.largest == batch_heads * max(seq_len * d, block * block) < batch_heads * seq_len**2
        largest[seq_len] = work.largest
        # the tiles: 5 matrix products and one tile of exponentials per tile of the causal triangle
        tiles = (seq_len // block) * (seq_len // block + 1) // 2
        assert work.counts["aten::bmm"] == 5 * tiles
        assert work.exponentials == tiles * batch_heads * block * block
        leaves = [x.clone().requires_grad_() for x in (q, k, v)]
        with Largest() as spy:  # the whole autograd path: forward, engine, backward
            flash_attention(*leaves, block_size=block).backward(grad_out)
        assert spy.largest <= batch_heads * seq_len * d
    assert largest[256] == 2 * largest[128] == 4 * largest[64]  # linear in T, not quadratic


def test_tiled_backward_rejects_bad_input():
    q, k, v = qkv()
    out, lse = tiled_attention(q, k, v, return_lse=True)
    with pytest.raises(ValueError, match="grad_out"):
        tiled_attention_backward(q, k, v, out, lse, out[:, :, :5])
    with pytest.raises(ValueError, match="lse"):
        tiled_attention_backward(q, k, v, out, lse[..., None], out)
    with pytest.raises(ValueError, match="out must be"):
        tiled_attention_backward(q, k, v, out.float(), lse, out)
    with pytest.raises(ValueError, match="block_size"):
        tiled_attention_backward(q, k, v, out, lse, out, block_size=0)
    with pytest.raises(ValueError, match="as many queries as keys"):
        tiled_attention_backward(q[:, :, :5], k, v, out[:, :, :5], lse[:, :, :5], out[:, :, :5])
    with pytest.raises(ValueError, match="shapes do not fit"):
        flash_attention(q, k[..., :4], v)
    with pytest.raises(ValueError, match="block_size"):
        flash_attention(q, k, v, block_size=2.5)


# --------------------------------------------------------------------------- KV cache

CONFIGS = [dict(), dict(position="rope"), dict(position="alibi"), dict(norm_first=False), dict(residual="rezero")]


def small_gpt(**kw) -> GPT:
    torch.manual_seed(0)
    model = GPT(
        GPTConfig(
            vocab_size=50, block_size=40, num_layers=2, num_heads=2, d_model=32, init="default", tie_weights=False, **kw
        )
    )
    if kw.get("residual") == "rezero":  # alpha starts at 0: make the blocks do something
        for block in model.blocks:
            block.attn.alpha.data.fill_(0.7)
            block.ffn.alpha.data.fill_(0.7)
    return model.eval()


@pytest.mark.parametrize("kw", CONFIGS, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()) or "default")
def test_cached_logits_equal_full_forward(kw):
    model = small_gpt(**kw)
    idx = torch.randint(50, (3, 20), generator=torch.Generator().manual_seed(1))
    full = model(idx)  # (3, 20, 50)
    cache = KVCache(2, 3, 2, 40, 16)
    pieces = [forward_with_cache(model, idx[:, :6], cache)]  # a prompt, then one token at a time
    pieces += [forward_with_cache(model, idx[:, t : t + 1], cache) for t in range(6, 20)]
    assert cache.length == 20
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kw", CONFIGS[:3], ids=["learned", "rope", "alibi"])
def test_greedy_generation_same_tokens_with_and_without_cache(kw):
    model = small_gpt(**kw)
    prompt = torch.randint(50, (2, 4), generator=torch.Generator().manual_seed(2))
    with_cache = generate_with_cache(model, prompt, 30)
    without = generate_without_cache(model, prompt, 30)
    assert with_cache.shape == (2, 34) and torch.equal(with_cache[:, :4], prompt)
    assert torch.equal(with_cache, without)
    assert len(set(with_cache[0, 4:].tolist())) > 1  # not a trivial constant continuation
    sampled = [
        generate_with_cache(model, prompt, 10, temperature=1.0, generator=torch.Generator().manual_seed(3)),
        generate_without_cache(model, prompt, 10, temperature=1.0, generator=torch.Generator().manual_seed(3)),
    ]
    assert torch.equal(*sampled)


def test_kv_cache_size_and_errors():
    cache = KVCache(num_layers=2, batch_size=3, num_heads=2, max_len=10, d_head=4)
    assert cache.nbytes == 2 * 2 * 3 * 2 * 10 * 4 * 4
    with pytest.raises(ValueError, match="do not fit"):
        cache.append(0, torch.zeros(3, 2, 11, 4), torch.zeros(3, 2, 11, 4))
    model = small_gpt()
    with pytest.raises(ValueError, match="block_size"):
        generate_with_cache(model, torch.zeros(1, 30, dtype=torch.long), 20)
    with pytest.raises(ValueError, match="long"):
        generate_without_cache(model, torch.zeros(1, 3), 2)


def test_unit10_names_are_the_library_s_own():
    """fast_attention keeps unit 10's names; each is the one definition elsewhere in the library."""
    import course_utils.fast_attention as fa
    from course_utils import primitives, self_attention

    assert fa.KVCache is self_attention.KVCache and fa.check_qkv is primitives.check_qkv
    model = small_gpt()
    prompt = torch.randint(50, (1, 3), generator=torch.Generator().manual_seed(4))
    cache = model.new_cache(1, 3)
    torch.testing.assert_close(forward_with_cache(model, prompt, cache), model(prompt), rtol=1e-6, atol=1e-6)
