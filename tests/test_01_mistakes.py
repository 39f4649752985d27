"""Mistake bank of unit 01: plausible wrong answers, each of which must lose its cell's points."""

import pytest
from notebook_cells import Mistake, answer_ids, assert_loses_points, check_bank, run_test_cell

UNIT = "01_tokenization"

BANK = [
    # ---------------------------------------------------------------- Part A: build_vocab
    Mistake("vocab: no specials", answer="vocab_answer", test="vocab_test",
            patches=(("itos = list(SPECIALS) + [", "itos = ["),)),
    Mistake("vocab: specials in the wrong order", answer="vocab_answer", test="vocab_test",
            patches=(("list(SPECIALS) +", "list(reversed(SPECIALS)) +"),)),
    Mistake("vocab: min_freq strict", answer="vocab_answer", test="vocab_test",
            patches=(("c >= min_freq", "c > min_freq"),)),
    Mistake("vocab: max_size ignores the specials", answer="vocab_answer", test="vocab_test",
            patches=(("itos = itos[:max_size]", "itos = itos[: max_size + len(SPECIALS)]"),)),
    Mistake("vocab: ties broken alphabetically", answer="vocab_answer", test="vocab_test",
            patches=(("key=lambda kv: -kv[1]", "key=lambda kv: (-kv[1], kv[0])"),)),
    Mistake("vocab: document frequency instead of counts", answer="vocab_answer", test="vocab_test",
            patches=(("counts.update(tokens)", "counts.update(set(tokens))"),)),
    Mistake("vocab: special in the data added twice", answer="vocab_answer", test="vocab_test",
            patches=((" and tok not in SPECIALS", ""),)),
    Mistake("vocab: increasing frequency", answer="vocab_answer", test="vocab_test",
            patches=(("key=lambda kv: -kv[1]", "key=lambda kv: kv[1]"),)),
    Mistake("vocab: max_size off by one", answer="vocab_answer", test="vocab_test",
            patches=(("itos = itos[:max_size]", "itos = itos[: max_size - 1]"),)),
    # ---------------------------------------------------------------- Part B: Numericalizer
    Mistake("codec: unknown raises KeyError", answer="codec_answer", test="codec_test",
            patches=(("self.stoi.get(tok, UNK_ID)", "self.stoi[tok]"),)),
    Mistake("codec: unknown mapped to pad", answer="codec_answer", test="codec_test",
            patches=(("self.stoi.get(tok, UNK_ID)", "self.stoi.get(tok, PAD_ID)"),)),
    Mistake("codec: bos and eos swapped", answer="codec_answer", test="codec_test",
            patches=(("[BOS_ID] * add_bos + ids + [EOS_ID] * add_eos", "[EOS_ID] * add_bos + ids + [BOS_ID] * add_eos"),)),
    Mistake("codec: decode drops <unk> too", answer="codec_answer", test="codec_test",
            patches=(("(PAD_ID, BOS_ID, EOS_ID)", "(PAD_ID, UNK_ID, BOS_ID, EOS_ID)"),)),
    Mistake("codec: decode keeps padding", answer="codec_answer", test="codec_test",
            patches=(("(PAD_ID, BOS_ID, EOS_ID)", "(BOS_ID, EOS_ID)"),)),
    Mistake("codec: decode forgets tensor input", answer="codec_answer", test="codec_test",
            patches=(("            ids = ids.tolist()\n", "            pass\n"),)),
    Mistake("codec: decode returns a string", answer="codec_answer", test="codec_test",
            patches=(("return [self.itos[i] for i in ids if", "return ' '.join(self.itos[i] for i in ids if"),
                     ("(PAD_ID, BOS_ID, EOS_ID)]", "(PAD_ID, BOS_ID, EOS_ID))"))),
    Mistake("codec: encode returns a tensor", answer="codec_answer", test="codec_test",
            patches=(("return [BOS_ID] * add_bos + ids + [EOS_ID] * add_eos",
                      "return torch.tensor([BOS_ID] * add_bos + ids + [EOS_ID] * add_eos)"),)),
    # ---------------------------------------------------------------- Part C: pad_batch
    Mistake("pad: mask off by one", answer="pad_answer", test="pad_test",
            patches=(("torch.arange(max_len)[None, :] < lengths", "torch.arange(max_len)[None, :] <= lengths"),)),
    Mistake("pad: mask as long", answer="pad_answer", test="pad_test",
            patches=(("< lengths[:, None]  # (B, T)", "< lengths[:, None]  # (B, T)\n    mask = mask.long()"),)),
    Mistake("pad: mask compares with pad_id", answer="pad_answer", test="pad_test",
            patches=(("mask = torch.arange(max_len)[None, :] < lengths[:, None]", "mask = ids != pad_id"),)),
    Mistake("pad: float lengths", answer="pad_answer", test="pad_test",
            patches=(("dtype=torch.long)  # (B,)", "dtype=torch.float)  # (B,)"),)),
    Mistake("pad: left padding", answer="pad_answer", test="pad_test",
            patches=(("ids[b, : len(seq)] =", "ids[b, max_len - len(seq) :] ="),)),
    Mistake("pad: always pads with zero", answer="pad_answer", test="pad_test",
            patches=(("max_len), pad_id, dtype", "max_len), 0, dtype"),)),
    Mistake("pad: time-major output", answer="pad_answer", test="pad_test",
            patches=(("return ids, lengths, mask", "return ids.T, lengths, mask.T"),)),
    Mistake("pad: int32 ids", answer="pad_answer", test="pad_test",
            patches=(("pad_id, dtype=torch.long)", "pad_id, dtype=torch.int32)"),)),
    # ---------------------------------------------------------------- Part D: learn_bpe
    Mistake("bpe learn: counts not weighted", answer="bpe_learn_answer", test="bpe_learn_test",
            patches=(("pairs[a, b] += word_counts[w]", "pairs[a, b] += 1"),)),
    Mistake("bpe learn: ties by insertion order", answer="bpe_learn_answer", test="bpe_learn_test",
            patches=(("best = min(pairs, key=lambda p: (-pairs[p], p))", "best = max(pairs, key=pairs.get)"),)),
    Mistake("bpe learn: ties to the largest pair", answer="bpe_learn_answer", test="bpe_learn_test",
            patches=(("best = min(pairs, key=lambda p: (-pairs[p], p))", "best = max(pairs, key=lambda p: (pairs[p], p))"),)),
    Mistake("bpe learn: repeated pairs counted once per word", answer="bpe_learn_answer", test="bpe_learn_test",
            patches=(("in zip(symbols, symbols[1:])", "in set(zip(symbols, symbols[1:]))"),)),
    Mistake("bpe learn: no early stop", answer="bpe_learn_answer", test="bpe_learn_test",
            patches=(("if not pairs:", "if False:"),)),
    Mistake("bpe learn: overlapping merges", answer="bpe_learn_answer", test="bpe_learn_test",
            patches=(("i += 2", "i += 1"),)),
    Mistake("bpe learn: first occurrence only", answer="bpe_learn_answer", test="bpe_learn_test",
            patches=(("                    i += 2\n",
                      "                    out.extend(symbols[i + 2 :])\n                    break\n"),)),
    Mistake("bpe learn: records merged strings", answer="bpe_learn_answer", test="bpe_learn_test",
            patches=(("merges.append(best)", "merges.append(best[0] + best[1])"),)),
    # ---------------------------------------------------------------- Part E: bpe_encode
    Mistake("bpe encode: merges in reverse order", answer="bpe_encode_answer", test="bpe_encode_test",
            patches=(("for a, b in merges:", "for a, b in reversed(merges):"),)),
    Mistake("bpe encode: merges sorted", answer="bpe_encode_answer", test="bpe_encode_test",
            patches=(("for a, b in merges:", "for a, b in sorted(merges):"),)),
    Mistake("bpe encode: overlapping", answer="bpe_encode_answer", test="bpe_encode_test",
            patches=(("i += 2", "i += 1"),)),
    Mistake("bpe encode: last pair never merged", answer="bpe_encode_answer", test="bpe_encode_test",
            patches=(("if i + 1 < len(symbols)", "if i + 2 < len(symbols)"),)),
    Mistake("bpe encode: starts from the whole word", answer="bpe_encode_answer", test="bpe_encode_test",
            patches=(("symbols = list(word)", "symbols = [word]"),)),
    Mistake("bpe encode: returns a string", answer="bpe_encode_answer", test="bpe_encode_test",
            patches=(("    return symbols\n", "    return ' '.join(symbols)\n"),)),
    Mistake("bpe encode: first occurrence only", answer="bpe_encode_answer", test="bpe_encode_test",
            patches=(("                i += 2\n", "                out.extend(symbols[i + 2 :])\n                break\n"),)),
    # ---------------------------------------------------------------- Part F: char_ngrams
    Mistake("ngrams: no boundary markers", answer="ngrams_answer", test="ngrams_test",
            patches=(('wrapped = "<" + word + ">"', "wrapped = word"),)),
    Mistake("ngrams: last n-gram dropped", answer="ngrams_answer", test="ngrams_test",
            patches=(("range(len(wrapped) - n + 1)", "range(len(wrapped) - n)"),)),
    Mistake("ngrams: n_max exclusive", answer="ngrams_answer", test="ngrams_test",
            patches=(("range(n_min, n_max + 1)", "range(n_min, n_max)"),)),
    Mistake("ngrams: whole word appended", answer="ngrams_answer", test="ngrams_test",
            patches=(("    return grams\n", "    return grams + [wrapped]\n"),)),
    Mistake("ngrams: duplicates removed", answer="ngrams_answer", test="ngrams_test",
            patches=(("    return grams\n", "    return list(dict.fromkeys(grams))\n"),)),
    Mistake("ngrams: ordered by position first", answer="ngrams_answer", test="ngrams_test",
            patches=(("    return grams\n", "    return sorted(grams, key=lambda g: wrapped.index(g))\n"),)),
]


def test_bank_covers_every_answer():
    check_bank(UNIT, BANK)


@pytest.mark.parametrize("answer", answer_ids(UNIT))
def test_solution_passes(answer):
    run_test_cell(UNIT, answer.replace("_answer", "_test"))


@pytest.mark.parametrize("mistake", BANK, ids=lambda m: m.name)
def test_mistake_loses_points(mistake):
    assert_loses_points(UNIT, mistake)
