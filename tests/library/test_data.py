"""Offline tests of course_utils.data: every loader works (or fails clearly) with no network."""

from __future__ import annotations

import collections
import math

import pytest
import torch

from course_utils import data


def test_python_docs_text_is_real_english():
    text = data.python_docs_text()
    assert len(text) > 100_000
    words = collections.Counter(text.lower().split())
    assert words["the"] > 1000 and words["is"] > 500
    assert data.python_docs_text(max_chars=1000) == text[:1000]
    with pytest.raises(ValueError, match="max_chars"):
        data.python_docs_text(max_chars=0)


def test_markov_source_entropy_matches_samples():
    source = data.MarkovSource.random("abcd ", concentration=0.5, seed=3)
    pi = source.stationary()
    assert torch.allclose(pi @ source.transition, pi) and abs(float(pi.sum()) - 1) < 1e-12
    text = source.sample(60_000, seed=1)
    assert set(text) <= set("abcd ") and len(text) == 60_000
    pairs = collections.Counter(zip(text, text[1:]))
    firsts = collections.Counter(text[:-1])
    n = len(text) - 1
    empirical = -sum(c / n * math.log(c / firsts[a]) for (a, _), c in pairs.items())
    assert abs(empirical - source.entropy_rate()) < 0.02
    assert 0 < source.entropy_rate() < math.log(5)
    assert source.sample(50, seed=7) == source.sample(50, seed=7) != source.sample(50, seed=8)


def test_markov_source_concentration_controls_entropy():
    peaked = data.MarkovSource.random(concentration=0.05, seed=0).entropy_rate()
    flat = data.MarkovSource.random(concentration=100.0, seed=0).entropy_rate()
    assert peaked < 0.8 < flat <= math.log(5)


def test_markov_source_validates():
    with pytest.raises(ValueError, match="shape"):
        data.MarkovSource("ab", torch.eye(3, dtype=torch.float64), torch.tensor([0.5, 0.5]))
    with pytest.raises(ValueError, match="probability"):
        data.MarkovSource("ab", torch.ones(2, 2, dtype=torch.float64), torch.tensor([0.5, 0.5], dtype=torch.float64))
    with pytest.raises(ValueError, match="concentration"):
        data.MarkovSource.random(concentration=0)


def test_sentiment_with_negation_labels_follow_negation_and_but():
    examples = data.sentiment_with_negation(2000, seed=0)
    assert examples == data.sentiment_with_negation(2000, seed=0)
    labels = [y for _, y in examples]
    assert 0.35 < sum(labels) / len(labels) < 0.65
    for text, label in examples:
        last = text.split(" but ")[-1].split()
        positive = last[-1] in data._POSITIVE
        negated = any(w.strip() in last for w in data._NEGATIONS)
        assert label == int(positive != negated), text
    assert any(" not " in t for t, _ in examples) and any(" but " in t for t, _ in examples)


def test_read_text_and_pairs(tmp_path):
    good = tmp_path / "pairs.tsv"
    good.write_text("one\t1\n\ntwo\t2\n", encoding="utf-8")
    assert data.read_pairs(good) == [("one", "1"), ("two", "2")]
    bad = tmp_path / "bad.tsv"
    bad.write_text("one\t1\ntwo 2\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2"):
        data.read_pairs(bad)
    with pytest.raises(ValueError, match="not found"):
        data.read_text(tmp_path / "missing.txt")
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ValueError, match="not UTF-8"):
        data.read_text(binary)


def test_read_pairs_tatoeba_export(tmp_path):
    # The standard Tatoeba / ManyThings export: English, French, attribution.
    tatoeba = tmp_path / "fra.txt"
    tatoeba.write_text(
        "Go.\tVa !\tCC-BY 2.0 (France) Attribution: tatoeba.org #2877272 (CM)\n"
        "Hi.\tSalut !\tCC-BY 2.0 (France) Attribution: tatoeba.org #538123 (CM)\n",
        encoding="utf-8",
    )
    assert data.read_pairs(tatoeba) == [("Go.", "Va !"), ("Hi.", "Salut !")]
    assert data.read_pairs(tatoeba, columns=(1, 0)) == [("Va !", "Go."), ("Salut !", "Hi.")]
    short = tmp_path / "short.txt"
    short.write_text("Go.\tVa !\tCC\nHi.\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"short.txt, line 2: expected at least 2 fields"):
        data.read_pairs(short)
    with pytest.raises(ValueError, match=r"fra.txt, line 1: expected at least 4 fields"):
        data.read_pairs(tatoeba, columns=(0, 3))
    empty = tmp_path / "empty_target.txt"
    empty.write_text("Go.\t \tCC\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 1: empty target"):
        data.read_pairs(empty)
    for bad in [(0, 0), (0,), (-1, 1), (0.0, 1)]:
        with pytest.raises(ValueError, match="columns must be"):
            data.read_pairs(tatoeba, columns=bad)


def test_load_text_dataset_offline_fails_fast(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert data.hub_offline()
    with pytest.raises(data.DataUnavailable, match="offline"):
        data.load_text_dataset("imdb")


def test_load_text_dataset_from_local_files(tmp_path):
    import datasets

    csv_file = tmp_path / "reviews.csv"
    csv_file.write_text("text,label\ngreat film,1\ndull film,0\nfine,1\n", encoding="utf-8")
    ds = data.load_text_dataset("ignored", local_path=csv_file, max_examples=2)
    assert ds["text"] == ["great film", "dull film"]
    saved = tmp_path / "saved"
    datasets.Dataset.from_dict({"text": ["a", "b"], "label": [0, 1]}).save_to_disk(str(saved))
    assert data.load_text_dataset("ignored", local_path=saved)["label"] == [0, 1]
    with pytest.raises(ValueError, match="no column 'review'"):
        data.load_text_dataset("ignored", local_path=csv_file, text_field="review")
    with pytest.raises(data.DataUnavailable, match="not a saved dataset"):
        data.load_text_dataset("ignored", local_path=tmp_path / "nothing.xyz")


def test_train_val_split():
    train, val = data.train_val_split("abcdefghij", 0.2)
    assert (train, val) == ("abcdefgh", "ij")
    with pytest.raises(ValueError):
        data.train_val_split("abc", 1.0)
