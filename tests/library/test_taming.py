"""course_utils.taming: each trick against an independent reference (PyTorch built-ins, brute force)."""

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.gpt import apply_rope, rope_tables
from course_utils.taming import (
    GLUFeedForward,
    RelativePositionBias,
    ReZero,
    RMSNorm,
    accumulate_gradients,
    alibi_bias,
    alibi_slopes,
    label_smoothed_cross_entropy,
    layernorm_jacobian_norm,
    radam_rectification,
    t5_buckets,
    warmup_cosine,
    warmup_cosine_scheduler,
    weight_decay_groups,
)


def test_warmup_cosine_values_and_lambdalr():
    assert warmup_cosine(0, 10, 110) == pytest.approx(0.1)
    assert warmup_cosine(9, 10, 110) == pytest.approx(1.0)
    assert warmup_cosine(10, 10, 110) == pytest.approx(1.0)
    assert warmup_cosine(60, 10, 110) == pytest.approx(0.5)
    assert warmup_cosine(60, 10, 110, min_ratio=0.2) == pytest.approx(0.6)
    assert warmup_cosine(110, 10, 110, min_ratio=0.2) == pytest.approx(0.2)
    assert warmup_cosine(500, 10, 110) == pytest.approx(0.0, abs=1e-12)
    assert warmup_cosine(3, 0, 10) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.3)))
    param = nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=0.5)
    scheduler = warmup_cosine_scheduler(optimizer, 5, 40, min_ratio=0.1)
    seen = []
    for _ in range(45):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert seen == pytest.approx([0.5 * warmup_cosine(s, 5, 40, 0.1) for s in range(45)])
    assert max(seen) == pytest.approx(0.5) and seen[-1] == pytest.approx(0.05)
    for bad in [dict(warmup_steps=20, total_steps=10), dict(warmup_steps=1, total_steps=10, min_ratio=2.0)]:
        with pytest.raises(ValueError):
            warmup_cosine(0, **bad)


def test_warmup_cosine_on_a_time_budget():
    # offset=0: every position on a continuous clock, the fraction of a budget (benchmarks/vit.py)
    def budget(p, w):
        return warmup_cosine(p, w, 1.0, offset=0.0)

    assert budget(0.0, 0.1) == 0.0 and budget(0.05, 0.1) == pytest.approx(0.5)
    assert budget(0.1, 0.1) == pytest.approx(1.0) and budget(0.55, 0.1) == pytest.approx(0.5)
    assert budget(1.0, 0.1) == pytest.approx(0.0, abs=1e-12) and budget(0.3, 0.0) == pytest.approx(
        0.5 * (1 + math.cos(math.pi * 0.3))
    )
    # progress: the warm-up counts steps, the cosine follows the fraction of the run from its start
    # (benchmarks/char_lm.py); total_steps is not needed
    assert warmup_cosine(0, 100, None, 0.1, progress=0.0) == pytest.approx(0.01)
    assert warmup_cosine(99, 100, None, 0.1, progress=0.01) == pytest.approx(1.0)
    assert warmup_cosine(100, 100, None, 0.1, progress=0.2) == pytest.approx(
        0.1 + 0.9 * 0.5 * (1 + math.cos(0.2 * math.pi))
    )
    assert warmup_cosine(500, 100, None, 0.1, progress=0.5) == pytest.approx(0.55)
    assert warmup_cosine(900, 100, None, 0.1, progress=1.3) == pytest.approx(0.1)
    # the defaults are the step schedule of unit 08, with the same checks
    assert warmup_cosine(60, 10, 110, offset=1.0) == warmup_cosine(60, 10, 110) == pytest.approx(0.5)
    for bad in [dict(total_steps=None), dict(total_steps=0.0), dict(total_steps=1.0, progress=-0.1)]:
        with pytest.raises(ValueError):
            warmup_cosine(0, 0, **bad)


def test_rmsnorm_equals_torch():
    torch.manual_seed(0)
    ours, theirs = RMSNorm(12, eps=1e-6), nn.RMSNorm(12, eps=1e-6)
    with torch.no_grad():
        ours.weight.normal_()
        theirs.weight.copy_(ours.weight)
    x = torch.randn(3, 5, 12) * 4
    assert torch.allclose(ours(x), theirs(x), atol=1e-6)
    y = ours(x * 7.0)  # scale invariant up to eps
    assert torch.allclose(y, ours(x), atol=1e-5)
    with pytest.raises(ValueError, match="last axis"):
        ours(torch.randn(2, 5))


def test_rezero_is_the_identity_at_initialisation_and_learns_alpha():
    torch.manual_seed(0)
    block = ReZero(nn.Linear(4, 4))
    x = torch.randn(2, 3, 4)
    assert torch.equal(block(x), x)
    block(x).pow(2).sum().backward()
    assert block.alpha.grad is not None and block.alpha.grad.abs() > 0
    assert block.sublayer.weight.grad.abs().sum() == 0  # alpha = 0 blocks the sublayer's gradient at first


def test_rezero_dropout_acts_on_the_branch_only():
    torch.manual_seed(0)
    block = ReZero(nn.Linear(4, 4), alpha=1.0, dropout=0.5)
    x = torch.randn(64, 4)
    assert torch.equal(block.eval()(x), x + block.sublayer(x))  # no dropout in eval mode
    torch.manual_seed(1)
    branch = block.train()(x) - x  # alpha * dropout(f(x))
    torch.manual_seed(1)
    expected = F.dropout(block.sublayer(x), 0.5, training=True)
    assert torch.allclose(branch, expected, atol=1e-6)
    assert (branch == 0).float().mean() > 0.3  # about half the branch dropped


def test_layernorm_jacobian_norm_is_sqrt_d_over_centered_norm():
    torch.manual_seed(0)
    for D, scale in [(8, 1.0), (64, 10.0), (256, 0.5)]:
        x = torch.randn(D, dtype=torch.float64) * scale + 3.0
        expected = math.sqrt(D) / (x - x.mean()).norm().item()
        assert layernorm_jacobian_norm(x, eps=0.0) == pytest.approx(expected, rel=1e-6)
    x = torch.randn(32, dtype=torch.float64)
    assert layernorm_jacobian_norm(10 * x, eps=0.0) == pytest.approx(layernorm_jacobian_norm(x, eps=0.0) / 10, rel=1e-6)
    with pytest.raises(ValueError):
        layernorm_jacobian_norm(torch.ones(2, 3))


@pytest.mark.parametrize("activation,fn", [("swiglu", F.silu), ("geglu", F.gelu), ("reglu", F.relu)])
def test_glu_feed_forward_matches_its_formula(activation, fn):
    torch.manual_seed(0)
    ffn = GLUFeedForward(6, 16, activation)
    x = torch.randn(2, 3, 6)
    expected = (fn(x @ ffn.gate.weight.T) * (x @ ffn.up.weight.T)) @ ffn.down.weight.T
    assert torch.allclose(ffn(x), expected, atol=1e-6)
    assert sum(p.numel() for p in ffn.parameters()) == 3 * 6 * 16
    with pytest.raises(ValueError, match="activation"):
        GLUFeedForward(6, 16, "tanh")


def _t5_bucket_reference(offset, bidirectional, num_buckets, max_distance):
    """Scalar transcription of the bucketing rule of T5 (Raffel et al.)."""
    n = -offset
    base = 0
    if bidirectional:
        num_buckets //= 2
        if n < 0:
            base = num_buckets
        n = abs(n)
    else:
        n = max(n, 0)
    exact = num_buckets // 2
    if n < exact:
        return base + n
    large = exact + int(math.log(n / exact) / math.log(max_distance / exact) * (num_buckets - exact))
    return base + min(large, num_buckets - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_buckets_match_a_scalar_reference(bidirectional):
    offsets = torch.arange(-300, 301)
    got = t5_buckets(offsets, bidirectional, 32, 128)
    expected = [_t5_bucket_reference(o, bidirectional, 32, 128) for o in offsets.tolist()]
    assert got.tolist() == expected
    assert got.max().item() == 31 and got.min().item() == 0
    with pytest.raises(ValueError, match="integer"):
        t5_buckets(offsets.float())


def test_relative_position_bias_depends_only_on_the_bucket():
    torch.manual_seed(0)
    bias = RelativePositionBias(num_heads=3, num_buckets=8, max_distance=16)(10, 10)
    assert bias.shape == (3, 10, 10)
    assert torch.equal(bias[:, 5, 2], bias[:, 8, 5])  # same offset -> same bias
    assert torch.equal(bias[:, 0, 9], bias[:, 0, 0])  # unidirectional: the future shares bucket 0


def test_alibi_slopes_and_bias():
    assert torch.allclose(alibi_slopes(8), torch.tensor([2.0**-k for k in range(1, 9)]))
    assert torch.allclose(alibi_slopes(4), torch.tensor([2.0**-k for k in (2, 4, 6, 8)]))
    six = alibi_slopes(6)  # 4 slopes of H = 4, then slopes 1 and 3 of H = 8 (every other one)
    assert torch.allclose(six, torch.tensor([2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3]))
    bias = alibi_bias(2, 5)
    assert bias.shape == (2, 5, 5)
    assert bias[0, 4, 1].item() == pytest.approx(-3 * 2**-4)
    assert torch.isinf(bias[1, 1, 3]) and torch.all(bias.diagonal(dim1=1, dim2=2) == 0)
    assert torch.allclose(alibi_bias(2, 5, causal=False), alibi_bias(2, 5, causal=False).transpose(1, 2))
    with pytest.raises(ValueError):
        alibi_slopes(0)


def test_rope_scores_depend_only_on_the_offset_brute_force():
    torch.manual_seed(0)
    cos, sin = rope_tables(40, 16)
    q, k = torch.randn(16, dtype=torch.float64), torch.randn(16, dtype=torch.float64)
    rq = apply_rope(q.expand(40, 16), cos.double(), sin.double())  # (T, 16)
    rk = apply_rope(k.expand(40, 16), cos.double(), sin.double())
    scores = rq @ rk.T  # (T, T): query m, key n
    for offset in range(-5, 6):
        diagonal = scores.diagonal(offset)
        assert torch.allclose(diagonal, diagonal[0].expand_as(diagonal), atol=1e-5)
    assert not torch.isclose(scores.diagonal(0)[0], scores.diagonal(1)[0])


def test_radam_rectification_matches_torch_radam_steps():
    param = nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.RAdam([param], lr=0.1, betas=(0.9, 0.999), eps=0.0)
    for step in range(1, 12):
        before = param.item()
        param.grad = torch.ones(1)  # constant gradient: bias-corrected moments are exactly 1
        optimizer.step()
        r = radam_rectification(step, 0.999)
        assert before - param.item() == pytest.approx(0.1 * (1.0 if r is None else r), rel=1e-5)
    assert radam_rectification(1, 0.999) is None and radam_rectification(5, 0.999) is None
    assert 0 < radam_rectification(6, 0.999) < radam_rectification(1000, 0.999) < 1


def test_weight_decay_groups_split_matrices_from_vectors():
    model = nn.Sequential(nn.Embedding(5, 4), nn.LayerNorm(4), nn.Linear(4, 3))
    decay, no_decay = weight_decay_groups(model, 0.1)
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert {id(p) for p in decay["params"]} == {id(model[0].weight), id(model[2].weight)}
    assert len(no_decay["params"]) == 3
    # no_decay: named parameters kept out of the decay whatever their shape (a ViT's CLS token, positions)
    decay, no_decay = weight_decay_groups(model, 0.1, no_decay=["0.weight"])
    assert [id(p) for p in decay["params"]] == [id(model[2].weight)]
    assert [id(p) for p in no_decay["params"]] == [
        id(p) for p in (model[0].weight, model[1].weight, model[1].bias, model[2].bias)
    ]
    with pytest.raises(ValueError, match="no parameter"):
        weight_decay_groups(model, 0.1, no_decay=["0.wieght"])


def test_label_smoothing_equals_torch():
    torch.manual_seed(0)
    logits, targets = torch.randn(20, 7), torch.randint(0, 7, (20,))
    targets[3] = -100
    for eps in (0.0, 0.1, 0.5, 1.0):
        expected = F.cross_entropy(logits, targets, label_smoothing=eps)
        assert torch.allclose(label_smoothed_cross_entropy(logits, targets, eps), expected, atol=1e-6)
    with pytest.raises(ValueError):
        label_smoothed_cross_entropy(logits, targets.float(), 0.1)


def test_accumulated_gradient_equals_the_large_batch_gradient():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3)).double()
    x, y = torch.randn(10, 5, dtype=torch.float64), torch.randint(0, 3, (10,))

    def loss_fn(m, xb, yb):
        return F.cross_entropy(m(xb), yb)

    full = loss_fn(model, x, y)
    full.backward()
    expected = [p.grad.clone() for p in model.parameters()]
    for micro in (1, 3, 4, 10):  # 3 and 4 leave a short last micro-batch
        model.zero_grad()
        loss = accumulate_gradients(model, loss_fn, x, y, micro)
        assert loss == pytest.approx(full.item())
        assert all(torch.allclose(p.grad, g, atol=1e-12) for p, g in zip(model.parameters(), expected))
    with pytest.raises(ValueError):
        accumulate_gradients(model, loss_fn, x, y[:5], 2)
