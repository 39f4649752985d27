"""Tests of course_utils.attention against PyTorch's own attention, brute force and autograd."""

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.attention import (
    AdditiveAttention,
    BahdanauSeq2Seq,
    MultiHeadAttention,
    causal_mask,
    masked_softmax,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from course_utils.data import date_pairs
from course_utils.seq2seq import Seq2SeqData, seq2seq_loss
from course_utils.text import PAD_ID

# --------------------------------------------------------------------------- masked softmax


def test_masked_softmax_matches_brute_force_and_zeroes_masked_keys():
    torch.manual_seed(0)
    scores = torch.randn(3, 4, 6, dtype=torch.float64)
    mask = torch.rand(3, 4, 6) > 0.4
    mask[0, 0] = False  # one query with every key masked
    got = masked_softmax(scores, mask)
    for b in range(3):
        for i in range(4):
            keep = mask[b, i]
            expected = torch.zeros(6, dtype=torch.float64)
            if keep.any():
                e = scores[b, i][keep].exp()
                expected[keep] = e / e.sum()
            torch.testing.assert_close(got[b, i], expected)
    assert (got[~mask] == 0).all()
    assert torch.equal(masked_softmax(scores), scores.softmax(-1))


def test_masked_softmax_is_stable_and_has_finite_gradients():
    scores = torch.tensor([[1000.0, 999.0, -1000.0], [5.0, 6.0, 7.0]], requires_grad=True)
    mask = torch.tensor([[True, True, False], [False, False, False]])
    weights = masked_softmax(scores, mask)
    torch.testing.assert_close(weights[0], torch.tensor([1 / (1 + math.exp(-1)), 1 / (1 + math.exp(1)), 0.0]))
    assert torch.equal(weights[1], torch.zeros(3))
    (weights * torch.arange(3.0)).sum().backward()
    assert torch.isfinite(scores.grad).all()


def test_masked_softmax_rejects_bad_masks():
    scores = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match="bool"):
        masked_softmax(scores, torch.ones(2, 3, 4))
    with pytest.raises(ValueError, match="broadcast"):
        masked_softmax(scores, torch.ones(2, 4, dtype=torch.bool))


# --------------------------------------------------------------------------- scaled dot-product attention


@pytest.mark.parametrize("masked", [False, True])
def test_sdpa_matches_torch(masked):
    torch.manual_seed(1)
    q, k = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8)
    v = torch.randn(2, 3, 7, 4)  # d_v != d_k, so scaling by the wrong width shows
    mask = (torch.rand(2, 1, 5, 7) > 0.3) if masked else None
    if masked:
        mask[..., 0] = True
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    assert weights.shape == (2, 3, 5, 7)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 5))
    torch.testing.assert_close(
        weights,
        (q @ k.transpose(-2, -1) / math.sqrt(8))
        .masked_fill(~mask if masked else torch.zeros(1, dtype=torch.bool), float("-inf"))
        .softmax(-1),
    )


def test_sdpa_padding_mask_and_causal_mask_match_torch():
    torch.manual_seed(2)
    x = torch.randn(3, 6, 8)
    lengths = torch.tensor([6, 4, 1])
    pad = torch.arange(6)[None, :] < lengths[:, None]  # (B, T_k)
    out, weights = scaled_dot_product_attention(x, x, x, pad[:, None, :])
    torch.testing.assert_close(out, F.scaled_dot_product_attention(x, x, x, attn_mask=pad[:, None, :]))
    assert (weights[2, :, 1:] == 0).all()
    out, _ = scaled_dot_product_attention(x, x, x, causal_mask(6))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(x, x, x, is_causal=True))


def test_query_equal_to_a_key_returns_its_value():
    keys = 10 * torch.eye(4)[None]  # (1, 4, 4): orthogonal, long keys
    values = torch.arange(12.0).view(1, 4, 3)
    out, weights = scaled_dot_product_attention(keys[:, 2:3], keys, values)
    torch.testing.assert_close(out[0, 0], values[0, 2], atol=1e-6, rtol=0)
    assert weights[0, 0].argmax() == 2


def test_sdpa_and_causal_mask_reject_bad_input():
    assert torch.equal(causal_mask(3), torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]]).bool())
    with pytest.raises(ValueError, match="shapes do not fit"):
        scaled_dot_product_attention(torch.randn(2, 3, 4), torch.randn(2, 3, 5), torch.randn(2, 3, 5))


# --------------------------------------------------------------------------- heads and multi-head attention


def test_split_and_merge_heads():
    x = torch.arange(2 * 3 * 6.0).view(2, 3, 6)
    heads = split_heads(x, num_heads=2)
    assert heads.shape == (2, 2, 3, 3)
    assert torch.equal(heads[1, 1, 2], x[1, 2, 3:6])  # head 1 holds features 3..5
    assert torch.equal(merge_heads(heads), x)
    with pytest.raises(ValueError, match="divisible"):
        split_heads(x, num_heads=4)


@pytest.mark.parametrize("bias", [True, False])
def test_multi_head_attention_matches_torch(bias):
    torch.manual_seed(3)
    d_model, num_heads = 12, 3
    reference = nn.MultiheadAttention(d_model, num_heads, bias=bias, batch_first=True)
    mha = MultiHeadAttention(d_model, num_heads, bias=bias).from_torch(reference)
    query, memory = torch.randn(2, 4, d_model), torch.randn(2, 5, d_model)
    pad = torch.tensor([[True] * 5, [True, True, True, False, False]])  # (B, T_k)
    out, weights = mha(query, memory, memory, pad[:, None, None, :])  # cross-attention with padding
    ref_out, ref_weights = reference(query, memory, memory, key_padding_mask=~pad, average_attn_weights=False)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(weights, ref_weights)
    x = torch.randn(2, 4, d_model)  # causal self-attention
    ref_out, _ = reference(x, x, x, attn_mask=~causal_mask(4))
    torch.testing.assert_close(mha(x, x, x, causal_mask(4))[0], ref_out)


def test_multi_head_attention_rejects_bad_widths():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match="query must be"):
        MultiHeadAttention(8, 2)(torch.randn(2, 3, 6), torch.randn(2, 3, 8), torch.randn(2, 3, 8))
    with pytest.raises(ValueError, match="num_heads"):
        MultiHeadAttention(8, 2).from_torch(nn.MultiheadAttention(8, 4))


# --------------------------------------------------------------------------- additive attention


def test_additive_attention_matches_a_loop():
    torch.manual_seed(4)
    attn = AdditiveAttention(query_size=3, key_size=5, hidden_size=7).double()
    query, key, value = torch.randn(2, 4, 3).double(), torch.randn(2, 6, 5).double(), torch.randn(2, 6, 2).double()
    scores = attn.scores(query, key)
    for b in range(2):
        for i in range(4):
            for j in range(6):
                expected = attn.w_v.weight[0] @ torch.tanh(attn.W_q.weight @ query[b, i] + attn.W_k.weight @ key[b, j])
                torch.testing.assert_close(scores[b, i, j], expected)
    mask = torch.tensor([[True] * 6, [True] * 2 + [False] * 4])[:, None, :]
    out, weights = attn(query, key, value, mask)
    torch.testing.assert_close(weights, masked_softmax(scores, mask))
    torch.testing.assert_close(out, weights @ value)


# --------------------------------------------------------------------------- Bahdanau seq2seq


def _tiny_model(seed=0):
    torch.manual_seed(seed)
    return BahdanauSeq2Seq(src_vocab_size=9, tgt_vocab_size=7, embed_size=8, hidden_size=16)


def test_bahdanau_shapes_and_attention_weights():
    model = _tiny_model()
    src = torch.tensor([[4, 5, 6, 7, 8], [4, 5, PAD_ID, PAD_ID, PAD_ID]])
    lengths = torch.tensor([5, 2])
    tgt_in = torch.tensor([[2, 4, 5], [2, 6, 4]])
    logits = model(src, lengths, tgt_in)
    assert logits.shape == (2, 3, 7)
    attention = model.last_attention
    assert attention.shape == (2, 3, 5) and not attention.requires_grad
    torch.testing.assert_close(attention.sum(-1), torch.ones(2, 3))
    assert (attention[1, :, 2:] == 0).all()  # padded source positions get no weight


def test_bahdanau_ignores_padding_and_is_causal():
    model = _tiny_model(1).double()
    src = torch.tensor([[4, 5, 6]])
    tgt_in = torch.tensor([[2, 4, 5, 6]])
    alone = model(src, torch.tensor([3]), tgt_in)
    padded = model(
        torch.tensor([[4, 5, 6, PAD_ID, PAD_ID], [8, 8, 8, 8, 8]]), torch.tensor([3, 5]), torch.cat([tgt_in, tgt_in])
    )
    torch.testing.assert_close(padded[:1], alone)
    prefix = model(src, torch.tensor([3]), tgt_in[:, :2])  # step t sees tokens 0..t only
    torch.testing.assert_close(prefix, alone[:, :2])


def test_bahdanau_gradients_reach_every_parameter_and_bad_input_raises():
    model = _tiny_model(2)
    src, lengths, tgt_in = torch.tensor([[4, 5, 6]]), torch.tensor([3]), torch.tensor([[2, 4]])
    model(src, lengths, tgt_in).sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    with pytest.raises(ValueError, match="src_lengths"):
        model(src, torch.tensor([4]), tgt_in)
    with pytest.raises(ValueError, match="src must be"):
        model(src.float(), lengths, tgt_in)


def test_bahdanau_learns_dates_and_attends_to_the_year():
    torch.manual_seed(0)
    pairs = date_pairs(1600, locales=("en",), formats=("long",), seed=5)
    train, test = pairs[:1500], pairs[1500:]
    data = Seq2SeqData.build(train)
    model = BahdanauSeq2Seq(len(data.src_vocab), len(data.tgt_vocab), embed_size=16, hidden_size=32)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    for epoch in range(2):
        for batch in data.batches(train, batch_size=32, shuffle=True, seed=epoch):
            optimizer.zero_grad()
            seq2seq_loss(model, batch).backward()
            optimizer.step()
    scores = data.evaluate(model, test, max_len=12)
    assert scores["exact_match"] > 0.5 and scores["bleu"] > 80, scores
    source = "March 14, 1987"  # English "long" format: the year is the last 4 characters
    assert data.translate(model, [source], max_len=12) == ["1987-03-14"]
    year_steps = model.last_attention[0, :4]  # (4, S): attention while writing 1, 9, 8, 7
    assert year_steps[:, -4:].sum(-1).mean() > 0.5
