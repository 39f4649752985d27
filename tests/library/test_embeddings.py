"""Tests of unit 03's library: course_utils.embeddings, course_utils.bow and the King James loader."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr
from sklearn.feature_extraction.text import TfidfTransformer

from course_utils import bow, data
from course_utils import embeddings as emb
from course_utils.text import char_ngrams

# --------------------------------------------------------------------------- bags of words, counts


def test_bag_of_words_counts_each_document():
    X = bow.bag_of_words([[0, 2, 2], [], [1, 1, 1, 3]], vocab_size=4)
    assert X.shape == (3, 4) and X.dtype == torch.float32
    assert X.tolist() == [[1, 0, 2, 0], [0, 0, 0, 0], [0, 3, 0, 1]]
    with pytest.raises(ValueError, match="range"):
        bow.bag_of_words([[0, 4]], vocab_size=4)
    with pytest.raises(ValueError, match="non-empty"):
        bow.bag_of_words([], vocab_size=4)


@pytest.mark.parametrize("smooth", [True, False])
def test_tfidf_equals_scikit_learn(smooth):
    gen = torch.Generator().manual_seed(0)
    counts = torch.randint(0, 3, (12, 9), generator=gen).float()
    counts[:, 0] = 1.0  # a word in every document gets the smallest idf
    ours = bow.tfidf(counts, smooth=smooth)
    ref = TfidfTransformer(smooth_idf=smooth).fit_transform(counts.numpy()).toarray()
    assert torch.allclose(ours, torch.from_numpy(ref).float(), atol=1e-6)
    assert torch.allclose(ours.norm(dim=1)[counts.sum(1) > 0], torch.ones(1), atol=1e-6)
    test = torch.randint(0, 3, (5, 9), generator=gen).float()
    fitted = TfidfTransformer(smooth_idf=smooth).fit(counts.numpy())
    ref_test = torch.from_numpy(fitted.transform(test.numpy()).toarray()).float()
    assert torch.allclose(bow.tfidf(test, smooth=smooth, reference=counts), ref_test, atol=1e-6)
    with pytest.raises(ValueError, match="float"):
        bow.tfidf(counts.long())
    with pytest.raises(ValueError, match="columns"):
        bow.tfidf(test[:, :4], reference=counts)


@pytest.mark.parametrize("harmonic", [False, True])
def test_cooccurrence_equals_a_loop(harmonic):
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 5, (40,), generator=gen)
    window = 3
    brute = torch.zeros(5, 5, dtype=torch.float64)
    for i in range(len(ids)):
        for j in range(len(ids)):
            if i != j and abs(i - j) <= window:
                brute[ids[i], ids[j]] += 1 / abs(i - j) if harmonic else 1
    counts = bow.cooccurrence(ids, 5, window, harmonic=harmonic)
    assert counts.shape == (5, 5) and torch.allclose(counts.double(), brute, atol=1e-5)
    assert torch.equal(counts, counts.T)
    with pytest.raises(ValueError, match="range"):
        bow.cooccurrence(ids, 4, window)
    with pytest.raises(ValueError, match="window"):
        bow.cooccurrence(ids, 5, 0)


# --------------------------------------------------------------------------- PPMI and SVD


def test_ppmi_hand_example():
    counts = torch.tensor([[2.0, 0.0], [1.0, 1.0]])  # N = 4, n_w = (2, 2), n_c = (3, 1)
    expected = torch.tensor([[math.log(2 * 4 / (2 * 3)), 0.0], [0.0, math.log(1 * 4 / (2 * 1))]])
    assert torch.allclose(emb.ppmi(counts), expected)  # PMI(1, 0) = log(2/3) < 0 is clipped to 0


def test_ppmi_with_smoothing_equals_a_loop_and_never_nans():
    gen = torch.Generator().manual_seed(2)
    counts = torch.randint(0, 4, (6, 7), generator=gen).double()
    counts[2] = 0  # an empty row
    counts[:, 5] = 0  # an empty column
    alpha = 0.75
    total, col_alpha = counts.sum(), counts.sum(0) ** alpha
    brute = torch.zeros_like(counts)
    for w in range(6):
        for c in range(7):
            if counts[w, c] > 0:
                pmi = math.log((counts[w, c] / total) / ((counts[w].sum() / total) * (col_alpha[c] / col_alpha.sum())))
                brute[w, c] = max(pmi, 0.0)
    ours = emb.ppmi(counts, alpha=alpha)
    assert ours.dtype == torch.float64 and torch.allclose(ours, brute)
    assert not torch.isnan(ours).any() and (ours[2] == 0).all() and (ours[:, 5] == 0).all()
    assert emb.ppmi(counts.long()).dtype == torch.float32  # integer counts are accepted
    assert torch.equal(emb.ppmi(torch.zeros(3, 3)), torch.zeros(3, 3))
    # smoothing raises the probability of rare contexts, so it lowers their PMI
    rare = torch.tensor([[50.0, 1.0], [50.0, 0.0]])
    assert emb.ppmi(rare, alpha=0.75)[0, 1] < emb.ppmi(rare, alpha=1.0)[0, 1]


@pytest.mark.parametrize(
    "bad, match",
    [(torch.ones(3), "2-D"), (-torch.ones(2, 2), "non-negative"), (torch.ones(2, 2, dtype=torch.bool), "2-D")],
)
def test_ppmi_rejects_bad_counts(bad, match):
    with pytest.raises(ValueError, match=match):
        emb.ppmi(bad)
    with pytest.raises(ValueError, match="alpha"):
        emb.ppmi(torch.ones(2, 2), alpha=0)


def test_svd_embeddings_factorise_a_low_rank_matrix():
    gen = torch.Generator().manual_seed(3)
    A = torch.randn(30, 4, generator=gen, dtype=torch.float64)
    M = A @ A.T  # (30, 30), symmetric PSD of rank 4: M = U S U^T
    for exact in (True, False):
        torch.manual_seed(0)
        E = emb.svd_embeddings(M, 4, power=0.5, exact=exact)
        assert E.shape == (30, 4)
        assert torch.allclose(E @ E.T, M, atol=1e-6)  # U S^1/2 (U S^1/2)^T = U S U^T
        top = E.abs().argmax(dim=0)
        assert (E[top, torch.arange(4)] > 0).all()  # the sign convention
    with pytest.raises(ValueError, match="dim"):
        emb.svd_embeddings(M, 31)
    with pytest.raises(ValueError, match="floating"):
        emb.svd_embeddings(M.long(), 2)


# --------------------------------------------------------------------------- word2vec


def _sgns_batch(seed=4, V=7, D=5, B=9, K=3):
    gen = torch.Generator().manual_seed(seed)
    W_in = torch.randn(V, D, generator=gen, dtype=torch.float64)
    W_out = torch.randn(V, D, generator=gen, dtype=torch.float64)
    centers = torch.randint(0, V, (B,), generator=gen)
    centers[:3] = 2  # repeated ids must accumulate
    contexts = torch.randint(0, V, (B,), generator=gen)
    negatives = torch.randint(0, V, (B, K), generator=gen)
    negatives[0] = contexts[0]  # a negative equal to the true context
    return W_in, W_out, centers, contexts, negatives


def test_skipgram_loss_equals_a_loop():
    W_in, W_out, centers, contexts, negatives = _sgns_batch()
    total = 0.0
    for c, o, ns in zip(centers.tolist(), contexts.tolist(), negatives.tolist()):
        sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
        total -= math.log(sig(float(W_out[o] @ W_in[c])))
        total -= sum(math.log(sig(-float(W_out[n] @ W_in[c]))) for n in ns)
    loss = emb.skipgram_ns_loss(W_in, W_out, centers, contexts, negatives)
    assert loss.dim() == 0 and math.isclose(float(loss), total / len(centers), rel_tol=1e-12)


def test_skipgram_hand_gradients_equal_autograd():
    W_in, W_out, centers, contexts, negatives = _sgns_batch()
    a, b = W_in.clone().requires_grad_(), W_out.clone().requires_grad_()
    ref = emb.skipgram_ns_loss(a, b, centers, contexts, negatives)
    ref.backward()
    loss, grad_in, grad_out = emb.skipgram_ns_grads(W_in, W_out, centers, contexts, negatives)
    assert loss.dim() == 0 and torch.allclose(loss, ref.detach())
    assert grad_in.shape == W_in.shape and grad_out.shape == W_out.shape
    assert torch.allclose(grad_in, a.grad, atol=1e-12) and torch.allclose(grad_out, b.grad, atol=1e-12)
    assert (grad_in[2] != 0).any()  # the repeated center collected its terms
    unused = torch.ones(W_in.shape[0], dtype=torch.bool)
    unused[centers] = False
    assert (grad_in[unused] == 0).all()


def test_skipgram_inputs_are_checked():
    W_in, W_out, centers, contexts, negatives = _sgns_batch()
    with pytest.raises(ValueError, match="same B"):
        emb.skipgram_ns_grads(W_in, W_out, centers[:-1], contexts, negatives)
    with pytest.raises(ValueError, match="outside range"):
        emb.skipgram_ns_grads(W_in, W_out, centers + 100, contexts, negatives)
    with pytest.raises(ValueError, match="integer"):
        emb.skipgram_ns_grads(W_in, W_out, centers.float(), contexts, negatives)
    with pytest.raises(ValueError, match="negatives"):
        emb.skipgram_ns_grads(W_in, W_out, centers, contexts, negatives[:, 0])
    with pytest.raises(ValueError, match="same shape"):
        emb.skipgram_ns_loss(W_in, W_out[:, :2], centers, contexts, negatives)


def test_skipgram_pairs_fixed_and_dynamic_window():
    ids = torch.tensor([5, 6, 7, 8, 9])
    centers, contexts = emb.skipgram_pairs(ids, window=2)
    brute = sorted((int(ids[i]), int(ids[j])) for i in range(5) for j in range(5) if 0 < abs(i - j) <= 2)
    assert sorted(zip(centers.tolist(), contexts.tolist())) == brute
    gen = torch.Generator().manual_seed(0)
    ids = torch.arange(200)
    c, o = emb.skipgram_pairs(ids, window=5, generator=gen)
    assert set(zip(c.tolist(), o.tolist())) <= {(i, j) for i in range(200) for j in range(200) if 0 < abs(i - j) <= 5}
    near, far = ((c - o).abs() == 1).sum(), ((c - o).abs() == 5).sum()
    assert near == 2 * 199 and 0 < far < near / 2  # distance 1 always kept, distance 5 with prob 1/5


def test_noise_and_subsampling_formulas():
    counts = torch.tensor([900.0, 90.0, 9.0, 1.0])
    noise = emb.unigram_noise(counts)
    expected = counts**0.75 / (counts**0.75).sum()
    assert torch.allclose(noise, expected) and math.isclose(float(noise.sum()), 1.0, rel_tol=1e-6)
    keep = emb.subsample_keep_prob(counts, t=0.01)
    assert torch.allclose(keep, torch.tensor([math.sqrt(0.01 / 0.9), math.sqrt(0.01 / 0.09), 1.0, 1.0]))
    with pytest.raises(ValueError, match="non-negative"):
        emb.unigram_noise(torch.tensor([1.0, -1.0]))


def test_train_skipgram_learns_and_is_deterministic():
    # two "topics" of words that never co-occur: trained vectors must separate them
    gen = torch.Generator().manual_seed(0)
    topic = torch.randint(0, 2, (300,), generator=gen)
    ids = (topic[:, None] * 5 + torch.randint(0, 5, (300, 8), generator=gen)).reshape(-1)  # (2400,)
    kwargs = dict(dim=8, window=2, steps=150, batch_size=256, lr=0.05, subsample_t=1.0)
    W_in, W_out, losses = emb.train_skipgram(ids, 10, seed=1, **kwargs)
    assert W_in.shape == W_out.shape == (10, 8) and len(losses) == 150
    assert sum(losses[-20:]) / 20 < losses[0] - 0.5
    unit = torch.nn.functional.normalize(W_in, dim=1)
    cos = unit @ unit.T
    same = (cos[:5, :5].sum() - 5) / 20
    assert same > cos[:5, 5:].mean() + 0.3
    again, _, _ = emb.train_skipgram(ids, 10, seed=1, **kwargs)
    assert torch.equal(W_in, again)


# --------------------------------------------------------------------------- GloVe


def test_glove_loss_equals_a_loop_and_is_differentiable():
    gen = torch.Generator().manual_seed(5)
    V, D, N = 6, 3, 10
    W, W_ctx = torch.randn(V, D, generator=gen), torch.randn(V, D, generator=gen)
    b, b_ctx = torch.randn(V, generator=gen), torch.randn(V, generator=gen)
    rows, cols = torch.randint(0, V, (N,), generator=gen), torch.randint(0, V, (N,), generator=gen)
    counts = torch.tensor([0.5, 1, 3, 10, 50, 99, 100, 150, 1000, 2.0])
    brute = 0.0
    for i, j, x in zip(rows.tolist(), cols.tolist(), counts.tolist()):
        f = min(1.0, (x / 100) ** 0.75)
        brute += f * (float(W[i] @ W_ctx[j]) + float(b[i]) + float(b_ctx[j]) - math.log(x)) ** 2
    loss = emb.glove_loss(W, W_ctx, b, b_ctx, rows, cols, counts)
    assert loss.dim() == 0 and math.isclose(float(loss), brute, rel_tol=1e-5)
    Wg = W.clone().requires_grad_()
    emb.glove_loss(Wg, W_ctx, b, b_ctx, rows, cols, counts, x_max=10.0, alpha=0.5).backward()
    assert Wg.grad is not None and torch.isfinite(Wg.grad).all()
    with pytest.raises(ValueError, match="positive"):
        emb.glove_loss(W, W_ctx, b, b_ctx, rows, cols, counts - 1)
    with pytest.raises(ValueError, match="b must"):
        emb.glove_loss(W, W_ctx, b[:-1], b_ctx, rows, cols, counts)
    with pytest.raises(ValueError, match="one length"):
        emb.glove_loss(W, W_ctx, b, b_ctx, rows, cols[:-1], counts)


# --------------------------------------------------------------------------- fastText


def test_ngram_vocab_and_fasttext_vector():
    ngram_ids = emb.ngram_vocab(["cat", "cart"], n_min=3, n_max=4)
    assert set(ngram_ids) == set(char_ngrams("cat", 3, 4) + char_ngrams("cart", 3, 4) + ["<cat>", "<cart>"])
    assert sorted(ngram_ids.values()) == list(range(len(ngram_ids)))
    E = torch.randn(len(ngram_ids), 4)
    grams = char_ngrams("cat", 3, 4) + ["<cat>"]
    expected = sum(E[ngram_ids[g]] for g in grams)
    assert torch.allclose(emb.fasttext_vector("cat", ngram_ids, E, 3, 4), expected)
    # an unseen word: only the n-grams it shares with the training words ("<ca", "<car")
    unseen = emb.fasttext_vector("carp", ngram_ids, E, 3, 4)
    assert torch.allclose(unseen, E[ngram_ids["<ca"]] + E[ngram_ids["car"]] + E[ngram_ids["<car"]])
    assert torch.equal(emb.fasttext_vector("xyz", ngram_ids, E, 3, 4), torch.zeros(4))
    assert emb.word_ngram_ids("cat", ngram_ids, 3, 4) == [ngram_ids[g] for g in grams]
    assert emb.ngram_vocab(["cat", "cart"], 3, 3, min_count=2) == {"<ca": 0}
    # ids follow first appearance, whatever the hash seed: not a set's iteration order
    assert list(emb.ngram_vocab(["cat", "cart"], 3, 3)) == ["<ca", "cat", "at>", "<cat>", "car", "art", "rt>", "<cart>"]
    with pytest.raises(ValueError, match="rows outside"):
        emb.fasttext_vector("cat", ngram_ids, E[:2], 3, 4)
    with pytest.raises(ValueError, match="dict"):
        emb.fasttext_vector("cat", list(ngram_ids), E, 3, 4)


# --------------------------------------------------------------------------- judging


def test_nearest_neighbours_equal_brute_force():
    gen = torch.Generator().manual_seed(6)
    E = torch.randn(20, 5, generator=gen, dtype=torch.float64)
    query = torch.tensor([0, 7, 7])
    top = emb.nearest_neighbours(E, query, k=3)
    for q, row in zip(query.tolist(), top.tolist()):
        cos = [(float(E[q] @ E[x] / (E[q].norm() * E[x].norm())), x) for x in range(20) if x != q]
        assert row == [x for _, x in sorted(cos, reverse=True)[:3]]
    assert emb.nearest_neighbours(E, query, k=1, exclude_self=False)[:, 0].tolist() == query.tolist()


def test_analogy_3cosadd():
    # a toy space where "man : king :: woman : queen" holds exactly
    E = torch.tensor([[1.0, 0, 0], [1, 1, 0], [0, 0, 1], [0, 1, 1], [1, 0, 0.1]])  # man king woman queen boy
    man, king, woman, queen = 0, 1, 2, 3
    best = emb.analogy(E, torch.tensor([man]), torch.tensor([king]), torch.tensor([woman]), k=2)
    assert best.dtype == torch.long and best.shape == (1, 2) and best[0, 0] == queen
    # without exclusion the question words compete (here "king" itself wins: it is b)
    got = emb.analogy(E, torch.tensor([man]), torch.tensor([king]), torch.tensor([woman]), k=1, exclude=False)
    assert got.item() in (king, queen)
    gen = torch.Generator().manual_seed(7)
    E = torch.randn(30, 6, generator=gen, dtype=torch.float64)
    a, b, c = torch.tensor([0, 3, 5]), torch.tensor([1, 4, 5]), torch.tensor([2, 9, 8])
    top = emb.analogy(E, a, b, c, k=4)
    unit = E / E.norm(dim=1, keepdim=True)
    for q in range(3):
        scores = {x: float(unit[x] @ (unit[b[q]] - unit[a[q]] + unit[c[q]])) for x in range(30)}
        allowed = [x for x in sorted(scores, key=scores.get, reverse=True) if x not in (a[q], b[q], c[q])]
        assert top[q].tolist() == allowed[:4]
    with pytest.raises(ValueError, match="same length"):
        emb.analogy(E, a, b, c[:2])
    with pytest.raises(ValueError, match="k must"):
        emb.analogy(E, a, b, c, k=0)


def test_spearman_equals_scipy_with_ties():
    rng = np.random.default_rng(0)
    for _ in range(5):
        x, y = rng.integers(0, 5, 25).astype(float), rng.normal(size=25)
        ours = emb.spearman(torch.from_numpy(x), torch.from_numpy(y))
        assert math.isclose(ours, spearmanr(x, y).statistic, abs_tol=1e-12)
    assert math.isclose(emb.spearman(torch.arange(5.0), torch.arange(5.0) ** 3), 1.0)
    with pytest.raises(ValueError, match="constant"):
        emb.spearman(torch.ones(4), torch.arange(4.0))
    with pytest.raises(ValueError, match="one length"):
        emb.spearman(torch.ones(4), torch.ones(3))


# --------------------------------------------------------------------------- the King James text

needs_bible = pytest.mark.skipif(
    shutil.which("bible") is None, reason="Debian's bible-kjv package is not installed (apt-get install bible-kjv)"
)


@needs_bible
def test_bible_kjv_text_is_the_whole_bible(monkeypatch):
    monkeypatch.delenv(data.NO_BIBLE_ENV, raising=False)
    assert data.bible_kjv_available()
    text = data.bible_kjv_text()
    lines = text.splitlines()
    assert lines[0] == "In the beginning God created the heaven and the earth."
    assert lines[-1] == "The grace of our Lord Jesus Christ be with you all. Amen."
    assert 30_000 < len(lines) < 32_000 and 750_000 < len(text.split()) < 850_000
    assert not any(line[:1].isdigit() for line in lines[:200])  # verse numbers are dropped


def test_bible_kjv_can_be_switched_off(monkeypatch):
    monkeypatch.setenv(data.NO_BIBLE_ENV, "1")
    assert not data.bible_kjv_available()
    with pytest.raises(data.DataUnavailable, match=data.NO_BIBLE_ENV):
        data.bible_kjv_text()


def test_bible_kjv_missing_program_says_how_to_install(monkeypatch):
    monkeypatch.delenv(data.NO_BIBLE_ENV, raising=False)
    monkeypatch.setattr(data, "BIBLE_PROGRAM", "no-such-bible-program")
    assert not data.bible_kjv_available()
    with pytest.raises(data.DataUnavailable, match="apt-get install bible-kjv"):
        data.bible_kjv_text()
