"""The course's perplexity as a local ``evaluate`` module (offline; no model download).

Unlike the hub's "perplexity" metric, which loads a model, this one takes what any language
model gives you: the per-token log-probabilities (natural log) of each sequence.

    ppl = evaluate.load("course_utils/metrics/course_perplexity")
    ppl.compute(log_probs=[[-1.2, -0.3, -2.0], [-0.7]])
"""

import math

import datasets
import evaluate

from course_utils.lm import bits_per_char, perplexity

_CITATION = """\
Jelinek, Mercer, Bahl and Baker (1977). Perplexity - a measure of the difficulty of speech recognition tasks.
"""

_DESCRIPTION = """\
Perplexity = exp(mean negative log-likelihood per token), the mean taken over all tokens of
all sequences (token-weighted, as for a corpus). Also returns the mean NLL in nats, the same
in bits per token, and each sequence's own perplexity.
"""

_KWARGS_DESCRIPTION = """\
Args:
    log_probs: list of sequences, each a list of per-token log-probabilities ln P(w_t | w_<t)
        (values <= 0). With is_nll=True they are negative log-likelihoods (values >= 0) instead.
    is_nll: whether the values are NLLs rather than log-probabilities (default False).
Returns:
    perplexity: exp(mean NLL over all tokens); mean_nll: nats per token;
    bits_per_token: mean_nll / ln 2; num_tokens; perplexities: one per sequence.
Examples:
    >>> ppl = load_metric("course_perplexity")
    >>> round(ppl.compute(log_probs=[[math.log(0.25)] * 3])["perplexity"], 6)
    4.0
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class CoursePerplexity(evaluate.Metric):
    """Corpus perplexity from per-token log-probabilities."""

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"log_probs": datasets.Sequence(datasets.Value("float64"))}),
        )

    def _compute(self, log_probs, is_nll=False):
        sign = 1.0 if is_nll else -1.0
        total, count, per_sequence = 0.0, 0, []
        for i, values in enumerate(log_probs):
            nlls = [sign * float(v) for v in values]
            if any(math.isnan(v) or v < 0 for v in nlls):
                kind = "NLLs must be >= 0" if is_nll else "log-probabilities must be <= 0"
                raise ValueError(f"sequence {i}: {kind} (did you pass the other one? see is_nll)")
            if nlls:
                per_sequence.append(perplexity(sum(nlls) / len(nlls)))
            total += sum(nlls)
            count += len(nlls)
        if count == 0:
            raise ValueError("no tokens: every sequence is empty")
        mean_nll = total / count
        return {
            "perplexity": perplexity(mean_nll),
            "mean_nll": mean_nll,
            "bits_per_token": bits_per_char(mean_nll),
            "num_tokens": count,
            "perplexities": per_sequence,
        }
