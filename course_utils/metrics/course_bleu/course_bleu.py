"""The course's BLEU as a local ``evaluate`` module (offline; no hub script needed).

    import evaluate
    bleu = evaluate.load("course_utils/metrics/course_bleu")   # or course_utils.metrics.load_metric
    bleu.compute(predictions=["the cat sat"], references=[["the cat sat down", "a cat sat"]])

It wraps :func:`course_utils.bleu.corpus_bleu`, which agrees with sacreBLEU to 1e-6.
"""

import datasets
import evaluate

from course_utils.bleu import corpus_bleu, whitespace_tokenize

_CITATION = """\
Papineni, Roukos, Ward and Zhu (2002). BLEU: a Method for Automatic Evaluation of Machine Translation. ACL.
Post (2018). A Call for Clarity in Reporting BLEU Scores. WMT.
Chen and Cherry (2014). A Systematic Comparison of Smoothing Techniques for Sentence-Level BLEU. WMT.
"""

_DESCRIPTION = """\
Corpus BLEU from scratch: clipped n-gram precisions for n = 1..max_order, their geometric
mean, times the brevity penalty exp(1 - r/c) when c < r. Clipped matches, totals and lengths
are summed over the corpus before the score is formed. The score is on a 0-100 scale.
"""

_KWARGS_DESCRIPTION = """\
Args:
    predictions: list of B hypothesis strings.
    references: list of B reference lists (one or more reference strings per hypothesis),
        or list of B strings (one reference each).
    max_order: largest n-gram order (default 4).
    smooth_method: "none", "floor", "add-k" or "exp" (default "exp", as in sacreBLEU).
    smooth_value: the value for "floor" (default 0.1) or "add-k" (default 1).
    effective_order: drop orders the hypotheses are too short to have (default False).
    tokenizer: a callable str -> list of tokens (default: whitespace split).
Returns:
    bleu: the score in [0, 100]; precisions: list of p_n in [0, 1]; brevity_penalty;
    length_ratio (c / r); translation_length (c); reference_length (r).
Examples:
    >>> bleu = load_metric("course_bleu")
    >>> bleu.compute(predictions=["a b c d"], references=[["a b c d"]])["bleu"]
    100.0
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class CourseBleu(evaluate.Metric):
    """Corpus BLEU of the course (0-100), computed by ``course_utils.bleu``."""

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=[
                datasets.Features(
                    {
                        "predictions": datasets.Value("string"),
                        "references": datasets.Sequence(datasets.Value("string")),
                    }
                ),
                datasets.Features({"predictions": datasets.Value("string"), "references": datasets.Value("string")}),
            ],
            reference_urls=["https://aclanthology.org/P02-1040/", "https://aclanthology.org/W18-6319/"],
        )

    def _compute(
        self,
        predictions,
        references,
        max_order=4,
        smooth_method="exp",
        smooth_value=None,
        effective_order=False,
        tokenizer=whitespace_tokenize,
    ):
        references = [[r] if isinstance(r, str) else list(r) for r in references]
        result = corpus_bleu(
            list(predictions),
            references,
            max_n=max_order,
            smooth=smooth_method,
            smooth_value=smooth_value,
            effective_order=effective_order,
            tokenize=tokenizer,
        )
        return {
            "bleu": result.score,
            "precisions": result.precisions,
            "brevity_penalty": result.bp,
            "length_ratio": result.hyp_len / result.ref_len if result.ref_len else 0.0,
            "translation_length": result.hyp_len,
            "reference_length": result.ref_len,
        }
