"""The course's metrics as local ``evaluate`` modules, loadable with no network.

Hub metric scripts (``evaluate.load("bleu")``) cannot be fetched offline; these modules ship
inside ``course_utils`` and load from their folder:

    from course_utils.metrics import load_metric
    bleu = load_metric("course_bleu")              # = evaluate.load(<folder of course_bleu.py>)
    bleu.compute(predictions=[...], references=[[...], ...])["bleu"]
    ppl = load_metric("course_perplexity")
    ppl.compute(log_probs=[[-0.1, -2.3], [-0.5]])["perplexity"]
"""

from __future__ import annotations

from pathlib import Path

METRICS_DIR = Path(__file__).resolve().parent
AVAILABLE = ("course_bleu", "course_perplexity")


def metric_path(name: str) -> str:
    """Absolute path of the folder holding the local module ``name``."""
    if name not in AVAILABLE:
        raise ValueError(f"unknown course metric {name!r}; available: {list(AVAILABLE)}")
    return str(METRICS_DIR / name)


def load_metric(name: str, **kwargs):
    """``evaluate.load`` of the course metric ``name`` from its local folder (works offline)."""
    import evaluate

    return evaluate.load(metric_path(name), **kwargs)


__all__ = ["AVAILABLE", "METRICS_DIR", "load_metric", "metric_path"]
