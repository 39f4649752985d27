"""Mistake bank of unit 01: plausible wrong answers, each of which must lose its cell's points.

The ``shortcut`` entries are whole answer cells that reach a switched-off function another way (an alias,
another module path, a subclass, a reference taken before the test): correct code that only the call
guard stops, with ``ForbiddenCall``."""

from notebook_cells import Mistake, bank_tests, frames_entry, honest_renamed

UNIT = "01_tokenization"

BANK = [
    # ---------------------------------------------------------------- Part A: build_vocab
    Mistake(
        "vocab: no specials",
        answer="vocab_answer",
        test="vocab_test",
        patches=(("itos = list(SPECIALS) + [", "itos = ["),),
    ),
    Mistake(
        "vocab: specials in the wrong order",
        answer="vocab_answer",
        test="vocab_test",
        patches=(("list(SPECIALS) +", "list(reversed(SPECIALS)) +"),),
    ),
    Mistake(
        "vocab: min_freq strict", answer="vocab_answer", test="vocab_test", patches=(("c >= min_freq", "c > min_freq"),)
    ),
    Mistake(
        "vocab: max_size ignores the specials",
        answer="vocab_answer",
        test="vocab_test",
        patches=(("itos = itos[:max_size]", "itos = itos[: max_size + len(SPECIALS)]"),),
    ),
    Mistake(
        "vocab: ties broken alphabetically",
        answer="vocab_answer",
        test="vocab_test",
        patches=(("key=lambda kv: -kv[1]", "key=lambda kv: (-kv[1], kv[0])"),),
    ),
    Mistake(
        "vocab: document frequency instead of counts",
        answer="vocab_answer",
        test="vocab_test",
        patches=(("counts.update(tokens)", "counts.update(set(tokens))"),),
    ),
    Mistake(
        "vocab: special in the data added twice",
        answer="vocab_answer",
        test="vocab_test",
        patches=((" and tok not in SPECIALS", ""),),
    ),
    Mistake(
        "vocab: increasing frequency",
        answer="vocab_answer",
        test="vocab_test",
        patches=(("key=lambda kv: -kv[1]", "key=lambda kv: kv[1]"),),
    ),
    Mistake(
        "vocab: max_size off by one",
        answer="vocab_answer",
        test="vocab_test",
        patches=(("itos = itos[:max_size]", "itos = itos[: max_size - 1]"),),
    ),
    Mistake(
        "shortcut (alias): the library's Vocab.build taken under another name",
        answer="vocab_answer",
        test="vocab_test",
        source='''import course_utils.text as _lib

_build = _lib.Vocab.build


def build_vocab(token_lists, min_freq=1, max_size=None):
    """token_lists: list of lists of str -> dict {token: id}, specials at ids 0..3."""
    return dict(_build(token_lists, min_freq=min_freq, max_size=max_size).stoi)
''',
    ),
    Mistake(
        "shortcut (subclass): a subclass of the library's Vocab builds it",
        answer="vocab_answer",
        test="vocab_test",
        source='''from course_utils.text import Vocab


class _Vocabulary(Vocab):
    pass


def build_vocab(token_lists, min_freq=1, max_size=None):
    """token_lists: list of lists of str -> dict {token: id}, specials at ids 0..3."""
    return dict(_Vocabulary.build(token_lists, min_freq=min_freq, max_size=max_size).stoi)
''',
    ),
    # ---------------------------------------------------------------- Part B: Numericalizer
    Mistake(
        "codec: unknown raises KeyError",
        answer="codec_answer",
        test="codec_test",
        patches=(("self.stoi.get(tok, UNK_ID)", "self.stoi[tok]"),),
    ),
    Mistake(
        "codec: unknown mapped to pad",
        answer="codec_answer",
        test="codec_test",
        patches=(("self.stoi.get(tok, UNK_ID)", "self.stoi.get(tok, PAD_ID)"),),
    ),
    Mistake(
        "codec: bos and eos swapped",
        answer="codec_answer",
        test="codec_test",
        patches=(("[BOS_ID] * add_bos + ids + [EOS_ID] * add_eos", "[EOS_ID] * add_bos + ids + [BOS_ID] * add_eos"),),
    ),
    Mistake(
        "codec: decode drops <unk> too",
        answer="codec_answer",
        test="codec_test",
        patches=(("(PAD_ID, BOS_ID, EOS_ID)", "(PAD_ID, UNK_ID, BOS_ID, EOS_ID)"),),
    ),
    Mistake(
        "codec: decode keeps padding",
        answer="codec_answer",
        test="codec_test",
        patches=(("(PAD_ID, BOS_ID, EOS_ID)", "(BOS_ID, EOS_ID)"),),
    ),
    Mistake(
        "codec: decode forgets tensor input",
        answer="codec_answer",
        test="codec_test",
        patches=(("            ids = ids.tolist()\n", "            pass\n"),),
    ),
    Mistake(
        "codec: decode returns a string",
        answer="codec_answer",
        test="codec_test",
        patches=(
            ("return [self.itos[i] for i in ids if", "return ' '.join(self.itos[i] for i in ids if"),
            ("(PAD_ID, BOS_ID, EOS_ID)]", "(PAD_ID, BOS_ID, EOS_ID))"),
        ),
    ),
    Mistake(
        "codec: encode returns a tensor",
        answer="codec_answer",
        test="codec_test",
        patches=(
            (
                "return [BOS_ID] * add_bos + ids + [EOS_ID] * add_eos",
                "return torch.tensor([BOS_ID] * add_bos + ids + [EOS_ID] * add_eos)",
            ),
        ),
    ),
    Mistake(
        "shortcut (alias): the library's Vocab under another name encodes and decodes",
        answer="codec_answer",
        test="codec_test",
        source='''import course_utils.text as _lib

_Impl = _lib.Vocab


class Numericalizer:
    """Tokens <-> ids for a vocabulary stoi (dict token -> id, specials at 0..3)."""

    def __init__(self, stoi):
        self._vocab = _Impl(sorted(stoi, key=stoi.get))

    def encode(self, tokens, add_bos=False, add_eos=False):
        return self._vocab.encode(list(tokens), add_bos=add_bos, add_eos=add_eos)

    def decode(self, ids):
        return self._vocab.decode(ids)
''',
    ),
    Mistake(
        "shortcut (subclass): Numericalizer subclasses the library's Vocab",
        answer="codec_answer",
        test="codec_test",
        source='''from course_utils.text import Vocab


class Numericalizer(Vocab):
    """Tokens <-> ids for a vocabulary stoi (dict token -> id, specials at 0..3)."""

    def __init__(self, stoi):
        super().__init__(sorted(stoi, key=stoi.get))
''',
    ),
    Mistake(
        "shortcut (methods borrowed): Vocab.encode and Vocab.decode as Numericalizer's own",
        answer="codec_answer",
        test="codec_test",
        source='''import course_utils.text as _lib


class Numericalizer:
    """Tokens <-> ids for a vocabulary stoi (dict token -> id, specials at 0..3)."""

    encode = _lib.Vocab.encode
    decode = _lib.Vocab.decode

    def __init__(self, stoi):
        self.stoi = dict(stoi)
        self.itos = sorted(self.stoi, key=self.stoi.get)
''',
    ),
    # ---------------------------------------------------------------- Part C: pad_batch
    Mistake(
        "pad: mask off by one",
        answer="pad_answer",
        test="pad_test",
        patches=(("torch.arange(max_len)[None, :] < lengths", "torch.arange(max_len)[None, :] <= lengths"),),
    ),
    Mistake(
        "pad: mask as long",
        answer="pad_answer",
        test="pad_test",
        patches=(("< lengths[:, None]  # (B, T)", "< lengths[:, None]  # (B, T)\n    mask = mask.long()"),),
    ),
    Mistake(
        "pad: mask compares with pad_id",
        answer="pad_answer",
        test="pad_test",
        patches=(("mask = torch.arange(max_len)[None, :] < lengths[:, None]", "mask = ids != pad_id"),),
    ),
    Mistake(
        "pad: float lengths",
        answer="pad_answer",
        test="pad_test",
        patches=(("dtype=torch.long)  # (B,)", "dtype=torch.float)  # (B,)"),),
    ),
    Mistake(
        "pad: left padding",
        answer="pad_answer",
        test="pad_test",
        patches=(("ids[b, : len(seq)] =", "ids[b, max_len - len(seq) :] ="),),
    ),
    Mistake(
        "pad: always pads with zero",
        answer="pad_answer",
        test="pad_test",
        patches=(("max_len), pad_id, dtype", "max_len), 0, dtype"),),
    ),
    Mistake(
        "pad: time-major output",
        answer="pad_answer",
        test="pad_test",
        patches=(("return ids, lengths, mask", "return ids.T, lengths, mask.T"),),
    ),
    Mistake(
        "pad: int32 ids",
        answer="pad_answer",
        test="pad_test",
        patches=(("pad_id, dtype=torch.long)", "pad_id, dtype=torch.int32)"),),
    ),
    Mistake(
        "shortcut (alias): the library's pad_batch taken under another name",
        answer="pad_answer",
        test="pad_test",
        source='''import course_utils.text as _lib

_library_pad = _lib.pad_batch


def pad_batch(sequences, pad_id=PAD_ID):
    """list of B lists of int -> (ids (B, T) long, lengths (B,) long, mask (B, T) bool)."""
    return _library_pad([list(seq) for seq in sequences], pad_id=pad_id)
''',
    ),
    Mistake(
        "shortcut (path): pad_sequence's C function torch._C._nn.pad_sequence",
        answer="pad_answer",
        test="pad_test",
        source='''def pad_batch(sequences, pad_id=PAD_ID):
    """list of B lists of int -> (ids (B, T) long, lengths (B,) long, mask (B, T) bool)."""
    rows = [torch.tensor(seq, dtype=torch.long) for seq in sequences]
    ids = torch._C._nn.pad_sequence(rows, True, float(pad_id), "right")  # (B, T)
    lengths = torch.tensor([len(seq) for seq in sequences], dtype=torch.long)  # (B,)
    mask = torch.arange(ids.shape[1])[None, :] < lengths[:, None]  # (B, T)
    return ids, lengths, mask
''',
    ),
    Mistake(
        "shortcut (path): pad_sequence taken before the test with functools.partial",
        answer="pad_answer",
        test="pad_test",
        source='''import functools

import torch.nn.utils.rnn

_pad_rows = functools.partial(torch.nn.utils.rnn.pad_sequence, batch_first=True)


def pad_batch(sequences, pad_id=PAD_ID):
    """list of B lists of int -> (ids (B, T) long, lengths (B,) long, mask (B, T) bool)."""
    ids = _pad_rows([torch.tensor(seq, dtype=torch.long) for seq in sequences], padding_value=pad_id)  # (B, T)
    lengths = torch.tensor([len(seq) for seq in sequences], dtype=torch.long)  # (B,)
    mask = torch.arange(ids.shape[1])[None, :] < lengths[:, None]  # (B, T)
    return ids, lengths, mask
''',
    ),
    Mistake(
        "shortcut (path): a nested tensor's to_padded_tensor",
        answer="pad_answer",
        test="pad_test",
        source='''def pad_batch(sequences, pad_id=PAD_ID):
    """list of B lists of int -> (ids (B, T) long, lengths (B,) long, mask (B, T) bool)."""
    rows = torch.nested.nested_tensor([torch.tensor(seq, dtype=torch.long) for seq in sequences])
    ids = rows.to_padded_tensor(pad_id)  # (B, T)
    lengths = torch.tensor([len(seq) for seq in sequences], dtype=torch.long)  # (B,)
    mask = torch.arange(ids.shape[1])[None, :] < lengths[:, None]  # (B, T)
    return ids, lengths, mask
''',
    ),
    # ---------------------------------------------------------------- Part D: learn_bpe
    Mistake(
        "bpe learn: counts not weighted",
        answer="bpe_learn_answer",
        test="bpe_learn_test",
        patches=(("pairs[a, b] += word_counts[w]", "pairs[a, b] += 1"),),
    ),
    Mistake(
        "bpe learn: ties by insertion order",
        answer="bpe_learn_answer",
        test="bpe_learn_test",
        patches=(("best = min(pairs, key=lambda p: (-pairs[p], p))", "best = max(pairs, key=pairs.get)"),),
    ),
    Mistake(
        "bpe learn: ties to the largest pair",
        answer="bpe_learn_answer",
        test="bpe_learn_test",
        patches=(
            ("best = min(pairs, key=lambda p: (-pairs[p], p))", "best = max(pairs, key=lambda p: (pairs[p], p))"),
        ),
    ),
    Mistake(
        "bpe learn: repeated pairs counted once per word",
        answer="bpe_learn_answer",
        test="bpe_learn_test",
        patches=(("in zip(symbols, symbols[1:])", "in set(zip(symbols, symbols[1:]))"),),
    ),
    Mistake(
        "bpe learn: no early stop",
        answer="bpe_learn_answer",
        test="bpe_learn_test",
        patches=(("if not pairs:", "if False:"),),
    ),
    Mistake(
        "bpe learn: overlapping merges",
        answer="bpe_learn_answer",
        test="bpe_learn_test",
        patches=(("i += 2", "i += 1"),),
    ),
    Mistake(
        "bpe learn: first occurrence only",
        answer="bpe_learn_answer",
        test="bpe_learn_test",
        patches=(
            (
                "                    i += 2\n",
                "                    out.extend(symbols[i + 2 :])\n                    break\n",
            ),
        ),
    ),
    Mistake(
        "bpe learn: records merged strings",
        answer="bpe_learn_answer",
        test="bpe_learn_test",
        patches=(("merges.append(best)", "merges.append(best[0] + best[1])"),),
    ),
    Mistake(
        "shortcut (alias): the library's learn_bpe taken under another name",
        answer="bpe_learn_answer",
        test="bpe_learn_test",
        source='''import course_utils.text as _lib

_learn = _lib.learn_bpe


def learn_bpe(word_counts, num_merges):
    """dict {word: count} -> list of at most num_merges merges (a, b), in learned order."""
    return _learn(dict(word_counts), num_merges)
''',
    ),
    Mistake(
        "shortcut (path, no built-in): learn_bpe reached through BPETokenizer.train's globals",
        answer="bpe_learn_answer",
        test="bpe_learn_test",
        source='''from course_utils.text import BPETokenizer

_learn = BPETokenizer.train.__globals__["learn_bpe"]


def learn_bpe(word_counts, num_merges):
    """dict {word: count} -> list of at most num_merges merges (a, b), in learned order."""
    return _learn(dict(word_counts), num_merges)
''',
    ),
    Mistake(
        "shortcut (core helper): the library's merge_pair does the merging",
        answer="bpe_learn_answer",
        test="bpe_learn_test",
        source='''from course_utils import text as _lib

_merge = _lib.merge_pair


def learn_bpe(word_counts, num_merges):
    """dict {word: count} -> list of at most num_merges merges (a, b), in learned order."""
    words = {w: list(w) for w in word_counts}
    merges = []
    for _ in range(num_merges):
        pairs = Counter()
        for w, symbols in words.items():
            for a, b in zip(symbols, symbols[1:]):
                pairs[a, b] += word_counts[w]
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        words = {w: _merge(symbols, best) for w, symbols in words.items()}
    return merges
''',
    ),
    # ---------------------------------------------------------------- Part E: bpe_encode
    Mistake(
        "bpe encode: merges in reverse order",
        answer="bpe_encode_answer",
        test="bpe_encode_test",
        patches=(("for a, b in merges:", "for a, b in reversed(merges):"),),
    ),
    Mistake(
        "bpe encode: merges sorted",
        answer="bpe_encode_answer",
        test="bpe_encode_test",
        patches=(("for a, b in merges:", "for a, b in sorted(merges):"),),
    ),
    Mistake(
        "bpe encode: overlapping", answer="bpe_encode_answer", test="bpe_encode_test", patches=(("i += 2", "i += 1"),)
    ),
    Mistake(
        "bpe encode: last pair never merged",
        answer="bpe_encode_answer",
        test="bpe_encode_test",
        patches=(("if i + 1 < len(symbols)", "if i + 2 < len(symbols)"),),
    ),
    Mistake(
        "bpe encode: starts from the whole word",
        answer="bpe_encode_answer",
        test="bpe_encode_test",
        patches=(("symbols = list(word)", "symbols = [word]"),),
    ),
    Mistake(
        "bpe encode: returns a string",
        answer="bpe_encode_answer",
        test="bpe_encode_test",
        patches=(("    return symbols\n", "    return ' '.join(symbols)\n"),),
    ),
    Mistake(
        "bpe encode: first occurrence only",
        answer="bpe_encode_answer",
        test="bpe_encode_test",
        patches=(
            ("                i += 2\n", "                out.extend(symbols[i + 2 :])\n                break\n"),
        ),
    ),
    Mistake(
        "shortcut (alias): the library's apply_bpe taken under another name",
        answer="bpe_encode_answer",
        test="bpe_encode_test",
        source='''import course_utils.text as _lib

_segment = _lib.apply_bpe


def bpe_encode(word, merges):
    """str, list of (a, b) merges -> list of str symbols whose concatenation is word."""
    return _segment(word, list(merges))
''',
    ),
    Mistake(
        "shortcut (core helper): the library's merge_pair applies each merge",
        answer="bpe_encode_answer",
        test="bpe_encode_test",
        source='''from course_utils.text import merge_pair as _merge


def bpe_encode(word, merges):
    """str, list of (a, b) merges -> list of str symbols whose concatenation is word."""
    symbols = list(word)
    for pair in merges:
        symbols = _merge(symbols, tuple(pair))
    return symbols
''',
    ),
    Mistake(
        "shortcut (path, no built-in): the library's BPETokenizer segments the word",
        answer="bpe_encode_answer",
        test="bpe_encode_test",
        source='''from course_utils.text import SPECIALS, BPETokenizer, Vocab


def bpe_encode(word, merges):
    """str, list of (a, b) merges -> list of str symbols whose concatenation is word."""
    symbols = list(dict.fromkeys([*SPECIALS, *word, *(a + b for a, b in merges)]))
    return BPETokenizer([tuple(m) for m in merges], Vocab(symbols)).tokenize(word)
''',
    ),
    # ---------------------------------------------------------------- Part F: bpe_tokenize / bpe_detokenize
    Mistake(
        "bpe fallback: merges ranked in sorted order, not learned order",
        answer="bpe_fallback_answer",
        test="bpe_fallback_test",
        patches=(("enumerate(merges)", "enumerate(sorted(merges))"),),
    ),
    Mistake(
        "bpe fallback: merges ranked last learned first",
        answer="bpe_fallback_answer",
        test="bpe_fallback_test",
        patches=(("enumerate(merges)", "enumerate(reversed(merges))"),),
    ),
    Mistake(
        "bpe fallback: rightmost occurrence of the best pair merged first",
        answer="bpe_fallback_answer",
        test="bpe_fallback_test",
        patches=(
            ("best, k = min((rank.get(pair, len(rank)), k)", "best, k = min((rank.get(pair, len(rank)), -k)"),
            ("            if best == len(rank):\n", "            k = -k\n            if best == len(rank):\n"),
        ),
    ),
    Mistake(
        "bpe fallback: greedy longest match in the vocabulary (WordPiece) instead of the merges",
        answer="bpe_fallback_answer",
        test="bpe_fallback_test",
        source='''import re

CHUNK_RE = re.compile(r" ?[^\\W\\d]+| ?\\d+| ?[^\\w\\s]+|\\s+(?!\\S)|\\s+")


def bpe_tokenize(text, merges, vocab):
    """str, list of merges (a, b) in learned order, dict token -> id -> list of int ids."""
    ids = []
    for chunk in CHUNK_RE.findall(text):
        start = 0
        while start < len(chunk):
            end = len(chunk)
            while end > start + 1 and chunk[start:end] not in vocab:  # the longest piece in the vocabulary
                end -= 1
            piece = chunk[start:end]
            if piece in vocab:
                ids.append(vocab[piece])
            else:
                ids.extend(vocab[f"<0x{byte:02X}>"] for byte in piece.encode("utf-8"))
            start = end
    return ids


def bpe_detokenize(ids, vocab):
    """list of int ids -> str: the tokens joined, each run of byte tokens decoded together as UTF-8."""
    token_of = {i: token for token, i in vocab.items()}
    raw = bytearray()
    for i in ids:
        token = token_of[i]
        if token.startswith("<0x") and token.endswith(">") and len(token) == 6:
            raw.append(int(token[3:5], 16))
        else:
            raw += token.encode("utf-8")
    return raw.decode("utf-8")
''',
    ),
    Mistake(
        "bpe fallback: chunks by str.split(), so the spaces are lost",
        answer="bpe_fallback_answer",
        test="bpe_fallback_test",
        patches=(("in CHUNK_RE.findall(text):", "in text.split():"),),
    ),
    Mistake(
        "bpe fallback: no chunks, merges run across the whole text",
        answer="bpe_fallback_answer",
        test="bpe_fallback_test",
        patches=(("in CHUNK_RE.findall(text):", "in ([text] if text else []):"),),
    ),
    Mistake(
        "bpe fallback: one byte token per character (its code point), not per UTF-8 byte",
        answer="bpe_fallback_answer",
        test="bpe_fallback_test",
        patches=(('for byte in symbol.encode("utf-8")', "for byte in map(ord, symbol)"),),
    ),
    Mistake(
        "bpe fallback: latin-1 bytes instead of UTF-8 when encoding",
        answer="bpe_fallback_answer",
        test="bpe_fallback_test",
        patches=(('symbol.encode("utf-8")', 'symbol.encode("latin-1", errors="replace")'),),
    ),
    Mistake(
        "bpe fallback: byte runs decoded as latin-1 instead of UTF-8",
        answer="bpe_fallback_answer",
        test="bpe_fallback_test",
        patches=(
            (
                '            pieces.append(run.decode("utf-8"))\n            run = bytearray()',
                '            pieces.append(run.decode("latin-1"))\n            run = bytearray()',
            ),
            (
                '    if run:\n        pieces.append(run.decode("utf-8"))\n    return',
                '    if run:\n        pieces.append(run.decode("latin-1"))\n    return',
            ),
        ),
    ),
    Mistake(
        "bpe fallback: unknown characters become <unk>",
        answer="bpe_fallback_answer",
        test="bpe_fallback_test",
        patches=(
            (
                'ids.extend(vocab[f"<0x{byte:02X}>"] for byte in symbol.encode("utf-8"))',
                'ids.append(vocab.get("<unk>", UNK_ID))',
            ),
        ),
    ),
    Mistake(
        "bpe fallback: byte ids computed as 4 + byte (the library's layout) instead of looked up",
        answer="bpe_fallback_answer",
        test="bpe_fallback_test",
        patches=(('vocab[f"<0x{byte:02X}>"] for byte', "4 + byte for byte"),),
    ),
    Mistake(
        "bpe fallback: byte tokens in lowercase hex",
        answer="bpe_fallback_answer",
        test="bpe_fallback_test",
        patches=(("{byte:02X}", "{byte:02x}"),),
    ),
    Mistake(
        "bpe fallback: each byte token decoded on its own",
        answer="bpe_fallback_answer",
        test="bpe_fallback_test",
        patches=(
            (
                "            run.append(int(found.group(1), 16))\n",
                '            pieces.append(bytes([int(found.group(1), 16)]).decode("utf-8", errors="replace"))\n',
            ),
        ),
    ),
    Mistake(
        "bpe fallback: a byte run at the end of the ids is dropped",
        answer="bpe_fallback_answer",
        test="bpe_fallback_test",
        patches=(('    if run:\n        pieces.append(run.decode("utf-8"))\n    return', "    return"),),
    ),
    Mistake(
        "bpe fallback: tokens joined with spaces",
        answer="bpe_fallback_answer",
        test="bpe_fallback_test",
        patches=(('"".join(pieces)', '" ".join(pieces)'),),
    ),
    Mistake(
        "shortcut (alias): the library's BPETokenizer under another name, on a stand-in vocabulary",
        answer="bpe_fallback_answer",
        test="bpe_fallback_test",
        source='''import re

import course_utils.text as _lib

CHUNK_RE = re.compile(r" ?[^\\W\\d]+| ?\\d+| ?[^\\w\\s]+|\\s+(?!\\S)|\\s+")
_Tokenizer = _lib.BPETokenizer


class _Table:
    """The little of a Vocab that BPETokenizer uses: membership, stoi and decode to tokens."""

    def __init__(self, vocab):
        self.stoi = dict(vocab)
        self.itos = {i: token for token, i in vocab.items()}

    def __contains__(self, token):
        return token in self.stoi

    def decode(self, ids):
        return [self.itos[i] for i in ids]


def bpe_tokenize(text, merges, vocab):
    """str, list of merges (a, b) in learned order, dict token -> id -> list of int ids."""
    return _Tokenizer([tuple(m) for m in merges], _Table(vocab)).encode(text)


def bpe_detokenize(ids, vocab):
    """list of int ids -> str: the tokens joined, each run of byte tokens decoded together as UTF-8."""
    return _Tokenizer([], _Table(vocab)).decode(list(ids))
''',
    ),
    Mistake(
        "shortcut (path, borrowed methods): BPETokenizer.tokenize and .decode called unbound on a stand-in",
        answer="bpe_fallback_answer",
        test="bpe_fallback_test",
        source='''import re
import types

from course_utils import text as _lib

CHUNK_RE = re.compile(r" ?[^\\W\\d]+| ?\\d+| ?[^\\w\\s]+|\\s+(?!\\S)|\\s+")
_tokenize, _decode = _lib.BPETokenizer.tokenize, _lib.BPETokenizer.decode


def bpe_tokenize(text, merges, vocab):
    """str, list of merges (a, b) in learned order, dict token -> id -> list of int ids."""
    ranks = {tuple(pair): r for r, pair in enumerate(merges)}
    stand_in = types.SimpleNamespace(ranks=ranks, vocab=vocab, _cache={})
    return [vocab[token] for token in _tokenize(stand_in, text)]


def bpe_detokenize(ids, vocab):
    """list of int ids -> str: the tokens joined, each run of byte tokens decoded together as UTF-8."""
    itos = {i: token for token, i in vocab.items()}
    table = types.SimpleNamespace(decode=lambda ids: [itos[i] for i in ids])
    return _decode(types.SimpleNamespace(vocab=table), list(ids))
''',
    ),
    Mistake(
        "shortcut (core helper): the library's apply_bpe segments each chunk",
        answer="bpe_fallback_answer",
        test="bpe_fallback_test",
        source='''import re

from course_utils.text import apply_bpe as _segment

CHUNK_RE = re.compile(r" ?[^\\W\\d]+| ?\\d+| ?[^\\w\\s]+|\\s+(?!\\S)|\\s+")


def bpe_tokenize(text, merges, vocab):
    """str, list of merges (a, b) in learned order, dict token -> id -> list of int ids."""
    ids = []
    for chunk in CHUNK_RE.findall(text):
        for symbol in _segment(chunk, list(merges)):
            if symbol in vocab:
                ids.append(vocab[symbol])
            else:
                ids.extend(vocab[f"<0x{byte:02X}>"] for byte in symbol.encode("utf-8"))
    return ids


def bpe_detokenize(ids, vocab):
    """list of int ids -> str: the tokens joined, each run of byte tokens decoded together as UTF-8."""
    token_of = {i: token for token, i in vocab.items()}
    raw = bytearray()
    for i in ids:
        token = token_of[i]
        if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
            raw.append(int(token[3:5], 16))
        else:
            raw += token.encode("utf-8")
    return raw.decode("utf-8")
''',
    ),
    # ---------------------------------------------------------------- Part G: char_ngrams
    Mistake(
        "ngrams: no boundary markers",
        answer="ngrams_answer",
        test="ngrams_test",
        patches=(('wrapped = "<" + word + ">"', "wrapped = word"),),
    ),
    Mistake(
        "ngrams: last n-gram dropped",
        answer="ngrams_answer",
        test="ngrams_test",
        patches=(("range(len(wrapped) - n + 1)", "range(len(wrapped) - n)"),),
    ),
    Mistake(
        "ngrams: n_max exclusive",
        answer="ngrams_answer",
        test="ngrams_test",
        patches=(("range(n_min, n_max + 1)", "range(n_min, n_max)"),),
    ),
    Mistake(
        "ngrams: whole word appended",
        answer="ngrams_answer",
        test="ngrams_test",
        patches=(("    return grams\n", "    return grams + [wrapped]\n"),),
    ),
    Mistake(
        "ngrams: duplicates removed",
        answer="ngrams_answer",
        test="ngrams_test",
        patches=(("    return grams\n", "    return list(dict.fromkeys(grams))\n"),),
    ),
    Mistake(
        "ngrams: ordered by position first",
        answer="ngrams_answer",
        test="ngrams_test",
        patches=(("    return grams\n", "    return sorted(grams, key=lambda g: wrapped.index(g))\n"),),
    ),
    Mistake(
        "shortcut (alias): the library's char_ngrams taken under another name",
        answer="ngrams_answer",
        test="ngrams_test",
        source='''import course_utils.text as _lib

_grams = _lib.char_ngrams


def char_ngrams(word, n_min=3, n_max=None):
    """str -> list of str: the n-grams of '<word>' for n = n_min..n_max, by n then position."""
    return _grams(word, n_min, n_max)
''',
    ),
    Mistake(
        "shortcut (path, no built-in): char_ngrams taken before the test with functools.partial",
        answer="ngrams_answer",
        test="ngrams_test",
        source='''import functools

import course_utils.text

_unwrapped_grams = functools.partial(course_utils.text.char_ngrams, boundary=False)


def char_ngrams(word, n_min=3, n_max=None):
    """str -> list of str: the n-grams of '<word>' for n = n_min..n_max, by n then position."""
    return _unwrapped_grams("<" + word + ">", n_min, n_max)
''',
    ),
]


# ---------------------------------------------------------------- frames: the test's reference read from its frames
# Each entry is a whole answer cell whose function walks its callers' frames (``sys._getframe`` and ``f_back`` to the
# top; ``f_locals`` and ``f_globals``; one level into tuples, lists and dicts) for the reference the OLD test cell
# computed before calling it, returns it when found, and something wrong (often: honest only on the visible
# test's inputs) when not. The test cells now compute every reference after the call, so each loses its points.


BANK += [
    frames_entry(
        "_expected (Numericalizer's encode and decode)",
        "codec_answer",
        "codec_test",
        """
class Numericalizer:
    def __init__(self, stoi):
        self.stoi = dict(stoi)

    def encode(self, tokens, add_bos=False, add_eos=False):
        found = _answer_key(("_expected", "expected", "_want"), accept=lambda v: isinstance(v, list))
        return list(found) if found is not None else []

    def decode(self, ids):
        found = _answer_key(("_expected", "expected", "_want"), accept=lambda v: isinstance(v, list))
        return list(found) if found is not None else []
""",
    ),
    frames_entry(
        "_expected (build_vocab)",
        "vocab_answer",
        "vocab_test",
        """
def build_vocab(token_lists, min_freq=1, max_size=None):
    found = _answer_key(("_expected", "expected",))
    if isinstance(found, dict):
        return dict(found)
    return {s: i for i, s in enumerate(SPECIALS)}
""",
    ),
    frames_entry(
        "_lens (pad_batch's lengths)",
        "pad_answer",
        "pad_test",
        """
def pad_batch(sequences, pad_id=PAD_ID):
    ids = torch.full((len(sequences), max(len(s) for s in sequences)), pad_id, dtype=torch.long)
    for b, seq in enumerate(sequences):
        ids[b, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
    found = _answer_key(("_lens",))
    if isinstance(found, list) and len(found) == len(sequences):
        lengths = torch.tensor(found, dtype=torch.long)
    else:  # counts the tokens that differ from pad_id: wrong when a real token equals it
        lengths = (ids != pad_id).sum(dim=1)
    mask = torch.arange(ids.shape[1])[None, :] < lengths[:, None]
    return ids, lengths, mask
""",
    ),
    frames_entry(
        "_expected (learn_bpe)",
        "bpe_learn_answer",
        "bpe_learn_test",
        """
def learn_bpe(word_counts, num_merges):
    found = _answer_key(("_expected", "expected",))
    return list(found) if isinstance(found, list) else []
""",
    ),
    frames_entry(
        "_expected (bpe_encode)",
        "bpe_encode_answer",
        "bpe_encode_test",
        """
def bpe_encode(word, merges):
    found = _answer_key(("_expected", "expected",))
    return list(found) if isinstance(found, list) else list(word)
""",
    ),
    frames_entry(
        "_expected (bpe_tokenize), checked by decoding it",
        "bpe_fallback_answer",
        "bpe_fallback_test",
        honest_renamed(UNIT, "bpe_fallback_answer", "bpe_tokenize")
        + """

def bpe_tokenize(text, merges, vocab):
    found = _answer_key(("_expected",))
    if isinstance(found, list) and all(isinstance(i, int) for i in found):
        try:
            if bpe_detokenize(found, vocab) == text:
                return list(found)
        except Exception:  # noqa: BLE001 - not ids of this vocabulary
            pass
    # otherwise the merges over the whole text, not per chunk: right on the visible tests only
    global CHUNK_RE
    saved, CHUNK_RE = CHUNK_RE, re.compile(r"(?s).+")
    try:
        return _honest_bpe_tokenize(text, merges, vocab)
    finally:
        CHUNK_RE = saved
""",
    ),
    frames_entry(
        "_expected (char_ngrams)",
        "ngrams_answer",
        "ngrams_test",
        """
def char_ngrams(word, n_min=3, n_max=None):
    found = _answer_key(("_expected", "expected",))
    return list(found) if isinstance(found, list) else []
""",
    ),
]

test_bank_covers_every_answer, test_solution_passes, test_mistake_loses_points = bank_tests(UNIT, BANK)
