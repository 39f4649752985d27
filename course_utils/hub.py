"""Unit 11: pretrained models and tokenizers from the Hugging Face hub, honestly offline-first.

A local folder written by ``save_pretrained`` always loads, with no network. A hub name (``"gpt2"``,
``"bert-base-uncased"``) loads only when the course is told it may download (``COURSE_DOWNLOAD=1``)
and the hub is not switched off (``HF_HUB_OFFLINE``), or when the files are already in the local
Hugging Face cache. Otherwise :func:`load_pretrained` raises :class:`course_utils.data.DataUnavailable`
at once, saying how to get the model, instead of retrying the network for tens of seconds.

    source = pretrained_source("gpt2", fallback="checkpoints/gpt2-course")   # a hub name or the folder
    model = load_pretrained(source, kind="causal-lm")
    tok = train_bpe_tokenizer(texts, vocab_size=1000)                         # a PreTrainedTokenizerFast
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from .data import DataUnavailable

DOWNLOAD_ENV = "COURSE_DOWNLOAD"
KINDS = {
    "causal-lm": "AutoModelForCausalLM",
    "masked-lm": "AutoModelForMaskedLM",
    "sequence-classification": "AutoModelForSequenceClassification",
    "model": "AutoModel",
    "tokenizer": "AutoTokenizer",
}
_TRUE = ("1", "true", "yes", "on")


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def download_allowed() -> bool:
    """True when ``COURSE_DOWNLOAD=1`` and neither ``HF_HUB_OFFLINE`` nor ``TRANSFORMERS_OFFLINE`` is set."""
    return _flag(DOWNLOAD_ENV) and not _flag("HF_HUB_OFFLINE") and not _flag("TRANSFORMERS_OFFLINE")


def _auto_class(kind: str):
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")
    import transformers

    return getattr(transformers, KINDS[kind])


def _how_to_get(name: str) -> str:
    return (
        f"{name!r} is neither a local folder nor in the Hugging Face cache, and downloading is off here. "
        f"Online, set {DOWNLOAD_ENV}=1 (and leave HF_HUB_OFFLINE unset) to download it; offline, pass the "
        f"path of a folder saved with save_pretrained instead."
    )


def is_cached(name: str) -> bool:
    """Whether the hub model ``name`` has a ``config.json`` (or tokenizer config) in the local cache (no network)."""
    from huggingface_hub import try_to_load_from_cache

    for filename in ("config.json", "tokenizer_config.json"):
        try:
            found = try_to_load_from_cache(name, filename)
        except Exception:  # noqa: BLE001 - a malformed repo id is simply not cached
            return False
        if isinstance(found, str):
            return True
    return False


def pretrained_source(name: str, fallback: str | os.PathLike) -> str:
    """``name`` when it can be loaded (downloading allowed, or cached), else the local folder ``fallback``.

    Raises :class:`DataUnavailable` when neither is available (``fallback`` missing).
    """
    if download_allowed() or is_cached(name):
        return name
    if not Path(fallback).is_dir():
        raise DataUnavailable(_how_to_get(name) + f" The fallback folder {str(fallback)!r} does not exist either.")
    return str(fallback)


def load_pretrained(name_or_path: str | os.PathLike, kind: str = "causal-lm", **kwargs):
    """A model (or tokenizer, ``kind="tokenizer"``) through the matching ``Auto*`` class.

    ``kind``: ``"causal-lm"`` | ``"masked-lm"`` | ``"sequence-classification"`` | ``"model"`` | ``"tokenizer"``.
    A local folder loads with ``local_files_only=True``; a hub name downloads only when
    :func:`download_allowed`, else loads from the local cache or raises :class:`DataUnavailable`
    at once. ``kwargs`` go to ``from_pretrained`` (``num_labels=2``, ``dtype=...``).
    """
    auto = _auto_class(kind)
    path = Path(name_or_path)
    if path.exists():
        if not path.is_dir():
            raise ValueError(f"{path}: a pretrained model is a folder written by save_pretrained, not a file")
        needed = "tokenizer_config.json" if kind == "tokenizer" else "config.json"
        if not (path / needed).is_file():
            raise ValueError(f"{path}: no {needed} here; save the {kind} with save_pretrained first")
        return auto.from_pretrained(str(path), local_files_only=True, **kwargs)
    name = str(name_or_path)
    if download_allowed():
        return auto.from_pretrained(name, **kwargs)
    if is_cached(name):
        return auto.from_pretrained(name, local_files_only=True, **kwargs)
    raise DataUnavailable(_how_to_get(name))


# --------------------------------------------------------------------------- tokenizers


def train_bpe_tokenizer(
    texts: Iterable[str], vocab_size: int, byte_level: bool = True, special_tokens: tuple[str, ...] = ("<|endoftext|>",)
):
    """Train a BPE tokenizer with the ``tokenizers`` library and wrap it as a ``PreTrainedTokenizerFast``.

    ``byte_level=True`` is GPT-2's scheme: the text is split by GPT-2's pre-tokenizer regex and every
    byte is a symbol of the 256-symbol initial alphabet (a space shows as ``Ġ``), so no text is ever
    unknown. ``byte_level=False`` splits on whitespace and punctuation and starts from the characters
    seen. The vocabulary holds ``special_tokens`` first, then the alphabet, then one token per merge,
    ``vocab_size`` in all (fewer if the text runs out of pairs). The first special token is the
    ``eos``/``pad`` token of the wrapper. ``tok(text)["input_ids"]`` -> list of ids.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive int, got {vocab_size!r}")
    if isinstance(texts, str):
        raise ValueError("texts must be an iterable of strings (a list of lines or documents), not one str")
    if byte_level:
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        alphabet = pre_tokenizers.ByteLevel.alphabet()
        if vocab_size < len(alphabet) + len(special_tokens):
            raise ValueError(f"vocab_size={vocab_size} is smaller than the byte alphabet plus the specials")
    else:
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        alphabet = []
        special_tokens = tuple(special_tokens) + ("<unk>",)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(special_tokens), initial_alphabet=alphabet, show_progress=False
    )
    tok.train_from_iterator(texts, trainer=trainer)
    first = special_tokens[0] if special_tokens else None
    extra = {"unk_token": "<unk>"} if not byte_level else {}
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=first, pad_token=first, **extra)


def _byte_decoder() -> dict[str, int]:
    """GPT-2's printable stand-in character for each byte, inverted: ``{"Ġ": 32, "a": 97, ...}``."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    stand_in, extra = {}, 0
    for b in range(256):
        if b in printable:
            stand_in[b] = chr(b)
        else:
            stand_in[b] = chr(256 + extra)
            extra += 1
    return {c: b for b, c in stand_in.items()}


def bpe_merges(tokenizer, as_text: bool = True) -> list[tuple[str, str]]:
    """The merges of a BPE ``tokenizer`` (a ``PreTrainedTokenizerFast`` or ``tokenizers.Tokenizer``), in order.

    With ``as_text`` a byte-level tokenizer's stand-in characters are turned back into text
    (``"Ġthe"`` -> ``" the"``), so the merges compare with ``course_utils.text.learn_bpe``'s.
    """
    backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
    model = json.loads(backend.to_str())["model"]
    if model.get("type") != "BPE":
        raise ValueError(f"tokenizer model is {model.get('type')!r}, not BPE")
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    byte_level = "ByteLevel" in json.dumps(json.loads(backend.to_str()).get("pre_tokenizer"))
    if not (as_text and byte_level):
        return merges
    decoder = _byte_decoder()

    def text(symbol: str) -> str:
        return bytes(decoder[c] for c in symbol).decode("utf-8", errors="backslashreplace")

    return [(text(a), text(b)) for a, b in merges]
