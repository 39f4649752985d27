"""Unit 11: pre-train a small encoder with masked-LM, then adapt it to a labelled task.

* masking: :func:`mask_tokens` (BERT's rule, Devlin et al. 2019: 15% of the non-special
  positions, of those 80% ``<mask>``, 10% a random word, 10% kept; loss only on the chosen ones),
  built on unit 07's :func:`course_utils.decoding.mlm_mask`;
* data: :func:`corpus_sentences` (King James verses, or sentences of the Python docs where the
  ``bible-kjv`` package is missing), a word-level :class:`WordVocab` with the specials
  ``<pad> <unk> <cls> <mask>``, and :func:`word_order_examples` (a CoLA-like acceptability task
  made from the corpus itself: a sentence as written, label 1, or with its words shuffled, label 0);
* models: :class:`EncoderConfig`, :class:`Encoder` (token + learned positions, Pre-LN encoder
  layers of ``course_utils.transformer``, final LayerNorm; padding masked out of attention),
  :class:`MLMHead`, :class:`SequenceClassifier` (mean or ``<cls>`` pooling, linear head);
* training: :func:`mlm_loss`, :func:`pretrain_mlm`, :func:`finetune` (``mode`` "full", "probe"
  or "lora" through ``course_utils.lora.add_lora``) and :func:`accuracy`. Every run is a fixed
  number of steps, never a time budget.

    sentences, source = corpus_sentences()
    vocab = WordVocab.build(sentences, size=2000)
    ids = vocab.encode_batch(sentences, block_size=24)                    # (N, 24)
    encoder = Encoder(EncoderConfig(vocab_size=len(vocab), block_size=24))
    head = MLMHead(encoder)
    history = pretrain_mlm(encoder, head, ids, steps=800)
    model = SequenceClassifier(encoder, num_classes=2)
    x, y = word_order_examples(ids[:256], torch.Generator().manual_seed(0))  # (256, 24), (256,)
    finetune(model, x, y, steps=100, mode="probe")
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from .data import bible_kjv_available, bible_kjv_text, python_docs_text
from .decoding import IGNORE_INDEX, mlm_mask
from .training import History, fit
from .transformer import EncoderLayer

SPECIALS = ("<pad>", "<unk>", "<cls>", "<mask>")
PAD_ID, UNK_ID, CLS_ID, MASK_ID = 0, 1, 2, 3
DEFAULT_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "out_proj", "linear1", "linear2")
_WORD = re.compile(r"[a-z]+")


# --------------------------------------------------------------------------- masking


def mask_tokens(
    ids: torch.Tensor,
    vocab_size: int,
    mask_id: int,
    special_ids: Sequence[int] = (),
    mask_prob: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masked-LM corruption of ``ids (B, T)`` long -> ``(inputs (B, T), labels (B, T))``.

    Each position whose id is not in ``special_ids`` is chosen with probability ``mask_prob``.
    A chosen token becomes ``mask_id`` with probability 0.8, a uniform random id among the
    non-special ids with 0.1 (it may draw the original id), and stays with 0.1. ``labels`` holds
    the original id at chosen positions and -100 elsewhere. The specials must be the lowest ids
    ``0 .. k-1`` (as in :data:`SPECIALS`), so "non-special" means ``[k, vocab_size)``.

    Random draws, in this order, all ``(B, T)`` on the CPU from ``generator``: ``rand`` (which
    positions are chosen), ``rand`` (mask / random / keep), ``randint`` (the random ids); this is
    :func:`course_utils.decoding.mlm_mask`, which does the work.
    """
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.dtype != torch.long:
        raise ValueError(
            f"ids must be a (B, T) long tensor, got shape {tuple(getattr(ids, 'shape', ()))} "
            f"dtype {getattr(ids, 'dtype', type(ids).__name__)}"
        )
    specials = sorted(set(int(i) for i in special_ids))
    if specials != list(range(len(specials))):
        raise ValueError(f"special_ids must be the lowest ids 0 .. k-1, got {tuple(special_ids)}")
    if not isinstance(vocab_size, int) or vocab_size <= len(specials):
        raise ValueError(f"vocab_size must be an int above the {len(specials)} specials, got {vocab_size!r}")
    if not 0 <= mask_id < vocab_size:
        raise ValueError(f"mask_id={mask_id} is not in range(0, {vocab_size})")
    if not isinstance(mask_prob, (int, float)) or not 0.0 <= mask_prob <= 1.0:
        raise ValueError(f"mask_prob must be a probability in [0, 1], got {mask_prob!r}")
    if ids.numel() and (ids.min().item() < 0 or ids.max().item() >= vocab_size):
        raise ValueError(f"ids must lie in range(0, {vocab_size})")
    maskable = ~torch.isin(ids, torch.tensor(specials, dtype=torch.long, device=ids.device))  # (B, T)
    return mlm_mask(ids, mask_id, vocab_size, maskable, mask_prob, random_low=len(specials), generator=generator)


# --------------------------------------------------------------------------- data


def words(text: str) -> list[str]:
    """Lower-cased words of ``text``: runs of the letters a-z (punctuation and digits dropped)."""
    return _WORD.findall(text.lower())


def corpus_sentences(source: str = "auto", min_words: int = 4) -> tuple[list[str], str]:
    """The pre-training corpus as a list of sentences, and the name of its source.

    ``source``: ``"kjv"`` (King James verses, one per sentence, about 31 000), ``"python_docs"`` (the
    Python documentation split after ``. ! ?`` and at line ends, about 7000 pieces) or ``"auto"`` (the
    King James text where :func:`course_utils.data.bible_kjv_available`, else the docs). Sentences with
    fewer than ``min_words`` words are dropped.
    """
    if source not in ("auto", "kjv", "python_docs"):
        raise ValueError(f"source must be 'auto', 'kjv' or 'python_docs', got {source!r}")
    if source == "auto":
        source = "kjv" if bible_kjv_available() else "python_docs"
    if source == "kjv":
        pieces = bible_kjv_text().split("\n")
    else:
        pieces = re.split(r"(?<=[.!?])\s+|\n", python_docs_text())
    sentences = [" ".join(p.split()) for p in pieces if len(words(p)) >= min_words]
    return sentences, source


@dataclass
class WordVocab:
    """Word-level vocabulary whose ids ``0..3`` are ``<pad> <unk> <cls> <mask>`` (:data:`SPECIALS`)."""

    itos: list[str]
    stoi: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if tuple(self.itos[: len(SPECIALS)]) != SPECIALS or len(set(self.itos)) != len(self.itos):
            raise ValueError(f"itos must start with {SPECIALS} and hold no duplicates")
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    @classmethod
    def build(cls, sentences: Sequence[str], size: int = 2000) -> WordVocab:
        """The ``size - 4`` most frequent words of ``sentences`` (ties: first appearance) after the specials."""
        if not isinstance(size, int) or size <= len(SPECIALS):
            raise ValueError(f"size must be an int above {len(SPECIALS)}, got {size!r}")
        counts = Counter(w for s in sentences for w in words(s))
        return cls(list(SPECIALS) + [w for w, _ in counts.most_common(size - len(SPECIALS))])

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, sentence: str, block_size: int) -> list[int]:
        """``<cls>`` + word ids (unknown -> ``<unk>``), cut to ``block_size`` and right-padded with ``<pad>``."""
        ids = [CLS_ID] + [self.stoi.get(w, UNK_ID) for w in words(sentence)][: block_size - 1]
        return ids + [PAD_ID] * (block_size - len(ids))

    def encode_batch(self, sentences: Sequence[str], block_size: int) -> torch.Tensor:
        """``N`` sentences -> ``(N, block_size)`` long ids (see :meth:`encode`)."""
        if not isinstance(block_size, int) or block_size < 2:
            raise ValueError(f"block_size must be an int >= 2, got {block_size!r}")
        return torch.tensor([self.encode(s, block_size) for s in sentences], dtype=torch.long)

    def decode(self, ids: Sequence[int] | torch.Tensor) -> str:
        """Ids -> words joined by spaces, ``<pad>`` dropped."""
        ids = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
        return " ".join(self.itos[i] for i in ids if i != PAD_ID)


def shuffle_words(ids: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Each row of ``ids (N, T)`` with its words (the non-pad positions after ``<cls>``) permuted.

    One ``randperm`` per row, in row order, from ``generator``. Returns ``(N, T)``; padding and
    the leading ``<cls>`` stay where they are.
    """
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.dtype != torch.long:
        raise ValueError(f"ids must be a (N, T) long tensor, got {getattr(ids, 'shape', type(ids).__name__)}")
    out = ids.clone()
    lengths = (ids != PAD_ID).sum(1).tolist()  # (N,) real tokens per row, <cls> included
    for r, n in enumerate(lengths):
        if n > 2:
            out[r, 1:n] = ids[r, 1 + torch.randperm(n - 1, generator=generator)]
    return out


def word_order_examples(
    ids: torch.Tensor, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Acceptability examples from ``ids (N, T)``: ``(inputs (N, T), labels (N,))``.

    Each row gets a fair coin (one ``randint(2, (N,))`` draw); label 1 keeps the sentence as
    written, label 0 replaces it by :func:`shuffle_words` of it (drawn after the coins).
    """
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.dtype != torch.long:
        raise ValueError(f"ids must be a (N, T) long tensor, got {getattr(ids, 'shape', type(ids).__name__)}")
    labels = torch.randint(2, (ids.shape[0],), generator=generator)  # (N,)
    shuffled = shuffle_words(ids, generator)  # (N, T)
    return torch.where(labels[:, None] == 1, ids, shuffled), labels


# --------------------------------------------------------------------------- models


@dataclass
class EncoderConfig:
    vocab_size: int
    block_size: int = 24  # longest input T
    num_layers: int = 2
    num_heads: int = 4
    d_model: int = 64
    d_ff: int | None = None  # default 4 * d_model
    dropout: float = 0.0
    pad_id: int = PAD_ID

    def __post_init__(self) -> None:
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}")
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model


class Encoder(nn.Module):
    """A BERT-style encoder: ``ids (B, T)`` long -> features ``(B, T, D)``.

    Token embedding + learned position embedding, ``num_layers`` Pre-LN
    :class:`course_utils.transformer.EncoderLayer` (GELU), a final LayerNorm. Keys equal to
    ``pad_id`` are masked out of every attention, so padding never changes a real position's
    output (the outputs AT padded positions are meaningless and should be ignored).
    """

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.config = c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = nn.Embedding(c.block_size, c.d_model)
        self.layers = nn.ModuleList(
            EncoderLayer(c.d_model, c.num_heads, c.d_ff, c.dropout, norm_first=True, activation="gelu")
            for _ in range(c.num_layers)
        )
        self.norm = nn.LayerNorm(c.d_model)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.dtype != torch.long:
            raise ValueError(f"ids must be (B, T) long, got {getattr(ids, 'shape', type(ids).__name__)}")
        if ids.shape[1] > self.config.block_size:
            raise ValueError(f"sequence of length {ids.shape[1]} is longer than block_size={self.config.block_size}")
        mask = (ids != self.config.pad_id)[:, None, None, :]  # (B, 1, 1, T) True = attend
        x = self.tok_emb(ids) + self.pos_emb(torch.arange(ids.shape[1], device=ids.device))  # (B, T, D)
        for layer in self.layers:
            x = layer(x, mask)  # (B, T, D)
        return self.norm(x)  # (B, T, D)


class MLMHead(nn.Module):
    """Features ``(..., D)`` -> logits ``(..., V)``: a linear map whose weight is the encoder's token
    embedding when ``tied`` (as BERT), plus its own bias."""

    def __init__(self, encoder: Encoder, tied: bool = True):
        super().__init__()
        d, v = encoder.config.d_model, encoder.config.vocab_size
        self.proj = nn.Linear(d, v)
        if tied:
            self.proj.weight = encoder.tok_emb.weight

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.proj(h)  # (..., V)


class SequenceClassifier(nn.Module):
    """``ids (B, T)`` -> logits ``(B, C)``: the encoder's features pooled (``"mean"`` over the
    non-pad positions, or ``"cls"``: position 0) and a linear head."""

    def __init__(self, encoder: Encoder, num_classes: int = 2, pooling: str = "mean"):
        super().__init__()
        if pooling not in ("mean", "cls"):
            raise ValueError(f"pooling must be 'mean' or 'cls', got {pooling!r}")
        self.encoder, self.pooling = encoder, pooling
        self.head = nn.Linear(encoder.config.d_model, num_classes)

    def features(self, ids: torch.Tensor) -> torch.Tensor:
        """Pooled features ``(B, D)``."""
        h = self.encoder(ids)  # (B, T, D)
        if self.pooling == "cls":
            return h[:, 0]  # (B, D)
        real = (ids != self.encoder.config.pad_id).unsqueeze(-1).to(h.dtype)  # (B, T, 1)
        return (h * real).sum(1) / real.sum(1).clamp_min(1.0)  # (B, D)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(ids))  # (B, C)


# --------------------------------------------------------------------------- training


def mlm_loss(encoder: Encoder, head: MLMHead, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the chosen positions only (``labels != -100``); scalar.

    The head runs on the chosen rows alone, ``(N_chosen, D) -> (N_chosen, V)``: the same loss as
    on all positions with ``ignore_index``, for about 15% of the head's cost.
    """
    if inputs.shape != labels.shape:
        raise ValueError(f"inputs {tuple(inputs.shape)} and labels {tuple(labels.shape)} differ in shape")
    chosen = labels != IGNORE_INDEX  # (B, T)
    if not chosen.any():
        raise ValueError("no position is chosen (all labels are -100)")
    h = encoder(inputs)[chosen]  # (N_chosen, D)
    return F.cross_entropy(head(h), labels[chosen])


def _device_of(module: nn.Module) -> torch.device:
    return next(module.parameters()).device


class _Batches:
    """``steps`` batches, each drawn by ``draw()`` when asked: a sized loader for :func:`course_utils.training.fit`."""

    def __init__(self, steps: int, draw) -> None:
        self.steps, self.draw = steps, draw

    def __len__(self) -> int:
        return self.steps

    def __iter__(self):
        return (self.draw() for _ in range(self.steps))


def pretrain_mlm(
    encoder: Encoder,
    head: MLMHead,
    ids: torch.Tensor,
    steps: int,
    batch_size: int = 64,
    lr: float = 1e-2,
    weight_decay: float = 0.01,
    mask_prob: float = 0.15,
    seed: int = 0,
    progress: bool = True,
) -> History:
    """Masked-LM pre-training on ``ids (N, T)`` for exactly ``steps`` AdamW steps; ``History.step_loss``.

    Each step draws ``batch_size`` rows with replacement and masks them with :func:`mask_tokens`
    (specials ``0..3`` never chosen), both from one CPU generator seeded with ``seed``. Trains on
    the device of ``encoder``.
    """
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    g = torch.Generator().manual_seed(seed)
    params = list({id(p): p for p in [*encoder.parameters(), *head.parameters()]}.values())
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)

    def masked_batch() -> tuple[torch.Tensor, torch.Tensor]:
        batch = ids[torch.randint(ids.shape[0], (batch_size,), generator=g)]  # (B, T)
        return mask_tokens(batch, encoder.config.vocab_size, MASK_ID, range(len(SPECIALS)), mask_prob, g)

    history = fit(
        encoder, _Batches(steps, masked_batch), lambda enc, b: mlm_loss(enc, head, *b), opt, progress=progress
    )
    encoder.eval()
    return history


def finetune(
    model: SequenceClassifier,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    steps: int,
    batch_size: int = 32,
    lr: float = 1e-3,
    mode: str = "full",
    rank: int = 4,
    alpha: float | None = None,
    targets: Sequence[str] = DEFAULT_LORA_TARGETS,
    seed: int = 0,
    progress: bool = False,
) -> History:
    """Train ``model`` on ``inputs (N, T)``, ``labels (N,)`` for exactly ``steps`` AdamW steps.

    ``mode``: ``"full"`` trains everything; ``"probe"`` freezes the encoder (a linear probe on its
    pooled features); ``"lora"`` wraps the encoder's linears named by ``targets`` with
    ``course_utils.lora.add_lora`` (rank ``rank``, ``alpha``), which freezes the rest of the
    encoder; the classifier head trains in every mode. Batches of ``min(batch_size, N)`` rows are
    drawn with replacement from a CPU generator seeded with ``seed``. Modifies ``model`` in place.
    """
    if mode not in ("full", "probe", "lora"):
        raise ValueError(f"mode must be 'full', 'probe' or 'lora', got {mode!r}")
    if inputs.dim() != 2 or labels.shape != (inputs.shape[0],):
        raise ValueError(f"inputs must be (N, T) and labels (N,), got {tuple(inputs.shape)} and {tuple(labels.shape)}")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    if mode == "probe":
        model.encoder.requires_grad_(False)
    elif mode == "lora":
        from .lora import add_lora

        add_lora(model.encoder, targets, rank, alpha)
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)

    def labelled_batch() -> tuple[torch.Tensor, torch.Tensor]:
        rows = torch.randint(inputs.shape[0], (min(batch_size, inputs.shape[0]),), generator=g)  # (B,)
        return inputs[rows], labels[rows]

    history = fit(
        model, _Batches(steps, labelled_batch), lambda m, b: F.cross_entropy(m(b[0]), b[1]), opt, progress=progress
    )
    model.eval()
    return history


@torch.no_grad()
def accuracy(model: nn.Module, inputs: torch.Tensor, labels: torch.Tensor, batch_size: int = 512) -> float:
    """Fraction of rows of ``inputs (N, T)`` whose argmax logit equals ``labels (N,)`` (eval mode)."""
    if inputs.shape[0] != labels.shape[0] or inputs.shape[0] == 0:
        raise ValueError(f"inputs {tuple(inputs.shape)} and labels {tuple(labels.shape)} must have the same N > 0")
    was_training = model.training
    model.eval()
    device, correct = _device_of(model), 0
    for start in range(0, inputs.shape[0], batch_size):
        logits = model(inputs[start : start + batch_size].to(device))  # (b, C)
        correct += (logits.argmax(-1).cpu() == labels[start : start + batch_size]).sum().item()
    model.train(was_training)
    return correct / inputs.shape[0]
