"""course_utils.metrics: the local evaluate modules load offline (in a fresh process, with the
hub disabled, without hanging) and agree with course_utils.bleu / course_utils.lm and sacreBLEU."""

import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu
import torch

from course_utils.bleu import corpus_bleu
from course_utils.lm import NGramLM
from course_utils.metrics import AVAILABLE, load_metric, metric_path

ROOT = Path(__file__).resolve().parents[2]
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_EVALUATE_OFFLINE": "1"}


@pytest.fixture(scope="module", autouse=True)
def offline():
    saved = {k: os.environ.get(k) for k in OFFLINE}
    os.environ.update(OFFLINE)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _repo_files():
    """Files where a metric load could write: the package tree and the repository's top level
    (not the whole repository, which tests running in parallel may touch)."""
    package = {p for p in (ROOT / "course_utils").rglob("*") if "__pycache__" not in p.parts}
    return package | set(ROOT.iterdir())


@pytest.fixture(scope="module")
def bleu():
    return load_metric("course_bleu")


@pytest.fixture(scope="module")
def ppl():
    return load_metric("course_perplexity")


def test_metric_folders_hold_one_script_each():
    for name in AVAILABLE:
        folder = Path(metric_path(name))
        assert folder.is_absolute() and (folder / f"{name}.py").is_file()
    with pytest.raises(ValueError, match="unknown course metric"):
        metric_path("bleu")


def test_load_offline_in_a_fresh_process_without_hanging_or_writing_to_the_repo():
    before = _repo_files()
    code = (
        "from course_utils.metrics import load_metric\n"
        "b = load_metric('course_bleu')\n"
        "p = load_metric('course_perplexity')\n"
        "print(round(b.compute(predictions=['a b c d'], references=[['a b c d']])['bleu'], 6))\n"
        "print(round(p.compute(log_probs=[[-0.5, -0.5]])['mean_nll'], 6))\n"
    )
    env = dict(os.environ, **OFFLINE)
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["100.0", "0.5"]
    assert _repo_files() == before


def test_evaluate_load_accepts_the_script_path_too():
    import evaluate

    module = evaluate.load(str(Path(metric_path("course_bleu")) / "course_bleu.py"))
    assert module.compute(predictions=["x y z w"], references=[["x y z w"]])["bleu"] == pytest.approx(100.0)


@pytest.mark.parametrize("seed", range(5))
def test_bleu_module_agrees_with_library_and_sacrebleu(bleu, seed):
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(6)]
    hyps = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 12))) for _ in range(10)]
    refs = [[" ".join(rng.choice(words) for _ in range(rng.randint(1, 12))) for _ in range(3)] for _ in range(10)]
    out = bleu.compute(predictions=hyps, references=refs)
    lib = corpus_bleu(hyps, refs)
    sacre = sacrebleu.corpus_bleu(hyps, [list(s) for s in zip(*refs)], tokenize="none")
    assert out["bleu"] == pytest.approx(lib.score, abs=1e-9)
    assert out["bleu"] == pytest.approx(sacre.score, abs=1e-6)
    assert out["brevity_penalty"] == pytest.approx(sacre.bp, abs=1e-9)
    assert out["precisions"] == pytest.approx([p / 100 for p in sacre.precisions], abs=1e-9)
    assert (out["translation_length"], out["reference_length"]) == (sacre.sys_len, sacre.ref_len)
    none = bleu.compute(predictions=hyps, references=refs, smooth_method="none", max_order=2)
    assert none["bleu"] == pytest.approx(corpus_bleu(hyps, refs, max_n=2, smooth="none").score, abs=1e-9)


def test_bleu_module_takes_single_string_references_and_batches(bleu):
    hyps, refs = ["the cat sat on the mat", "a dog barked"], ["the cat sat on a mat", "the dog barked"]
    single = bleu.compute(predictions=hyps, references=refs)["bleu"]
    assert single == pytest.approx(corpus_bleu(hyps, [[r] for r in refs]).score, abs=1e-9)
    for h, r in zip(hyps, refs):
        bleu.add(predictions=h, references=[r])
    assert bleu.compute()["bleu"] == pytest.approx(single, abs=1e-9)


def test_perplexity_module_agrees_with_the_ngram_model(ppl):
    train = ["abcab", "cabbac", "aabbcc"]
    test = ["abc", "cba", "bbbbb"]
    lm = NGramLM(2, "abc", k=0.5).fit(train)
    log_probs = []
    for seq in test:
        padded = list(seq) + ["<eos>"]
        log_probs.append([lm.log_prob(tok, seq[:i]) for i, tok in enumerate(padded)])
    out = ppl.compute(log_probs=log_probs)
    assert out["perplexity"] == pytest.approx(lm.perplexity(test), rel=1e-9)
    assert out["mean_nll"] == pytest.approx(lm.mean_nll(test), rel=1e-9)
    assert out["bits_per_token"] == pytest.approx(lm.mean_nll(test) / math.log(2), rel=1e-9)
    assert out["num_tokens"] == sum(len(s) + 1 for s in test)
    assert out["perplexities"] == pytest.approx([lm.perplexity([s]) for s in test], rel=1e-9)
    nll = ppl.compute(log_probs=[[-v for v in row] for row in log_probs], is_nll=True)
    assert nll["perplexity"] == pytest.approx(out["perplexity"], rel=1e-12)


def test_perplexity_module_anchors_and_errors(ppl):
    vocab_size = 7
    uniform = ppl.compute(log_probs=[[-math.log(vocab_size)] * 5, [-math.log(vocab_size)] * 2])
    assert uniform["perplexity"] == pytest.approx(vocab_size)
    assert ppl.compute(log_probs=[[0.0, 0.0]])["perplexity"] == pytest.approx(1.0)
    logits = torch.randn(3, vocab_size, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    lp = torch.log_softmax(logits, -1)[torch.arange(3), torch.tensor([1, 4, 6])]
    assert ppl.compute(log_probs=[lp.tolist()])["perplexity"] == pytest.approx(math.exp(-lp.mean().item()))
    with pytest.raises(ValueError, match="is_nll"):
        ppl.compute(log_probs=[[0.5, 1.0]])
    with pytest.raises(ValueError, match="no tokens"):
        ppl.compute(log_probs=[[]])
