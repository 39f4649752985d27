"""Units 06-07: the plumbing every sequence-to-sequence model shares.

Character vocabularies for a parallel corpus, padded batches with teacher forcing, the masked
cross-entropy, greedy decoding and scoring (exact match and character-level sacreBLEU). Any
model that follows one calling convention plugs in, whatever is inside it (a GRU with
Bahdanau attention in unit 06, a transformer in unit 07)::

    logits = model(src, src_lengths, tgt_in)     # (B, S) long, (B,) long, (B, T) long -> (B, T, V_tgt)

``src`` is right-padded with ``PAD_ID``; ``tgt_in`` starts with ``BOS_ID`` and ``tgt_out`` (the
labels) is ``tgt_in`` shifted left by one and ends with ``EOS_ID``: teacher forcing.

    pairs = date_pairs(6000, seed=0)
    data = Seq2SeqData.build(pairs[:5000])
    train = data.batches(pairs[:5000], batch_size=64, shuffle=True, seed=0)
    loss = seq2seq_loss(model, train[0])
    outputs = data.translate(model, ["21 novembre 2026"], max_len=12)   # ["2026-11-21"]
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .text import BOS_ID, EOS_ID, PAD_ID, Vocab, char_tokenize, pad_batch

Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]  # src, src_lengths, tgt_in, tgt_out


def _check_pairs(pairs: Sequence[tuple[str, str]]) -> None:
    if isinstance(pairs, (str, torch.Tensor)) or len(pairs) == 0:
        raise ValueError("pairs must be a non-empty list of (source, target) strings")
    for k, pair in enumerate(pairs):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(s, str) for s in pair)):
            raise ValueError(f"pair {k} is not a (source, target) pair of strings: {pair!r:.80}")


@dataclass
class Seq2SeqData:
    """Character vocabularies of a parallel corpus, and the batches built with them."""

    src_vocab: Vocab
    tgt_vocab: Vocab

    @classmethod
    def build(cls, pairs: Sequence[tuple[str, str]]) -> Seq2SeqData:
        """One character vocabulary per side, from (training) ``pairs``."""
        _check_pairs(pairs)
        return cls(Vocab.build([char_tokenize(s) for s, _ in pairs]), Vocab.build([char_tokenize(t) for _, t in pairs]))

    def encode_sources(self, sources: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Strings -> ``src (B, S)`` long, right-padded, and ``src_lengths (B,)`` long."""
        ids, lengths, _ = pad_batch([self.src_vocab.encode(char_tokenize(s)) for s in sources])
        return ids, lengths

    def batches(
        self, pairs: Sequence[tuple[str, str]], batch_size: int, shuffle: bool = False, seed: int = 0
    ) -> list[Batch]:
        """``pairs`` as a list of ``(src (B,S), src_lengths (B,), tgt_in (B,T), tgt_out (B,T))``.

        ``tgt_in = <bos> y_1 .. y_n`` and ``tgt_out = y_1 .. y_n <eos>``, both padded with
        ``PAD_ID``. With ``shuffle`` the pairs are shuffled (seeded) before batching.
        """
        _check_pairs(pairs)
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        order = list(range(len(pairs)))
        if shuffle:
            random.Random(seed).shuffle(order)
        out = []
        for start in range(0, len(order), batch_size):
            chunk = [pairs[i] for i in order[start : start + batch_size]]
            src, src_lengths = self.encode_sources([s for s, _ in chunk])
            tgt = [self.tgt_vocab.encode(char_tokenize(t)) for _, t in chunk]
            tgt_in, _, _ = pad_batch(tgt, bos_id=BOS_ID)  # (B, T)
            tgt_out, _, _ = pad_batch(tgt, eos_id=EOS_ID)  # (B, T)
            out.append((src, src_lengths, tgt_in, tgt_out))
        return out

    def translate(self, model: torch.nn.Module, sources: Sequence[str], max_len: int) -> list[str]:
        """Greedy translations of ``sources`` (strings) by ``model``, as strings."""
        device = next(model.parameters()).device
        src, src_lengths = self.encode_sources(sources)
        ids = greedy_decode(model, src.to(device), src_lengths.to(device), max_len)
        return ["".join(self.tgt_vocab.decode(_until_eos(row))) for row in ids.tolist()]

    def evaluate(
        self, model: torch.nn.Module, pairs: Sequence[tuple[str, str]], max_len: int, batch_size: int = 256
    ) -> dict[str, float]:
        """Exact-match accuracy and character-level sacreBLEU of greedy translations of ``pairs``."""
        import sacrebleu

        _check_pairs(pairs)
        hyps = []
        for start in range(0, len(pairs), batch_size):
            hyps += self.translate(model, [s for s, _ in pairs[start : start + batch_size]], max_len)
        refs = [t for _, t in pairs]
        exact = sum(h == r for h, r in zip(hyps, refs)) / len(refs)
        bleu = sacrebleu.corpus_bleu(hyps, [refs], tokenize="char").score
        return {"exact_match": exact, "bleu": bleu}


def _until_eos(ids: list[int]) -> list[int]:
    return ids[: ids.index(EOS_ID)] if EOS_ID in ids else ids


def seq2seq_loss(model: torch.nn.Module, batch: Batch, label_smoothing: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy of ``model(src, src_lengths, tgt_in)`` against ``tgt_out``, padding ignored."""
    src, src_lengths, tgt_in, tgt_out = batch
    logits = model(src, src_lengths, tgt_in)  # (B, T, V)
    if logits.shape[:2] != tgt_out.shape:
        raise ValueError(
            f"model returned logits of shape {tuple(logits.shape)}; expected (B, T, V) with "
            f"(B, T) = {tuple(tgt_out.shape)}"
        )
    return F.cross_entropy(
        logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD_ID, label_smoothing=label_smoothing
    )


@torch.no_grad()
def greedy_decode(model: torch.nn.Module, src: torch.Tensor, src_lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """Greedy decoding: at each step append the most likely next token.

    Re-runs the model on the whole prefix each step (simple, and cheap for short targets).
    Returns ``ids (B, L)`` long, ``L <= max_len``, without the leading ``<bos>``; a row that
    reached ``<eos>`` is padded with ``PAD_ID`` after it. Decoding stops early once every row
    has ended.
    """
    if src.dim() != 2 or src.dtype != torch.long:
        raise ValueError(f"src must be (B, S) long, got shape {tuple(src.shape)} dtype {src.dtype}")
    was_training = model.training
    model.eval()
    batch_size = src.shape[0]
    tgt = torch.full((batch_size, 1), BOS_ID, dtype=torch.long, device=src.device)  # (B, 1)
    done = torch.zeros(batch_size, dtype=torch.bool, device=src.device)  # (B,)
    for _ in range(max_len):
        logits = model(src, src_lengths, tgt)  # (B, t, V)
        next_id = logits[:, -1].argmax(-1)  # (B,)
        next_id = next_id.masked_fill(done, PAD_ID)
        tgt = torch.cat([tgt, next_id[:, None]], dim=1)  # (B, t + 1)
        done |= next_id == EOS_ID
        if done.all():
            break
    model.train(was_training)
    return tgt[:, 1:]
