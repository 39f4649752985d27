"""course_utils.lora against peft (LoraConfig / get_peft_model on a copy of the same model, lora_A and
lora_B copied across), against the formula W x + b + scaling * B A x written out, and against autograd."""

import copy
import math

import pytest
import torch
import torch.nn as nn
from tiny_hf import tiny_bert_config

from course_utils.lora import LoRALinear, add_lora, merge_lora, trainable_parameters

peft = pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")

# transformers deprecates a name that peft still calls; not ours to fix
pytestmark = pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing.*:FutureWarning")

TOL = {torch.float32: 1e-6, torch.float64: 1e-12}


class Small(nn.Module):
    """A model with named Linears at two depths, one of them inside a ModuleList."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(6, 12)
        self.blocks = nn.ModuleList(
            nn.ModuleDict({"query": nn.Linear(12, 12), "value": nn.Linear(12, 12, bias=False)}) for _ in range(2)
        )
        self.head = nn.Linear(12, 3)

    def forward(self, x):  # (B, 6) -> (B, 3)
        h = torch.tanh(self.embed(x))  # (B, 12)
        for block in self.blocks:
            h = h + torch.tanh(block["query"](h)) * block["value"](h)  # (B, 12)
        return self.head(h)  # (B, 3)


def _tiny_bert():
    config = tiny_bert_config(
        vocab_size=40, num_hidden_layers=2, intermediate_size=24, max_position_embeddings=16, num_labels=3
    )
    return transformers.BertForSequenceClassification(config).eval()


def _adapt_both(model, targets, rank, alpha, dropout=0.0):
    """(ours, peft's) from two copies of ``model``; random B so the update is not zero, copied across."""
    ours = copy.deepcopy(model)
    names = add_lora(ours, targets, rank=rank, alpha=alpha, dropout=dropout)
    theirs = peft.get_peft_model(
        copy.deepcopy(model),
        peft.LoraConfig(r=rank, lora_alpha=alpha, target_modules=list(targets), lora_dropout=dropout),
    )
    inner = theirs.base_model.model
    with torch.no_grad():
        for name in names:
            mine, ref = ours.get_submodule(name), inner.get_submodule(name)
            mine.lora_B.normal_()
            ref.lora_A["default"].weight.copy_(mine.lora_A)
            ref.lora_B["default"].weight.copy_(mine.lora_B)
    return ours, theirs, names


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("rank, alpha", [(1, None), (2, 4), (5, 3.0)])
def test_small_model_equals_peft(dtype, rank, alpha):
    torch.manual_seed(rank)
    model = Small().to(dtype)
    ours, theirs, names = _adapt_both(model, ["query", "value", "head"], rank, alpha if alpha is not None else rank)
    assert names == ["blocks.0.query", "blocks.0.value", "blocks.1.query", "blocks.1.value", "head"]
    assert sorted(theirs.base_model.targeted_module_names) == sorted(names)
    x = torch.randn(7, 6, dtype=dtype)
    got, ref = ours(x), theirs(x)
    assert (got - ref).abs().max().item() <= TOL[dtype]
    assert (got - model(x)).abs().max().item() > 1e-3  # the update is not zero
    assert trainable_parameters(ours) == theirs.get_nb_trainable_parameters()[0]
    assert trainable_parameters(ours) == rank * (4 * (12 + 12) + (12 + 3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bert_query_value_equals_peft(dtype):
    torch.manual_seed(0)
    model = _tiny_bert().to(dtype)
    ours, theirs, names = _adapt_both(model, ["query", "value"], rank=4, alpha=8)
    assert len(names) == 4 and all(n.endswith(("attention.self.query", "attention.self.value")) for n in names)
    ids = torch.randint(0, 40, (3, 9))
    mask = torch.ones_like(ids)
    mask[0, 6:] = 0
    with torch.no_grad():
        got = ours(input_ids=ids, attention_mask=mask).logits  # (3, 3)
        ref = theirs(input_ids=ids, attention_mask=mask).logits  # (3, 3)
    assert got.shape == (3, 3)
    assert (got - ref).abs().max().item() <= TOL[dtype]
    n_ours, (n_peft, n_all) = trainable_parameters(ours), theirs.get_nb_trainable_parameters()
    assert n_ours == n_peft == 2 * 2 * 4 * (16 + 16)
    assert n_all == sum(p.numel() for p in model.parameters()) + n_ours


def test_dropout_acts_on_the_lora_branch_like_peft():
    torch.manual_seed(0)
    model = Small()
    ours, theirs, _ = _adapt_both(model, ["query"], rank=3, alpha=6, dropout=0.4)
    ours.train()
    theirs.train()
    x = torch.randn(5, 6)
    torch.manual_seed(11)
    got = ours(x)
    torch.manual_seed(11)
    ref = theirs(x)
    assert (got - ref).abs().max().item() <= 1e-6
    # with B = 0 the dropout cannot reach the output: it is on the LoRA branch only
    layer = LoRALinear(nn.Linear(6, 4), rank=2, dropout=0.9).train()
    assert torch.equal(layer(x), layer.base(x))


@pytest.mark.parametrize("shape", [(6,), (4, 6), (2, 3, 6)])
def test_forward_is_the_formula(shape):
    torch.manual_seed(0)
    base = nn.Linear(6, 5).double()
    layer = LoRALinear(base, rank=3, alpha=7.5)
    with torch.no_grad():
        layer.lora_B.normal_()
    x = torch.randn(*shape, dtype=torch.float64)
    W = base.weight + (7.5 / 3) * layer.lora_B @ layer.lora_A  # (5, 6)
    expected = x @ W.T + base.bias  # (..., 5)
    got = layer(x)
    assert got.shape == (*shape[:-1], 5)
    assert (got - expected).abs().max().item() <= 1e-12
    assert layer.scaling == 2.5 and layer.lora_A.shape == (3, 6) and layer.lora_B.shape == (5, 3)


def test_initialisation_starts_at_the_base_model():
    torch.manual_seed(0)
    base = nn.Linear(400, 30)
    layer = LoRALinear(base, rank=8)
    assert layer.scaling == 1.0 and not layer.merged
    assert torch.count_nonzero(layer.lora_B) == 0
    bound = 1 / math.sqrt(400)  # kaiming_uniform_(a=sqrt(5)) on fan_in 400
    assert layer.lora_A.abs().max().item() <= bound
    assert layer.lora_A.abs().max().item() > 0.95 * bound
    assert abs(layer.lora_A.std().item() - bound / math.sqrt(3)) < 0.1 * bound
    x = torch.randn(4, 400)
    assert torch.equal(layer(x), base(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_merge_and_unmerge(dtype):
    torch.manual_seed(0)
    base = nn.Linear(8, 6).to(dtype)
    w0 = base.weight.detach().clone()
    layer = LoRALinear(base, rank=2, alpha=5)
    with torch.no_grad():
        layer.lora_B.normal_()
    x = torch.randn(3, 8, dtype=dtype)
    before = layer(x)
    layer.merge()
    assert layer.merged
    assert (layer(x) - before).abs().max().item() <= 10 * TOL[dtype]
    assert (layer(x) - base(x)).abs().max().item() == 0.0  # merged: the base layer alone
    layer.unmerge()
    assert (base.weight - w0).abs().max().item() <= 10 * TOL[dtype]
    assert (layer(x) - before).abs().max().item() <= 10 * TOL[dtype]


def test_merge_lora_puts_plain_linears_back():
    torch.manual_seed(0)
    model = Small().double()
    ours, _, names = _adapt_both(model, ["query", "value"], rank=2, alpha=2)
    x = torch.randn(4, 6, dtype=torch.float64)
    before = ours(x)
    merged = merge_lora(ours)
    assert merged is ours
    assert not any(isinstance(m, LoRALinear) for m in merged.modules())
    for name in names:
        assert type(merged.get_submodule(name)) is nn.Linear
    assert (merged(x) - before).abs().max().item() <= 1e-12
    assert sum(p.numel() for p in merged.parameters()) == sum(p.numel() for p in model.parameters())
    single = LoRALinear(nn.Linear(3, 2), rank=1)
    assert type(merge_lora(single)) is nn.Linear


def test_gradients_reach_only_lora_and_base_is_unchanged_by_a_step():
    torch.manual_seed(0)
    model = Small()
    frozen = {n: p.detach().clone() for n, p in model.named_parameters()}
    names = add_lora(model, ["query"], rank=2)
    with torch.no_grad():
        for name in names:
            model.get_submodule(name).lora_B.normal_()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.1)
    x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    for n, p in model.named_parameters():
        if ".lora_" in n:
            assert p.requires_grad and p.grad is not None and p.grad.abs().sum() > 0, n
        else:
            assert not p.requires_grad and p.grad is None, n
    lora_before = {n: p.detach().clone() for n, p in model.named_parameters() if ".lora_" in n}
    optimizer.step()
    for n, p in model.named_parameters():
        if ".lora_" in n:
            assert not torch.equal(p, lora_before[n]), n
        else:
            assert torch.equal(p, frozen[n.replace(".base.", ".")]), n


def test_names_match_whole_components_and_are_not_wrapped_twice():
    model = Small()
    with pytest.raises(ValueError, match="uery"):
        add_lora(model, ["uery"], rank=2)  # a suffix of a name, not a component of it
    first = add_lora(model, ["blocks.1.query"], rank=2)
    assert first == ["blocks.1.query"]
    assert add_lora(model, ["query"], rank=2) == ["blocks.0.query"]  # the wrapped one is not wrapped again
    trainable = sorted(n for n, p in model.named_parameters() if p.requires_grad)
    assert trainable == [
        f"blocks.{i}.query.lora_{m}" for i in (0, 1) for m in "AB"
    ]  # the first adapter stays trainable
    assert type(model.blocks[1]["query"].base) is nn.Linear


def test_value_errors():
    with pytest.raises(ValueError, match="rank"):
        LoRALinear(nn.Linear(3, 2), rank=0)
    with pytest.raises(ValueError, match="rank"):
        LoRALinear(nn.Linear(3, 2), rank=1.5)
    with pytest.raises(ValueError, match="nn.Linear"):
        LoRALinear(nn.Conv1d(3, 2, 1), rank=1)
    with pytest.raises(ValueError, match="alpha"):
        LoRALinear(nn.Linear(3, 2), rank=1, alpha=0)
    with pytest.raises(ValueError, match="dropout"):
        LoRALinear(nn.Linear(3, 2), rank=1, dropout=1.0)
    layer = LoRALinear(nn.Linear(3, 2), rank=1)
    with pytest.raises(ValueError, match=r"\(\.\.\., 3\)"):
        layer(torch.randn(4, 5))
    layer.merge()
    with pytest.raises(ValueError, match="already merged"):
        layer.merge()
    layer.unmerge()
    with pytest.raises(ValueError, match="not merged"):
        layer.unmerge()
    with pytest.raises(ValueError, match=r"\['key'\].*embed"):
        add_lora(Small(), ["key"], rank=2)
    with pytest.raises(ValueError, match="targets"):
        add_lora(Small(), "query", rank=2)
    with pytest.raises(ValueError, match="targets"):
        add_lora(Small(), [], rank=2)
    untouched = Small()
    with pytest.raises(ValueError, match="rank"):
        add_lora(untouched, ["query"], rank=0)
    assert trainable_parameters(untouched) == sum(p.numel() for p in Small().parameters())  # checked before any change
    with pytest.raises(ValueError, match="no LoRALinear"):
        merge_lora(Small())


def test_lora_parameters_follow_the_base_layer_dtype_and_device():
    base = nn.Linear(5, 3, dtype=torch.float64, device="meta")
    layer = LoRALinear(base, rank=2)
    assert layer.lora_A.device.type == layer.lora_B.device.type == "meta"
    assert layer.lora_A.dtype == layer.lora_B.dtype == torch.float64
