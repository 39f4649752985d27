"""Unit 07: turning next-token distributions into sequences, and BERT's masking.

* search: :func:`beam_search` over any ``log_prob_fn(prefixes (N, t)) -> (N, V)`` log-probs,
  with finished hypotheses kept aside and an optional length normalization;
  :func:`seq2seq_log_prob_fn` and :func:`beam_decode` plug in a model that follows
  ``logits = model(src, src_lengths, tgt_in)`` (``course_utils.seq2seq``);
* sampling: :func:`apply_temperature`, :func:`top_k_filter`, :func:`top_p_filter` (nucleus)
  return filtered logits ``(..., V)``; :func:`sample_next` draws one token per row;
* pre-training objectives: :func:`mlm_mask` (BERT: 15% of the tokens, 80% ``<mask>``, 10%
  random, 10% unchanged) and :func:`next_token_targets` (GPT: the input shifted by one).

    best = beam_search(log_prob_fn, beam_size=4, max_len=12, bos_id=BOS_ID, eos_id=EOS_ID)[0]
    ids = sample_next(logits[:, -1], temperature=0.8, top_k=20, top_p=0.95)    # (B,)
    inputs, labels = mlm_mask(ids, mask_id, vocab_size)                          # (B, T), (B, T)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

IGNORE_INDEX = -100  # the default ignore_index of F.cross_entropy

LogProbFn = Callable[[torch.Tensor], torch.Tensor]


class Hypothesis(NamedTuple):
    tokens: list[int]  # generated ids after <bos>; ends with <eos> unless max_len was reached
    log_prob: float  # sum of the log-probabilities of the tokens
    score: float  # log_prob / len(tokens) ** length_penalty


# --------------------------------------------------------------------------- beam search


def beam_search(
    log_prob_fn: LogProbFn, beam_size: int, max_len: int, bos_id: int, eos_id: int, length_penalty: float = 0.0
) -> list[Hypothesis]:
    """Beam search for one sequence; returns the finished hypotheses, best first.

    Start from ``[bos_id]``. At each of at most ``max_len`` steps, every alive hypothesis is
    extended by every token, ``log_prob = old + log p(token | prefix)`` (a sum of LOG-probs),
    and the ``beam_size`` best extensions overall are kept. Those ending in ``eos_id``, or
    having reached ``max_len`` tokens, move to the finished list and are not extended again;
    the search ends when no hypothesis is alive. Finished hypotheses of different lengths are
    compared by ``score = log_prob / len(tokens) ** length_penalty`` (0: no normalization, which
    favours short outputs; 1: mean log-prob per token). ``log_prob_fn`` maps ``prefixes (N, t)``
    long (each starting with ``bos_id``) to next-token log-probs ``(N, V)``. With ``beam_size=1``
    this is greedy search; with ``beam_size >= V ** max_len`` it is exhaustive.
    """
    if not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(f"beam_size must be a positive int, got {beam_size!r}")
    if not isinstance(max_len, int) or max_len < 1:
        raise ValueError(f"max_len must be a positive int, got {max_len!r}")
    alive = torch.tensor([[bos_id]], dtype=torch.long)  # (N, t) prefixes
    alive_lp = torch.zeros(1, dtype=torch.float64)  # (N,)
    finished: list[Hypothesis] = []
    for step in range(1, max_len + 1):
        log_probs = log_prob_fn(alive)  # (N, V)
        if not isinstance(log_probs, torch.Tensor) or log_probs.dim() != 2 or log_probs.shape[0] != alive.shape[0]:
            raise ValueError(
                f"log_prob_fn must return (N, V) = ({alive.shape[0]}, V) log-probs, "
                f"got {getattr(log_probs, 'shape', type(log_probs).__name__)}"
            )
        vocab_size = log_probs.shape[1]
        total = (alive_lp[:, None] + log_probs.detach().cpu().double()).flatten()  # (N * V,)
        top_lp, top_idx = total.topk(min(beam_size, total.numel()))  # (K,)
        rows, tokens = top_idx // vocab_size, top_idx % vocab_size  # (K,), (K,)
        candidates = torch.cat([alive[rows], tokens[:, None]], dim=1)  # (K, t + 1)
        ended = (tokens == eos_id) | (step == max_len)  # (K,)
        for seq, lp in zip(candidates[ended].tolist(), top_lp[ended].tolist()):
            finished.append(Hypothesis(seq[1:], lp, lp / len(seq[1:]) ** length_penalty))
        alive, alive_lp = candidates[~ended], top_lp[~ended]
        if len(alive) == 0:
            break
    return sorted(finished, key=lambda h: h.score, reverse=True)


def seq2seq_log_prob_fn(model: torch.nn.Module, src: torch.Tensor, src_lengths: torch.Tensor) -> LogProbFn:
    """A :func:`beam_search` ``log_prob_fn`` for ONE source sentence ``src (1, S)``, ``src_lengths (1,)``.

    Uses ``model.encode``/``model.decode`` when the model has them (the source is encoded once),
    else calls ``model(src, src_lengths, prefixes)`` on copies of the source. Call in eval mode.
    """
    if src.dim() != 2 or src.shape[0] != 1:
        raise ValueError(f"src must be one sentence of shape (1, S), got {tuple(src.shape)}")
    device = src.device
    if hasattr(model, "encode") and hasattr(model, "decode"):
        memory, src_mask = model.encode(src, src_lengths)  # (1, S, D), (1, 1, 1, S)

        def fn(prefixes: torch.Tensor) -> torch.Tensor:
            n = prefixes.shape[0]
            logits = model.decode(prefixes.to(device), memory.expand(n, -1, -1), src_mask.expand(n, -1, -1, -1))
            return logits[:, -1].log_softmax(-1)  # (N, V)

        return fn

    def fn(prefixes: torch.Tensor) -> torch.Tensor:
        n = prefixes.shape[0]
        logits = model(src.expand(n, -1), src_lengths.expand(n), prefixes.to(device))  # (N, t, V)
        return logits[:, -1].log_softmax(-1)  # (N, V)

    return fn


@torch.no_grad()
def beam_decode(
    model: torch.nn.Module,
    src: torch.Tensor,
    src_lengths: torch.Tensor,
    beam_size: int,
    max_len: int,
    bos_id: int,
    eos_id: int,
    length_penalty: float = 0.0,
) -> list[list[int]]:
    """Beam-search every row of ``src (B, S)``; returns ``B`` lists of ids (without ``<bos>``/``<eos>``)."""
    was_training = model.training
    model.eval()
    out = []
    for b in range(src.shape[0]):
        length = src_lengths[b : b + 1]
        fn = seq2seq_log_prob_fn(model, src[b : b + 1, : int(length)], length)
        best = beam_search(fn, beam_size, max_len, bos_id, eos_id, length_penalty)[0].tokens
        out.append(best[:-1] if best and best[-1] == eos_id else best)
    model.train(was_training)
    return out


# --------------------------------------------------------------------------- sampling


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """``logits / temperature`` (``temperature > 0``): below 1 sharpens, above 1 flattens the softmax."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0 (use argmax for greedy), got {temperature!r}")
    return logits / temperature


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the ``k`` largest logits of each row ``(..., V)``, set the others to ``-inf``.

    Ties with the k-th largest value are kept too.
    """
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    if k >= logits.shape[-1]:
        return logits
    kth = logits.topk(k, dim=-1).values[..., -1:]  # (..., 1)
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filter (Holtzman et al., 2020): keep the smallest set of most likely tokens whose
    probabilities add up to at least ``p``; set the other logits to ``-inf``. ``(..., V) -> (..., V)``.

    A token is kept when the probability mass of the tokens ranked above it is below ``p``, so
    the most likely token always survives.
    """
    if not 0 < p <= 1:
        raise ValueError(f"p must lie in (0, 1], got {p!r}")
    sorted_logits, order = logits.sort(dim=-1, descending=True)  # (..., V)
    probs = sorted_logits.softmax(dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs  # (..., V)
    remove_sorted = mass_before >= p
    remove = remove_sorted.scatter(-1, order, remove_sorted)  # back to vocabulary order
    return logits.masked_fill(remove, float("-inf"))


def sample_next(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Draw one token per row from ``logits (B, V)``: temperature, then top-k, then top-p -> ``(B,)`` long."""
    if logits.dim() != 2:
        raise ValueError(f"logits must be (B, V), got {tuple(logits.shape)}")
    logits = apply_temperature(logits, temperature)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    probs = logits.softmax(dim=-1)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)  # (B,)


# --------------------------------------------------------------------------- pre-training objectives


def mlm_mask(
    ids: torch.Tensor,
    mask_id: int,
    vocab_size: int,
    maskable: torch.Tensor | None = None,
    mask_prob: float = 0.15,
    random_low: int = 0,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masked-LM corruption (Devlin et al., 2019) of ``ids (B, T)`` -> ``(inputs, labels)``.

    Each position where ``maskable`` is True (all by default; pass False on padding and special
    tokens) is selected with probability ``mask_prob``. A selected token becomes ``mask_id`` with
    probability 0.8, a uniform random id from ``[random_low, vocab_size)`` with 0.1, and stays as
    it is with 0.1. ``labels`` holds the original id at selected positions and ``-100``
    (ignored by ``F.cross_entropy``) elsewhere: the loss is on the selected 15% only.
    """
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.is_floating_point():
        raise ValueError(f"ids must be a (B, T) integer tensor, got {getattr(ids, 'shape', type(ids).__name__)}")
    if maskable is None:
        maskable = torch.ones_like(ids, dtype=torch.bool)
    if maskable.dtype != torch.bool or maskable.shape != ids.shape:
        raise ValueError(f"maskable must be a bool tensor of shape {tuple(ids.shape)}")
    if not 0 <= mask_prob <= 1:
        raise ValueError(f"mask_prob must lie in [0, 1], got {mask_prob}")
    device = ids.device
    selected = (torch.rand(ids.shape, generator=generator) < mask_prob).to(device) & maskable  # (B, T)
    action = torch.rand(ids.shape, generator=generator).to(device)  # (B, T)
    random_ids = torch.randint(random_low, vocab_size, ids.shape, generator=generator).to(device)
    inputs = torch.where(selected & (action < 0.8), torch.full_like(ids, mask_id), ids)
    inputs = torch.where(selected & (action >= 0.8) & (action < 0.9), random_ids, inputs)
    labels = torch.where(selected, ids, torch.full_like(ids, IGNORE_INDEX))
    return inputs, labels


def next_token_targets(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """GPT's objective: ``ids (B, T + 1)`` -> inputs ``ids[:, :-1]`` and labels ``ids[:, 1:]``, each ``(B, T)``."""
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.shape[1] < 2:
        raise ValueError(f"ids must be (B, T + 1) with T >= 1, got {getattr(ids, 'shape', type(ids).__name__)}")
    return ids[:, :-1], ids[:, 1:]
