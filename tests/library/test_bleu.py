"""course_utils.bleu: the textbook examples, the brevity penalty, and agreement with sacreBLEU
to 1e-6 on random corpora (corpus and sentence level, one or several references, every
smoothing method, whitespace and 13a tokenization)."""

import math
import random

import pytest
import sacrebleu
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

from course_utils.bleu import (
    brevity_penalty,
    clipped_counts,
    closest_ref_length,
    corpus_bleu,
    modified_precision,
    ngram_counts,
    sentence_bleu,
)

SMOOTHINGS = ["none", "floor", "add-k", "exp"]


def test_ngram_counts_brute_force():
    tokens = "a b a b a c".split()
    assert ngram_counts(tokens, 1) == {("a",): 3, ("b",): 2, ("c",): 1}
    assert ngram_counts(tokens, 2) == {("a", "b"): 2, ("b", "a"): 2, ("a", "c"): 1}
    assert ngram_counts(tokens, 6) == {tuple(tokens): 1}
    assert ngram_counts(tokens, 7) == {}
    with pytest.raises(ValueError, match="split"):
        ngram_counts("a b", 1)


def test_the_times_seven_gives_two_sevenths():
    hypothesis = ["the"] * 7
    references = ["the cat is on the mat".split(), "there is a cat on the mat".split()]
    assert clipped_counts(hypothesis, references, 1) == (2, 7)
    assert modified_precision(hypothesis, references, 1) == pytest.approx(2 / 7)
    assert modified_precision(hypothesis, references, 2) == 0.0


def test_clipping_takes_the_max_over_references_not_the_sum():
    hypothesis = "a a a b".split()
    references = ["a b".split(), "a a c".split()]
    assert clipped_counts(hypothesis, references, 1) == (3, 4)  # a: min(3, max(1, 2)) + b: 1
    assert clipped_counts(hypothesis, references, 2) == (2, 3)  # (a a): 1, (a b): 1
    assert modified_precision(["x"], [["a"]], 2) == 0.0  # no bigrams at all


@pytest.mark.parametrize(
    "c, r, expected",
    [
        (10, 5, 1.0),
        (5, 5, 1.0),
        (3, 6, math.exp(-1)),
        (1, 4, math.exp(-3)),
        (0, 3, 0.0),
        (0, 0, 1.0),
        (9, 10, math.exp(1 - 10 / 9)),
    ],
)
def test_brevity_penalty_values(c, r, expected):
    assert brevity_penalty(c, r) == pytest.approx(expected, rel=1e-15)


def test_brevity_penalty_rejects_negative_lengths():
    with pytest.raises(ValueError):
        brevity_penalty(-1, 3)


def test_closest_reference_length_prefers_the_shorter_on_ties():
    assert closest_ref_length(5, [3, 7, 9]) == 3
    assert closest_ref_length(6, [3, 7, 9]) == 7
    assert closest_ref_length(5, [9, 4]) == 4


def test_perfect_and_disjoint_translations():
    assert corpus_bleu(["a b c d e"], [["a b c d e"]]).score == pytest.approx(100.0)
    assert corpus_bleu(["a b c d e"], [["v w x y z"]]).score == 0.0
    short = corpus_bleu(["a b c d"], [["a b c d e f"]])
    assert short.precisions == [1.0, 1.0, 1.0, 1.0]
    assert short.score == pytest.approx(100 * math.exp(1 - 6 / 4))


def test_corpus_bleu_is_not_the_mean_of_sentence_bleu():
    hyps = ["the cat sat on the mat", "a dog"]
    refs = [["the cat sat on the mat"], ["a dog barked loudly at night"]]
    corpus = corpus_bleu(hyps, refs).score
    mean_sentence = sum(sentence_bleu(h, r).score for h, r in zip(hyps, refs)) / 2
    expected = sacrebleu.corpus_bleu(hyps, [[r[0] for r in refs]], tokenize="none").score
    assert corpus == pytest.approx(expected, abs=1e-6)
    assert abs(corpus - mean_sentence) > 1


def _random_corpus(rng, num_sentences, num_refs, vocab_size=8, max_len=10):
    words = [f"w{i}" for i in range(vocab_size)]

    def sentence():
        return " ".join(rng.choice(words) for _ in range(rng.randint(0, max_len)))

    hyps = [sentence() for _ in range(num_sentences)]
    refs = [[sentence() for _ in range(rng.randint(1, num_refs))] for _ in range(num_sentences)]
    return hyps, refs


def _streams(refs):
    """Per-hypothesis reference lists -> sacreBLEU's reference streams (None where fewer refs)."""
    width = max(len(r) for r in refs)
    return [[r[k] if k < len(r) else None for r in refs] for k in range(width)]


@pytest.mark.parametrize("seed", range(40))
def test_corpus_bleu_agrees_with_sacrebleu(seed):
    rng = random.Random(seed)
    hyps, refs = _random_corpus(rng, rng.randint(1, 12), rng.randint(1, 4), vocab_size=rng.choice([4, 8, 30]))
    for smooth in SMOOTHINGS:
        for effective in (False, True):
            ours = corpus_bleu(hyps, refs, smooth=smooth, effective_order=effective)
            ref = sacrebleu.corpus_bleu(
                hyps, _streams(refs), smooth_method=smooth, tokenize="none", use_effective_order=effective
            )
            assert ours.score == pytest.approx(ref.score, abs=1e-6), (smooth, effective)
            assert ours.hyp_len == ref.sys_len and ours.ref_len == ref.ref_len
            assert ours.bp == pytest.approx(ref.bp, abs=1e-12)


@pytest.mark.parametrize("seed", range(40))
def test_sentence_bleu_agrees_with_sacrebleu(seed):
    rng = random.Random(1000 + seed)
    hyps, refs = _random_corpus(rng, 1, 3, vocab_size=rng.choice([3, 6, 12]))
    for smooth in SMOOTHINGS:
        for value in (None, 0.5):
            if value is not None and smooth in ("none", "exp"):
                continue
            ours = sentence_bleu(hyps[0], refs[0], smooth=smooth, smooth_value=value)
            ref = sacrebleu.sentence_bleu(hyps[0], refs[0], smooth_method=smooth, smooth_value=value, tokenize="none")
            assert ours.score == pytest.approx(ref.score, abs=1e-6), (smooth, value)


def test_agreement_with_the_13a_tokenizer_on_real_text():
    rng = random.Random(0)
    words = "The cat, the dog's bone; a (big) house. It's 3.5 km away! \"Quoted\" text - and more? yes".split()
    hyps = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 15))) for _ in range(25)]
    refs = [[" ".join(rng.choice(words) for _ in range(rng.randint(3, 15))) for _ in range(2)] for _ in range(25)]
    tok13a = Tokenizer13a()
    ours = corpus_bleu(hyps, refs, tokenize=lambda s: tok13a(s.rstrip()).split())
    ref = sacrebleu.corpus_bleu(hyps, _streams(refs), tokenize="13a")
    assert ours.score == pytest.approx(ref.score, abs=1e-6)
    assert ours.score > 0
    plain = corpus_bleu(hyps, refs)
    assert plain.score != pytest.approx(ref.score, abs=1e-3)  # tokenization matters


def test_max_order_and_a_single_string_reference():
    ours = corpus_bleu(["a b c a b"], ["a b c d"], max_n=2)
    # unigrams a, b, c, a, b: each clipped to its single reference count -> 3 of 5;
    # bigrams (a b), (b c), (c a), (a b): (a b) clipped to 1, (b c) matches -> 2 of 4
    assert ours.matches == [3, 2] and ours.totals == [5, 4]
    assert ours.score == pytest.approx(100 * math.sqrt(3 / 5 * 2 / 4))


def test_bleu_rejects_bad_input():
    with pytest.raises(ValueError, match="one entry per hypothesis"):
        corpus_bleu(["a b", "c d"], [["a b", "c d"]])
    with pytest.raises(ValueError, match="list of strings"):
        corpus_bleu("a b", [["a b"]])
    with pytest.raises(ValueError, match="smooth"):
        corpus_bleu(["a"], [["a"]], smooth="laplace")
    with pytest.raises(ValueError, match="max_n"):
        corpus_bleu(["a"], [["a"]], max_n=0)
    with pytest.raises(ValueError, match="non-empty"):
        corpus_bleu(["a"], [[]])
    with pytest.raises(ValueError, match="token lists"):
        clipped_counts(["a"], "a", 1)
