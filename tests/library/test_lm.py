"""course_utils.lm: the n-gram model against brute-force counting, the neural metrics against
torch's own cross-entropy, and the anchors (perfect model 1, uniform model |V|, entropy floor)."""

import math
import random

import pytest
import torch
import torch.nn.functional as F

from course_utils.data import MarkovSource
from course_utils.lm import NGramLM, bits_per_char, cross_entropy_from_logits, perplexity


def _random_corpus(seed, alphabet="abc", num=20):
    rng = random.Random(seed)
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(num)]


@pytest.mark.parametrize("order", [1, 2, 3])
@pytest.mark.parametrize("k", [0.5, 1.0])
def test_add_k_matches_brute_force_counting(order, k):
    corpus = _random_corpus(order)
    lm = NGramLM(order, "abc", k=k).fit(corpus)
    padded = [["<bos>"] * (order - 1) + list(s) + ["<eos>"] for s in corpus]
    rng = random.Random(1)
    for _ in range(20):
        context = tuple(rng.choice(["a", "b", "c", "<bos>"]) for _ in range(order - 1))
        token = rng.choice(["a", "b", "c", "<eos>"])
        # count (context, token) and context-followed-by-anything by scanning every window
        joint = sum(
            1
            for p in padded
            for t in range(order - 1, len(p))
            if tuple(p[t - order + 1 : t]) == context and p[t] == token
        )
        ctx = sum(1 for p in padded for t in range(order - 1, len(p)) if tuple(p[t - order + 1 : t]) == context)
        expected = (joint + k) / (ctx + k * 4)  # |V| = a, b, c, <eos>
        assert lm.prob(token, context) == pytest.approx(expected, rel=1e-12)
        assert lm.log_prob(token, context) == pytest.approx(math.log(expected), rel=1e-12)


@pytest.mark.parametrize("order", [1, 2, 4])
def test_distribution_sums_to_one_and_excludes_bos(order):
    lm = NGramLM(order, "abc", k=0.1).fit(_random_corpus(5))
    for context in ["", "a", "abca", "ccc"]:
        dist = lm.distribution(context)
        assert set(dist) == {"a", "b", "c", "<eos>"}
        assert sum(dist.values()) == pytest.approx(1.0, abs=1e-12)
    assert lm.vocab_size == 4


def test_sequence_nll_is_the_chain_rule():
    lm = NGramLM(3, "abc", k=0.3).fit(_random_corpus(2))
    seq = "abcab"
    nll, count = lm.sequence_nll(seq)
    # chain rule by hand: P(a|<bos><bos>) P(b|<bos>a) P(c|ab) P(a|bc) P(b|ca) P(<eos>|ab)
    manual = -sum(lm.log_prob(tok, seq[:i]) for i, tok in enumerate(seq)) - lm.log_prob("<eos>", seq)
    assert count == len(seq) + 1
    assert nll == pytest.approx(manual, rel=1e-12)
    assert lm.mean_nll([seq, "a"]) == pytest.approx((nll + lm.sequence_nll("a")[0]) / (count + 2))
    assert lm.perplexity([seq]) == pytest.approx(math.exp(nll / count))


def test_unfit_model_is_uniform_with_perplexity_vocab_size():
    lm = NGramLM(2, "abcdefg", k=1.0)
    assert lm.perplexity(["abc", "gfedcba"]) == pytest.approx(8.0)  # 7 letters + <eos>


def test_near_perfect_model_has_perplexity_near_one():
    text = "ab" * 500
    lm = NGramLM(2, "ab", k=1e-6, add_eos=False).fit([text])
    assert 1.0 <= lm.perplexity([text]) < 1.0001


def test_bigram_reaches_the_entropy_floor_of_a_markov_source():
    source = MarkovSource.random(seed=0)
    train, test = source.sample(40_000, seed=1), source.sample(10_000, seed=2)
    floor = math.exp(source.entropy_rate())
    ppl = {n: NGramLM(n, source.alphabet, k=0.01, add_eos=False).fit([train]).perplexity([test]) for n in (1, 2)}
    assert ppl[1] > floor * 1.1  # a unigram model ignores the dependence
    assert abs(ppl[2] - floor) / floor < 0.02  # a first-order source is a bigram model


def test_generate_is_reproducible_and_respects_the_vocabulary():
    lm = NGramLM(2, "abc", k=0.5).fit(_random_corpus(3))
    a, b = lm.generate(30, seed=7), lm.generate(30, seed=7)
    assert a == b
    assert len(a) <= 30 and set(a) <= {"a", "b", "c"}
    samples = {tuple(lm.generate(30, seed=s)) for s in range(10)}
    assert len(samples) > 1
    deterministic = NGramLM(2, "ab", k=1e-9, add_eos=False).fit(["abababab"])
    assert "".join(deterministic.generate(6, seed=0, context="a")) == "bababa"


def test_lm_rejects_bad_input():
    with pytest.raises(ValueError, match="k must be"):
        NGramLM(2, "ab", k=0)
    with pytest.raises(ValueError, match="k must be"):
        NGramLM(2, "ab", k=-1.0)
    with pytest.raises(ValueError, match="order"):
        NGramLM(0, "ab")
    with pytest.raises(ValueError, match="padding"):
        NGramLM(2, ["a", "<bos>"])
    with pytest.raises(ValueError, match="empty"):
        NGramLM(2, [])
    lm = NGramLM(2, "ab")
    with pytest.raises(ValueError, match="not in the vocabulary"):
        lm.fit(["abz"])
    with pytest.raises(ValueError, match="wrap a single string"):
        lm.fit("abab")
    with pytest.raises(ValueError, match="not in the vocabulary"):
        lm.prob("z", "a")
    with pytest.raises(ValueError, match="max_len"):
        lm.generate(-1)


@pytest.mark.parametrize("seed", range(4))
def test_cross_entropy_from_logits_equals_torch(seed):
    gen = torch.Generator().manual_seed(seed)
    batch_size, seq_len, vocab_size = (int(x) for x in torch.randint(1, 9, (3,), generator=gen))
    logits = torch.randn(batch_size, seq_len, vocab_size, generator=gen, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, vocab_size, (batch_size, seq_len), generator=gen)
    mask = torch.rand(batch_size, seq_len, generator=gen) < 0.7
    mask[0, 0] = True
    ours = cross_entropy_from_logits(logits, targets, mask)
    ref = F.cross_entropy(logits.transpose(1, 2), targets.masked_fill(~mask, -100), ignore_index=-100)
    assert ours.dim() == 0
    torch.testing.assert_close(ours, ref, rtol=1e-12, atol=1e-12)
    (g_ours,) = torch.autograd.grad(ours, logits)
    (g_ref,) = torch.autograd.grad(ref, logits)
    torch.testing.assert_close(g_ours, g_ref)
    unmasked = F.cross_entropy(logits.reshape(-1, vocab_size), targets.reshape(-1))
    torch.testing.assert_close(cross_entropy_from_logits(logits, targets), unmasked)


def test_padding_targets_are_ignored_even_out_of_range():
    logits = torch.randn(2, 3, 5)
    targets = torch.tensor([[1, 2, -100], [4, -100, -100]])
    mask = targets != -100
    value = cross_entropy_from_logits(logits, targets, mask)
    assert torch.isfinite(value)
    ref = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-100)
    torch.testing.assert_close(value, ref)


def test_cross_entropy_rejects_bad_input():
    logits, targets = torch.randn(2, 3, 4), torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="shape"):
        cross_entropy_from_logits(logits, torch.zeros(3, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="int64"):
        cross_entropy_from_logits(logits, targets.float())
    with pytest.raises(ValueError, match="bool"):
        cross_entropy_from_logits(logits, targets, torch.ones(2, 3))
    with pytest.raises(ValueError, match="no tokens"):
        cross_entropy_from_logits(logits, targets, torch.zeros(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"\(B, T, V\)"):
        cross_entropy_from_logits(logits[0], targets[0])
    with pytest.raises(ValueError, match="lie in"):
        cross_entropy_from_logits(logits, targets + 4)


def test_perplexity_anchors_and_bits():
    vocab_size = 11
    uniform = cross_entropy_from_logits(torch.zeros(3, 4, vocab_size), torch.randint(0, vocab_size, (3, 4)))
    assert perplexity(uniform).item() == pytest.approx(vocab_size)
    perfect_logits = torch.full((1, 5, vocab_size), -1e4)
    targets = torch.arange(5).unsqueeze(0)
    perfect_logits[0, torch.arange(5), targets[0]] = 1e4
    assert perplexity(cross_entropy_from_logits(perfect_logits, targets)).item() == pytest.approx(1.0)
    assert perplexity(0.0) == 1.0 and isinstance(perplexity(1.5), float)
    assert bits_per_char(math.log(2)) == pytest.approx(1.0)
    assert bits_per_char(math.log(vocab_size)) == pytest.approx(math.log2(vocab_size))
    assert isinstance(bits_per_char(torch.tensor(1.0)), torch.Tensor)
    with pytest.raises(ValueError):
        perplexity(-0.5)
    with pytest.raises(ValueError):
        bits_per_char("1.0")
