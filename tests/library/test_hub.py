"""course_utils.hub: pretrained models load offline from saved folders; hub names fail fast offline."""

import time

import pytest
import torch
from tiny_hf import tiny_bert_config, tiny_gpt2_config

from course_utils.data import DataUnavailable
from course_utils.hub import bpe_merges, download_allowed, load_pretrained, pretrained_source, train_bpe_tokenizer

transformers = pytest.importorskip("transformers")

TEXTS = ["the cat sat on the mat", "the dog sat on the log", "then the cat ate the rat"] * 20


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("COURSE_DOWNLOAD", raising=False)


def _tiny_gpt2():
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(tiny_gpt2_config()).eval()


def _tiny_bert(cls):
    torch.manual_seed(0)
    return cls(tiny_bert_config()).eval()


def test_download_switch(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.delenv("COURSE_DOWNLOAD", raising=False)
    assert not download_allowed()
    monkeypatch.setenv("COURSE_DOWNLOAD", "1")
    assert download_allowed()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert not download_allowed()


@pytest.mark.parametrize(
    "make, kind, auto",
    [
        (_tiny_gpt2, "causal-lm", "GPT2LMHeadModel"),
        (lambda: _tiny_bert(transformers.BertForMaskedLM), "masked-lm", "BertForMaskedLM"),
        (
            lambda: _tiny_bert(transformers.BertForSequenceClassification),
            "sequence-classification",
            "BertForSequenceClassification",
        ),
        (_tiny_gpt2, "model", "GPT2Model"),
    ],
)
def test_saved_checkpoint_loads_offline(tmp_path, offline, make, kind, auto):
    model = make()
    model.save_pretrained(tmp_path)
    loaded = load_pretrained(tmp_path, kind=kind).eval()
    assert type(loaded).__name__ == auto
    idx = torch.randint(0, 30, (2, 8))
    with torch.no_grad():
        out, ref = loaded(idx), model(idx)
    key = "last_hidden_state" if kind == "model" else "logits"
    expected = ref.logits if kind != "model" else model.transformer(idx).last_hidden_state
    assert torch.allclose(out[key], expected, atol=1e-6)


def test_tokenizer_trains_saves_and_reloads_offline(tmp_path, offline):
    tok = train_bpe_tokenizer(TEXTS, vocab_size=256 + 1 + 20)
    assert len(tok) == 256 + 1 + 20 and len(bpe_merges(tok)) == 20
    ids = tok("the cat sat")["input_ids"]
    assert tok.decode(ids) == "the cat sat"
    assert tok.decode(tok("naïve ☃ text")["input_ids"]) == "naïve ☃ text"  # byte level: nothing is unknown
    tok.save_pretrained(tmp_path)
    again = load_pretrained(tmp_path, kind="tokenizer")
    assert isinstance(again, transformers.PreTrainedTokenizerFast)
    assert again("the cat sat")["input_ids"] == ids
    auto = transformers.AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    assert auto("then the rat")["input_ids"] == tok("then the rat")["input_ids"]


def test_bpe_merges_are_the_frequency_order():
    # pair counts by construction: "ab" 40, then "abc" 30 (against "abd" 10); then " ab" 20 in the spaced lines
    tok = train_bpe_tokenizer(["abc"] * 30 + ["abd"] * 10 + [" ab ab"] * 10, vocab_size=256 + 1 + 3)
    assert bpe_merges(tok) == [("a", "b"), ("ab", "c"), (" ", "ab")]
    assert bpe_merges(tok, as_text=False)[2] == ("Ġ", "ab")  # GPT-2's stand-in for the space byte


@pytest.mark.parametrize("kind", ["causal-lm", "tokenizer"])
def test_hub_name_fails_fast_offline(offline, kind):
    start = time.perf_counter()
    with pytest.raises(DataUnavailable, match="COURSE_DOWNLOAD=1") as info:
        load_pretrained("course-test/surely-not-cached-model", kind=kind)
    assert time.perf_counter() - start < 5.0
    assert "save_pretrained" in str(info.value)


def test_hub_name_fails_fast_without_course_download(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("COURSE_DOWNLOAD", raising=False)
    start = time.perf_counter()
    with pytest.raises(DataUnavailable, match="COURSE_DOWNLOAD"):
        load_pretrained("course-test/surely-not-cached-model")
    assert time.perf_counter() - start < 5.0


def test_pretrained_source_falls_back(tmp_path, offline):
    _tiny_gpt2().save_pretrained(tmp_path)
    assert pretrained_source("course-test/surely-not-cached-model", tmp_path) == str(tmp_path)
    with pytest.raises(DataUnavailable, match="does not exist"):
        pretrained_source("course-test/surely-not-cached-model", tmp_path / "missing")


def test_bad_arguments(tmp_path, offline):
    with pytest.raises(ValueError, match="kind"):
        load_pretrained(tmp_path, kind="translation")
    with pytest.raises(ValueError, match="config.json"):
        load_pretrained(tmp_path, kind="causal-lm")
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(ValueError, match="folder"):
        load_pretrained(tmp_path / "weights.bin")
    with pytest.raises(ValueError, match="vocab_size"):
        train_bpe_tokenizer(TEXTS, vocab_size=10)
    with pytest.raises(ValueError, match="iterable"):
        train_bpe_tokenizer("one string", vocab_size=300)
