"""Unit 01: from raw text to padded batches of token ids.

Tokenizers (characters, whitespace words, a regular expression), a ``Vocab`` with four
specials at fixed ids, padding/collation into ``(ids, lengths, mask)`` batches, byte-pair
encoding learned from scratch and fastText-style character n-grams.

    tokens = regex_tokenize("Hello, world 42!")        # ['Hello', ',', 'world', '42', '!']
    vocab = Vocab.build([tokens], min_freq=1)
    ids, lengths, mask = pad_batch([vocab.encode(tokens)], bos_id=BOS_ID, eos_id=EOS_ID)
    bpe = BPETokenizer.train(text, num_merges=200)
    assert bpe.decode(bpe.encode(any_text)) == any_text
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import torch

from .primitives import lengths_to_mask  # noqa: F401 - re-exported: unit 01's padding masks

SPECIALS = ("<pad>", "<unk>", "<bos>", "<eos>")
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3

# Words (letters and underscores, with an inner apostrophe: "don't"), numbers ("3.14"),
# and each punctuation character on its own. Whitespace is dropped.
TOKEN_PATTERN = re.compile(r"[^\W\d]+(?:'[^\W\d]+)?|\d+(?:\.\d+)?|[^\w\s]")
# BPE pre-tokenization (GPT-2 style): a word, a number or a run of punctuation with at most
# one leading space, or a run of whitespace. The chunks concatenate back to the input exactly.
CHUNK_PATTERN = re.compile(r" ?[^\W\d]+| ?\d+| ?[^\w\s]+|\s+(?!\S)|\s+")
_BYTE_TOKEN = re.compile(r"<0x([0-9A-F]{2})>")


def _check_text(text: object, name: str = "text") -> str:
    if not isinstance(text, str):
        raise ValueError(f"{name} must be a str, got {type(text).__name__}")
    return text


# --------------------------------------------------------------------------- tokenizers


def char_tokenize(text: str) -> list[str]:
    """Every character is a token (spaces included): ``"a b"`` -> ``['a', ' ', 'b']``."""
    return list(_check_text(text))


def word_tokenize(text: str, lower: bool = False) -> list[str]:
    """Split on runs of whitespace; punctuation stays glued to words (``"end."``)."""
    text = _check_text(text)
    return (text.lower() if lower else text).split()


def regex_tokenize(text: str, lower: bool = False, pattern: re.Pattern | str = TOKEN_PATTERN) -> list[str]:
    """Words, numbers and single punctuation marks (``TOKEN_PATTERN``), whitespace dropped.

    ``"Don't pay $3.50, ok?"`` -> ``["Don't", 'pay', '$', '3.50', ',', 'ok', '?']``.
    """
    text = _check_text(text)
    return re.findall(pattern, text.lower() if lower else text)


# --------------------------------------------------------------------------- vocabulary


@dataclass
class Vocab:
    """A bijection token <-> id whose ids ``0, 1, 2, 3`` are ``<pad> <unk> <bos> <eos>``.

    ``itos`` (id -> token) is the only state; ``stoi`` is derived. Build one from data with
    :meth:`Vocab.build`. Unknown tokens encode to ``UNK_ID``.
    """

    itos: list[str]
    stoi: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if tuple(self.itos[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"the first tokens must be the specials {SPECIALS}, got {self.itos[:4]}")
        if len(set(self.itos)) != len(self.itos):
            raise ValueError("itos contains duplicate tokens")
        self.stoi = {token: i for i, token in enumerate(self.itos)}

    @classmethod
    def build(cls, token_lists: Iterable[Sequence[str]], min_freq: int = 1, max_size: int | None = None) -> Vocab:
        """Count tokens over ``token_lists`` (a list of token lists) and keep the frequent ones.

        A token is kept when it occurs at least ``min_freq`` times. Tokens are ordered by
        decreasing frequency; ties are broken by FIRST APPEARANCE in the corpus (a stable sort
        of the counts in insertion order), so the result is deterministic. ``max_size`` bounds
        ``len(vocab)`` *including* the four specials (so it must be >= 4). Specials found in
        the data are not counted twice.
        """
        if isinstance(token_lists, str):
            raise ValueError("token_lists must be a list of token lists, got a str")
        if not isinstance(min_freq, int) or min_freq < 1:
            raise ValueError(f"min_freq must be an int >= 1, got {min_freq!r}")
        if max_size is not None and (not isinstance(max_size, int) or max_size < len(SPECIALS)):
            raise ValueError(f"max_size must be an int >= {len(SPECIALS)} (it counts the specials), got {max_size!r}")
        counts: Counter[str] = Counter()
        for tokens in token_lists:
            if isinstance(tokens, str):
                raise ValueError("token_lists must contain token lists, found a str: wrap a single list as [tokens]")
            counts.update(tokens)
        ranked = sorted(counts.items(), key=lambda kv: -kv[1])  # stable: ties keep first appearance
        itos = list(SPECIALS) + [t for t, c in ranked if c >= min_freq and t not in SPECIALS]
        return cls(itos[:max_size] if max_size is not None else itos)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: object) -> bool:
        return token in self.stoi

    def token_to_id(self, token: str) -> int:
        """The id of ``token``, ``UNK_ID`` if it is not in the vocabulary."""
        return self.stoi.get(token, UNK_ID)

    def encode(self, tokens: Sequence[str], add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """Tokens -> ids (unknown -> ``UNK_ID``), optionally framed by ``BOS_ID``/``EOS_ID``."""
        if isinstance(tokens, str):
            raise ValueError("encode takes a list of tokens, got a str: tokenize it first")
        ids = [self.stoi.get(t, UNK_ID) for t in tokens]
        return [BOS_ID] * add_bos + ids + [EOS_ID] * add_eos

    def decode(self, ids: Sequence[int] | torch.Tensor, keep_specials: bool = False) -> list[str]:
        """Ids -> tokens. Unless ``keep_specials``, drops ``<pad> <bos> <eos>`` (``<unk>`` stays,
        it stands for a real word). Accepts a list of ints or a 1-D integer tensor."""
        if isinstance(ids, torch.Tensor):
            if ids.dim() != 1 or ids.is_floating_point():
                raise ValueError(f"ids must be a 1-D integer tensor, got shape {tuple(ids.shape)} dtype {ids.dtype}")
            ids = ids.tolist()
        out = []
        for i in ids:
            if not isinstance(i, int) or not 0 <= i < len(self.itos):
                raise ValueError(f"id {i!r} is not in range(0, {len(self.itos)})")
            if keep_specials or i not in (PAD_ID, BOS_ID, EOS_ID):
                out.append(self.itos[i])
        return out


# --------------------------------------------------------------------------- padding and collation


def pad_batch(
    sequences: Sequence[Sequence[int] | torch.Tensor],
    pad_id: int = PAD_ID,
    bos_id: int | None = None,
    eos_id: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-pad ``B`` id sequences into one batch.

    Each sequence is a list of ints or a 1-D integer tensor; ``bos_id``/``eos_id`` (if given)
    are added around every sequence first. Returns ``ids`` (B, T) long filled with ``pad_id``
    after each sequence, ``lengths`` (B,) long (including bos/eos), and ``mask`` (B, T) bool,
    True on real tokens and False on padding; ``T = max(lengths)``.
    """
    if isinstance(sequences, torch.Tensor) or len(sequences) == 0:
        raise ValueError("sequences must be a non-empty list of id sequences")
    rows = []
    for k, seq in enumerate(sequences):
        if isinstance(seq, torch.Tensor):
            if seq.dim() != 1 or seq.is_floating_point() or seq.dtype == torch.bool:
                raise ValueError(
                    f"sequence {k}: expected a 1-D integer tensor, got shape {tuple(seq.shape)} dtype {seq.dtype}"
                )
            seq = seq.tolist()
        if isinstance(seq, str) or not all(isinstance(i, int) and not isinstance(i, bool) for i in seq):
            raise ValueError(f"sequence {k}: expected a list of int ids, got {seq!r:.60}")
        rows.append(([bos_id] if bos_id is not None else []) + list(seq) + ([eos_id] if eos_id is not None else []))
    lengths = torch.tensor([len(r) for r in rows], dtype=torch.long)  # (B,)
    ids = torch.full((len(rows), int(lengths.max())), pad_id, dtype=torch.long)  # (B, T)
    for b, row in enumerate(rows):
        ids[b, : len(row)] = torch.tensor(row, dtype=torch.long)
    return ids, lengths, lengths_to_mask(lengths, ids.shape[1])


def collate(
    batch: Sequence[tuple[Sequence[int] | torch.Tensor, int]],
    pad_id: int = PAD_ID,
    bos_id: int | None = None,
    eos_id: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``DataLoader`` collate for ``(ids, label)`` pairs -> ``(ids (B,T), lengths (B,), mask (B,T), labels (B,))``.

    Use ``functools.partial(collate, bos_id=BOS_ID)`` to change the options.
    """
    if len(batch) == 0 or not all(isinstance(item, (tuple, list)) and len(item) == 2 for item in batch):
        raise ValueError("collate expects a non-empty list of (ids, label) pairs")
    ids, lengths, mask = pad_batch([item[0] for item in batch], pad_id, bos_id, eos_id)
    labels = torch.tensor([int(item[1]) for item in batch], dtype=torch.long)  # (B,)
    return ids, lengths, mask, labels


# --------------------------------------------------------------------------- byte-pair encoding


def pretokenize(text: str) -> list[str]:
    """Split ``text`` into BPE chunks (``CHUNK_PATTERN``); ``"".join(chunks) == text``.

    ``"Hello, world!"`` -> ``['Hello', ',', ' world', '!']``: merges never cross a chunk.
    """
    return CHUNK_PATTERN.findall(_check_text(text))


def merge_pair(symbols: Sequence[str], pair: tuple[str, str]) -> list[str]:
    """Replace every non-overlapping occurrence of ``pair``, scanning left to right, by one symbol."""
    a, b = pair
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:
            out.append(a + b)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def learn_bpe(word_counts: dict[str, int], num_merges: int) -> list[tuple[str, str]]:
    """Learn up to ``num_merges`` BPE merges from ``{word: count}`` (Sennrich et al., 2016).

    Every word starts as its characters. Each step counts adjacent symbol pairs (overlapping,
    weighted by the word's count), merges the most frequent pair everywhere, and records it.
    Ties go to the lexicographically smallest pair ``(a, b)``. Stops early when no word has two
    symbols left. Pair counts are updated incrementally, touching only words that contain
    the merged pair, so this is fast enough for ~10^5 distinct words.
    """
    if not isinstance(num_merges, int) or num_merges < 0:
        raise ValueError(f"num_merges must be an int >= 0, got {num_merges!r}")
    if not isinstance(word_counts, dict) or not all(isinstance(w, str) and w for w in word_counts):
        raise ValueError("word_counts must be a dict {non-empty str: count}")
    if any(not isinstance(c, int) or c < 1 for c in word_counts.values()):
        raise ValueError("word counts must be positive ints")
    words = [list(w) for w in word_counts]
    counts = list(word_counts.values())
    stats: Counter[tuple[str, str]] = Counter()
    where: dict[tuple[str, str], set[int]] = {}
    for i, w in enumerate(words):
        for pair in zip(w, w[1:]):
            stats[pair] += counts[i]
            where.setdefault(pair, set()).add(i)
    merges: list[tuple[str, str]] = []
    while len(merges) < num_merges and stats:
        best = min(stats, key=lambda p: (-stats[p], p))
        merges.append(best)
        for i in where.pop(best):
            old = words[i]
            new = merge_pair(old, best)
            if len(new) == len(old):  # stale index: the pair was merged away earlier
                continue
            for pair in zip(old, old[1:]):
                stats[pair] -= counts[i]
                if stats[pair] == 0:
                    del stats[pair]
            for pair in zip(new, new[1:]):
                stats[pair] += counts[i]
                where.setdefault(pair, set()).add(i)
            words[i] = new
        stats.pop(best, None)
    return merges


def apply_bpe(word: str, merges: Sequence[tuple[str, str]] | dict[tuple[str, str], int]) -> list[str]:
    """Segment ``word`` by applying ``merges`` in learned order (pass a ``{pair: rank}`` dict to
    avoid rebuilding it). Repeatedly merging the lowest-ranked pair present is equivalent to
    applying every merge in turn, because a merge only creates pairs that were learned later."""
    ranks = merges if isinstance(merges, dict) else {pair: r for r, pair in enumerate(merges)}
    symbols = list(_check_text(word, "word"))
    while len(symbols) > 1:
        best = min(zip(symbols, symbols[1:]), key=lambda p: ranks.get(p, len(ranks)))
        if best not in ranks:
            break
        symbols = merge_pair(symbols, best)
    return symbols


@dataclass
class BPETokenizer:
    """Byte-pair encoding with a byte fallback, trained from scratch.

    Training: the text is split into chunks (:func:`pretokenize`; a word keeps its leading
    space, so no end-of-word marker is needed and decoding is plain concatenation), then
    :func:`learn_bpe` runs on the chunk counts. The vocabulary is the four specials, the 256
    byte tokens ``<0x00> ... <0xFF>``, every character seen in training, then the merged
    symbols in learned order.

    Encoding applies the merges chunk by chunk. A character never seen in training (an emoji,
    say) has no token of its own; it is written as the tokens of its UTF-8 bytes (the "byte
    fallback" of SentencePiece), so ``<unk>`` is never produced and ``decode(encode(s)) == s``
    for every string ``s``: decoding joins the tokens and turns each run of byte tokens back
    into characters.
    """

    merges: list[tuple[str, str]]
    vocab: Vocab
    ranks: dict[tuple[str, str], int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.ranks = {pair: r for r, pair in enumerate(self.merges)}
        self._cache: dict[str, list[str]] = {}

    @classmethod
    def train(cls, text: str, num_merges: int) -> BPETokenizer:
        """Learn ``num_merges`` merges (fewer if the text runs out of pairs) from ``text``."""
        chunks = pretokenize(text)
        if not chunks:
            raise ValueError("cannot train BPE on empty text")
        merges = learn_bpe(dict(Counter(chunks)), num_merges)
        itos = list(SPECIALS) + [f"<0x{b:02X}>" for b in range(256)] + sorted(set(text))
        seen = set(itos)
        for a, b in merges:
            if a + b not in seen:  # ("ab","c") and ("a","bc") both give "abc"
                itos.append(a + b)
                seen.add(a + b)
        return cls(merges, Vocab(itos))

    def tokenize(self, text: str) -> list[str]:
        """``text`` -> token strings (merged symbols, or byte tokens for unknown characters)."""
        out = []
        for chunk in pretokenize(text):
            if chunk not in self._cache:
                pieces = []
                for symbol in apply_bpe(chunk, self.ranks):
                    if symbol in self.vocab:
                        pieces.append(symbol)
                    else:
                        pieces.extend(f"<0x{b:02X}>" for b in symbol.encode("utf-8", "surrogatepass"))
                self._cache[chunk] = pieces
            out.extend(self._cache[chunk])
        return out

    def encode(self, text: str) -> list[int]:
        """``text`` -> list of ids (never ``UNK_ID``)."""
        return [self.vocab.stoi[t] for t in self.tokenize(text)]

    def decode(self, ids: Sequence[int] | torch.Tensor) -> str:
        """Ids -> the exact text (specials are skipped)."""
        parts, pending = [], bytearray()
        for token in self.vocab.decode(ids):
            byte = _BYTE_TOKEN.fullmatch(token)
            if byte:
                pending.append(int(byte.group(1), 16))
                continue
            if pending:
                parts.append(pending.decode("utf-8", "surrogatepass"))
                pending = bytearray()
            parts.append(token)
        if pending:
            parts.append(pending.decode("utf-8", "surrogatepass"))
        return "".join(parts)

    def __len__(self) -> int:
        return len(self.vocab)


# --------------------------------------------------------------------------- character n-grams


def char_ngrams(word: str, n_min: int = 3, n_max: int | None = None, boundary: bool = True) -> list[str]:
    """fastText's character n-grams (Bojanowski et al., 2017) of ``word``.

    The word is wrapped as ``<word>`` (unless ``boundary=False``) and every substring of
    length ``n`` for ``n = n_min .. n_max`` (``n_max`` defaults to ``n_min``) is returned,
    ordered by ``n`` then by position, duplicates kept. ``char_ngrams("football", 3)`` ->
    ``['<fo', 'foo', 'oot', 'otb', 'tba', 'bal', 'all', 'll>']``. fastText also adds the
    whole ``<word>`` as one extra feature; this function does not.
    """
    word = _check_text(word, "word")
    if not word:
        raise ValueError("word must be non-empty")
    n_max = n_min if n_max is None else n_max
    if not isinstance(n_min, int) or not isinstance(n_max, int) or n_min < 1 or n_max < n_min:
        raise ValueError(f"need ints 1 <= n_min <= n_max, got n_min={n_min!r}, n_max={n_max!r}")
    wrapped = f"<{word}>" if boundary else word
    return [wrapped[i : i + n] for n in range(n_min, n_max + 1) for i in range(len(wrapped) - n + 1)]
