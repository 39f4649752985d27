"""Tests of course_utils.recall: the MQAR batches ask what they should (checked pair by pair in Python),
every mixer's model is causal and has the shapes and parameter counts it claims, the matmul WKV equals
course_utils.rwkv's, and a short training run of softmax attention recalls far above chance."""

import pytest
import torch
import torch.nn as nn

from course_utils import recall as rc
from course_utils.rwkv import TimeMix, wkv_by_matmul, wkv_parallel


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


# --------------------------------------------------------------------------- the task


@pytest.mark.parametrize("seq_len", [None, 40])
def test_mqar_batch_asks_for_the_paired_value(seq_len):
    vocab, n_pairs, n_queries = 32, 6, 4
    inputs, targets = rc.mqar_batch(8, n_pairs, n_queries, vocab, gen(1), seq_len=seq_len)
    length = 2 * n_pairs + n_queries if seq_len is None else seq_len
    assert inputs.shape == targets.shape == (8, length) and inputs.dtype == targets.dtype == torch.long
    for row_in, row_tg in zip(inputs.tolist(), targets.tolist()):
        keys, values = row_in[0 : 2 * n_pairs : 2], row_in[1 : 2 * n_pairs : 2]
        assert len(set(keys)) == n_pairs, "keys are distinct within a sequence"
        assert all(1 <= key < vocab // 2 for key in keys) and all(vocab // 2 <= v < vocab for v in values)
        pairs = dict(zip(keys, values))
        asked = [t for t in range(length) if row_tg[t] != rc.IGNORE]
        assert len(asked) == n_queries and all(t >= 2 * n_pairs for t in asked)
        assert len({row_in[t] for t in asked}) == n_queries, "each query asks for a different key"
        for t in asked:
            assert row_in[t] in pairs and row_tg[t] == pairs[row_in[t]], "the target is the value paired with the key"
        others = [row_in[t] for t in range(2 * n_pairs, length) if t not in asked]
        assert all(token == 0 for token in others), "positions that ask nothing hold the filler"


def test_mqar_batch_is_reproducible_and_random():
    a, b, c = rc.mqar_batch(4, 5, 5, 64, gen(3)), rc.mqar_batch(4, 5, 5, 64, gen(3)), rc.mqar_batch(4, 5, 5, 64, gen(4))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) and not torch.equal(a[0], c[0])


def test_mqar_batch_queries_come_in_every_order():
    inputs, targets = rc.mqar_batch(200, 4, 4, 16, gen(5))
    first_asked = inputs[:, 8]  # (B,): the first query
    first_key = inputs[:, 0]  # (B,)
    share = (first_asked == first_key).double().mean().item()
    assert 0.1 < share < 0.45, "the first query is the first key about a quarter of the time, not always"


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(n_pairs=16, vocab_size=32),  # 16 keys need 17 key tokens (0 is the filler)
        dict(vocab_size=33),
        dict(n_queries=9),
        dict(seq_len=20),
        dict(batch_size=0),
        dict(generator=0),
    ],
)
def test_mqar_batch_rejects_bad_arguments(kwargs):
    args = dict(batch_size=2, n_pairs=8, n_queries=8, vocab_size=64, generator=gen()) | kwargs
    with pytest.raises(ValueError):
        rc.mqar_batch(**args)


# --------------------------------------------------------------------------- the models


@pytest.mark.parametrize("mixer", rc.MIXERS)
def test_model_shapes_and_causality(mixer):
    torch.manual_seed(0)
    model = rc.RecallModel(mixer, vocab_size=32, d_model=16, num_heads=2, num_layers=2).double()
    inputs, _ = rc.mqar_batch(3, 5, 5, 32, gen(2))
    logits = model(inputs)
    assert logits.shape == (3, 15, 32) and logits.isfinite().all()
    changed = inputs.clone()
    changed[:, 9:] = 0  # change only the future of position 8
    assert torch.allclose(model(changed)[:, :9], logits[:, :9], rtol=0, atol=1e-12), "no position sees the future"
    assert not torch.allclose(model(changed)[:, 9:], logits[:, 9:])


def test_parameter_counts_are_equal_within_two_percent():
    counts = {m: rc.parameter_count(rc.RecallModel(m, vocab_size=64, d_model=32, num_heads=2)) for m in rc.MIXERS}
    assert counts["softmax"] == counts["linear"]
    base = counts["softmax"]
    assert all(abs(c / base - 1) < 0.02 for c in counts.values()), counts
    d_model, heads = 32, 2
    assert counts["gated"] - base == counts["deltanet"] - base == d_model * heads + heads, "one gate per head"
    assert counts["rwkv"] - base == 5 * d_model, "RWKV's decay, bonus and three mixing vectors"


def test_state_numbers():
    for mixer, expected in (("softmax", 0), ("linear", 2 * 8 * 16 + 2 * 8), ("gated", 2 * 8 * 16), ("rwkv", 4 * 32)):
        assert rc.RecallModel(
            mixer, 64, d_model=32, num_heads=2, d_k=8 if mixer != "rwkv" else None
        ).state_numbers() == (expected)
    assert rc.RecallModel("deltanet", 64, d_model=32, num_heads=4, num_layers=2).state_numbers() == 2 * 4 * 8 * 8


def test_model_rejects_bad_arguments():
    with pytest.raises(ValueError):
        rc.RecallModel("mamba", 64)
    with pytest.raises(ValueError):
        rc.RecallModel("softmax", 64, d_model=30, num_heads=4)
    with pytest.raises(ValueError):
        rc.RecallModel("softmax", 64)(torch.zeros(2, 5))


def test_rwkv_mixer_is_the_library_time_mix():
    g = gen(7)
    w, u = 2 * torch.rand(5, generator=g, dtype=torch.float64), torch.randn(5, generator=g, dtype=torch.float64)
    k, v = (
        4 * torch.randn(3, 23, 5, generator=g, dtype=torch.float64),
        torch.randn(3, 23, 5, generator=g, dtype=torch.float64),
    )
    assert (wkv_by_matmul(w, u, k, v) - wkv_parallel(w, u, k, v)).abs().max() < 1e-12
    mixer = rc.RecallMixer("rwkv", 8, 2).double()
    x = torch.randn(2, 11, 8, generator=g, dtype=torch.float64)
    assert (mixer(x) - TimeMix.forward(mixer.time_mix, x)[0]).abs().max() < 1e-12
    with pytest.raises(ValueError):
        wkv_by_matmul(w[:4], u, k, v)


# --------------------------------------------------------------------------- training and scoring


class _Oracle(nn.Module):
    """Puts the largest logit on a fixed answer: the targets where asked, token 0 elsewhere."""

    def __init__(self, targets, vocab):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1))
        self.answer, self.vocab = targets.clamp(min=0), vocab

    def forward(self, inputs):
        return nn.functional.one_hot(self.answer, self.vocab).double()  # (B, T, V)


def test_recall_accuracy_counts_only_the_queries():
    inputs, targets = rc.mqar_batch(4, 3, 2, 16, gen(8))
    assert rc.recall_accuracy(_Oracle(targets, 16), (inputs, targets)) == 1.0
    wrong = targets.clone()
    wrong[0][wrong[0] != rc.IGNORE] = 8 + (wrong[0][wrong[0] != rc.IGNORE] - 8 + 1) % 8  # 2 of 8 answers wrong
    assert rc.recall_accuracy(_Oracle(wrong, 16), (inputs, targets)) == 0.75
    with pytest.raises(ValueError):
        rc.recall_accuracy(_Oracle(targets, 16), (inputs, torch.full_like(targets, rc.IGNORE)))


def test_softmax_attention_learns_to_recall_far_above_chance():
    torch.manual_seed(0)
    model = rc.RecallModel("softmax", vocab_size=16, d_model=16, num_heads=2)
    losses = rc.train_recall(model, 4, steps=100, lr=3e-2, generator=gen(0), batch_size=16, show_progress=False)
    accuracy = rc.recall_accuracy(model, rc.mqar_batch(256, 4, 4, 16, gen(99)))
    assert len(losses) == 100 and losses[-1] < losses[0]
    assert accuracy > 0.5, f"chance is 1/8, got {accuracy}"


def test_train_recall_rejects_bad_arguments():
    model = rc.RecallModel("softmax", 16, d_model=8, num_heads=2)
    for kwargs in (dict(n_pairs=[]), dict(steps=0), dict(lr=-1.0)):
        args = dict(n_pairs=2, steps=1, lr=1e-3, generator=gen()) | kwargs
        with pytest.raises(ValueError):
            rc.train_recall(model, show_progress=False, **args)


def test_matched_init_starts_keys_as_queries():
    torch.manual_seed(0)
    for mixer in ("linear", "deltanet", "rwkv"):
        model = rc.RecallModel(mixer, 32, d_model=16, num_heads=2, d_k=4)
        assert torch.equal(model.previous.weight, model.embedding.weight)
        if mixer != "rwkv":
            layer = model.mixers[0]
            assert layer.key.weight.shape == (8, 16) and torch.equal(layer.key.weight, layer.query.weight)
    plain = rc.RecallModel("linear", 32, d_model=16, num_heads=2, matched_init=False)
    assert not torch.equal(plain.previous.weight, plain.embedding.weight)
