"""Mistake bank of unit 11 (pre-training and adapting a pretrained model): each plausible wrong answer must lose
the points of its test cell, run through the very test code nbgrader runs (hidden tests included).

Part A's entries get BERT's rule or its random draws wrong (special tokens chosen, labels everywhere or only at the
[MASK] positions, replacements drawn from the whole vocabulary, the draws in another order, ids changed in place).
Part B's entries load GPT-2 wrongly (a Conv1D weight copied untransposed where its shape happens to fit, reshaped
instead of transposed, biases or norms left out, the exact GELU for GPT-2's tanh GELU, the MLP width or the head
count taken from the wrong field) or borrow its tensors instead of copying them. Part C's entries scale, initialise, freeze, merge or match names wrongly,
and two compute the right values through the dense (out, in) update B A in the forward pass, which the test's work
watch refuses (``passes_unchecked``: full marks with the checks off, ``WrongMethod`` with them on).

The ``shortcut`` entries are whole answer cells that reach a blocked function another way: the course library's
masking (``pretraining.mask_tokens`` by alias, ``decoding.mlm_mask`` by module path), ``transformers``'
``DataCollatorForLanguageModeling`` through an instance made without its constructor, the GPT-2 model's own
forward pass behind the course model's ``forward``, the library's ``convert.hf_to_gpt``, ``peft``'s LoRA layer inside the module, ``get_peft_model`` by
module path and a subclass of ``course_utils.lora.LoRALinear``. Each must lose its points to the guard first, with
``ForbiddenCall``. The ``frames`` entries (``notebook_cells.frames_entries``) read a value of the answer's type and
shape from their callers' frames; the tests compute every expected value after the call, so they find nothing."""

from notebook_cells import Mistake, answer_source, bank_tests, frames_entries

UNIT = "11_pretraining"

# ---------------------------------------------------------------- lines of the solution that the patches target
MASK_SPECIAL = "special = torch.tensor(sorted(set(int(i) for i in special_ids)), dtype=torch.long)  # (S,)"
MASK_CHOSEN = "chosen = torch.rand(ids.shape, generator=generator) < mask_prob  # (B, T)"
MASK_NOSPECIAL = "chosen = chosen & ~torch.isin(ids, special)  # special tokens, padding included, are never chosen"
MASK_ACTION = "action = torch.rand(ids.shape, generator=generator)  # (B, T): < 0.8 mask, [0.8, 0.9) random, else keep"
MASK_RANDOM = "random_ids = ordinary[torch.randint(len(ordinary), ids.shape, generator=generator)]  # (B, T)"
MASK_TO_MASK = "to_mask = chosen & (action < 0.8)  # (B, T)"
MASK_TO_RANDOM = "to_random = chosen & (action >= 0.8) & (action < 0.9)  # (B, T)"
MASK_INPUTS = "inputs = torch.where(to_mask, torch.full_like(ids, mask_id), ids)  # (B, T): a new tensor, ids untouched"
MASK_LABELS = "labels = torch.where(chosen, ids, torch.full_like(ids, -100))  # (B, T)"

CONV_HIDDEN = "ffn_hidden=hf_config.n_inner or 4 * hf_config.n_embd,"
CONV_HEADS = "num_heads=hf_config.n_head,"
CONV_GELU = "        gelu=gelus[hf_config.activation_function],\n"
CONV_BIAS = "bias=True,"
CONV_NORM_BIAS = "        norm.bias.copy_(hf_norm.bias)\n"
CONV_WEIGHT = "linear.weight.copy_(conv.weight.T)  # Conv1D stores (in, out); nn.Linear wants (out, in)"
CONV_LINEAR_BIAS = "        linear.bias.copy_(conv.bias)\n"
CONV_WPE = "        model.pos_emb.weight.copy_(source.wpe.weight)  # (n_positions, D)\n"
CONV_LN1 = "copy_norm(block.norm1, hf_block.ln_1)"
CONV_LN2 = "copy_norm(block.norm2, hf_block.ln_2)"
CONV_LNF = "        copy_norm(model.norm_f, source.ln_f)\n"

LORA_FREEZE = "for param in base.parameters():"
LORA_SCALING = "self.scaling = (rank if alpha is None else alpha) / rank"
LORA_A = "self.lora_A = nn.Parameter(torch.empty(rank, base.in_features, dtype=weight.dtype, device=weight.device))"
LORA_A_INIT = "nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))  # (r, in), like an nn.Linear weight"
LORA_B = "self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank, dtype=weight.dtype, device=weight.device))"
LORA_MERGED_SKIP = "        if self.merged:\n            return out\n"
LORA_LOW = (
    "        low = x @ self.lora_A.T  # (..., r): through the bottleneck, never the (out, in) matrix B A\n"
    "        return out + self.scaling * (low @ self.lora_B.T)  # (..., out)\n"
)
LORA_MERGE = "if not self.merged:"
LORA_MERGE_ADD = "self.base.weight += self.scaling * (self.lora_B @ self.lora_A)  # (out, in)"
LORA_UNMERGE_SUB = "self.base.weight -= self.scaling * (self.lora_B @ self.lora_A)  # (out, in)"
LORA_FREEZE_ALL = "for param in model.parameters():"
LORA_MATCH = 'if isinstance(module, nn.Linear) and any(name == t or name.endswith("." + t) for t in targets):'
LORA_SETATTR = "parent.register_module(child, LoRALinear(module, rank, alpha))  # replaces the nn.Linear"


def _reordered_draws() -> str:
    """The solution with the random ids drawn before the 80/10/10 draw."""
    source = answer_source(UNIT, "mask_answer")
    source = source.replace(f"    {MASK_RANDOM}\n", "")
    return source.replace(f"    {MASK_ACTION}\n", f"    {MASK_RANDOM}\n    {MASK_ACTION}\n")


# ---------------------------------------------------------------- whole answer cells
_MASK_LIBRARY_ALIAS = """\
from course_utils.pretraining import mask_tokens as _library_masking


def mask_tokens(ids, vocab_size, mask_id, special_ids, mask_prob=0.15, generator=None):
    return _library_masking(ids, vocab_size, mask_id, special_ids, mask_prob=mask_prob, generator=generator)
"""
_MASK_LIBRARY_PATH = """\
import importlib

import torch


def mask_tokens(ids, vocab_size, mask_id, special_ids, mask_prob=0.15, generator=None):
    decoding = importlib.import_module("course_utils.decoding")
    special = torch.tensor(sorted(set(special_ids)))
    maskable = ~torch.isin(ids, special)
    return decoding.mlm_mask(ids, mask_id, vocab_size, maskable, mask_prob, random_low=len(special),
                             generator=generator)
"""
_MASK_COLLATOR = """\
import torch
import transformers


def mask_tokens(ids, vocab_size, mask_id, special_ids, mask_prob=0.15, generator=None):
    class _Tokenizer:  # just what the collator reads
        mask_token = "[MASK]"

        def __len__(self):
            return vocab_size

        def convert_tokens_to_ids(self, token):
            return mask_id

    collator = object.__new__(transformers.DataCollatorForLanguageModeling)  # no constructor, no checks
    collator.tokenizer, collator.mlm_probability, collator.generator = _Tokenizer(), mask_prob, generator
    collator.mask_replace_prob, collator.random_replace_prob = 0.8, 0.1
    special = torch.isin(ids, torch.tensor(sorted(set(special_ids))))
    return collator.torch_mask_tokens(ids.clone(), special_tokens_mask=special)
"""

_CONV_FORWARD_HF = """\
def gpt2_to_course(hf_model):
    hf_config = hf_model.config
    model = GPT(GPTConfig(vocab_size=hf_config.vocab_size, block_size=hf_config.n_positions,
                          num_layers=hf_config.n_layer, num_heads=hf_config.n_head, d_model=hf_config.n_embd,
                          bias=True, gelu="tanh"))
    model.forward = lambda idx: hf_model(idx).logits  # the course model, GPT-2's logits
    return model
"""
_CONV_FORWARD_PATH = """\
import importlib


def gpt2_to_course(hf_model):
    gpt2 = importlib.import_module("transformers.models.gpt2.modeling_gpt2")
    hf_config = hf_model.config
    model = GPT(GPTConfig(vocab_size=hf_config.vocab_size, block_size=hf_config.n_positions,
                          num_layers=hf_config.n_layer, num_heads=hf_config.n_head, d_model=hf_config.n_embd,
                          bias=True, gelu="tanh"))
    body, head = hf_model.transformer, hf_model.lm_head
    model.forward = lambda idx: head(gpt2.GPT2Model.forward(body, idx).last_hidden_state)
    return model
"""

_CONV_LIBRARY = """\
from course_utils.convert import hf_to_gpt as _load


def gpt2_to_course(hf_model):
    return _load(hf_model)
"""

_LORA_LIBRARY_SUBCLASS = """\
from course_utils import lora as _lora


class LoRALinear(_lora.LoRALinear):
    \"\"\"The library's layer under the exercise's name.\"\"\"


def add_lora(model, targets, rank, alpha=None):
    return _lora.add_lora(model, targets, rank, alpha)
"""
_LORA_PEFT_LAYER = """\
import torch.nn as nn
from peft import LoraConfig
from peft.tuners.lora import Linear as _PeftLinear


class LoRALinear(nn.Module):
    def __init__(self, base, rank, alpha=None):
        super().__init__()
        alpha = rank if alpha is None else alpha
        config = LoraConfig(r=rank, lora_alpha=alpha)
        self.inner = _PeftLinear(base, "default", config=config, r=rank, lora_alpha=alpha)
        self.base = base
        self.scaling = self.inner.scaling["default"]
        self.lora_A = self.inner.lora_A["default"].weight
        self.lora_B = self.inner.lora_B["default"].weight
        self.merged = False

    def forward(self, x):
        return self.inner(x)

    def merge(self):
        self.inner.merge()
        self.merged = True

    def unmerge(self):
        self.inner.unmerge()
        self.merged = False
"""


def _peft_add_lora() -> str:
    """The honest layer, and add_lora through peft.get_peft_model reached by module path."""
    honest = answer_source(UNIT, "lora_answer").split("\n\ndef add_lora(")[0]
    return (
        honest
        + """


def add_lora(model, targets, rank, alpha=None):
    import importlib

    peft = importlib.import_module("peft")
    config = peft.LoraConfig(r=rank, lora_alpha=rank if alpha is None else alpha, target_modules=list(targets))
    peft.get_peft_model(model, config)  # injects its layers into model, in place
    return [n for n, m in model.named_modules() if hasattr(m, "lora_A") and hasattr(m, "base_layer")]
"""
    )


def _m(name, answer, patches=(), source=None, passes_unchecked=False):
    test = answer.replace("_answer", "_test")
    return Mistake(name, answer=answer, test=test, patches=patches, source=source, passes_unchecked=passes_unchecked)


BANK = [
    # ---------------------------------------------------------------- Part A: mask_tokens
    _m(
        "mask: special tokens (padding included) may be chosen",
        "mask_answer",
        ((MASK_NOSPECIAL, "chosen = chosen  # every position may be chosen"),),
    ),
    _m("mask: labels are the ids everywhere", "mask_answer", ((MASK_LABELS, "labels = ids.clone()  # (B, T)"),)),
    _m(
        "mask: labels only where [MASK] was put (not at the replaced or kept positions)",
        "mask_answer",
        ((MASK_LABELS, "labels = torch.where(to_mask, ids, torch.full_like(ids, -100))  # (B, T)"),),
    ),
    _m(
        "mask: random replacements drawn from the whole vocabulary, specials included",
        "mask_answer",
        ((MASK_RANDOM, "random_ids = torch.randint(vocab_size, ids.shape, generator=generator)  # (B, T)"),),
    ),
    _m(
        "mask: the drawn index used as the id (not the j-th ordinary id)",
        "mask_answer",
        ((MASK_RANDOM, "random_ids = torch.randint(len(ordinary), ids.shape, generator=generator)  # (B, T)"),),
    ),
    _m(
        "mask: repeated special ids counted twice (n = vocab_size - len(special_ids))",
        "mask_answer",
        (
            (
                MASK_RANDOM,
                "random_ids = ordinary[torch.randint(vocab_size - len(special_ids), ids.shape, generator=generator)]",
            ),
        ),
    ),
    _m(
        "mask: ids changed in place",
        "mask_answer",
        ((MASK_INPUTS, "inputs = ids.masked_fill_(to_mask, mask_id)  # (B, T)"),),
    ),
    _m(
        "mask: mask_prob ignored (always 0.15)",
        "mask_answer",
        ((MASK_CHOSEN, MASK_CHOSEN.replace("mask_prob", "0.15")),),
    ),
    _m(
        "mask: every chosen token becomes [MASK] (no 10% random, 10% kept)",
        "mask_answer",
        ((MASK_TO_MASK, "to_mask = chosen  # (B, T)"), (MASK_TO_RANDOM, "to_random = torch.zeros_like(chosen)")),
    ),
    _m(
        "mask: the random and the kept bands swapped (random where r >= 0.9)",
        "mask_answer",
        ((MASK_TO_RANDOM, "to_random = chosen & (action >= 0.9)  # (B, T)"),),
    ),
    _m("mask: the random ids drawn before the 80/10/10 draw", "mask_answer", source=_reordered_draws()),
    _m(
        "mask: random ids drawn only for the chosen positions",
        "mask_answer",
        (
            (
                MASK_RANDOM,
                "random_ids = ids.clone()\n    random_ids[chosen] = ordinary[torch.randint(len(ordinary), "
                "(int(chosen.sum()),), generator=generator)]",
            ),
        ),
    ),
    _m(
        "shortcut (alias): course_utils.pretraining.mask_tokens imported under another name",
        "mask_answer",
        source=_MASK_LIBRARY_ALIAS,
    ),
    _m("shortcut (path): course_utils.decoding.mlm_mask by module path", "mask_answer", source=_MASK_LIBRARY_PATH),
    _m(
        "shortcut (instance): DataCollatorForLanguageModeling.torch_mask_tokens on an instance made without __init__",
        "mask_answer",
        source=_MASK_COLLATOR,
    ),
    # ---------------------------------------------------------------- Part B: gpt2_to_course
    _m(
        "convert: a Conv1D weight transposed only where its shape does not fit (square c_proj copied as is)",
        "convert_answer",
        (
            (
                CONV_WEIGHT,
                "linear.weight.copy_(conv.weight if conv.weight.shape == linear.weight.shape else conv.weight.T)",
            ),
        ),
    ),
    _m(
        "convert: Conv1D weights reshaped instead of transposed",
        "convert_answer",
        ((CONV_WEIGHT, "linear.weight.copy_(conv.weight.reshape(linear.weight.shape))"),),
    ),
    _m(
        "convert: no biases (GPTConfig's default bias=False, biases not copied)",
        "convert_answer",
        ((CONV_BIAS, "bias=False,"), (CONV_NORM_BIAS, ""), (CONV_LINEAR_BIAS, "")),
    ),
    _m(
        "convert: the MLP width fixed at 4 D (n_inner ignored)",
        "convert_answer",
        ((CONV_HIDDEN, "ffn_hidden=4 * hf_config.n_embd,"),),
    ),
    _m("convert: the activation ignored (the exact GELU for GPT-2's gelu_new)", "convert_answer", ((CONV_GELU, ""),)),
    _m("convert: the head count read from n_layer", "convert_answer", ((CONV_HEADS, "num_heads=hf_config.n_layer,"),)),
    _m("convert: position embeddings not copied", "convert_answer", ((CONV_WPE, ""),)),
    _m("convert: the final LayerNorm ln_f not copied", "convert_answer", ((CONV_LNF, ""),)),
    _m(
        "convert: ln_1 and ln_2 swapped",
        "convert_answer",
        ((CONV_LN1, "copy_norm(block.norm1, hf_block.ln_2)"), (CONV_LN2, "copy_norm(block.norm2, hf_block.ln_1)")),
    ),
    _m(
        "convert: the weights borrowed as views of GPT-2's tensors (.data = conv.weight.data.T)",
        "convert_answer",
        ((CONV_WEIGHT, "linear.weight.data = conv.weight.data.T  # a view of GPT-2's weight"),),
    ),
    _m(
        "convert: GPT-2's Conv1D weights transposed in place, then copied",
        "convert_answer",
        (
            (
                CONV_WEIGHT,
                "conv.weight.data = conv.weight.data.T.contiguous()  # now (out, in)\n"
                "        linear.weight.copy_(conv.weight)",
            ),
        ),
    ),
    _m("shortcut (forward): the course model's forward runs GPT-2", "convert_answer", source=_CONV_FORWARD_HF),
    _m(
        "shortcut (path): GPT2Model.forward by module path behind the course model",
        "convert_answer",
        source=_CONV_FORWARD_PATH,
    ),
    _m("shortcut (library): course_utils.convert.hf_to_gpt under another name", "convert_answer", source=_CONV_LIBRARY),
    # ---------------------------------------------------------------- Part C: LoRALinear, add_lora
    _m(
        "lora: scaling = alpha (not alpha / rank)",
        "lora_answer",
        ((LORA_SCALING, "self.scaling = rank if alpha is None else alpha"),),
    ),
    _m(
        "lora: B initialised like A (random), so the wrapped layer is not base at first",
        "lora_answer",
        ((LORA_B, LORA_B.replace("torch.zeros", "0.01 * torch.randn")),),
    ),
    _m("lora: A initialised with zeros too", "lora_answer", ((LORA_A_INIT, "nn.init.zeros_(self.lora_A)"),)),
    _m("lora: the wrapped layer is not frozen", "lora_answer", ((LORA_FREEZE, "for param in []:"),)),
    _m(
        "lora: A and B always float32",
        "lora_answer",
        (
            (LORA_A, "self.lora_A = nn.Parameter(torch.empty(rank, base.in_features))"),
            (LORA_B, "self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank))"),
        ),
    ),
    _m(
        "lora: merge adds B @ A without the scaling",
        "lora_answer",
        ((LORA_MERGE_ADD, "self.base.weight += self.lora_B @ self.lora_A  # (out, in)"),),
    ),
    _m("lora: forward still adds the update once merged", "lora_answer", ((LORA_MERGED_SKIP, ""),)),
    _m("lora: a second merge() adds the update again", "lora_answer", ((LORA_MERGE, "if True:"),)),
    _m(
        "lora: unmerge adds the update instead of subtracting it",
        "lora_answer",
        ((LORA_UNMERGE_SUB, LORA_UNMERGE_SUB.replace("-=", "+=")),),
    ),
    _m(
        'lora: names matched with endswith(target) ("down_proj" matches "proj")',
        "lora_answer",
        ((LORA_MATCH, "if isinstance(module, nn.Linear) and any(name.endswith(t) for t in targets):"),),
    ),
    _m(
        "lora: every module whose name matches is wrapped, not only nn.Linear",
        "lora_answer",
        ((LORA_MATCH, 'if any(name == t or name.endswith("." + t) for t in targets):'),),
    ),
    _m(
        "lora: add_lora leaves the rest of the model trainable", "lora_answer", ((LORA_FREEZE_ALL, "for param in []:"),)
    ),
    _m(
        "lora: the new layer set on the root under the dotted name",
        "lora_answer",
        ((LORA_SETATTR, "setattr(model, name, LoRALinear(module, rank, alpha))"),),
    ),
    _m(
        "lora: forward through the dense update x @ (s B A)^T",
        "lora_answer",
        ((LORA_LOW, "        return out + x @ (self.scaling * (self.lora_B @ self.lora_A)).T  # (..., out)\n"),),
        passes_unchecked=True,
    ),
    _m(
        "lora: forward with the merged weight W + s B A built on the fly",
        "lora_answer",
        (
            (
                "        out = self.base(x)  # (..., out)\n        if self.merged:\n            return out\n"
                + LORA_LOW,
                "        if self.merged:\n            return self.base(x)\n"
                "        weight = self.base.weight + self.scaling * (self.lora_B @ self.lora_A)  # (out, in)\n"
                "        return F.linear(x, weight, self.base.bias)  # (..., out)\n",
            ),
        ),
        passes_unchecked=True,
    ),
    _m("shortcut (subclass): course_utils.lora.LoRALinear and add_lora", "lora_answer", source=_LORA_LIBRARY_SUBCLASS),
    _m("shortcut (peft): peft's lora.Linear inside the module", "lora_answer", source=_LORA_PEFT_LAYER),
    _m("shortcut (path): add_lora through peft.get_peft_model by module path", "lora_answer", source=_peft_add_lora()),
]
BANK += frames_entries(UNIT)

test_bank_covers_every_answer, test_solution_passes, test_mistake_loses_points = bank_tests(UNIT, BANK)
