"""course_utils.transformer: positions, layers equal to PyTorch's, and the two models."""

import math

import pytest
import torch
import torch.nn as nn

from course_utils.attention import causal_mask
from course_utils.seq2seq import Seq2SeqData, greedy_decode, seq2seq_loss
from course_utils.transformer import (
    DecoderLayer,
    EncoderLayer,
    FeedForward,
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    TransformerClassifier,
    TransformerClassifierConfig,
    TransformerSeq2Seq,
    padding_mask,
    shift_matrix,
    sinusoidal_positions,
)

# --------------------------------------------------------------------------- positions


def test_sinusoidal_positions_match_the_formula_entry_by_entry():
    T, D = 13, 10
    P = sinusoidal_positions(T, D)
    assert P.shape == (T, D) and P.dtype == torch.float32
    for i in range(T):
        for j in range(D // 2):
            angle = i / 10000 ** (2 * j / D)
            assert P[i, 2 * j].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert P[i, 2 * j + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    assert torch.equal(P[0], torch.tensor([0.0, 1.0] * (D // 2)))
    assert not torch.allclose(sinusoidal_positions(T, D, base=100.0), P)


def test_sinusoidal_positions_reject_bad_sizes():
    with pytest.raises(ValueError, match="even"):
        sinusoidal_positions(5, 7)
    with pytest.raises(ValueError, match="seq_len"):
        sinusoidal_positions(0, 8)


def test_shift_matrix_rotates_every_position_by_k():
    D = 16
    P = sinusoidal_positions(200, D, dtype=torch.float64)
    for k in (1, 7, 50):
        R = shift_matrix(k, D)
        assert torch.allclose(R @ R.T, torch.eye(D, dtype=torch.float64), atol=1e-12)  # a rotation
        assert torch.allclose(P[k:], P[:-k] @ R.T, atol=1e-10)  # P[t+k] = R P[t], all t
    assert torch.allclose(shift_matrix(3, D) @ shift_matrix(4, D), shift_matrix(7, D), atol=1e-12)


def test_position_modules_add_their_table():
    x = torch.randn(2, 5, 8)
    sin = SinusoidalPositionalEncoding(8, max_len=6)
    assert torch.allclose(sin(x), x + sinusoidal_positions(5, 8)) and not list(sin.parameters())
    learned = LearnedPositionalEmbedding(8, max_len=6)
    assert torch.allclose(learned(x), x + learned.embed.weight[:5])
    for module in (sin, learned):
        with pytest.raises(ValueError, match="max_len"):
            module(torch.randn(1, 7, 8))


# --------------------------------------------------------------------------- layers


def test_feed_forward_acts_on_each_position_alone():
    torch.manual_seed(0)
    ffn = FeedForward(6, 12)
    x = torch.randn(3, 4, 6)
    per_position = torch.stack([ffn(x[:, t]) for t in range(4)], dim=1)
    assert torch.allclose(ffn(x), per_position, atol=1e-6)
    conv = nn.Sequential(nn.Conv1d(6, 12, 1), nn.ReLU(), nn.Conv1d(12, 6, 1))
    with torch.no_grad():
        conv[0].weight.copy_(ffn.linear1.weight[..., None])
        conv[0].bias.copy_(ffn.linear1.bias)
        conv[2].weight.copy_(ffn.linear2.weight[..., None])
        conv[2].bias.copy_(ffn.linear2.bias)
    assert torch.allclose(conv(x.transpose(1, 2)).transpose(1, 2), ffn(x), atol=1e-6)


def test_feed_forward_without_bias_is_two_matrices_around_the_activation():
    torch.manual_seed(0)
    ffn = FeedForward(6, 12, activation="gelu", bias=False)
    assert ffn.linear1.bias is None and ffn.linear2.bias is None
    assert sum(p.numel() for p in ffn.parameters()) == 2 * 6 * 12
    x = torch.randn(2, 3, 6)
    expected = torch.nn.functional.gelu(x @ ffn.linear1.weight.T) @ ffn.linear2.weight.T
    assert torch.allclose(ffn(x), expected, atol=1e-6)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_equals_torch_with_padding(norm_first):
    torch.manual_seed(1)
    ref = nn.TransformerEncoderLayer(16, 4, 40, dropout=0.0, batch_first=True, norm_first=norm_first)
    ours = EncoderLayer(16, 4, 40, norm_first=norm_first).from_torch(ref)
    x = torch.randn(3, 7, 16)
    lengths = torch.tensor([7, 4, 1])
    ref.train()  # the eval-mode fast path zeroes padded rows; train mode with dropout 0 is exact
    expected = ref(x, src_key_padding_mask=~padding_mask(lengths, 7)[:, 0, 0])
    assert torch.allclose(ours(x, padding_mask(lengths, 7)), expected, atol=1e-5)
    other = EncoderLayer(16, 4, 40, norm_first=not norm_first)
    with pytest.raises(ValueError, match="norm_first"):
        other.from_torch(ref)
    with pytest.raises(ValueError, match="activation"):
        EncoderLayer(16, 4, 40, norm_first=norm_first, activation="gelu").from_torch(ref)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_equals_torch_with_causal_and_memory_masks(norm_first):
    torch.manual_seed(2)
    ref = nn.TransformerDecoderLayer(12, 3, 24, dropout=0.0, batch_first=True, norm_first=norm_first)
    ours = DecoderLayer(12, 3, 24, norm_first=norm_first).from_torch(ref)
    y, memory = torch.randn(2, 5, 12), torch.randn(2, 6, 12)
    src_lengths = torch.tensor([6, 2])
    expected = ref(y, memory, tgt_mask=~causal_mask(5), memory_key_padding_mask=~padding_mask(src_lengths, 6)[:, 0, 0])
    got = ours(y, memory, causal_mask(5), padding_mask(src_lengths, 6))
    assert torch.allclose(got, expected, atol=1e-5)
    assert ours.cross_weights.shape == (2, 3, 5, 6)
    assert torch.all(ours.cross_weights[1, :, :, 2:] == 0)  # padded source positions get no attention


def test_encoder_without_positions_is_permutation_equivariant_and_positions_break_it():
    torch.manual_seed(3)
    layer = EncoderLayer(8, 2, 16).eval()
    x = torch.randn(2, 6, 8)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    assert torch.allclose(layer(x)[:, perm], layer(x[:, perm]), atol=1e-5)
    pe = SinusoidalPositionalEncoding(8)
    assert not torch.allclose(layer(pe(x))[:, perm], layer(pe(x[:, perm])), atol=1e-3)


# --------------------------------------------------------------------------- models


def test_classifier_ignores_padding_and_has_the_seed_recipe_size():
    torch.manual_seed(4)
    model = TransformerClassifier(TransformerClassifierConfig(vocab_size=20)).eval()
    assert model.config.d_model == 32 and model.config.num_heads == 2 and model.config.num_layers == 1
    ids = torch.tensor([[5, 6, 7, 0], [8, 9, 0, 0]])
    lengths = torch.tensor([3, 2])
    logits = model(ids, lengths)
    assert logits.shape == (2, 2)
    padded = torch.cat([ids, torch.zeros(2, 3, dtype=torch.long)], dim=1)
    assert torch.allclose(model(padded, lengths), logits, atol=1e-5)
    with pytest.raises(ValueError, match="pooling"):
        TransformerClassifier(TransformerClassifierConfig(vocab_size=5, pooling="last"))
    with pytest.raises(ValueError, match=r"lengths must lie in \[1, T=4\]"):  # unit 05's id checks
        model(ids, torch.tensor([3, 0]))


def test_seq2seq_is_causal_and_ignores_source_padding():
    torch.manual_seed(5)
    model = TransformerSeq2Seq(10, 9, d_model=16, num_heads=2, num_layers=1, d_ff=32).eval()
    src = torch.tensor([[4, 5, 6, 0], [7, 8, 9, 5]])
    lengths = torch.tensor([3, 4])
    tgt = torch.tensor([[2, 4, 5, 6], [2, 6, 7, 8]])
    logits = model(src, lengths, tgt)
    assert logits.shape == (2, 4, 9)
    changed = tgt.clone()
    changed[:, 2] = 3
    later = model(src, lengths, changed)
    assert torch.allclose(later[:, :2], logits[:, :2], atol=1e-6) and not torch.allclose(later[:, 2:], logits[:, 2:])
    src_more_padding = torch.cat([src, torch.zeros(2, 2, dtype=torch.long)], dim=1)
    assert torch.allclose(model(src_more_padding, lengths, tgt), logits, atol=1e-5)


def test_seq2seq_learns_to_reverse_a_few_strings():
    torch.manual_seed(6)
    pairs = [("abc", "cba"), ("bca", "acb"), ("cab", "bac"), ("aab", "baa"), ("cc", "cc"), ("ba", "ab")]
    data = Seq2SeqData.build(pairs)
    model = TransformerSeq2Seq(
        len(data.src_vocab), len(data.tgt_vocab), d_model=32, num_heads=2, num_layers=1, d_ff=64, dropout=0.0
    )
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    batch = data.batches(pairs, batch_size=len(pairs))[0]
    for _ in range(150):
        loss = seq2seq_loss(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05
    assert data.evaluate(model, pairs, max_len=5)["exact_match"] == 1.0
    src, src_lengths, _, _ = batch
    assert greedy_decode(model, src, src_lengths, 5).shape[0] == len(pairs)


def test_each_classifier_config_is_defined_once_and_keeps_its_unit_name():
    from course_utils import gated, transformer

    assert transformer.ClassifierConfig is TransformerClassifierConfig  # lecture 07's name
    assert gated.ClassifierConfig is gated.SequenceClassifierConfig  # lecture 05's name
    assert TransformerClassifierConfig is not gated.SequenceClassifierConfig
    assert issubclass(TransformerClassifierConfig, gated.TextClassifierConfig)
    assert issubclass(gated.SequenceClassifierConfig, gated.TextClassifierConfig)
    assert TransformerClassifierConfig(vocab_size=5).pooling == "max"
    assert gated.SequenceClassifierConfig(vocab_size=5).pooling == "last"
