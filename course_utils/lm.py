"""Unit 02: language models and how to score them.

A language model assigns a probability to a sequence by the chain rule,
``P(w_1..w_T) = prod_t P(w_t | w_<t)``. Here:

- :class:`NGramLM`, a count-based n-gram model with add-k smoothing over a fixed vocabulary:
  each sequence is padded with ``order - 1`` ``<bos>`` tokens in front and one ``<eos>`` at the
  end, and ``P(w | h) = (c(h, w) + k) / (c(h) + k |V|)``, where ``V`` is the vocabulary plus
  ``<eos>`` (``<bos>`` is never predicted, only conditioned on).
- metrics for neural language models: :func:`cross_entropy_from_logits` (the masked mean
  negative log-likelihood, equal to ``F.cross_entropy(..., ignore_index=...)``),
  :func:`perplexity` ``= exp(mean NLL)`` and :func:`bits_per_char` ``= nats / ln 2``.

All log-probabilities are natural logarithms (nats).

    lm = NGramLM(order=3, vocab=sorted(set(text)), k=0.1).fit([text_train])
    lm.perplexity([text_test])
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Sequence

import torch

Token = Hashable


class NGramLM:
    """An n-gram language model with add-k smoothing.

    Args:
        order: ``n`` of the n-gram (1 = unigram: no context; 2 = bigram: one token of context).
        vocab: the tokens the model may predict (strings, characters, ids; hashable). Tokens
            outside it raise ``ValueError`` in ``fit`` and scoring: map them to an ``<unk>``
            token of your vocabulary first.
        k: the pseudo-count added to every (context, token) pair; must be > 0 so that no
            token ever gets probability 0 (``k = 1`` is Laplace smoothing).
        add_eos: append ``eos`` to every sequence (so the model also learns where sequences
            end). Turn it off to model one long stream of characters.
        bos, eos: the padding tokens; they must not be in ``vocab``.
    """

    def __init__(
        self,
        order: int,
        vocab: Iterable[Token],
        k: float = 1.0,
        add_eos: bool = True,
        bos: Token = "<bos>",
        eos: Token = "<eos>",
    ) -> None:
        if not isinstance(order, int) or isinstance(order, bool) or order < 1:
            raise ValueError(f"order must be an int >= 1, got {order!r}")
        if not isinstance(k, (int, float)) or isinstance(k, bool) or not k > 0 or math.isinf(k):
            raise ValueError(f"k must be a positive finite number, got {k!r}")
        vocab = list(dict.fromkeys(vocab))  # unique, order kept
        if not vocab:
            raise ValueError("vocab is empty")
        if bos in vocab or eos in vocab:
            raise ValueError(f"vocab must not contain the padding tokens {bos!r} / {eos!r}")
        self.order, self.k, self.add_eos, self.bos, self.eos = order, float(k), add_eos, bos, eos
        self.vocab = vocab
        self.outputs = vocab + [eos] if add_eos else list(vocab)  # what the model predicts
        self._known = set(self.outputs)
        self.counts: dict[tuple, Counter] = defaultdict(Counter)  # context -> Counter(next token)
        self.context_totals: Counter = Counter()  # context -> number of tokens seen after it

    @property
    def vocab_size(self) -> int:
        """|V|: the number of tokens the model predicts (``vocab`` plus ``eos`` if used)."""
        return len(self.outputs)

    # ------------------------------------------------------------------ counting
    def _padded(self, sequence: Sequence[Token]) -> list[Token]:
        if not isinstance(sequence, Sequence):
            raise ValueError(f"a sequence must be a str or a sequence of tokens, got {type(sequence).__name__}")
        tokens = list(sequence)
        unknown = [t for t in tokens if t not in self._known or t == self.eos]
        if unknown:
            raise ValueError(f"token {unknown[0]!r} is not in the vocabulary (map it to an <unk> token first)")
        return [self.bos] * (self.order - 1) + tokens + ([self.eos] if self.add_eos else [])

    def _events(self, sequence: Sequence[Token]) -> Iterable[tuple[tuple, Token]]:
        """(context, token) for every predicted position of one padded sequence."""
        padded = self._padded(sequence)
        n = self.order
        for t in range(n - 1, len(padded)):
            yield tuple(padded[t - n + 1 : t]), padded[t]

    def fit(self, sequences: Iterable[Sequence[Token]]) -> NGramLM:
        """Count n-grams in ``sequences`` (each a str of characters or a list of tokens).

        Counts accumulate over calls; returns ``self``.
        """
        if isinstance(sequences, str):
            raise ValueError("fit takes a list of sequences; wrap a single string as [text]")
        for sequence in sequences:
            for context, token in self._events(sequence):
                self.counts[context][token] += 1
                self.context_totals[context] += 1
        return self

    # ------------------------------------------------------------------ probabilities
    def _context(self, context: Sequence[Token]) -> tuple:
        """The last ``order - 1`` tokens of ``context``, left-padded with ``bos``."""
        context = list(context)
        width = self.order - 1
        if width == 0:
            return ()
        context = [self.bos] * max(0, width - len(context)) + context
        return tuple(context[len(context) - width :])

    def prob(self, token: Token, context: Sequence[Token] = ()) -> float:
        """P(``token`` | ``context``) with add-k smoothing; ``context`` may be any length
        (only its last ``order - 1`` tokens matter; a short one is padded with ``bos``)."""
        if token not in self._known:
            raise ValueError(f"token {token!r} is not in the vocabulary")
        h = self._context(context)
        count = self.counts[h][token] if h in self.counts else 0
        return (count + self.k) / (self.context_totals[h] + self.k * self.vocab_size)

    def log_prob(self, token: Token, context: Sequence[Token] = ()) -> float:
        """ln P(``token`` | ``context``), in nats."""
        return math.log(self.prob(token, context))

    def distribution(self, context: Sequence[Token] = ()) -> dict[Token, float]:
        """{token: P(token | context)} over the |V| predictable tokens (sums to 1)."""
        return {token: self.prob(token, context) for token in self.outputs}

    def sequence_nll(self, sequence: Sequence[Token]) -> tuple[float, int]:
        """(total NLL in nats, number of predicted tokens) of one sequence, ``eos`` included."""
        total, count = 0.0, 0
        for context, token in self._events(sequence):
            total -= math.log((self.counts[context][token] if context in self.counts else 0) + self.k) - math.log(
                self.context_totals[context] + self.k * self.vocab_size
            )
            count += 1
        return total, count

    def mean_nll(self, sequences: Iterable[Sequence[Token]]) -> float:
        """Mean NLL per predicted token over ``sequences`` (nats/token): the cross-entropy."""
        if isinstance(sequences, str):
            raise ValueError("mean_nll takes a list of sequences; wrap a single string as [text]")
        total, count = 0.0, 0
        for sequence in sequences:
            nll, n = self.sequence_nll(sequence)
            total, count = total + nll, count + n
        if count == 0:
            raise ValueError("no tokens to score")
        return total / count

    def perplexity(self, sequences: Iterable[Sequence[Token]]) -> float:
        """exp(mean NLL per token) over ``sequences``."""
        return math.exp(self.mean_nll(sequences))

    # ------------------------------------------------------------------ sampling
    def generate(self, max_len: int = 50, seed: int = 0, context: Sequence[Token] = ()) -> list[Token]:
        """Sample up to ``max_len`` tokens after ``context`` (stops early at ``eos``, which is
        not returned). Reproducible: the same ``seed`` gives the same tokens."""
        if not isinstance(max_len, int) or max_len < 0:
            raise ValueError(f"max_len must be a non-negative int, got {max_len!r}")
        rng = random.Random(seed)
        history, out = list(context), []
        for _ in range(max_len):
            dist = self.distribution(history)
            token = rng.choices(self.outputs, weights=[dist[t] for t in self.outputs])[0]
            if self.add_eos and token == self.eos:
                break
            out.append(token)
            history.append(token)
        return out


# ---------------------------------------------------------------------- neural LM metrics


def cross_entropy_from_logits(
    logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Mean negative log-likelihood (nats/token) of ``targets`` under ``logits``.

    Args:
        logits: float tensor ``(B, T, V)`` of unnormalized scores.
        targets: int64 tensor ``(B, T)`` of token ids in ``[0, V)`` (any value where masked out).
        mask: bool tensor ``(B, T)``, True where a token counts (False on padding), or None.

    Returns a scalar tensor: the mean over counted tokens only (not over padded positions),
    equal to ``F.cross_entropy(logits.transpose(1, 2), targets.masked_fill(~mask, -100),
    ignore_index=-100)``.
    """
    if not isinstance(logits, torch.Tensor) or not isinstance(targets, torch.Tensor):
        raise ValueError("logits and targets must be torch tensors")
    if logits.dim() != 3 or not logits.is_floating_point():
        raise ValueError(f"logits must be a float tensor (B, T, V), got {logits.dtype} {tuple(logits.shape)}")
    if targets.dtype != torch.long:
        raise ValueError(f"targets must be int64 (torch.long), got {targets.dtype}")
    if tuple(targets.shape) != tuple(logits.shape[:2]):
        raise ValueError(f"targets must have shape {tuple(logits.shape[:2])}, got {tuple(targets.shape)}")
    if mask is None:
        mask = torch.ones_like(targets, dtype=torch.bool)
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor, got {getattr(mask, 'dtype', type(mask).__name__)}")
    if mask.shape != targets.shape:
        raise ValueError(f"mask must have shape {tuple(targets.shape)}, got {tuple(mask.shape)}")
    if not mask.any():
        raise ValueError("mask selects no tokens: the mean is undefined")
    vocab_size = logits.shape[-1]
    counted = targets[mask]
    if counted.numel() and (counted.min() < 0 or counted.max() >= vocab_size):
        raise ValueError(f"targets must lie in [0, {vocab_size}) where mask is True")
    log_probs = torch.log_softmax(logits, dim=-1)  # (B, T, V)
    safe_targets = targets.masked_fill(~mask, 0)  # (B, T), any valid id on padding
    token_nll = -log_probs.gather(-1, safe_targets.unsqueeze(-1)).squeeze(-1)  # (B, T)
    return token_nll[mask].mean()


def perplexity(mean_nll: float | torch.Tensor) -> float | torch.Tensor:
    """exp(mean NLL in nats): 1 for a perfect model, |V| for the uniform one.

    Returns a float for a number, a tensor for a tensor.
    """
    if isinstance(mean_nll, torch.Tensor):
        return torch.exp(mean_nll)
    if isinstance(mean_nll, bool) or not isinstance(mean_nll, (int, float)):
        raise ValueError(f"mean_nll must be a number or tensor, got {type(mean_nll).__name__}")
    if mean_nll < 0:
        raise ValueError(f"a mean NLL cannot be negative, got {mean_nll}")
    return math.exp(mean_nll)


def bits_per_char(nats: float | torch.Tensor) -> float | torch.Tensor:
    """Convert a mean NLL from nats to bits: ``nats / ln 2`` (bits per character when the
    tokens are characters)."""
    if isinstance(nats, torch.Tensor):
        return nats / math.log(2)
    if isinstance(nats, bool) or not isinstance(nats, (int, float)):
        raise ValueError(f"nats must be a number or tensor, got {type(nats).__name__}")
    return nats / math.log(2)
