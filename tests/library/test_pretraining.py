"""Unit 11: masked-LM corruption, the encoder and its adaptation modes (course_utils.pretraining)."""

import math

import pytest
import torch
import torch.nn as nn

from course_utils import pretraining as pt
from course_utils.lora import LoRALinear

V = 60


def small_encoder(seed=0, **kw):
    torch.manual_seed(seed)
    return pt.Encoder(pt.EncoderConfig(vocab_size=V, block_size=12, num_layers=2, num_heads=2, d_model=16, **kw))


def random_ids(rows=8, length=12, seed=0, pad_from=None):
    ids = torch.randint(4, V, (rows, length), generator=torch.Generator().manual_seed(seed))
    ids[:, 0] = pt.CLS_ID
    if pad_from is not None:
        ids[:, pad_from:] = pt.PAD_ID
    return ids


# --------------------------------------------------------------------------- masking


def test_mask_tokens_rate_and_80_10_10_within_binomial_margins():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, V, (400, 500), generator=g)  # about 1/15 of the positions are specials 0..3
    inputs, labels = pt.mask_tokens(ids, V, pt.MASK_ID, special_ids=range(4), generator=g)
    maskable = ids >= 4
    chosen = labels != -100
    assert not (chosen & ~maskable).any()
    n_maskable, n = maskable.sum().item(), chosen.sum().item()
    assert abs(n / n_maskable - 0.15) < 4 * math.sqrt(0.15 * 0.85 / n_maskable)
    masked = (inputs[chosen] == pt.MASK_ID).float().mean().item()
    kept = (inputs[chosen] == ids[chosen]).float().mean().item()
    p_kept = 0.1 + 0.1 / (V - 4)  # a random word can draw the original one
    assert abs(masked - 0.8) < 4 * math.sqrt(0.8 * 0.2 / n)
    assert abs(kept - p_kept) < 4 * math.sqrt(p_kept * (1 - p_kept) / n)
    replaced = inputs[chosen & (inputs != pt.MASK_ID) & (inputs != ids)]
    assert replaced.min().item() >= 4  # random words never special
    assert torch.equal(labels[chosen], ids[chosen]) and (labels[~chosen] == -100).all()
    assert torch.equal(inputs[~chosen], ids[~chosen])


def test_mask_tokens_deterministic_and_equal_to_the_rule_written_out():
    ids = torch.randint(0, V, (30, 40), generator=torch.Generator().manual_seed(1))
    a = pt.mask_tokens(ids, V, 3, range(4), 0.3, torch.Generator().manual_seed(5))
    b = pt.mask_tokens(ids, V, 3, range(4), 0.3, torch.Generator().manual_seed(5))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    g = torch.Generator().manual_seed(5)  # the documented order of draws
    chosen = (torch.rand(ids.shape, generator=g) < 0.3) & (ids >= 4)
    action = torch.rand(ids.shape, generator=g)
    rand_ids = torch.randint(4, V, ids.shape, generator=g)
    expect = torch.where(chosen & (action < 0.8), 3, ids)
    expect = torch.where(chosen & (action >= 0.8) & (action < 0.9), rand_ids, expect)
    assert torch.equal(a[0], expect) and torch.equal(a[1], torch.where(chosen, ids, -100))


def test_mask_tokens_edges():
    ids = torch.randint(4, V, (5, 7))
    inputs, labels = pt.mask_tokens(ids, V, 3, range(4), mask_prob=0.0)
    assert torch.equal(inputs, ids) and (labels == -100).all()
    _, labels = pt.mask_tokens(ids, V, 3, range(4), mask_prob=1.0)
    assert torch.equal(labels, ids)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(ids=torch.zeros(3, 4)), "long"),
        (dict(ids=torch.zeros(3, dtype=torch.long)), r"\(B, T\)"),
        (dict(mask_prob=1.5), "mask_prob"),
        (dict(mask_prob=-0.1), "mask_prob"),
        (dict(special_ids=(0, 2)), "special_ids"),
        (dict(mask_id=V), "mask_id"),
        (dict(ids=torch.full((2, 3), V, dtype=torch.long)), "range"),
    ],
)
def test_mask_tokens_rejects_bad_input(kwargs, match):
    args = dict(ids=torch.zeros(2, 3, dtype=torch.long), vocab_size=V, mask_id=3, special_ids=range(4))
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        pt.mask_tokens(**args)


# --------------------------------------------------------------------------- data


def test_vocab_encode_and_word_order_examples():
    vocab = pt.WordVocab.build(["the cat sat on the mat", "the dog sat"], size=8)
    assert vocab.itos[:4] == list(pt.SPECIALS) and vocab.itos[4] == "the" and len(vocab) == 8
    row = vocab.encode("The cat ate the mat", block_size=8)
    assert row[0] == pt.CLS_ID and row[-2:] == [pt.PAD_ID] * 2 and row[3] == pt.UNK_ID
    ids = random_ids(200, 12, pad_from=9)
    x, y = pt.word_order_examples(ids, torch.Generator().manual_seed(0))
    assert x.shape == ids.shape and y.shape == (200,) and 60 < y.sum().item() < 140
    assert torch.equal(x[y == 1], ids[y == 1])
    # shuffled rows: same multiset of words, <cls> and padding in place, and most rows actually change
    assert torch.equal(x[y == 0].sort(1).values, ids[y == 0].sort(1).values)
    assert (x[:, 0] == pt.CLS_ID).all() and (x[:, 9:] == pt.PAD_ID).all()
    assert (x[y == 0] != ids[y == 0]).any(1).float().mean().item() > 0.9


def test_corpus_sentences_fallback_and_bad_arguments():
    sentences, source = pt.corpus_sentences("python_docs", min_words=4)
    assert source == "python_docs" and len(sentences) > 3000
    assert all(len(pt.words(s)) >= 4 for s in sentences)
    with pytest.raises(ValueError, match="source"):
        pt.corpus_sentences("wikipedia")
    with pytest.raises(ValueError, match="size"):
        pt.WordVocab.build(sentences, size=4)
    with pytest.raises(ValueError, match="itos"):
        pt.WordVocab(["<pad>", "<unk>", "<bos>", "<eos>"])
    with pytest.raises(ValueError, match="long"):
        pt.word_order_examples(torch.zeros(2, 3))


# --------------------------------------------------------------------------- models


def test_encoder_shapes_and_padding_invariance():
    enc = small_encoder().eval()
    ids = random_ids(4, 12, pad_from=7)
    with torch.no_grad():
        h = enc(ids)  # (4, 12, 16)
        h_short = enc(ids[:, :7])  # the same sentences without padding
        assert h.shape == (4, 12, 16)
        assert torch.allclose(h[:, :7], h_short, atol=1e-5)
        # two of the four sentences shortened further: the others' outputs are unchanged
        shorter = ids.clone()
        shorter[:2, 4:] = pt.PAD_ID
        assert torch.allclose(enc(shorter)[2:], h[2:], atol=1e-6)
        assert torch.allclose(enc(shorter)[:2, :4], enc(ids[:2, :4]), atol=1e-5)


def test_encoder_is_bidirectional_and_rejects_bad_input():
    enc = small_encoder().eval()
    ids = random_ids(1, 12)
    changed = ids.clone()
    changed[0, 9] = 4 if ids[0, 9] != 4 else 5
    with torch.no_grad():
        assert (enc(ids) - enc(changed))[0, :9].abs().amax(-1).min().item() > 0
    with pytest.raises(ValueError, match="long"):
        enc(ids.float())
    with pytest.raises(ValueError, match="block_size"):
        enc(random_ids(1, 13))
    with pytest.raises(ValueError, match="divisible"):
        pt.EncoderConfig(vocab_size=V, d_model=10, num_heads=4)


def test_mlm_head_tied_and_loss_on_chosen_positions_only():
    enc = small_encoder()
    head = pt.MLMHead(enc)
    assert head.proj.weight is enc.tok_emb.weight
    ids = random_ids(6, 12)
    inputs, labels = pt.mask_tokens(ids, V, pt.MASK_ID, range(4), 0.3, torch.Generator().manual_seed(0))
    full = nn.functional.cross_entropy(head(enc(inputs)).flatten(0, 1), labels.flatten(), ignore_index=-100)
    assert torch.allclose(pt.mlm_loss(enc, head, inputs, labels), full, atol=1e-6)
    with pytest.raises(ValueError, match="no position"):
        pt.mlm_loss(enc, head, inputs, torch.full_like(labels, -100))


def test_pretrain_mlm_lowers_the_loss_and_is_reproducible():
    ids = torch.arange(4, 16).repeat(40, 1)  # the same sentence: easy to learn
    losses = []
    for _ in range(2):
        torch.manual_seed(0)
        enc = pt.Encoder(pt.EncoderConfig(vocab_size=V, block_size=12, num_layers=1, num_heads=2, d_model=16))
        h = pt.pretrain_mlm(enc, pt.MLMHead(enc), ids, steps=40, batch_size=16, lr=1e-2, seed=0, progress=False)
        losses.append(h.step_loss)
    assert losses[0] == losses[1] and len(losses[0]) == 40
    assert sum(losses[0][-10:]) / 10 < sum(losses[0][:10]) / 10 - 1.0


# --------------------------------------------------------------------------- adaptation


def test_classifier_pooling():
    enc = small_encoder().eval()
    ids = random_ids(3, 12, pad_from=8)
    with torch.no_grad():
        h = enc(ids)
        assert torch.allclose(pt.SequenceClassifier(enc).features(ids), h[:, :8].mean(1), atol=1e-6)
        assert torch.equal(pt.SequenceClassifier(enc, pooling="cls").features(ids), h[:, 0])
        assert pt.SequenceClassifier(enc, num_classes=3)(ids).shape == (3, 3)
    with pytest.raises(ValueError, match="pooling"):
        pt.SequenceClassifier(enc, pooling="max")


def _trained(mode):
    model = pt.SequenceClassifier(small_encoder())
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x, y = pt.word_order_examples(random_ids(32, 12, pad_from=10), torch.Generator().manual_seed(0))
    pt.finetune(model, x, y, steps=5, lr=1e-2, mode=mode, rank=2)
    return model, before


def test_probe_trains_only_the_head():
    model, before = _trained("probe")
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {"head.weight", "head.bias"}
    after = model.state_dict()
    for name, value in before.items():
        assert torch.equal(value, after[name]) == (not name.startswith("head.")), name


def test_lora_trains_only_lora_factors_and_the_head():
    model, before = _trained("lora")
    wrapped = [n for n, m in model.named_modules() if isinstance(m, LoRALinear)]
    assert len(wrapped) == 2 * 6  # q, k, v, out, linear1, linear2 in each of 2 layers
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {"head.weight", "head.bias"} | {f"{w}.lora_{ab}" for w in wrapped for ab in "AB"}
    after = model.state_dict()
    for name, value in before.items():  # every original weight is unchanged; only the head moved
        lora_name = name
        for w in wrapped:
            if name.startswith(w + "."):
                lora_name = name.replace(w + ".", w + ".base.")
        assert torch.equal(value, after[lora_name]) == (not name.startswith("head.")), name
    # rank 2: r * (in + out) per wrapped linear, d = 16, d_ff = 64
    per_layer = 4 * 2 * (16 + 16) + 2 * 2 * (16 + 64)
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == 2 * per_layer + 16 * 2 + 2


def test_full_finetune_learns_a_separable_task_and_accuracy_counts():
    torch.manual_seed(0)
    model = pt.SequenceClassifier(small_encoder())
    x = random_ids(64, 12)
    y = (x[:, 1] < 32).long()  # the first word decides the label
    pt.finetune(model, x, y, steps=80, lr=1e-2, mode="full")
    assert all(p.requires_grad for p in model.parameters())
    assert pt.accuracy(model, x, y) > 0.9
    assert pt.accuracy(model, x[:4], y[:4]) in (0.0, 0.25, 0.5, 0.75, 1.0)


def test_finetune_rejects_bad_input():
    model = pt.SequenceClassifier(small_encoder())
    x, y = random_ids(4, 12), torch.zeros(4, dtype=torch.long)
    with pytest.raises(ValueError, match="mode"):
        pt.finetune(model, x, y, steps=1, mode="adapter")
    with pytest.raises(ValueError, match="labels"):
        pt.finetune(model, x, y[:3], steps=1)
    with pytest.raises(ValueError, match="steps"):
        pt.finetune(model, x, y, steps=0)
