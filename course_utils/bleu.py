"""Unit 02: BLEU from scratch (Papineni et al., 2002), matching sacreBLEU (Post, 2018).

BLEU = BP * exp( (1/N) * sum_{n=1..N} ln p_n ), reported on a 0-100 scale like sacreBLEU.

- ``p_n`` is the *modified* (clipped) n-gram precision: each hypothesis n-gram counts at most
  as often as it occurs in the reference that contains it most often. Precisions are
  fractions in [0, 1] throughout this module; only the final score is multiplied by 100.
- ``BP = 1`` if ``c > r`` else ``exp(1 - r / c)`` (0 when ``c = 0``), with ``c`` the
  hypothesis length and ``r`` the length of the closest reference (ties: the shorter one).
- At corpus level the clipped matches, the n-gram totals, ``c`` and ``r`` are *summed over
  all sentences first*; BLEU is computed once from these sums. Averaging sentence scores is a
  different (and not the standard) number.
- Smoothing for zero counts (Chen and Cherry, 2014), defined exactly as in sacreBLEU:
  ``"none"`` (any zero precision gives BLEU 0), ``"floor"`` (a zero count becomes
  ``smooth_value`` = 0.1), ``"add-k"`` (add ``smooth_value`` = 1 to matches and totals for
  n >= 2), ``"exp"`` (the k-th zero count becomes ``1 / 2^k``; sacreBLEU's default).

Inputs are strings; ``tokenize`` turns each into tokens (default: whitespace split, which is
sacreBLEU with ``tokenize="none"``). References are given *per hypothesis*:
``references[i]`` is a list of reference strings for ``hypotheses[i]`` (sacreBLEU takes
reference *streams* ``streams[k][i]``; convert with ``[list(r) for r in zip(*streams)]``).

    corpus_bleu(["the cat sat on the mat"], [["the cat sat on a mat", "a cat sat on the mat"]]).score
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

Tokenizer = Callable[[str], list]
SMOOTH_DEFAULTS = {"none": None, "floor": 0.1, "add-k": 1.0, "exp": None}


def whitespace_tokenize(text: str) -> list[str]:
    """Split on runs of whitespace (what sacreBLEU does after its own tokenizer)."""
    return text.split()


def ngram_counts(tokens: Sequence[str], n: int) -> Counter:
    """Counter of the n-grams (tuples of ``n`` tokens) of a token list."""
    if isinstance(tokens, str):
        raise ValueError("ngram_counts takes a list of tokens, not a string: call .split() first")
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    tokens = list(tokens)
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def clipped_counts(hypothesis: Sequence[str], references: Sequence[Sequence[str]], n: int) -> tuple[int, int]:
    """(clipped matches, total hypothesis n-grams) for one sentence.

    ``hypothesis`` is a token list, ``references`` a list of token lists. Each hypothesis
    n-gram is credited ``min(count in hypothesis, max over references of count in reference)``.
    """
    if isinstance(references, str) or not references or any(isinstance(r, str) for r in references):
        raise ValueError("references must be a non-empty list of token lists (one per reference)")
    hyp = ngram_counts(hypothesis, n)
    max_ref: Counter = Counter()
    for ref in references:
        for gram, count in ngram_counts(ref, n).items():
            max_ref[gram] = max(max_ref[gram], count)
    matches = sum(min(count, max_ref[gram]) for gram, count in hyp.items())
    return matches, sum(hyp.values())


def modified_precision(hypothesis: Sequence[str], references: Sequence[Sequence[str]], n: int) -> float:
    """Clipped n-gram precision in [0, 1] of one tokenized sentence (0.0 if it has no n-grams).

    The classic example: hypothesis "the" x 7, reference "the cat is on the mat" -> 2/7.
    """
    matches, total = clipped_counts(hypothesis, references, n)
    return matches / total if total else 0.0


def closest_ref_length(hyp_len: int, ref_lens: Sequence[int]) -> int:
    """The reference length closest to ``hyp_len`` (ties go to the shorter reference)."""
    if not ref_lens:
        raise ValueError("ref_lens is empty")
    return min(ref_lens, key=lambda r: (abs(r - hyp_len), r))


def brevity_penalty(c: int, r: int) -> float:
    """BP = 1 if c > r else exp(1 - r/c); 0.0 when c = 0 < r (an empty hypothesis).

    ``c``: hypothesis length (tokens), ``r``: effective reference length.
    """
    if c < 0 or r < 0:
        raise ValueError(f"lengths must be non-negative, got c={c}, r={r}")
    if c >= r:
        return 1.0
    if c == 0:
        return 0.0
    return math.exp(1 - r / c)


@dataclass
class BLEUScore:
    """A BLEU result. ``score`` is on sacreBLEU's 0-100 scale; ``precisions`` (the smoothed
    p_n actually used) and ``bp`` are fractions in [0, 1]; ``matches``/``totals`` are the
    raw clipped counts per order; ``hyp_len``/``ref_len`` are c and r."""

    score: float
    precisions: list[float] = field(default_factory=list)
    bp: float = 1.0
    hyp_len: int = 0
    ref_len: int = 0
    matches: list[int] = field(default_factory=list)
    totals: list[int] = field(default_factory=list)

    def __str__(self) -> str:
        prec = "/".join(f"{100 * p:.1f}" for p in self.precisions)
        return f"BLEU = {self.score:.2f} {prec} (BP = {self.bp:.3f}, c = {self.hyp_len}, r = {self.ref_len})"


def bleu_from_stats(
    matches: Sequence[int],
    totals: Sequence[int],
    hyp_len: int,
    ref_len: int,
    smooth: str = "exp",
    smooth_value: float | None = None,
    effective_order: bool = False,
) -> BLEUScore:
    """BLEU from its sufficient statistics (per-order clipped matches and totals, c, r)."""
    if smooth not in SMOOTH_DEFAULTS:
        raise ValueError(f"smooth must be one of {sorted(SMOOTH_DEFAULTS)}, got {smooth!r}")
    if len(matches) != len(totals) or not matches:
        raise ValueError("matches and totals must be non-empty lists of the same length (one per order)")
    value = SMOOTH_DEFAULTS[smooth] if smooth_value is None else float(smooth_value)
    max_n = len(matches)
    bp = brevity_penalty(hyp_len, ref_len)
    result = BLEUScore(0.0, [0.0] * max_n, bp, hyp_len, ref_len, list(matches), list(totals))
    if not any(matches):  # nothing matches at all: 0 whatever the smoothing
        return result
    correct, total = [float(m) for m in matches], [float(t) for t in totals]
    halvings, eff_order = 1.0, max_n
    for n in range(max_n):
        if smooth == "add-k" and n > 0:
            correct[n] += value
            total[n] += value
        if total[n] == 0:  # the hypotheses have no n-grams of this order (too short)
            break
        if effective_order:
            eff_order = n + 1
        if correct[n] == 0:
            if smooth == "exp":
                halvings *= 2
                result.precisions[n] = 1.0 / (halvings * total[n])
            elif smooth == "floor":
                result.precisions[n] = value / total[n]
        else:
            result.precisions[n] = correct[n] / total[n]
    used = result.precisions[:eff_order]
    if min(used) <= 0:
        return result  # a zero precision: the geometric mean is 0
    result.score = 100.0 * bp * math.exp(sum(math.log(p) for p in used) / eff_order)
    return result


def _check_inputs(hypotheses, references) -> list[list[str]]:
    if isinstance(hypotheses, str) or not all(isinstance(h, str) for h in hypotheses):
        raise ValueError("hypotheses must be a list of strings")
    if isinstance(references, str) or len(references) != len(hypotheses):
        raise ValueError(
            f"references must be a list with one entry per hypothesis ({len(hypotheses)}), "
            f"got {'a string' if isinstance(references, str) else len(references)}; "
            "references[i] is the list of reference strings of hypotheses[i]"
        )
    refs = [[r] if isinstance(r, str) else list(r) for r in references]
    for i, group in enumerate(refs):
        if not group or not all(isinstance(r, str) for r in group):
            raise ValueError(f"references[{i}] must be a non-empty list of strings")
    return refs


def corpus_stats(
    hypotheses: Sequence[str],
    references: Sequence[Sequence[str]],
    max_n: int = 4,
    tokenize: Tokenizer = whitespace_tokenize,
) -> tuple[list[int], list[int], int, int]:
    """(matches per order, totals per order, c, r) summed over the corpus."""
    if not isinstance(max_n, int) or max_n < 1:
        raise ValueError(f"max_n must be an int >= 1, got {max_n!r}")
    refs = _check_inputs(hypotheses, references)
    matches, totals, c, r = [0] * max_n, [0] * max_n, 0, 0
    for hyp, group in zip(hypotheses, refs):
        hyp_tokens = tokenize(hyp)
        ref_tokens = [tokenize(ref) for ref in group]
        c += len(hyp_tokens)
        r += closest_ref_length(len(hyp_tokens), [len(t) for t in ref_tokens])
        for n in range(1, max_n + 1):
            m, t = clipped_counts(hyp_tokens, ref_tokens, n)
            matches[n - 1] += m
            totals[n - 1] += t
    return matches, totals, c, r


def corpus_bleu(
    hypotheses: Sequence[str],
    references: Sequence[Sequence[str]],
    max_n: int = 4,
    smooth: str = "exp",
    smooth_value: float | None = None,
    effective_order: bool = False,
    tokenize: Tokenizer = whitespace_tokenize,
) -> BLEUScore:
    """Corpus BLEU (0-100) of ``hypotheses`` (list of B strings) against ``references``
    (list of B lists of reference strings; a plain string means a single reference).

    Defaults match ``sacrebleu.corpus_bleu(..., tokenize="none")``.
    """
    matches, totals, c, r = corpus_stats(hypotheses, references, max_n, tokenize)
    return bleu_from_stats(matches, totals, c, r, smooth, smooth_value, effective_order)


def sentence_bleu(
    hypothesis: str,
    references: Sequence[str],
    max_n: int = 4,
    smooth: str = "exp",
    smooth_value: float | None = None,
    effective_order: bool = True,
    tokenize: Tokenizer = whitespace_tokenize,
) -> BLEUScore:
    """Sentence BLEU (0-100) of one hypothesis string against a list of reference strings.

    Defaults match ``sacrebleu.sentence_bleu(..., tokenize="none")`` (exp smoothing,
    effective order: orders longer than the hypothesis are left out).
    """
    if not isinstance(hypothesis, str):
        raise ValueError(f"hypothesis must be a string, got {type(hypothesis).__name__}")
    refs = [references] if isinstance(references, str) else list(references)
    return corpus_bleu([hypothesis], [refs], max_n, smooth, smooth_value, effective_order, tokenize)
