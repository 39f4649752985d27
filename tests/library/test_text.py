"""Tests of course_utils.text against independent references (brute force, torch built-ins)."""

from __future__ import annotations

import functools
import random
from collections import Counter

import pytest
import torch
from torch.nn.utils.rnn import pad_sequence

from course_utils.data import python_docs_text, train_val_split
from course_utils.text import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    SPECIALS,
    UNK_ID,
    BPETokenizer,
    Vocab,
    apply_bpe,
    char_ngrams,
    char_tokenize,
    collate,
    learn_bpe,
    merge_pair,
    pad_batch,
    pretokenize,
    regex_tokenize,
    word_tokenize,
)

# --------------------------------------------------------------------------- references


def naive_learn_bpe(word_counts: dict[str, int], num_merges: int) -> list[tuple[str, str]]:
    """Textbook BPE: recount every pair from scratch after every merge."""
    words = {w: list(w) for w in word_counts}
    merges = []
    for _ in range(num_merges):
        pairs: Counter = Counter()
        for w, symbols in words.items():
            for k in range(len(symbols) - 1):
                pairs[symbols[k], symbols[k + 1]] += word_counts[w]
        if not pairs:
            break
        top = max(pairs.values())
        best = sorted(p for p, c in pairs.items() if c == top)[0]
        merges.append(best)
        for w, symbols in words.items():
            out, k = [], 0
            while k < len(symbols):
                if symbols[k : k + 2] == list(best):
                    out.append(best[0] + best[1])
                    k += 2
                else:
                    out.append(symbols[k])
                    k += 1
            words[w] = out
    return merges


def sequential_apply(word: str, merges) -> list[str]:
    """Apply each merge in learned order to the whole word (the definition, without ranks)."""
    symbols = list(word)
    for a, b in merges:
        out, k = [], 0
        while k < len(symbols):
            if k + 1 < len(symbols) and (symbols[k], symbols[k + 1]) == (a, b):
                out.append(a + b)
                k += 2
            else:
                out.append(symbols[k])
                k += 1
        symbols = out
    return symbols


def random_word_counts(seed: int, alphabet: str = "abc", num_words: int = 40) -> dict[str, int]:
    rng = random.Random(seed)
    return {
        "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8))): rng.randint(1, 5) for _ in range(num_words)
    }


@pytest.fixture(scope="module")
def docs() -> tuple[str, str]:
    return train_val_split(python_docs_text(max_chars=120_000), val_fraction=0.2)


# --------------------------------------------------------------------------- tokenizers


def test_char_tokenize_keeps_every_character():
    text = "Hi, you!\n\tok"
    assert char_tokenize(text) == ["H", "i", ",", " ", "y", "o", "u", "!", "\n", "\t", "o", "k"]
    assert "".join(char_tokenize(text)) == text


def test_word_tokenize_splits_on_whitespace_only():
    assert word_tokenize("The end.  Really?\nYes") == ["The", "end.", "Really?", "Yes"]
    assert word_tokenize("The End", lower=True) == ["the", "end"]


def test_regex_tokenize_words_numbers_punctuation():
    assert regex_tokenize("Don't pay $3.50, ok?") == ["Don't", "pay", "$", "3.50", ",", "ok", "?"]
    assert regex_tokenize("x2 = f(y)") == ["x", "2", "=", "f", "(", "y", ")"]
    assert regex_tokenize("__init__()") == ["__init__", "(", ")"]
    assert regex_tokenize("ABC", lower=True) == ["abc"]
    assert regex_tokenize("a-b", pattern=r"\w") == ["a", "b"]


@pytest.mark.parametrize("fn", [char_tokenize, word_tokenize, regex_tokenize, pretokenize])
def test_tokenizers_reject_non_strings(fn):
    with pytest.raises(ValueError, match="str"):
        fn(["a", "b"])


# --------------------------------------------------------------------------- vocabulary


def test_vocab_specials_first_then_frequency_then_first_appearance():
    vocab = Vocab.build([["b", "a", "c"], ["a", "c", "d"], ["d"]])
    # a, c, d occur twice (first seen in that order), b once
    assert vocab.itos == list(SPECIALS) + ["a", "c", "d", "b"]
    assert [vocab.stoi[s] for s in SPECIALS] == [PAD_ID, UNK_ID, BOS_ID, EOS_ID] == [0, 1, 2, 3]
    assert len(vocab) == 8 and "a" in vocab and "z" not in vocab


def test_vocab_min_freq_and_max_size():
    corpus = [["x"] * 5 + ["y"] * 3 + ["z"] * 2 + ["w"]]
    assert Vocab.build(corpus, min_freq=2).itos[4:] == ["x", "y", "z"]
    assert Vocab.build(corpus, min_freq=3).itos[4:] == ["x", "y"]
    assert Vocab.build(corpus, max_size=6).itos == list(SPECIALS) + ["x", "y"]
    assert len(Vocab.build(corpus, max_size=4)) == 4
    assert len(Vocab.build(corpus, min_freq=2, max_size=100)) == 7


def test_vocab_does_not_duplicate_specials_found_in_data():
    vocab = Vocab.build([["<pad>", "a", "<unk>", "<unk>"]])
    assert vocab.itos == list(SPECIALS) + ["a"]


def test_vocab_encode_decode_with_unknown_and_specials():
    vocab = Vocab.build([["the", "cat", "sat"]])
    ids = vocab.encode(["the", "dog", "sat"], add_bos=True, add_eos=True)
    assert ids == [BOS_ID, vocab.stoi["the"], UNK_ID, vocab.stoi["sat"], EOS_ID]
    assert vocab.decode(ids + [PAD_ID, PAD_ID]) == ["the", "<unk>", "sat"]
    assert vocab.decode(ids, keep_specials=True) == ["<bos>", "the", "<unk>", "sat", "<eos>"]
    assert vocab.decode(torch.tensor(ids)) == ["the", "<unk>", "sat"]
    assert vocab.token_to_id("dog") == UNK_ID


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: Vocab.build("a b c"), "str"),
        (lambda: Vocab.build(["a", "b"]), "wrap"),
        (lambda: Vocab.build([["a"]], min_freq=0), "min_freq"),
        (lambda: Vocab.build([["a"]], max_size=3), "max_size"),
        (lambda: Vocab(["a", "<pad>", "<unk>", "<bos>", "<eos>"]), "specials"),
        (lambda: Vocab(list(SPECIALS) + ["a", "a"]), "duplicate"),
        (lambda: Vocab.build([["a"]]).decode([5]), "range"),
        (lambda: Vocab.build([["a"]]).decode(torch.zeros(2, 2, dtype=torch.long)), "1-D"),
        (lambda: Vocab.build([["a"]]).encode("a"), "tokenize"),
    ],
)
def test_vocab_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_vocab_on_real_text_roundtrips_known_tokens(docs):
    train, _ = docs
    tokens = regex_tokenize(train, lower=True)
    vocab = Vocab.build([tokens], min_freq=2)
    counts = Counter(tokens)
    assert set(vocab.itos[4:]) == {t for t, c in counts.items() if c >= 2}
    freqs = [counts[t] for t in vocab.itos[4:]]
    assert freqs == sorted(freqs, reverse=True)
    sample = tokens[:200]
    decoded = vocab.decode(vocab.encode(sample))
    assert decoded == [t if counts[t] >= 2 else "<unk>" for t in sample]


# --------------------------------------------------------------------------- padding and collation


def test_pad_batch_matches_pad_sequence():
    gen = torch.Generator().manual_seed(0)
    seqs = [torch.randint(4, 50, (n,), generator=gen) for n in (3, 7, 1, 5)]
    ids, lengths, mask = pad_batch(seqs)
    reference = pad_sequence(seqs, batch_first=True, padding_value=PAD_ID)
    assert ids.dtype == torch.long and lengths.dtype == torch.long and mask.dtype == torch.bool
    assert ids.shape == (4, 7) and lengths.shape == (4,) and mask.shape == (4, 7)
    assert torch.equal(ids, reference)
    assert lengths.tolist() == [3, 7, 1, 5]
    assert torch.equal(mask, reference != PAD_ID)
    assert torch.equal(mask.sum(1), lengths)


def test_pad_batch_bos_eos_and_custom_pad():
    ids, lengths, mask = pad_batch([[5, 6], [7]], pad_id=-1, bos_id=BOS_ID, eos_id=EOS_ID)
    assert ids.tolist() == [[BOS_ID, 5, 6, EOS_ID], [BOS_ID, 7, EOS_ID, -1]]
    assert lengths.tolist() == [4, 3]
    assert mask.tolist() == [[True] * 4, [True, True, True, False]]


def test_pad_batch_keeps_pad_tokens_inside_a_sequence_in_the_mask():
    ids, lengths, mask = pad_batch([[0, 9], [9]])
    assert mask.tolist() == [[True, True], [True, False]]  # a real id equal to pad_id is still real


@pytest.mark.parametrize(
    "bad",
    [[], [[1, 2], "ab"], [[1.5, 2]], [torch.zeros(2, 2, dtype=torch.long)], [torch.ones(3)], [[True, False]]],
)
def test_pad_batch_errors(bad):
    with pytest.raises(ValueError):
        pad_batch(bad)


def test_collate_in_a_dataloader():
    data = [([4, 5, 6], 1), ([7], 0), ([8, 9], 1)]
    loader = torch.utils.data.DataLoader(data, batch_size=3, collate_fn=functools.partial(collate, eos_id=EOS_ID))
    ids, lengths, mask, labels = next(iter(loader))
    assert ids.tolist() == [[4, 5, 6, EOS_ID], [7, EOS_ID, 0, 0], [8, 9, EOS_ID, 0]]
    assert lengths.tolist() == [4, 2, 3] and labels.tolist() == [1, 0, 1] and labels.dtype == torch.long
    assert mask.sum().item() == 9
    with pytest.raises(ValueError, match="pairs"):
        collate([[1, 2, 3]])


# --------------------------------------------------------------------------- BPE


def test_merge_pair_is_left_to_right_and_non_overlapping():
    assert merge_pair(list("aaa"), ("a", "a")) == ["aa", "a"]
    assert merge_pair(list("abab"), ("a", "b")) == ["ab", "ab"]
    assert merge_pair(list("ba"), ("a", "b")) == ["b", "a"]


def test_learn_bpe_hand_example():
    # pairs: (l,o) 7, (o,w) 7, (w,e) 2+... ; ties broken lexicographically
    merges = learn_bpe({"low": 5, "lower": 2, "newest": 6, "widest": 3}, 4)
    assert merges == naive_learn_bpe({"low": 5, "lower": 2, "newest": 6, "widest": 3}, 4)
    assert merges[:3] == [("e", "s"), ("es", "t"), ("l", "o")]


@pytest.mark.parametrize("seed", range(12))
def test_learn_bpe_equals_naive_recount(seed):
    counts = random_word_counts(seed, alphabet="abc" if seed % 2 else "abcdef")
    assert learn_bpe(counts, 30) == naive_learn_bpe(counts, 30)


def test_learn_bpe_stops_when_nothing_left_to_merge():
    merges = learn_bpe({"ab": 3, "c": 1}, 10)
    assert merges == [("a", "b")]
    assert learn_bpe({"abc": 1}, 0) == []


@pytest.mark.parametrize("seed", range(6))
def test_apply_bpe_equals_sequential_application(seed):
    counts = random_word_counts(seed, alphabet="abcd")
    merges = learn_bpe(counts, 25)
    rng = random.Random(100 + seed)
    for _ in range(30):
        word = "".join(rng.choice("abcde") for _ in range(rng.randint(1, 12)))  # 'e' is unseen
        assert apply_bpe(word, merges) == sequential_apply(word, merges)


def test_learned_segmentation_reproduced_by_apply(docs):
    train, _ = docs
    counts = dict(Counter(pretokenize(train[:20_000])))
    merges = learn_bpe(counts, 80)
    # after learning, every training chunk's segmentation uses only learned symbols
    symbols = {a + b for a, b in merges} | set(train[:20_000])
    for chunk in list(counts)[:300]:
        pieces = apply_bpe(chunk, merges)
        assert "".join(pieces) == chunk and all(p in symbols for p in pieces)


def test_pretokenize_concatenates_back():
    for text in ["Hello, world!", "  leading", "a\n\n  b\t\tc  ", "x=1.5;y", ""]:
        assert "".join(pretokenize(text)) == text
    assert pretokenize("Hello, world!") == ["Hello", ",", " world", "!"]


def test_bpe_roundtrip_on_docs_and_unseen_characters(docs):
    train, val = docs
    tok = BPETokenizer.train(train, num_merges=300)
    for text in [val, "naïve café → 😀 日本語\t\r\n", "<pad> <0x41> <unk>", "\ud800 lone surrogate", ""]:
        ids = tok.encode(text)
        assert all(isinstance(i, int) and 0 <= i < len(tok) for i in ids)
        assert UNK_ID not in ids
        assert tok.decode(ids) == text
    assert tok.decode(torch.tensor(tok.encode("def f(x):"))) == "def f(x):"


def test_bpe_merges_reduce_token_count(docs):
    train, val = docs
    lengths = [len(BPETokenizer.train(train, n).encode(val)) for n in (0, 50, 200, 800)]
    assert len(val) <= lengths[0] <= len(val.encode("utf-8"))  # no merges: one token per character (or byte)
    assert lengths == sorted(lengths, reverse=True) and len(set(lengths)) == 4
    assert lengths[-1] < 0.5 * lengths[0]  # 800 merges at least halve the sequence


def test_bpe_vocab_layout(docs):
    train, _ = docs
    tok = BPETokenizer.train(train[:5000], num_merges=40)
    assert tok.vocab.itos[:4] == list(SPECIALS)
    assert tok.vocab.itos[4] == "<0x00>" and tok.vocab.itos[259] == "<0xFF>"
    alphabet = sorted(set(train[:5000]))
    assert tok.vocab.itos[260 : 260 + len(alphabet)] == alphabet
    assert len(tok) == len({a + b for a, b in tok.merges} | set(tok.vocab.itos[: 260 + len(alphabet)]))
    assert tok.merges == naive_learn_bpe(dict(Counter(pretokenize(train[:5000]))), 40)


def test_bpe_errors():
    with pytest.raises(ValueError, match="num_merges"):
        learn_bpe({"ab": 1}, -1)
    with pytest.raises(ValueError, match="positive"):
        learn_bpe({"ab": 0}, 1)
    with pytest.raises(ValueError, match="word_counts"):
        learn_bpe(["ab"], 1)
    with pytest.raises(ValueError, match="empty"):
        BPETokenizer.train("", 5)


# --------------------------------------------------------------------------- character n-grams


def test_char_ngrams_football():
    assert char_ngrams("football", 3) == ["<fo", "foo", "oot", "otb", "tba", "bal", "all", "ll>"]


def test_char_ngrams_range_count_and_order():
    word = "where"
    grams = char_ngrams(word, 3, 6)
    wrapped = f"<{word}>"
    expected = [wrapped[i : i + n] for n in range(3, 7) for i in range(len(wrapped) - n + 1)]
    assert grams == expected
    assert len(grams) == sum(len(wrapped) - n + 1 for n in range(3, 7))
    assert grams[:5] == ["<wh", "whe", "her", "ere", "re>"]
    assert char_ngrams("ab", 2, boundary=False) == ["ab"]
    assert char_ngrams("a", 5) == []
    assert char_ngrams("aaa", 2) == ["<a", "aa", "aa", "a>"]


@pytest.mark.parametrize("args", [("", 3), ("word", 0), ("word", 4, 3), (["w"], 3), ("word", 2.5)])
def test_char_ngrams_errors(args):
    with pytest.raises(ValueError):
        char_ngrams(*args)
