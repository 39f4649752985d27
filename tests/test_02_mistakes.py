"""Mistake bank of exercise 02 (evaluation): each plausible wrong answer must lose the points
of its test cell, run through the very test code nbgrader runs (hidden tests included)."""

from notebook_cells import Mistake, bank_tests

UNIT = "02_evaluation"

BANK = [
    # (a) masked perplexity from logits
    Mistake("mean over padded positions", answer="perplexity_answer", test="perplexity_test",
            patches=(("mean_nll = -(token_logp * mask).sum() / mask.sum()", "mean_nll = -token_logp.mean()"),)),
    Mistake("sum instead of mean", answer="perplexity_answer", test="perplexity_test",
            patches=(("-(token_logp * mask).sum() / mask.sum()", "-(token_logp * mask).sum()"),)),
    Mistake("log2 instead of ln (2 ** nats)", answer="perplexity_answer", test="perplexity_test",
            patches=(("return torch.exp(mean_nll)", "return 2 ** mean_nll"),)),
    Mistake("forgot the exp (returns mean NLL)", answer="perplexity_answer", test="perplexity_test",
            patches=(("return torch.exp(mean_nll)", "return mean_nll"),)),
    Mistake("softmax over the time axis", answer="perplexity_answer", test="perplexity_test",
            patches=(("torch.log_softmax(logits, dim=-1)", "torch.log_softmax(logits, dim=1)"),)),
    Mistake("log of softmax underflows", answer="perplexity_answer", test="perplexity_test",
            patches=(("torch.log_softmax(logits, dim=-1)", "torch.log(torch.softmax(logits, dim=-1))"),)),
    Mistake("gather with padding targets -100", answer="perplexity_answer", test="perplexity_test",
            patches=(("targets.masked_fill(~mask, 0)", "targets"),)),
    Mistake("mean of per-sequence perplexities", answer="perplexity_answer", test="perplexity_test",
            patches=(("mean_nll = -(token_logp * mask).sum() / mask.sum()\n    return torch.exp(mean_nll)",
                      "seq_nll = -(token_logp * mask).sum(1) / mask.sum(1)\n    return torch.exp(seq_nll).mean()"),)),
    # (b) clipped counts
    Mistake("unclipped counts", answer="clip_answer", test="clip_test",
            patches=(("min(count, max_ref[gram])", "(count if max_ref[gram] else 0)"),)),
    Mistake("clip by the sum over references", answer="clip_answer", test="clip_test",
            patches=(("max_ref[gram] = max(max_ref[gram], count)", "max_ref[gram] += count"),)),
    Mistake("only the first reference", answer="clip_answer", test="clip_test",
            patches=(("for ref in references:", "for ref in references[:1]:"),)),
    Mistake("off-by-one n-gram range", answer="clip_answer", test="clip_test",
            patches=(("range(len(tokens) - n + 1)", "range(len(tokens) - n)"),)),
    Mistake("total counts distinct n-grams", answer="clip_answer", test="clip_test",
            patches=(("total = sum(hyp.values())", "total = len(hyp)"),)),
    Mistake("matches count n-gram types", answer="clip_answer", test="clip_test",
            patches=(("matches = sum(min(count, max_ref[gram]) for gram, count in hyp.items())",
                      "matches = len(set(hyp) & set(max_ref))"),)),
    # (c) brevity penalty
    Mistake("BP with c and r swapped", answer="bp_answer", test="bp_test",
            patches=(("math.exp(1 - r / c)", "math.exp(1 - c / r)"),)),
    Mistake("penalizes long hypotheses too", answer="bp_answer", test="bp_test",
            patches=(("    if c >= r:\n        return 1.0\n", ""),)),
    Mistake("no guard for an empty hypothesis", answer="bp_answer", test="bp_test",
            patches=(("    if c == 0:\n        return 0.0\n", ""),)),
    Mistake("exp(-r/c) without the 1", answer="bp_answer", test="bp_test",
            patches=(("1 - r / c", "-r / c"),)),
    Mistake("length ratio instead of exp", answer="bp_answer", test="bp_test",
            patches=(("math.exp(1 - r / c)", "c / r"),)),
    Mistake("integer division r // c", answer="bp_answer", test="bp_test",
            patches=(("1 - r / c", "1 - r // c"),)),
    # (d) corpus BLEU
    Mistake("no brevity penalty", answer="bleu_answer", test="bleu_test",
            patches=(("100.0 * brevity_penalty(c, r) * math.exp(log_precision)", "100.0 * math.exp(log_precision)"),)),
    Mistake("arithmetic mean of precisions", answer="bleu_answer", test="bleu_test",
            patches=(("math.exp(log_precision)", "sum(m / t for m, t in zip(matches, totals)) / max_n"),)),
    Mistake("averaging sentence-level BLEU", answer="bleu_answer", test="bleu_test",
            patches=(("return 100.0 * brevity_penalty(c, r) * math.exp(log_precision)",
                      "if len(hypotheses) > 1:\n"
                      "        return sum(corpus_bleu([h], [rs], max_n) for h, rs in zip(hypotheses, references)) / len(hypotheses)\n"
                      "    return 100.0 * brevity_penalty(c, r) * math.exp(log_precision)"),)),
    Mistake("first reference length instead of closest", answer="bleu_answer", test="bleu_test",
            patches=(("r += min(ref_lens, key=lambda length: (abs(length - len(hyp_tokens)), length))", "r += ref_lens[0]"),)),
    Mistake("shortest reference length", answer="bleu_answer", test="bleu_test",
            patches=(("r += min(ref_lens, key=lambda length: (abs(length - len(hyp_tokens)), length))", "r += min(ref_lens)"),)),
    Mistake("BP with c and r swapped in the call", answer="bleu_answer", test="bleu_test",
            patches=(("brevity_penalty(c, r)", "brevity_penalty(r, c)"),)),
    Mistake("log2 in the geometric mean", answer="bleu_answer", test="bleu_test",
            patches=(("math.log(m / t)", "math.log2(m / t)"),)),
    Mistake("references concatenated into one", answer="bleu_answer", test="bleu_test",
            patches=(("ref_tokens = [ref.split() for ref in refs]", "ref_tokens = [\" \".join(refs).split()]"),)),
    Mistake("macro-average of per-sentence precisions", answer="bleu_answer", test="bleu_test",
            patches=(("matches[n - 1] += m\n            totals[n - 1] += t",
                      "matches[n - 1] += m / t if t else 0\n            totals[n - 1] += 1"),)),
]

test_bank_covers_every_answer, test_solution_passes, test_mistake_loses_points = bank_tests(UNIT, BANK)
