"""Mistake bank of exercise 02 (evaluation): each plausible wrong answer must lose the points
of its test cell, run through the very test code nbgrader runs (hidden tests included).

The ``shortcut`` entries are whole answer cells that reach a switched-off function another way (an alias,
another module path, a subclass, a reference taken before the test): correct code that only the call
guard stops, with ``ForbiddenCall``."""

from notebook_cells import Mistake, bank_tests, frames_entries

UNIT = "02_evaluation"

BANK = [
    # (A) masked perplexity from logits
    Mistake(
        "mean over padded positions",
        answer="perplexity_answer",
        test="perplexity_test",
        patches=(("mean_nll = -(token_logp * mask).sum() / mask.sum()", "mean_nll = -token_logp.mean()"),),
    ),
    Mistake(
        "sum instead of mean",
        answer="perplexity_answer",
        test="perplexity_test",
        patches=(("-(token_logp * mask).sum() / mask.sum()", "-(token_logp * mask).sum()"),),
    ),
    Mistake(
        "log2 instead of ln (2 ** nats)",
        answer="perplexity_answer",
        test="perplexity_test",
        patches=(("return torch.exp(mean_nll)", "return 2 ** mean_nll"),),
    ),
    Mistake(
        "forgot the exp (returns mean NLL)",
        answer="perplexity_answer",
        test="perplexity_test",
        patches=(("return torch.exp(mean_nll)", "return mean_nll"),),
    ),
    Mistake(
        "softmax over the time axis",
        answer="perplexity_answer",
        test="perplexity_test",
        patches=(("torch.log_softmax(logits, dim=-1)", "torch.log_softmax(logits, dim=1)"),),
    ),
    Mistake(
        "log of softmax underflows",
        answer="perplexity_answer",
        test="perplexity_test",
        patches=(("torch.log_softmax(logits, dim=-1)", "torch.log(torch.softmax(logits, dim=-1))"),),
    ),
    Mistake(
        "gather with padding targets -100",
        answer="perplexity_answer",
        test="perplexity_test",
        patches=(("targets.masked_fill(~mask, 0)", "targets"),),
    ),
    Mistake(
        "mean of per-sequence perplexities",
        answer="perplexity_answer",
        test="perplexity_test",
        patches=(
            (
                "mean_nll = -(token_logp * mask).sum() / mask.sum()\n    return torch.exp(mean_nll)",
                "seq_nll = -(token_logp * mask).sum(1) / mask.sum(1)\n    return torch.exp(seq_nll).mean()",
            ),
        ),
    ),
    Mistake(
        "shortcut (alias): the library's cross_entropy_from_logits taken under another name",
        answer="perplexity_answer",
        test="perplexity_test",
        source='''import course_utils.lm as _lm

_mean_nll = _lm.cross_entropy_from_logits


def masked_perplexity(logits, targets, mask):
    """Perplexity exp(mean NLL) over the positions where mask is True."""
    return torch.exp(_mean_nll(logits, targets, mask))
''',
    ),
    Mistake(
        "shortcut (path): F.cross_entropy's C function torch._C._nn.cross_entropy_loss",
        answer="perplexity_answer",
        test="perplexity_test",
        source='''def masked_perplexity(logits, targets, mask):
    """Perplexity exp(mean NLL) over the positions where mask is True."""
    ignored = targets.masked_fill(~mask, -100)  # (B, T)
    mean_nll = torch._C._nn.cross_entropy_loss(logits.transpose(1, 2), ignored, None, 1, -100, 0.0)
    return torch.exp(mean_nll)
''',
    ),
    Mistake(
        "shortcut (path): nn.CrossEntropyLoss by its module path, built before the test",
        answer="perplexity_answer",
        test="perplexity_test",
        source='''import torch.nn.modules.loss

_loss = torch.nn.modules.loss.CrossEntropyLoss(ignore_index=-100)


def masked_perplexity(logits, targets, mask):
    """Perplexity exp(mean NLL) over the positions where mask is True."""
    return torch.exp(_loss(logits.transpose(1, 2), targets.masked_fill(~mask, -100)))
''',
    ),
    Mistake(
        "shortcut (path): F.nll_loss taken before the test with functools.partial",
        answer="perplexity_answer",
        test="perplexity_test",
        source='''import functools

import torch.nn.functional

_nll = functools.partial(torch.nn.functional.nll_loss, ignore_index=-100)


def masked_perplexity(logits, targets, mask):
    """Perplexity exp(mean NLL) over the positions where mask is True."""
    log_probs = torch.log_softmax(logits, dim=-1)  # (B, T, V)
    return torch.exp(_nll(log_probs.transpose(1, 2), targets.masked_fill(~mask, -100)))
''',
    ),
    Mistake(
        "shortcut (library): course_utils.taming's label_smoothed_cross_entropy without smoothing",
        answer="perplexity_answer",
        test="perplexity_test",
        source='''from course_utils.taming import label_smoothed_cross_entropy as _ce


def masked_perplexity(logits, targets, mask):
    """Perplexity exp(mean NLL) over the positions where mask is True."""
    flat_targets = targets.masked_fill(~mask, -100).reshape(-1)  # (B*T,)
    return torch.exp(_ce(logits.reshape(-1, logits.shape[-1]), flat_targets, smoothing=0.0))
''',
    ),
    # (B) bits per character of one text under any tokenization
    Mistake(
        "bits per token: divided by the number of tokens, not characters",
        answer="bpc_answer",
        test="bpc_test",
        patches=(("return total_bits / num_chars.sum()", "return total_bits / real_targets.shape[0]"),),
    ),
    Mistake(
        "nats per character: natural log, no conversion to bits",
        answer="bpc_answer",
        test="bpc_test",
        patches=(("total_bits = total_nats / math.log(2)", "total_bits = total_nats"),),
    ),
    Mistake(
        "nats to bits the wrong way round (times ln 2)",
        answer="bpc_answer",
        test="bpc_test",
        patches=(("total_bits = total_nats / math.log(2)", "total_bits = total_nats * math.log(2)"),),
    ),
    Mistake(
        "padding counted: the whole flattened batch scored, padded targets as token 0",
        answer="bpc_answer",
        test="bpc_test",
        patches=(
            ("real_logits = logits[mask]", "real_logits = logits.reshape(-1, logits.shape[-1])"),
            ("real_targets = targets[mask]", "real_targets = targets.reshape(-1).clamp(min=0)"),
        ),
    ),
    Mistake(
        "mean of the rows' bpc instead of total bits over total characters",
        answer="bpc_answer",
        test="bpc_test",
        source='''def bits_per_character(logits, targets, mask, num_chars):
    """Bits per character of the text spelled by the real tokens of a padded batch."""
    log_probs = torch.log_softmax(logits, dim=-1)  # (B, T, V)
    token_logp = log_probs.gather(-1, targets.masked_fill(~mask, 0).unsqueeze(-1)).squeeze(-1)  # (B, T)
    row_bits = -(token_logp * mask).sum(dim=1) / math.log(2)  # (B,)
    return (row_bits / num_chars).mean()
''',
    ),
    Mistake(
        "characters of the padded batch: every row as long as the longest",
        answer="bpc_answer",
        test="bpc_test",
        patches=(
            ("return total_bits / num_chars.sum()", "return total_bits / (num_chars.max() * num_chars.shape[0])"),
        ),
    ),
    Mistake(
        "log of softmax underflows for a confident model",
        answer="bpc_answer",
        test="bpc_test",
        patches=(("torch.log_softmax(real_logits, dim=-1)", "torch.log(torch.softmax(real_logits, dim=-1))"),),
    ),
    Mistake(
        "softmax over the tokens instead of the vocabulary",
        answer="bpc_answer",
        test="bpc_test",
        patches=(("torch.log_softmax(real_logits, dim=-1)", "torch.log_softmax(real_logits, dim=0)"),),
    ),
    Mistake(
        "returns a Python float",
        answer="bpc_answer",
        test="bpc_test",
        patches=(("return total_bits / num_chars.sum()", "return (total_bits / num_chars.sum()).item()"),),
    ),
    Mistake(
        "shortcut (alias): the library's cross_entropy_from_logits under another name, times the token count",
        answer="bpc_answer",
        test="bpc_test",
        source='''import course_utils.lm as _lm

_mean_nll = _lm.cross_entropy_from_logits


def bits_per_character(logits, targets, mask, num_chars):
    """Bits per character of the text spelled by the real tokens of a padded batch."""
    total_nats = _mean_nll(logits, targets, mask) * mask.sum()
    return total_nats / math.log(2) / num_chars.sum()
''',
    ),
    Mistake(
        "shortcut (library): the course's bits_per_char converts the total",
        answer="bpc_answer",
        test="bpc_test",
        source='''from course_utils.lm import bits_per_char as _to_bits


def bits_per_character(logits, targets, mask, num_chars):
    """Bits per character of the text spelled by the real tokens of a padded batch."""
    log_probs = torch.log_softmax(logits[mask], dim=-1)  # (N, V)
    total_nats = -log_probs[torch.arange(log_probs.shape[0]), targets[mask]].sum()
    return _to_bits(total_nats) / num_chars.sum()
''',
    ),
    Mistake(
        "shortcut (path): F.cross_entropy's C function with reduction sum",
        answer="bpc_answer",
        test="bpc_test",
        source='''def bits_per_character(logits, targets, mask, num_chars):
    """Bits per character of the text spelled by the real tokens of a padded batch."""
    ignored = targets.masked_fill(~mask, -100)  # (B, T)
    total_nats = torch._C._nn.cross_entropy_loss(logits.transpose(1, 2), ignored, None, 2, -100, 0.0)
    return total_nats / math.log(2) / num_chars.sum()
''',
    ),
    Mistake(
        "shortcut (operator): torch.ops.aten.cross_entropy_loss",
        answer="bpc_answer",
        test="bpc_test",
        source='''def bits_per_character(logits, targets, mask, num_chars):
    """Bits per character of the text spelled by the real tokens of a padded batch."""
    total_nats = torch.ops.aten.cross_entropy_loss(logits[mask], targets[mask], None, 2)
    return total_nats / math.log(2) / num_chars.sum()
''',
    ),
    Mistake(
        "shortcut (path): nn.CrossEntropyLoss(reduction='sum') by its module path, built before the test",
        answer="bpc_answer",
        test="bpc_test",
        source='''import torch.nn.modules.loss

_loss = torch.nn.modules.loss.CrossEntropyLoss(reduction="sum")


def bits_per_character(logits, targets, mask, num_chars):
    """Bits per character of the text spelled by the real tokens of a padded batch."""
    return _loss(logits[mask], targets[mask]) / math.log(2) / num_chars.sum()
''',
    ),
    Mistake(
        "shortcut (subclass): a loss derived from nn.NLLLoss",
        answer="bpc_answer",
        test="bpc_test",
        source='''class _SummedNLL(torch.nn.NLLLoss):
    """NLL summed over the tokens."""

    def __init__(self):
        super().__init__(reduction="sum")


def bits_per_character(logits, targets, mask, num_chars):
    """Bits per character of the text spelled by the real tokens of a padded batch."""
    log_probs = torch.log_softmax(logits[mask], dim=-1)  # (N, V)
    return _SummedNLL()(log_probs, targets[mask]) / math.log(2) / num_chars.sum()
''',
    ),
    Mistake(
        "shortcut (path): F.nll_loss with reduction sum, taken before the test with functools.partial",
        answer="bpc_answer",
        test="bpc_test",
        source='''import functools

import torch.nn.functional

_summed_nll = functools.partial(torch.nn.functional.nll_loss, reduction="sum")


def bits_per_character(logits, targets, mask, num_chars):
    """Bits per character of the text spelled by the real tokens of a padded batch."""
    log_probs = torch.log_softmax(logits[mask], dim=-1)  # (N, V)
    return _summed_nll(log_probs, targets[mask]) / math.log(2) / num_chars.sum()
''',
    ),
    # (C) clipped counts
    Mistake(
        "unclipped counts",
        answer="clip_answer",
        test="clip_test",
        patches=(("min(count, max_ref[gram])", "(count if max_ref[gram] else 0)"),),
    ),
    Mistake(
        "clip by the sum over references",
        answer="clip_answer",
        test="clip_test",
        patches=(("max_ref[gram] = max(max_ref[gram], count)", "max_ref[gram] += count"),),
    ),
    Mistake(
        "only the first reference",
        answer="clip_answer",
        test="clip_test",
        patches=(("for ref in references:", "for ref in references[:1]:"),),
    ),
    Mistake(
        "off-by-one n-gram range",
        answer="clip_answer",
        test="clip_test",
        patches=(("range(len(tokens) - n + 1)", "range(len(tokens) - n)"),),
    ),
    Mistake(
        "total counts distinct n-grams",
        answer="clip_answer",
        test="clip_test",
        patches=(("total = sum(hyp.values())", "total = len(hyp)"),),
    ),
    Mistake(
        "matches count n-gram types",
        answer="clip_answer",
        test="clip_test",
        patches=(
            (
                "matches = sum(min(count, max_ref[gram]) for gram, count in hyp.items())",
                "matches = len(set(hyp) & set(max_ref))",
            ),
        ),
    ),
    Mistake(
        "shortcut (alias): the library's clipped_counts taken under another name",
        answer="clip_answer",
        test="clip_test",
        source='''import course_utils.bleu as _bleu

_clip = _bleu.clipped_counts


def clipped_counts(hypothesis, references, n):
    """(clipped matches, total hypothesis n-grams) for one sentence, as a tuple of two ints."""
    return tuple(_clip(hypothesis, references, n))
''',
    ),
    Mistake(
        "shortcut (path): sacreBLEU's BLEU class by its module path counts",
        answer="clip_answer",
        test="clip_test",
        source='''import sacrebleu.metrics.bleu


def clipped_counts(hypothesis, references, n):
    """(clipped matches, total hypothesis n-grams) for one sentence, as a tuple of two ints."""
    scorer = sacrebleu.metrics.bleu.BLEU(tokenize="none", smooth_method="none", max_ngram_order=n)
    stats = scorer.corpus_score([" ".join(hypothesis)], [[" ".join(ref)] for ref in references])
    return stats.counts[n - 1], stats.totals[n - 1]
''',
    ),
    Mistake(
        "shortcut (core helper): sacreBLEU's extract_word_ngrams counts the n-grams",
        answer="clip_answer",
        test="clip_test",
        source='''from sacrebleu.metrics.helpers import extract_word_ngrams as _grams


def clipped_counts(hypothesis, references, n):
    """(clipped matches, total hypothesis n-grams) for one sentence, as a tuple of two ints."""
    hyp = _grams(list(hypothesis), n)
    max_ref = {}
    for ref in references:
        for gram, count in _grams(list(ref), n).items():
            max_ref[gram] = max(max_ref.get(gram, 0), count)
    matches = sum(min(count, max_ref.get(gram, 0)) for gram, count in hyp.items())
    return matches, sum(hyp.values())
''',
    ),
    Mistake(
        "shortcut (lazy): counts whose __int__ calls the library after the call returns",
        answer="clip_answer",
        test="clip_test",
        source='''import course_utils.bleu as _bleu


class _Count:
    """Looks like a count; works it out with the library only when int() asks."""

    def __init__(self, args, k):
        self.args, self.k = args, k

    def __int__(self):
        return _bleu.clipped_counts(*self.args)[self.k]


def clipped_counts(hypothesis, references, n):
    """(clipped matches, total hypothesis n-grams) for one sentence, as a tuple of two ints."""
    args = (list(hypothesis), [list(ref) for ref in references], n)
    return _Count(args, 0), _Count(args, 1)
''',
    ),
    # (D) brevity penalty
    Mistake(
        "BP with c and r swapped",
        answer="bp_answer",
        test="bp_test",
        patches=(("math.exp(1 - r / c)", "math.exp(1 - c / r)"),),
    ),
    Mistake(
        "penalizes long hypotheses too",
        answer="bp_answer",
        test="bp_test",
        patches=(("    if c >= r:\n        return 1.0\n", ""),),
    ),
    Mistake(
        "no guard for an empty hypothesis",
        answer="bp_answer",
        test="bp_test",
        patches=(("    if c == 0:\n        return 0.0\n", ""),),
    ),
    Mistake("exp(-r/c) without the 1", answer="bp_answer", test="bp_test", patches=(("1 - r / c", "-r / c"),)),
    Mistake(
        "length ratio instead of exp", answer="bp_answer", test="bp_test", patches=(("math.exp(1 - r / c)", "c / r"),)
    ),
    Mistake("integer division r // c", answer="bp_answer", test="bp_test", patches=(("1 - r / c", "1 - r // c"),)),
    Mistake(
        "shortcut (alias): the library's brevity_penalty taken under another name",
        answer="bp_answer",
        test="bp_test",
        source='''import course_utils.bleu as _bleu

_bp = _bleu.brevity_penalty


def brevity_penalty(c, r):
    """BLEU's brevity penalty for hypothesis length c and reference length r (ints >= 0, r >= 1)."""
    return float(_bp(c, r))
''',
    ),
    Mistake(
        "shortcut (path): sacreBLEU's BLEU.compute_bleu by its module path",
        answer="bp_answer",
        test="bp_test",
        source='''import sacrebleu.metrics.bleu


def brevity_penalty(c, r):
    """BLEU's brevity penalty for hypothesis length c and reference length r (ints >= 0, r >= 1)."""
    return float(sacrebleu.metrics.bleu.BLEU.compute_bleu([1] * 4, [1] * 4, sys_len=c, ref_len=r).bp)
''',
    ),
    Mistake(
        "shortcut (library): the library's bleu_from_stats reports BP",
        answer="bp_answer",
        test="bp_test",
        source='''from course_utils.bleu import bleu_from_stats as _stats_to_bleu


def brevity_penalty(c, r):
    """BLEU's brevity penalty for hypothesis length c and reference length r (ints >= 0, r >= 1)."""
    return float(_stats_to_bleu([1], [1], c, r, smooth="none").bp)
''',
    ),
    # (E) corpus BLEU
    Mistake(
        "no brevity penalty",
        answer="bleu_answer",
        test="bleu_test",
        patches=(("100.0 * brevity_penalty(c, r) * math.exp(log_precision)", "100.0 * math.exp(log_precision)"),),
    ),
    Mistake(
        "arithmetic mean of precisions",
        answer="bleu_answer",
        test="bleu_test",
        patches=(("math.exp(log_precision)", "sum(m / t for m, t in zip(matches, totals)) / max_n"),),
    ),
    Mistake(
        "averaging sentence-level BLEU",
        answer="bleu_answer",
        test="bleu_test",
        patches=(
            (
                "return 100.0 * brevity_penalty(c, r) * math.exp(log_precision)",
                "if len(hypotheses) > 1:\n"
                "        return sum(corpus_bleu([h], [rs], max_n) for h, rs in zip(hypotheses, references)) / len(hypotheses)\n"
                "    return 100.0 * brevity_penalty(c, r) * math.exp(log_precision)",
            ),
        ),
    ),
    Mistake(
        "first reference length instead of closest",
        answer="bleu_answer",
        test="bleu_test",
        patches=(
            ("r += min(ref_lens, key=lambda length: (abs(length - len(hyp_tokens)), length))", "r += ref_lens[0]"),
        ),
    ),
    Mistake(
        "shortest reference length",
        answer="bleu_answer",
        test="bleu_test",
        patches=(
            ("r += min(ref_lens, key=lambda length: (abs(length - len(hyp_tokens)), length))", "r += min(ref_lens)"),
        ),
    ),
    Mistake(
        "BP with c and r swapped in the call",
        answer="bleu_answer",
        test="bleu_test",
        patches=(("brevity_penalty(c, r)", "brevity_penalty(r, c)"),),
    ),
    Mistake(
        "log2 in the geometric mean",
        answer="bleu_answer",
        test="bleu_test",
        patches=(("math.log(m / t)", "math.log2(m / t)"),),
    ),
    Mistake(
        "references concatenated into one",
        answer="bleu_answer",
        test="bleu_test",
        patches=(("ref_tokens = [ref.split() for ref in refs]", 'ref_tokens = [" ".join(refs).split()]'),),
    ),
    Mistake(
        "macro-average of per-sentence precisions",
        answer="bleu_answer",
        test="bleu_test",
        patches=(
            (
                "matches[n - 1] += m\n            totals[n - 1] += t",
                "matches[n - 1] += m / t if t else 0\n            totals[n - 1] += 1",
            ),
        ),
    ),
    Mistake(
        "shortcut (alias): the library's corpus_bleu taken under another name",
        answer="bleu_answer",
        test="bleu_test",
        source='''import course_utils.bleu as _bleu

_library_bleu = _bleu.corpus_bleu


def corpus_bleu(hypotheses, references, max_n=4):
    """Corpus BLEU in [0, 100] without smoothing, whitespace tokenization."""
    return float(_library_bleu(hypotheses, references, max_n=max_n, smooth="none").score)
''',
    ),
    Mistake(
        "shortcut (path): sacreBLEU's BLEU class by its module path scores",
        answer="bleu_answer",
        test="bleu_test",
        source='''import sacrebleu.metrics.bleu


def corpus_bleu(hypotheses, references, max_n=4):
    """Corpus BLEU in [0, 100] without smoothing, whitespace tokenization."""
    streams = [list(stream) for stream in zip(*references)]
    scorer = sacrebleu.metrics.bleu.BLEU(tokenize="none", smooth_method="none", max_ngram_order=max_n)
    return float(scorer.corpus_score(list(hypotheses), streams).score)
''',
    ),
    Mistake(
        "shortcut (path): sacreBLEU scorers built before the test (inherited corpus_score)",
        answer="bleu_answer",
        test="bleu_test",
        source='''import functools

import sacrebleu

_make_scorer = functools.partial(sacrebleu.BLEU, tokenize="none", smooth_method="none")
_SCORERS = {n: _make_scorer(max_ngram_order=n) for n in range(1, 5)}


def corpus_bleu(hypotheses, references, max_n=4):
    """Corpus BLEU in [0, 100] without smoothing, whitespace tokenization."""
    streams = [list(stream) for stream in zip(*references)]
    return float(_SCORERS[max_n].corpus_score(list(hypotheses), streams).score)
''',
    ),
    Mistake(
        "shortcut (library): the library's corpus_stats counts, the formula by hand",
        answer="bleu_answer",
        test="bleu_test",
        source='''from course_utils.bleu import corpus_stats as _stats


def corpus_bleu(hypotheses, references, max_n=4):
    """Corpus BLEU in [0, 100] without smoothing, whitespace tokenization."""
    matches, totals, c, r = _stats(hypotheses, references, max_n)
    if min(matches) == 0:
        return 0.0
    log_precision = sum(math.log(m / t) for m, t in zip(matches, totals)) / max_n
    return 100.0 * brevity_penalty(c, r) * math.exp(log_precision)
''',
    ),
    # (F) smoothed sentence-level BLEU
    Mistake(
        "no doubling: every order without a match gets 1 / (2 total)",
        answer="sentence_answer",
        test="sentence_test",
        patches=(("-math.log(2**zero_orders * t)", "-math.log(2 * t)"),),
    ),
    Mistake(
        "the doubling advances at every order, not only at orders without a match",
        answer="sentence_answer",
        test="sentence_test",
        patches=(
            (
                "        if m == 0:\n            zero_orders += 1\n",
                "        zero_orders += 1\n        if m == 0:\n",
            ),
        ),
    ),
    Mistake(
        "smoothed count not divided by the total (p = 1 / 2^k)",
        answer="sentence_answer",
        test="sentence_test",
        patches=(("-math.log(2**zero_orders * t)", "-math.log(2**zero_orders)"),),
    ),
    Mistake(
        "smoothing every order: (matches + 1) / (total + 1)",
        answer="sentence_answer",
        test="sentence_test",
        patches=(
            ("-math.log(2**zero_orders * t)", "math.log(1 / (t + 1))"),
            ("math.log(m / t)", "math.log((m + 1) / (t + 1))"),
        ),
    ),
    Mistake(
        "floor smoothing (0.1 / total) instead of exp",
        answer="sentence_answer",
        test="sentence_test",
        patches=(("-math.log(2**zero_orders * t)", "math.log(0.1 / t)"),),
    ),
    Mistake(
        "orders without a match left out of the mean",
        answer="sentence_answer",
        test="sentence_test",
        patches=(
            (
                "log_precisions.append(-math.log(2**zero_orders * t))  # exp smoothing: 1 / (2^k total)",
                "continue",
            ),
        ),
    ),
    Mistake(
        "no brevity penalty on the sentence score",
        answer="sentence_answer",
        test="sentence_test",
        patches=(("100.0 * brevity_penalty(c, r) * math.exp(", "100.0 * math.exp("),),
    ),
    Mistake(
        "shortest reference length instead of the closest",
        answer="sentence_answer",
        test="sentence_test",
        patches=(
            (
                "r = min((len(tokens) for tokens in ref_tokens), key=lambda length: (abs(length - c), length))",
                "r = min(len(tokens) for tokens in ref_tokens)",
            ),
        ),
    ),
    Mistake(
        "ties between reference lengths go to the longer one",
        answer="sentence_answer",
        test="sentence_test",
        patches=(("(abs(length - c), length)", "(abs(length - c), -length)"),),
    ),
    Mistake(
        "no effective order: the mean divides by max_n",
        answer="sentence_answer",
        test="sentence_test",
        patches=(("sum(log_precisions) / len(log_precisions)", "sum(log_precisions) / max_n"),),
    ),
    Mistake(
        "no zero when nothing matches: smoothing gives a score anyway",
        answer="sentence_answer",
        test="sentence_test",
        patches=(
            (
                "    if all(m == 0 for m, _ in counts):\n        return 0.0  # nothing matches at all: 0 whatever the smoothing\n",
                "",
            ),
        ),
    ),
    Mistake(
        "shortcut (alias): the library's sentence_bleu taken under another name",
        answer="sentence_answer",
        test="sentence_test",
        source='''import course_utils.bleu as _bleu

_library_sentence_bleu = _bleu.sentence_bleu


def smoothed_sentence_bleu(hypothesis, references, max_n=4):
    """Sentence BLEU in [0, 100] with exp smoothing and effective order, whitespace tokenization."""
    return float(_library_sentence_bleu(hypothesis, list(references), max_n=max_n).score)
''',
    ),
    Mistake(
        "shortcut (path): sacreBLEU's BLEU class by its module path scores the sentence",
        answer="sentence_answer",
        test="sentence_test",
        source='''import sacrebleu.metrics.bleu


def smoothed_sentence_bleu(hypothesis, references, max_n=4):
    """Sentence BLEU in [0, 100] with exp smoothing and effective order, whitespace tokenization."""
    scorer = sacrebleu.metrics.bleu.BLEU(tokenize="none", effective_order=True, max_ngram_order=max_n)
    return float(scorer.sentence_score(hypothesis, list(references)).score)
''',
    ),
    Mistake(
        "shortcut (static method): own counts, sacreBLEU's BLEU.compute_bleu does the smoothing",
        answer="sentence_answer",
        test="sentence_test",
        source='''from sacrebleu.metrics.bleu import BLEU as _Scorer

_compute = _Scorer.compute_bleu


def smoothed_sentence_bleu(hypothesis, references, max_n=4):
    """Sentence BLEU in [0, 100] with exp smoothing and effective order, whitespace tokenization."""
    hyp_tokens = hypothesis.split()
    ref_tokens = [ref.split() for ref in references]
    c = len(hyp_tokens)
    r = min((len(tokens) for tokens in ref_tokens), key=lambda length: (abs(length - c), length))
    counts = [clipped_counts(hyp_tokens, ref_tokens, n) for n in range(1, max_n + 1)]
    correct, total = [m for m, _ in counts], [t for _, t in counts]
    return float(_compute(correct, total, c, r, "exp", None, True, max_n).score)
''',
    ),
    Mistake(
        "shortcut (library): own counts, the library's bleu_from_stats does the smoothing",
        answer="sentence_answer",
        test="sentence_test",
        source='''from course_utils.bleu import bleu_from_stats as _from_stats


def smoothed_sentence_bleu(hypothesis, references, max_n=4):
    """Sentence BLEU in [0, 100] with exp smoothing and effective order, whitespace tokenization."""
    hyp_tokens = hypothesis.split()
    ref_tokens = [ref.split() for ref in references]
    c = len(hyp_tokens)
    r = min((len(tokens) for tokens in ref_tokens), key=lambda length: (abs(length - c), length))
    counts = [clipped_counts(hyp_tokens, ref_tokens, n) for n in range(1, max_n + 1)]
    correct, total = [m for m, _ in counts], [t for _, t in counts]
    return float(_from_stats(correct, total, c, r, smooth="exp", effective_order=True).score)
''',
    ),
    Mistake(
        "shortcut (subclass): a scorer derived from sacreBLEU's BLEU, built before the test",
        answer="sentence_answer",
        test="sentence_test",
        source='''import sacrebleu


class _SentenceScorer(sacrebleu.BLEU):
    """sacreBLEU's BLEU with the sentence-level defaults."""


_SCORERS = {n: _SentenceScorer(tokenize="none", effective_order=True, max_ngram_order=n) for n in range(1, 5)}


def smoothed_sentence_bleu(hypothesis, references, max_n=4):
    """Sentence BLEU in [0, 100] with exp smoothing and effective order, whitespace tokenization."""
    return float(_SCORERS[max_n].sentence_score(hypothesis, list(references)).score)
''',
    ),
]

# The answer key out of reach: every test of this unit computes its reference after the call.
BANK += frames_entries(UNIT)

test_bank_covers_every_answer, test_solution_passes, test_mistake_loses_points = bank_tests(UNIT, BANK)
