"""Offline-first data: corpora the course generates, text that ships with Python, local files,
and the Hugging Face hub when it is reachable.

Every notebook runs on the first three with no network at all; ``load_text_dataset`` reads
real corpora (IMDB, ...) when online or given a local path, and fails fast with
:class:`DataUnavailable` otherwise, so a notebook can fall back to an embedded default.

    text = python_docs_text(max_chars=50_000)            # real English prose, no download
    source = MarkovSource.random("abcd ", seed=0)        # a toy language with a known entropy
    reviews = sentiment_with_negation(1000, seed=0)      # [("the film was not good", 0), ...]
    pairs = date_pairs(5000, seed=0)                     # [("samedi 21 novembre 2026", "2026-11-21"), ...]
    bible = bible_kjv_text() if bible_kjv_available() else python_docs_text()   # ~820k words, Debian
"""

from __future__ import annotations

import math
import os
import random
import re
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch


class DataUnavailable(RuntimeError):
    """A dataset cannot be had here (offline, missing file, ...); the message says why."""


# --------------------------------------------------------------------------- shipped with Python


def python_docs_text(max_chars: int | None = None) -> str:
    """English prose: the topic help pages of the Python documentation bundled with CPython.

    They live in the standard library's ``pydoc_data`` package, so they exist on every machine
    with Python and need no download. Returns at most ``max_chars`` characters (all by default,
    about 0.5-0.8 M characters depending on the Python version).
    """
    if max_chars is not None and max_chars <= 0:
        raise ValueError(f"max_chars must be positive, got {max_chars}")
    try:
        from pydoc_data.topics import topics
    except ImportError as exc:  # some distributions strip it
        raise DataUnavailable("this Python has no pydoc_data package; pass a text file instead") from exc
    text = "\n\n".join(topics[key].strip() for key in sorted(topics))
    return text if max_chars is None else text[:max_chars]


# --------------------------------------------------------------------------- shipped with Debian

BIBLE_PROGRAM = "bible"  # Debian's bible-kjv package: /usr/bin/bible, data in /usr/lib/bible.data
BIBLE_RANGE = "Gen1:1-Rev22:21"
NO_BIBLE_ENV = "COURSE_NO_BIBLE_KJV"
_VERSE = re.compile(r"^\s*\d+ (.+)$")


def _bible_disabled() -> bool:
    return os.environ.get(NO_BIBLE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def bible_kjv_available() -> bool:
    """Whether :func:`bible_kjv_text` can run here: Debian's ``bible`` program is on the PATH.

    Setting the environment variable ``COURSE_NO_BIBLE_KJV=1`` makes it answer False (and
    :func:`bible_kjv_text` raise), to test a notebook's fallback on a machine that has the package.
    """
    return not _bible_disabled() and shutil.which(BIBLE_PROGRAM) is not None


def bible_kjv_text() -> str:
    """The King James Bible (public domain), one verse per line: about 31 000 lines, 820 000 words.

    Read from Debian's ``bible-kjv`` package (``apt-get install bible-kjv``), whose ``bible``
    program prints the whole text in a fraction of a second; chapter headings and verse numbers
    are dropped. Raises :class:`DataUnavailable` with an install hint where the program is
    missing, or when ``COURSE_NO_BIBLE_KJV=1`` is set (see :func:`bible_kjv_available`).
    """
    if _bible_disabled():
        raise DataUnavailable(f"the King James text is switched off by {NO_BIBLE_ENV}=1")
    program = shutil.which(BIBLE_PROGRAM)
    if program is None:
        raise DataUnavailable(
            "the King James text needs Debian's bible-kjv package (apt-get install bible-kjv), "
            f"whose {BIBLE_PROGRAM!r} program is not on the PATH here"
        )
    try:  # a wide line width, so that no verse is wrapped over several lines
        out = subprocess.run(
            [program, "-l100000", BIBLE_RANGE], capture_output=True, text=True, check=True, timeout=60
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise DataUnavailable(f"{program} {BIBLE_RANGE} failed: {exc}") from exc
    verses = [m.group(1).strip() for line in out.splitlines() if (m := _VERSE.match(line))]
    if len(verses) < 1000:
        raise DataUnavailable(f"{program} printed only {len(verses)} verses; is bible-kjv's data complete?")
    return "\n".join(verses)


# --------------------------------------------------------------------------- a toy language


@dataclass
class MarkovSource:
    """A first-order Markov chain over characters: a toy language whose entropy rate is known.

    ``transition[i, j]`` is P(next = alphabet[j] | current = alphabet[i]), shape ``(V, V)``;
    ``initial`` (shape ``(V,)``) is the distribution of the first character. No model can
    beat ``exp(entropy_rate())`` perplexity on long samples: it is the floor of unit 02.
    """

    alphabet: str
    transition: torch.Tensor  # (V, V), rows sum to 1
    initial: torch.Tensor  # (V,)

    def __post_init__(self) -> None:
        size = len(self.alphabet)
        if size < 2 or len(set(self.alphabet)) != size:
            raise ValueError(f"alphabet needs at least 2 distinct characters, got {self.alphabet!r}")
        if tuple(self.transition.shape) != (size, size):
            raise ValueError(f"transition must have shape ({size}, {size}), got {tuple(self.transition.shape)}")
        if tuple(self.initial.shape) != (size,):
            raise ValueError(f"initial must have shape ({size},), got {tuple(self.initial.shape)}")
        if (self.transition < 0).any() or not torch.allclose(
            self.transition.sum(1), torch.ones(size, dtype=self.transition.dtype)
        ):
            raise ValueError("every row of transition must be a probability distribution")

    @classmethod
    def random(cls, alphabet: str = "abcd ", concentration: float = 0.5, seed: int = 0) -> MarkovSource:
        """Draw transition rows from a Dirichlet(``concentration``); small values give peaked,
        predictable rows (low entropy), large ones nearly uniform rows."""
        if concentration <= 0:
            raise ValueError(f"concentration must be positive, got {concentration}")
        size = len(alphabet)
        draws = np.random.default_rng(seed).dirichlet([concentration] * size, size=size)  # (V, V)
        draws = torch.from_numpy(draws) + 1e-12
        transition = draws / draws.sum(dim=1, keepdim=True)
        source = cls(alphabet, transition, torch.full((size,), 1.0 / size, dtype=torch.float64))
        return cls(alphabet, transition, source.stationary())

    def stationary(self) -> torch.Tensor:
        """The stationary distribution pi (shape ``(V,)``) with pi = pi @ transition."""
        values, vectors = torch.linalg.eig(self.transition.T.to(torch.float64))
        k = int(torch.argmin((values - 1).abs()))
        pi = vectors[:, k].real
        return pi / pi.sum()

    def entropy_rate(self) -> float:
        """H = -sum_i pi_i sum_j P_ij ln P_ij, in nats per character."""
        p = self.transition.to(torch.float64)
        row_entropy = -(p * torch.log(p.clamp_min(1e-300))).sum(dim=1)  # (V,)
        return float(self.stationary() @ row_entropy)

    def sample(self, num_chars: int, seed: int = 0) -> str:
        """A string of ``num_chars`` characters drawn from the chain (reproducible by ``seed``)."""
        if num_chars < 1:
            raise ValueError(f"num_chars must be at least 1, got {num_chars}")
        gen = torch.Generator().manual_seed(seed)
        cumulative = torch.cumsum(self.transition, dim=1)  # (V, V)
        uniforms = torch.rand(num_chars, generator=gen, dtype=torch.float64)
        state = int(torch.multinomial(self.initial, 1, generator=gen))
        out = [state]
        for u in uniforms[1:].tolist():
            state = min(int(torch.searchsorted(cumulative[state], u)), len(self.alphabet) - 1)
            out.append(state)
        return "".join(self.alphabet[i] for i in out)


# --------------------------------------------------------------------------- sentiment with negation

_SUBJECTS = [
    "the film",
    "this movie",
    "the plot",
    "the acting",
    "the soundtrack",
    "the ending",
    "the cast",
    "the script",
]
_POSITIVE = ["good", "great", "funny", "moving", "brilliant", "clever", "charming", "gripping"]
_NEGATIVE = ["bad", "boring", "dull", "awful", "predictable", "clumsy", "tedious", "weak"]
_INTENSIFIERS = ["", "", "really ", "very ", "quite "]
_NEGATIONS = ["not ", "never ", "hardly "]


def _clause(rng: random.Random) -> tuple[str, int]:
    positive = rng.random() < 0.5
    negated = rng.random() < 0.4
    verb = rng.choice(["was", "is"])
    adjective = rng.choice(_POSITIVE if positive else _NEGATIVE)
    negation = rng.choice(_NEGATIONS) if negated else ""
    text = f"{rng.choice(_SUBJECTS)} {verb} {negation}{rng.choice(_INTENSIFIERS)}{adjective}"
    return text, int(positive != negated)


def sentiment_with_negation(num_examples: int = 1000, seed: int = 0) -> list[tuple[str, int]]:
    """Short reviews with labels 1 (positive) / 0 (negative) that hinge on word order.

    A clause's label flips under negation ("the film was not good" is 0); in a two-clause
    review joined by "but", the clause after "but" decides. About 40% of clauses are
    negated, so a bag-of-words model cannot exceed chance on those. Deterministic in ``seed``.
    """
    if num_examples < 1:
        raise ValueError(f"num_examples must be at least 1, got {num_examples}")
    rng = random.Random(seed)
    examples = []
    for _ in range(num_examples):
        text, label = _clause(rng)
        if rng.random() < 0.3:
            second, label = _clause(rng)
            text = f"{text} but {second}"
        examples.append((text, label))
    return examples


# --------------------------------------------------------------------------- a parallel corpus

DATE_LOCALES = ("en", "de", "fr", "es")
DATE_FORMATS = ("full", "long", "medium")


def date_pairs(
    num_pairs: int,
    locales: tuple[str, ...] = DATE_LOCALES,
    formats: tuple[str, ...] = DATE_FORMATS,
    seed: int = 0,
    years: tuple[int, int] = (1950, 2049),
) -> list[tuple[str, str]]:
    """A translation task with easy-to-read alignments: dates written out -> ISO dates.

    Each pair is ``(written, iso)``, e.g. ``("samedi 21 novembre 2026", "2026-11-21")``. The
    written forms are real: Unicode CLDR date formats for each locale, through Babel (which
    JupyterLab already installs). Dates are drawn uniformly from ``years`` (inclusive), the
    locale and format uniformly from ``locales`` and ``formats`` (Babel's ``"full"``,
    ``"long"``, ``"medium"``, ``"short"``). Deterministic for a given ``seed``.
    """
    import datetime

    from babel.dates import format_date

    if not isinstance(num_pairs, int) or num_pairs < 1:
        raise ValueError(f"num_pairs must be a positive int, got {num_pairs!r}")
    if not locales or not formats:
        raise ValueError("locales and formats must be non-empty")
    first, last = datetime.date(years[0], 1, 1).toordinal(), datetime.date(years[1], 12, 31).toordinal()
    rng = random.Random(seed)
    pairs = []
    for _ in range(num_pairs):
        day = datetime.date.fromordinal(rng.randint(first, last))
        written = format_date(day, format=rng.choice(formats), locale=rng.choice(locales))
        pairs.append((written, day.isoformat()))
    return pairs


# --------------------------------------------------------------------------- local files


def read_text(path: str | os.PathLike) -> str:
    """The UTF-8 contents of a text file; a clear ``ValueError`` if it is missing or not text."""
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"text file not found: {file}")
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{file} is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def read_pairs(path: str | os.PathLike, sep: str = "\t", columns: tuple[int, int] = (0, 1)) -> list[tuple[str, str]]:
    """Parallel pairs from a file with one pair per line, its fields separated by ``sep``.

    ``columns`` says which two fields are the source and the target (0-based). Extra fields are
    ignored, so the standard Tatoeba / ManyThings export (``English<TAB>French<TAB>attribution``)
    reads as it is; ``columns=(1, 0)`` reverses the direction. Blank lines are skipped. A line with
    too few fields, or an empty source or target, raises ``ValueError`` naming the file and line.
    Returns a list of ``(source, target)`` string pairs.
    """
    if (
        len(columns) != 2
        or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in columns)
        or columns[0] == columns[1]
    ):
        raise ValueError(f"columns must be two different non-negative field indices, got {columns!r}")
    needed = max(columns) + 1
    pairs = []
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split(sep)
        if len(fields) < needed:
            raise ValueError(
                f"{path}, line {number}: expected at least {needed} fields separated by {sep!r} "
                f"(columns {columns[0]} and {columns[1]}), got {len(fields)}: {line[:80]!r}"
            )
        source, target = fields[columns[0]].strip(), fields[columns[1]].strip()
        if not source or not target:
            raise ValueError(f"{path}, line {number}: empty {'source' if not source else 'target'} field")
        pairs.append((source, target))
    if not pairs:
        raise ValueError(f"{path}: no pairs found")
    return pairs


# --------------------------------------------------------------------------- the hub, when online


def hub_offline() -> bool:
    """True when the Hugging Face hub must not or cannot be reached (fast: ≤ 3 s)."""
    for flag in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        if os.environ.get(flag, "").strip().lower() in ("1", "true", "yes", "on"):
            return True
    try:
        socket.create_connection(("huggingface.co", 443), timeout=3).close()
    except OSError:
        return True
    return False


def load_text_dataset(
    name: str,
    split: str = "train",
    text_field: str = "text",
    local_path: str | os.PathLike | None = None,
    max_examples: int | None = None,
):
    """A ``datasets.Dataset`` of texts: from ``local_path`` if given, else from the hub.

    ``local_path`` may be a folder written by ``Dataset.save_to_disk`` or a ``.txt``, ``.csv``,
    ``.json``/``.jsonl`` or ``.parquet`` file. Offline (or with ``HF_HUB_OFFLINE=1``) a hub
    name raises :class:`DataUnavailable` at once instead of retrying for tens of seconds.
    """
    import datasets

    if local_path is not None:
        path = Path(local_path)
        builders = {".txt": "text", ".csv": "csv", ".json": "json", ".jsonl": "json", ".parquet": "parquet"}
        if path.is_dir():
            loaded = datasets.load_from_disk(str(path))
            dataset = loaded[split] if isinstance(loaded, datasets.DatasetDict) else loaded
        elif path.is_file() and path.suffix in builders:
            dataset = datasets.load_dataset(builders[path.suffix], data_files=str(path), split="train")
        else:
            raise DataUnavailable(f"{path}: not a saved dataset folder nor a {sorted(builders)} file")
    else:
        if hub_offline():
            raise DataUnavailable(f"dataset {name!r} needs the Hugging Face hub, which is offline here")
        try:
            dataset = datasets.load_dataset(name, split=split)
        except Exception as exc:  # noqa: BLE001 - any hub failure means: fall back
            raise DataUnavailable(f"could not load {name!r} ({split}) from the hub: {exc}") from exc
    if text_field not in dataset.column_names:
        raise ValueError(f"dataset has no column {text_field!r}; columns are {dataset.column_names}")
    if max_examples is not None:
        dataset = dataset.select(range(min(max_examples, len(dataset))))
    return dataset


def train_val_split(text: str, val_fraction: float = 0.1) -> tuple[str, str]:
    """Split a string into its first ``1 - val_fraction`` and its last ``val_fraction``."""
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    cut = math.floor(len(text) * (1 - val_fraction))
    return text[:cut], text[cut:]
