"""Unit 03: counting words. Bags of words, TF-IDF, and word-word co-occurrence counts.

A bag of words forgets order: a document becomes the vector of its word counts. TF-IDF reweights
the counts so that words found in every document count for little. Co-occurrence counts are the
raw material of the count-based embeddings in :mod:`course_utils.embeddings`.

    X = bag_of_words([vocab.encode(tokens) for tokens in docs], len(vocab))   # (N, V)
    X = tfidf(X)                                                              # (N, V), unit rows
    counts = cooccurrence(ids, vocab_size, window=4)                          # (V, V)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def bag_of_words(id_lists: Sequence[Sequence[int]], vocab_size: int) -> torch.Tensor:
    """Word counts of ``N`` documents given as lists of ids in ``[0, V)`` -> float32 ``(N, V)``.

    Row ``n`` is ``one_hot(ids_n).sum(0)``: how often each word occurs in document ``n``.
    """
    if isinstance(id_lists, (str, torch.Tensor)) or len(id_lists) == 0:
        raise ValueError("id_lists must be a non-empty list of id lists")
    if not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive int, got {vocab_size!r}")
    rows, cols = [], []
    for n, ids in enumerate(id_lists):
        if isinstance(ids, str) or not all(isinstance(i, int) and 0 <= i < vocab_size for i in ids):
            raise ValueError(f"document {n}: expected a list of int ids in range(0, {vocab_size}), got {ids!r:.60}")
        rows += [n] * len(ids)
        cols += list(ids)
    flat = torch.tensor(rows, dtype=torch.long) * vocab_size + torch.tensor(cols, dtype=torch.long)  # (total,)
    return torch.bincount(flat, minlength=len(id_lists) * vocab_size).view(len(id_lists), vocab_size).float()


def tfidf(counts: torch.Tensor, smooth: bool = True, reference: torch.Tensor | None = None) -> torch.Tensor:
    """TF-IDF of a document-term count matrix ``counts (N, V)`` -> ``(N, V)`` with unit-length rows.

    ``tf`` is the raw count; ``idf(w) = ln((1 + N) / (1 + df(w))) + 1`` with ``smooth`` (``df`` =
    documents containing ``w``), ``ln(N / df(w)) + 1`` without; each row is then divided by its
    Euclidean norm (empty rows stay 0). These are scikit-learn's ``TfidfTransformer`` defaults.
    ``N`` and ``df`` come from ``reference (N_ref, V)`` when given (the training set's counts, to
    weight test documents as the training ones), else from ``counts`` itself.
    """
    for name, m in (("counts", counts), ("reference", counts if reference is None else reference)):
        if not isinstance(m, torch.Tensor) or m.dim() != 2 or not m.is_floating_point():
            raise ValueError(f"{name} must be a 2-D float tensor (N, V), got {getattr(m, 'shape', m)!r}")
        if (m < 0).any():
            raise ValueError(f"{name} must be non-negative")
    reference = counts if reference is None else reference
    if reference.shape[1] != counts.shape[1]:
        raise ValueError(f"reference has {reference.shape[1]} columns, counts {counts.shape[1]}")
    n_docs = reference.shape[0]
    df = (reference > 0).sum(dim=0).to(counts.dtype)  # (V,)
    if smooth:
        idf = torch.log((1 + n_docs) / (1 + df)) + 1  # (V,)
    else:
        idf = torch.log(n_docs / df.clamp_min(1)) + 1  # (V,); unseen words have tf 0 anyway
    weighted = counts * idf  # (N, V)
    return weighted / weighted.norm(dim=1, keepdim=True).clamp_min(1e-12)  # (N, V)


def cooccurrence(ids: torch.Tensor, vocab_size: int, window: int, harmonic: bool = False) -> torch.Tensor:
    """Symmetric word-word co-occurrence counts of a token stream ``ids (N,)`` (values in ``[0, V)``).

    ``counts[w, c]`` adds 1 (or ``1/d`` with ``harmonic=True``, GloVe's weighting) each time ``c``
    occurs ``d <= window`` positions before or after ``w``. Returns a dense float32 ``(V, V)``
    tensor, so keep ``V`` to a few thousand words.
    """
    if not isinstance(ids, torch.Tensor) or ids.dim() != 1 or ids.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"ids must be a 1-D integer tensor, got {getattr(ids, 'shape', ids)!r}")
    if not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive int, got {vocab_size!r}")
    if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        raise ValueError(f"ids must lie in range(0, {vocab_size}), got min {int(ids.min())}, max {int(ids.max())}")
    ids = ids.long()
    if not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be an int >= 1, got {window!r}")
    keys, weights = [], []
    for d in range(1, min(window, len(ids) - 1) + 1):
        left, right = ids[:-d], ids[d:]  # (N - d,) each
        keys += [left * vocab_size + right, right * vocab_size + left]
        weights += [torch.full((2 * len(left),), 1.0 / d if harmonic else 1.0, dtype=torch.float64)]
    if not keys:
        return torch.zeros(vocab_size, vocab_size)
    flat = torch.bincount(torch.cat(keys), torch.cat(weights), minlength=vocab_size * vocab_size)  # (V * V,)
    return flat.view(vocab_size, vocab_size).float()  # (V, V)
