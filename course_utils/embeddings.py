"""Unit 03: word embeddings, count-based and predictive, and how to judge them.

- the count-based route (counts from :func:`course_utils.bow.cooccurrence`): :func:`ppmi` (with context smoothing),
  :func:`svd_embeddings` (truncated SVD);
- word2vec's skip-gram with negative sampling: :func:`subsample_keep_prob`, :func:`skipgram_pairs`,
  :func:`unigram_noise`, :func:`skipgram_ns_loss` (for autograd) and :func:`skipgram_ns_grads`
  (the same loss with its gradients by hand), :func:`train_skipgram` (a complete training run);
- GloVe's weighted least squares, :func:`glove_loss`;
- fastText's subword vectors: :func:`ngram_vocab`, :func:`word_ngram_ids`, :func:`fasttext_vector`;
- judging: :func:`nearest_neighbours`, :func:`analogy` (3CosAdd), :func:`spearman`.

Shapes: ``V`` vocabulary size, ``C`` number of contexts, ``D`` embedding width, ``B`` batch of
(center, context) pairs, ``K`` negatives per pair. Embedding matrices are ``(V, D)``, one row per word.

    counts = bow.cooccurrence(ids, vocab_size, window=4)        # (V, V)
    vectors = svd_embeddings(ppmi(counts, alpha=0.75), dim=64)  # (V, 64)
    best = analogy(vectors, a, b, c, k=1)                       # (Q, 1): "a is to b as c is to ?"
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import torch
import torch.nn.functional as F

from .progress import progress
from .text import char_ngrams


def _matrix(x: object, name: str, rows: int | None = None) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or not x.is_floating_point():
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        dtype = x.dtype if isinstance(x, torch.Tensor) else ""
        raise ValueError(f"{name} must be a 2-D floating tensor, got {shape} {dtype}")
    if rows is not None and x.shape[0] != rows:
        raise ValueError(f"{name} must have {rows} rows, got shape {tuple(x.shape)}")
    return x


def _ids(x: object, name: str, dims: int, vocab_size: int | None = None) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.dim() != dims or x.dtype not in (torch.int32, torch.int64):
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        dtype = x.dtype if isinstance(x, torch.Tensor) else ""
        raise ValueError(f"{name} must be a {dims}-D integer (long) tensor of ids, got {shape} {dtype}")
    if vocab_size is not None and x.numel() and (int(x.min()) < 0 or int(x.max()) >= vocab_size):
        raise ValueError(f"{name} holds ids outside range(0, {vocab_size}): min {int(x.min())}, max {int(x.max())}")
    return x


# --------------------------------------------------------------------------- the count-based route


def ppmi(counts: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """Positive pointwise mutual information of a count matrix ``counts (V, C)`` -> ``(V, C)``.

    ``PPMI(w, c) = max(0, log P(w, c) / (P(w) P_alpha(c)))`` with ``P(w, c) = n_wc / N``,
    ``P(w) = n_w / N`` and the smoothed context distribution ``P_alpha(c) = n_c^alpha / sum n^alpha``
    of Levy, Goldberg & Dagan (2015); ``alpha = 0.75`` lifts rare contexts' probabilities and so
    lowers their inflated PMI. Pairs never seen, and empty rows or columns, give 0 (never NaN).
    Integer counts are accepted; the result is float (the input's dtype when it is floating).
    """
    if not isinstance(counts, torch.Tensor) or counts.dim() != 2 or counts.dtype == torch.bool:
        raise ValueError(f"counts must be a 2-D numeric tensor (V, C), got {getattr(counts, 'shape', counts)!r}")
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or not alpha > 0:
        raise ValueError(f"alpha must be a positive number, got {alpha!r}")
    n = counts if counts.is_floating_point() else counts.float()
    if not torch.isfinite(n).all() or (n < 0).any():
        raise ValueError("counts must be finite and non-negative")
    row = n.sum(dim=1, keepdim=True)  # (V, 1): n_w
    col = n.sum(dim=0, keepdim=True) ** alpha  # (1, C): n_c^alpha
    p_ctx = col / col.sum().clamp_min(torch.finfo(n.dtype).tiny)  # (1, C)
    seen = n > 0  # n_wc > 0 implies n_w > 0 and n_c > 0
    pmi = torch.log(n.where(seen, 1.0)) - torch.log(row.where(row > 0, 1.0)) - torch.log(p_ctx.where(col > 0, 1.0))
    return torch.where(seen, pmi.clamp_min(0.0), torch.zeros((), dtype=n.dtype))  # (V, C)


def svd_embeddings(matrix: torch.Tensor, dim: int, power: float = 0.5, exact: bool = False) -> torch.Tensor:
    """Word vectors from a truncated SVD ``matrix ~ U_d S_d V_d^T``: returns ``U_d S_d^power (V, dim)``.

    ``power = 0.5`` splits the singular values between words and contexts (a symmetric choice
    that Levy, Goldberg & Dagan, 2015, found to work better than 1). ``exact=False`` uses the
    randomised ``torch.svd_lowrank`` (seed torch first for repeatable vectors), ``exact=True``
    ``torch.linalg.svd``. Each column's sign is fixed so that its largest entry is positive.
    """
    matrix = _matrix(matrix, "matrix")
    if not isinstance(dim, int) or not 1 <= dim <= min(matrix.shape):
        raise ValueError(f"dim must be an int in [1, {min(matrix.shape)}], got {dim!r}")
    if exact:
        u, s, _ = torch.linalg.svd(matrix, full_matrices=False)  # (V, r), (r,)
        u, s = u[:, :dim], s[:dim]  # (V, dim), (dim,)
    else:
        u, s, _ = torch.svd_lowrank(matrix, q=min(dim + 10, min(matrix.shape)), niter=4)
        u, s = u[:, :dim], s[:dim]  # (V, dim), (dim,)
    top = u.abs().argmax(dim=0)  # (dim,)
    signs = torch.sign(u[top, torch.arange(dim)])  # (dim,)
    return u * signs * s**power  # (V, dim)


# --------------------------------------------------------------------------- word2vec


def unigram_noise(counts: torch.Tensor, power: float = 0.75) -> torch.Tensor:
    """word2vec's noise distribution ``P_n(w) ∝ count(w)^power`` from word counts ``(V,)`` -> ``(V,)``."""
    if not isinstance(counts, torch.Tensor) or counts.dim() != 1 or (counts < 0).any() or counts.sum() <= 0:
        raise ValueError("counts must be a 1-D tensor of non-negative counts with a positive sum")
    weights = counts.double() ** power  # (V,)
    return (weights / weights.sum()).float()


def subsample_keep_prob(counts: torch.Tensor, t: float = 1e-4) -> torch.Tensor:
    """The probability of keeping each occurrence of a word, ``min(1, sqrt(t / f(w)))`` -> ``(V,)``.

    ``f(w)`` is the word's relative frequency (``counts (V,)`` normalised). Mikolov et al. (2013b)
    discard an occurrence with probability ``1 - sqrt(t / f(w))``: "the" loses most of its
    occurrences, words rarer than ``t`` keep all of theirs.
    """
    if not isinstance(counts, torch.Tensor) or counts.dim() != 1 or (counts < 0).any() or counts.sum() <= 0:
        raise ValueError("counts must be a 1-D tensor of non-negative counts with a positive sum")
    if not t > 0:
        raise ValueError(f"t must be positive, got {t!r}")
    freq = counts.double() / counts.sum()  # (V,)
    return torch.sqrt(t / freq.clamp_min(1e-300)).clamp(max=1.0).float()  # (V,)


def skipgram_pairs(
    ids: torch.Tensor, window: int, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """All (center, context) pairs of a token stream ``ids (N,)`` within ``window`` positions.

    With a ``generator``, each center draws its own window ``b`` uniformly from ``1..window`` and
    keeps only contexts within ``b`` (word2vec's dynamic window: nearer words count more).
    Returns ``centers (P,)`` and ``contexts (P,)``, ordered by offset then position.
    """
    ids = _ids(ids, "ids", 1)
    if not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be an int >= 1, got {window!r}")
    n = len(ids)
    if generator is None:
        reach = torch.full((n,), window)  # (N,)
    else:
        reach = torch.randint(1, window + 1, (n,), generator=generator)  # (N,)
    centers, contexts = [], []
    for d in range(1, min(window, n - 1) + 1):
        pos = torch.arange(n - d)  # (N - d,)
        ahead = reach[pos] >= d  # the center at pos sees pos + d
        behind = reach[pos + d] >= d  # the center at pos + d sees pos
        centers += [ids[pos[ahead]], ids[pos[behind] + d]]
        contexts += [ids[pos[ahead] + d], ids[pos[behind]]]
    if not centers:
        return ids.new_zeros(0), ids.new_zeros(0)
    return torch.cat(centers), torch.cat(contexts)  # (P,), (P,)


def _check_sgns(W_in, W_out, centers, contexts, negatives) -> None:
    _matrix(W_in, "W_in")
    _matrix(W_out, "W_out")
    if W_in.shape != W_out.shape:
        raise ValueError(
            f"W_in and W_out must have the same shape (V, D), got {tuple(W_in.shape)} and {tuple(W_out.shape)}"
        )
    V = W_in.shape[0]
    _ids(centers, "centers", 1, V)
    _ids(contexts, "contexts", 1, V)
    _ids(negatives, "negatives", 2, V)
    if not len(centers) == len(contexts) == len(negatives) > 0:
        raise ValueError(
            f"centers (B,), contexts (B,) and negatives (B, K) need the same B > 0, got "
            f"{len(centers)}, {len(contexts)}, {tuple(negatives.shape)}"
        )


def skipgram_ns_loss(
    W_in: torch.Tensor, W_out: torch.Tensor, centers: torch.Tensor, contexts: torch.Tensor, negatives: torch.Tensor
) -> torch.Tensor:
    """Skip-gram with negative sampling (Mikolov et al., 2013b), mean over the batch; 0-dim.

    For a center ``c`` (row of ``W_in``), its true context ``o`` and ``K`` noise words ``n_k``
    (rows of ``W_out``): ``-log σ(u_o·v_c) - Σ_k log σ(-u_{n_k}·v_c)``. Differentiable by autograd.
    """
    _check_sgns(W_in, W_out, centers, contexts, negatives)
    v = W_in[centers]  # (B, D)
    pos = (W_out[contexts] * v).sum(-1)  # (B,)
    neg = torch.einsum("bkd,bd->bk", W_out[negatives], v)  # (B, K)
    return -(F.logsigmoid(pos) + F.logsigmoid(-neg).sum(-1)).mean()


def skipgram_ns_grads(
    W_in: torch.Tensor, W_out: torch.Tensor, centers: torch.Tensor, contexts: torch.Tensor, negatives: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`skipgram_ns_loss` and its gradients by hand: ``(loss 0-dim, grad_in (V, D), grad_out (V, D))``.

    With scores ``s = u·v`` and ``d log σ(s)/ds = 1 - σ(s)``: ``∂L/∂s_pos = (σ(s_pos) - 1)/B`` and
    ``∂L/∂s_k = σ(s_k)/B``; then ``∂L/∂v_c = ∂L/∂s_pos u_o + Σ_k ∂L/∂s_k u_{n_k}``,
    ``∂L/∂u_o = ∂L/∂s_pos v_c``, ``∂L/∂u_{n_k} = ∂L/∂s_k v_c``. A word that occurs several times in
    the batch (as center, context or negative) accumulates all its terms (``index_add_``).
    """
    _check_sgns(W_in, W_out, centers, contexts, negatives)
    with torch.no_grad():
        batch_size, dim = len(centers), W_in.shape[1]
        targets = torch.cat([contexts[:, None], negatives], dim=1)  # (B, 1 + K): the true context first
        v = W_in[centers]  # (B, D)
        u = W_out[targets]  # (B, 1 + K, D)
        s = (u * v[:, None, :]).sum(-1)  # (B, 1 + K)
        sign = torch.ones_like(s)
        sign[:, 1:] = -1.0  # log σ(s) for the context, log σ(-s) for the noise words
        loss = -F.logsigmoid(sign * s).sum(-1).mean()
        g = (torch.sigmoid(s) - (sign > 0).to(s.dtype)) / batch_size  # (B, 1 + K): ∂L/∂s
        grad_in = torch.zeros_like(W_in).index_add_(0, centers, (g[..., None] * u).sum(1))  # (V, D)
        grad_u = (g[..., None] * v[:, None, :]).reshape(-1, dim)  # (B (1 + K), D)
        grad_out = torch.zeros_like(W_out).index_add_(0, targets.reshape(-1), grad_u)  # (V, D)
    return loss, grad_in, grad_out


def train_skipgram(
    ids: torch.Tensor,
    vocab_size: int,
    dim: int = 50,
    window: int = 4,
    num_negatives: int = 5,
    steps: int = 800,
    batch_size: int = 4096,
    lr: float = 0.05,
    subsample_t: float = 1e-3,
    seed: int = 0,
    desc: str = "skip-gram",
    device: torch.device | str = "cpu",
) -> tuple[torch.Tensor, torch.Tensor, list[float]]:
    """Train skip-gram with negative sampling on a token stream ``ids (N,)``; returns
    ``(W_in (V, dim), W_out (V, dim), losses)`` (the batch loss at every step).

    Frequent words are subsampled once (:func:`subsample_keep_prob`), pairs come from a dynamic
    window (:func:`skipgram_pairs`), negatives from ``unigram^0.75`` (:func:`unigram_noise`). Each
    step draws ``batch_size`` random pairs and takes an Adagrad step (Duchi, Hazan & Singer, 2011;
    GloVe's optimiser) on the hand-computed gradients of :func:`skipgram_ns_grads`. Adagrad scales
    each coordinate's step by its own gradient history, so the frequent words (hit hundreds of times
    per batch as negatives) take small steps and the rare ones large. Plain SGD with one rate for
    all has a narrow window (on lecture 03's corpus: at 10 it barely moves, from 300 it diverges).
    ``W_in`` starts uniform in ``±0.5/dim``, ``W_out`` at zero, as in word2vec. Random draws are
    made on the CPU from ``seed`` (deterministic on a given machine); the vectors live and train on
    ``device``, and come back on the CPU.
    """
    ids = _ids(ids, "ids", 1, vocab_size)
    gen = torch.Generator().manual_seed(seed)
    counts = torch.bincount(ids, minlength=vocab_size).float()  # (V,)
    keep = torch.rand(len(ids), generator=gen) < subsample_keep_prob(counts, subsample_t)[ids]  # (N,)
    centers, contexts = skipgram_pairs(ids[keep], window, generator=gen)  # (P,), (P,)
    centers, contexts = centers.to(device), contexts.to(device)
    noise = unigram_noise(counts)  # (V,)
    W_in = ((torch.rand(vocab_size, dim, generator=gen) - 0.5) / dim).to(device).requires_grad_()  # (V, D)
    W_out = torch.zeros(vocab_size, dim, device=device, requires_grad=True)  # (V, D)
    optimizer = torch.optim.Adagrad([W_in, W_out], lr=lr)
    losses = []
    bar = progress(range(steps), desc=desc, unit="step")
    for step in bar:
        pick = torch.randint(0, len(centers), (batch_size,), generator=gen).to(device)  # (B,)
        negatives = torch.multinomial(noise, batch_size * num_negatives, True, generator=gen).to(device)  # (B K,)
        loss, W_in.grad, W_out.grad = skipgram_ns_grads(
            W_in, W_out, centers[pick], contexts[pick], negatives.view(batch_size, num_negatives)
        )
        optimizer.step()
        losses.append(loss.item())
        if step % 100 == 0 or step == steps - 1:
            bar.set_postfix(loss=f"{sum(losses[-100:]) / len(losses[-100:]):.3f}")
    return W_in.detach().cpu(), W_out.detach().cpu(), losses


# --------------------------------------------------------------------------- GloVe


def glove_loss(
    W: torch.Tensor,
    W_ctx: torch.Tensor,
    b: torch.Tensor,
    b_ctx: torch.Tensor,
    rows: torch.Tensor,
    cols: torch.Tensor,
    counts: torch.Tensor,
    x_max: float = 100.0,
    alpha: float = 0.75,
) -> torch.Tensor:
    """GloVe's objective (Pennington, Socher & Manning, 2014) over ``N`` non-zero entries; 0-dim.

    ``Σ_n f(X_n) (w_{i_n}·w̃_{j_n} + b_{i_n} + b̃_{j_n} - log X_n)^2`` with ``i = rows (N,)``,
    ``j = cols (N,)``, ``X = counts (N,) > 0`` and the weight ``f(x) = min(1, (x / x_max)^alpha)``.
    ``W, W_ctx`` are ``(V, D)``, ``b, b_ctx`` are ``(V,)``. A sum, not a mean; differentiable.
    """
    for name, m in (("W", W), ("W_ctx", W_ctx)):
        _matrix(m, name)
    if W.shape != W_ctx.shape:
        raise ValueError(f"W and W_ctx must have the same shape (V, D), got {tuple(W.shape)} and {tuple(W_ctx.shape)}")
    V = W.shape[0]
    for name, vec in (("b", b), ("b_ctx", b_ctx)):
        if not isinstance(vec, torch.Tensor) or tuple(vec.shape) != (V,) or not vec.is_floating_point():
            raise ValueError(f"{name} must be a floating tensor of shape ({V},), got {getattr(vec, 'shape', vec)!r}")
    _ids(rows, "rows", 1, V)
    _ids(cols, "cols", 1, V)
    if not isinstance(counts, torch.Tensor) or counts.dim() != 1 or not len(rows) == len(cols) == len(counts):
        raise ValueError(
            f"rows, cols and counts must be 1-D of one length N, got {tuple(rows.shape)}, "
            f"{tuple(cols.shape)}, {getattr(counts, 'shape', counts)!r}"
        )
    if not (counts > 0).all():
        raise ValueError("counts must be positive: GloVe sums over the non-zero entries only (log 0 is -inf)")
    if not x_max > 0 or not alpha > 0:
        raise ValueError(f"x_max and alpha must be positive, got {x_max!r}, {alpha!r}")
    x = counts.to(W.dtype)  # (N,)
    weight = (x / x_max).pow(alpha).clamp(max=1.0)  # (N,)
    pred = (W[rows] * W_ctx[cols]).sum(-1) + b[rows] + b_ctx[cols]  # (N,)
    return (weight * (pred - torch.log(x)) ** 2).sum()


# --------------------------------------------------------------------------- fastText


def ngram_vocab(words: Iterable[str], n_min: int = 3, n_max: int = 6, min_count: int = 1) -> dict[str, int]:
    """A dictionary ``{n-gram: id}`` of the character n-grams of ``words`` (ids ``0, 1, ...``).

    Each word contributes ``char_ngrams(word, n_min, n_max)`` (boundary markers ``<``, ``>``) and,
    as in fastText, the whole word ``<word>`` as one more unit. N-grams seen in fewer than
    ``min_count`` distinct words are dropped. Ids follow first appearance, so the result is
    deterministic in the order of ``words``.
    """
    seen: Counter[str] = Counter()
    for word in words:  # each distinct n-gram of the word once, in order (a set's order changes between runs)
        seen.update(dict.fromkeys(char_ngrams(word, n_min, n_max) + [f"<{word}>"]).keys())
    return {gram: i for i, gram in enumerate(g for g, c in seen.items() if c >= min_count)}


def word_ngram_ids(word: str, ngram_ids: dict[str, int], n_min: int = 3, n_max: int = 6) -> list[int]:
    """The ids of ``word``'s n-grams (and of ``<word>``) that ``ngram_ids`` knows, repeats kept."""
    grams = char_ngrams(word, n_min, n_max) + [f"<{word}>"]
    return [ngram_ids[g] for g in grams if g in ngram_ids]


def fasttext_vector(
    word: str, ngram_ids: dict[str, int], E: torch.Tensor, n_min: int = 3, n_max: int = 6
) -> torch.Tensor:
    """fastText's vector of ``word`` (Bojanowski et al., 2017): the sum of the rows of ``E (N, D)``
    of its known n-grams (:func:`word_ngram_ids`) -> ``(D,)``.

    An unseen word still gets a vector from the n-grams it shares with training words; a word
    with no known n-gram gets zeros. Ids in ``ngram_ids`` must index rows of ``E``.
    """
    E = _matrix(E, "E")
    if not isinstance(ngram_ids, dict):
        raise ValueError(f"ngram_ids must be a dict {{n-gram: row of E}}, got {type(ngram_ids).__name__}")
    ids = word_ngram_ids(word, ngram_ids, n_min, n_max)
    if any(not 0 <= i < E.shape[0] for i in ids):
        raise ValueError(f"ngram_ids maps n-grams of {word!r} to rows outside E's {E.shape[0]} rows")
    if not ids:
        return E.new_zeros(E.shape[1])  # (D,)
    return E[torch.tensor(ids)].sum(dim=0)  # (D,)


# --------------------------------------------------------------------------- judging embeddings


def nearest_neighbours(E: torch.Tensor, query: torch.Tensor, k: int = 5, exclude_self: bool = True) -> torch.Tensor:
    """The ``k`` words whose rows of ``E (V, D)`` have the highest cosine with each ``query (Q,)``
    word -> LongTensor ``(Q, k)``, best first; the query word itself is skipped when ``exclude_self``."""
    E = _matrix(E, "E")
    query = _ids(query, "query", 1, E.shape[0])
    unit = F.normalize(E, dim=1)  # (V, D)
    scores = unit[query] @ unit.T  # (Q, V)
    if exclude_self:
        scores[torch.arange(len(query)), query] = -torch.inf
    return scores.topk(k, dim=1).indices  # (Q, k)


def analogy(
    E: torch.Tensor, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, k: int = 1, exclude: bool = True
) -> torch.Tensor:
    """3CosAdd (Mikolov, Yih & Zweig, 2013): "a is to b as c is to ?" for ``Q`` questions at once.

    Returns the ``k`` words ``x`` with the largest ``cos(x, b) - cos(x, a) + cos(x, c)``, best
    first, as a LongTensor ``(Q, k)``; ``a, b, c`` are ``(Q,)`` word ids into ``E (V, D)``. With
    ``exclude`` (the usual protocol) the three question words are never answers.
    """
    E = _matrix(E, "E")
    V = E.shape[0]
    a, b, c = (_ids(x, name, 1, V) for x, name in ((a, "a"), (b, "b"), (c, "c")))
    if not len(a) == len(b) == len(c):
        raise ValueError(f"a, b and c must have the same length Q, got {len(a)}, {len(b)}, {len(c)}")
    if not isinstance(k, int) or not 1 <= k <= V:
        raise ValueError(f"k must be an int in [1, {V}], got {k!r}")
    unit = F.normalize(E, dim=1)  # (V, D)
    scores = (unit[b] - unit[a] + unit[c]) @ unit.T  # (Q, V): a sum of three cosines
    if exclude:
        rows = torch.arange(len(a))
        for x in (a, b, c):
            scores[rows, x] = -torch.inf
    return scores.topk(k, dim=1).indices  # (Q, k)


def _ranks(x: torch.Tensor) -> torch.Tensor:
    order = torch.argsort(x, stable=True)  # (P,)
    sorted_x = x[order]
    ranks = torch.empty_like(x)
    start = 0
    for i in range(1, len(x) + 1):  # ties share the mean of their ranks
        if i == len(x) or sorted_x[i] != sorted_x[start]:
            ranks[order[start:i]] = (start + i - 1) / 2 + 1
            start = i
    return ranks


def spearman(x: torch.Tensor, y: torch.Tensor) -> float:
    """Spearman's rank correlation of two 1-D tensors of one length ``P >= 2`` (ties get mean ranks):
    the Pearson correlation of the ranks. Returns a float in ``[-1, 1]``."""
    if not all(isinstance(t, torch.Tensor) and t.dim() == 1 for t in (x, y)) or len(x) != len(y) or len(x) < 2:
        raise ValueError(
            f"x and y must be 1-D tensors of one length >= 2, got {getattr(x, 'shape', x)!r} and "
            f"{getattr(y, 'shape', y)!r}"
        )
    rx, ry = _ranks(x.double()), _ranks(y.double())  # (P,), (P,)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denom = float(torch.sqrt((rx**2).sum() * (ry**2).sum()))
    if denom == 0:
        raise ValueError("spearman is undefined when x or y is constant")
    return float((rx * ry).sum()) / denom
