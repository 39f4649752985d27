"""course_utils.decoding: beam search against brute force, sampling filters, BERT's masking."""

import itertools

import pytest
import torch

from course_utils.decoding import (
    IGNORE_INDEX,
    apply_temperature,
    beam_decode,
    beam_search,
    mlm_mask,
    next_token_targets,
    sample_next,
    top_k_filter,
    top_p_filter,
)
from course_utils.seq2seq import greedy_decode
from course_utils.text import BOS_ID, EOS_ID
from course_utils.transformer import TransformerSeq2Seq

BOS, EOS, V = 0, 1, 4


def table_lm(seed, vocab_size=V, sharpness=2.0):
    """A 'language model' whose next-token log-probs are a fixed random function of the whole prefix."""
    cache = {}

    def next_log_probs(prefix):
        if prefix not in cache:
            g = torch.Generator().manual_seed(hash((seed,) + prefix) % 2**31)
            cache[prefix] = (sharpness * torch.randn(vocab_size, generator=g, dtype=torch.float64)).log_softmax(-1)
        return cache[prefix]

    def log_prob_fn(prefixes):
        return torch.stack([next_log_probs(tuple(row)) for row in prefixes.tolist()])

    return next_log_probs, log_prob_fn


def brute_force(next_log_probs, max_len, length_penalty):
    """Score every complete sequence: ends at the first <eos>, or has max_len tokens."""
    best = None
    for n in range(1, max_len + 1):
        for seq in itertools.product(range(V), repeat=n):
            if EOS in seq[:-1] or (n < max_len and seq[-1] != EOS):
                continue
            lp = sum(next_log_probs((BOS,) + seq[:t])[tok].item() for t, tok in enumerate(seq))
            score = lp / n**length_penalty
            if best is None or score > best[1]:
                best = (list(seq), score)
    return best


@pytest.mark.parametrize("seed,length_penalty", [(0, 0.0), (1, 0.0), (2, 1.0), (3, 0.6), (4, 1.0)])
def test_exhaustive_beam_search_equals_brute_force(seed, length_penalty):
    next_log_probs, fn = table_lm(seed)
    max_len = 4
    hyps = beam_search(fn, beam_size=V**max_len, max_len=max_len, bos_id=BOS, eos_id=EOS, length_penalty=length_penalty)
    tokens, score = brute_force(next_log_probs, max_len, length_penalty)
    assert hyps[0].tokens == tokens and hyps[0].score == pytest.approx(score, abs=1e-9)
    assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)


def test_beam_of_one_is_greedy_and_wider_beams_never_do_worse_here():
    next_log_probs, fn = table_lm(7)
    prefix, lp = (BOS,), 0.0
    for _ in range(6):
        tok = int(next_log_probs(prefix).argmax())
        lp += next_log_probs(prefix)[tok].item()
        prefix += (tok,)
        if tok == EOS:
            break
    greedy = beam_search(fn, 1, 6, BOS, EOS)[0]
    assert greedy.tokens == list(prefix[1:]) and greedy.log_prob == pytest.approx(lp)
    assert beam_search(fn, 8, 6, BOS, EOS)[0].log_prob >= greedy.log_prob - 1e-12


def test_finished_hypotheses_are_kept_while_others_continue():
    # <eos> first costs log 0.4; every continuation costs at least log 0.6 + log 0.5 < log 0.4
    def fn(prefixes):
        rows = []
        for row in prefixes.tolist():
            rows.append([0.0, 0.4, 0.6, 0.0] if len(row) == 1 else [0.0, 0.5, 0.25, 0.25])
        return torch.tensor(rows, dtype=torch.float64).clamp_min(1e-30).log()

    hyps = beam_search(fn, beam_size=2, max_len=5, bos_id=BOS, eos_id=EOS)
    assert hyps[0].tokens == [EOS] and hyps[0].log_prob == pytest.approx(torch.tensor(0.4).log().item())
    assert all(h.tokens[-1] == EOS or len(h.tokens) == 5 for h in hyps)
    with pytest.raises(ValueError):
        beam_search(fn, 0, 5, BOS, EOS)


def test_beam_decode_with_beam_one_equals_greedy_decode():
    torch.manual_seed(0)
    model = TransformerSeq2Seq(9, 8, d_model=16, num_heads=2, num_layers=1, d_ff=32).eval()
    src = torch.tensor([[4, 5, 6, 0], [7, 8, 4, 5]])
    lengths = torch.tensor([3, 4])
    greedy = greedy_decode(model, src, lengths, 6).tolist()
    greedy = [row[: row.index(EOS_ID)] if EOS_ID in row else row for row in greedy]
    assert beam_decode(model, src, lengths, 1, 6, BOS_ID, EOS_ID) == greedy


# --------------------------------------------------------------------------- sampling


def test_temperature_scales_logits_and_rejects_zero():
    logits = torch.tensor([[1.0, 2.0, 4.0]])
    assert torch.allclose(apply_temperature(logits, 0.5), logits * 2)
    entropy = lambda z: -(z.softmax(-1) * z.log_softmax(-1)).sum().item()  # noqa: E731
    assert entropy(apply_temperature(logits, 0.5)) < entropy(logits) < entropy(apply_temperature(logits, 2.0))
    with pytest.raises(ValueError):
        apply_temperature(logits, 0.0)


def test_top_k_keeps_the_k_largest_and_ties():
    logits = torch.tensor([[0.1, 3.0, -1.0, 2.0, 2.5], [1.0, 1.0, 1.0, 0.0, 2.0]])
    out = top_k_filter(logits, 2)
    assert torch.isfinite(out).tolist() == [[False, True, False, False, True], [True, True, True, False, True]]
    assert torch.equal(out[torch.isfinite(out)], logits[torch.isfinite(out)])
    assert torch.equal(top_k_filter(logits, 5), logits)


def test_top_p_keeps_the_smallest_nucleus_by_brute_force():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(20, 7, generator=g) * 2
    for p in (0.05, 0.5, 0.9, 1.0):
        kept = torch.isfinite(top_p_filter(logits, p))
        probs = logits.softmax(-1)
        for row in range(20):
            order = probs[row].argsort(descending=True).tolist()
            mass, expected = 0.0, set()
            for tok in order:
                expected.add(tok)
                mass += probs[row, tok].item()
                if mass >= p - 1e-9:
                    break
            assert set(torch.nonzero(kept[row]).flatten().tolist()) == expected


def test_sample_next_follows_the_filtered_distribution():
    logits = torch.tensor([[0.0, 1.0, 2.0, -5.0]]).repeat(20000, 1)
    g = torch.Generator().manual_seed(0)
    draws = sample_next(logits, generator=g)
    assert draws.shape == (20000,) and draws.dtype == torch.long
    freq = torch.bincount(draws, minlength=4).double() / 20000
    assert torch.allclose(freq, logits[0].double().softmax(-1), atol=0.015)
    assert torch.all(sample_next(logits[:50], top_k=1) == 2)
    assert set(sample_next(logits, top_k=2, generator=g).tolist()) == {1, 2}


# --------------------------------------------------------------------------- objectives


def test_mlm_mask_selects_15_percent_and_splits_80_10_10():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 50, (200, 100), generator=g)
    maskable = torch.ones_like(ids, dtype=torch.bool)
    maskable[:, :10] = False
    inputs, labels = mlm_mask(ids, mask_id=4, vocab_size=50, maskable=maskable, random_low=5, generator=g)
    selected = labels != IGNORE_INDEX
    assert not selected[:, :10].any() and torch.equal(inputs[:, :10], ids[:, :10])
    assert selected[:, 10:].float().mean().item() == pytest.approx(0.15, abs=0.01)
    assert torch.equal(labels[selected], ids[selected]) and torch.equal(inputs[~selected], ids[~selected])
    n = selected.sum().item()
    masked = (inputs == 4) & selected
    unchanged = (inputs == ids) & selected
    assert masked.sum().item() / n == pytest.approx(0.8, abs=0.02)
    # random replacements hit the original id 1/45 of the time and then count as unchanged
    assert unchanged.sum().item() / n == pytest.approx(0.1 + 0.1 / 45, abs=0.015)
    assert inputs.min().item() >= 4


def test_next_token_targets_shift_by_one():
    ids = torch.tensor([[1, 2, 3, 4]])
    inputs, labels = next_token_targets(ids)
    assert inputs.tolist() == [[1, 2, 3]] and labels.tolist() == [[2, 3, 4]]
    with pytest.raises(ValueError):
        next_token_targets(torch.tensor([[1]]))
