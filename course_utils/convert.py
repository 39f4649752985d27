"""Unit 11: the course's GPT (``course_utils.gpt``) as Hugging Face's ``GPT2LMHeadModel``, and back.

The two are the same network written twice (Radford et al., "Language Models are Unsupervised
Multitask Learners", 2019: Pre-LN blocks, learned positions, a GELU MLP of width 4 D, a final
LayerNorm and an output layer tied to the token embedding). Only the names and one storage
convention differ: GPT-2 keeps its linear maps in ``Conv1D`` modules whose weight is ``(in, out)``,
the transpose of ``nn.Linear``'s ``(out, in)``. This is the idea of nanoGPT's ``from_pretrained``,
run in both directions.

    hf = gpt_to_hf(model)                       # course GPT -> GPT2LMHeadModel, same logits
    back = hf_to_gpt(hf)                        # GPT2LMHeadModel -> course GPT, same logits
    for course_name, hf_name, transposed in weight_map(model.config): ...

A course configuration GPT-2 cannot express (RMSNorm, a gated MLP, RoPE or ALiBi, ReZero, Post-LN,
an untied output layer) raises ``ValueError`` naming the field. ``bias=False`` is expressed with
zero biases; ``hf_to_gpt`` always builds ``bias=True``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from .gpt import GPT, GPTConfig

if TYPE_CHECKING:  # imported lazily: transformers takes seconds to import
    import transformers

# GPTConfig field -> the values GPT-2 can express
_EXPRESSIBLE = {
    "norm": ("layer",),
    "ffn": ("gelu",),
    "position": ("learned",),
    "residual": ("plain",),
    "norm_first": (True,),
    "tie_weights": (True,),
}
# GPTConfig size field -> the GPT2Config field that holds it (one table for both directions)
_SIZES = {
    "vocab_size": "vocab_size",
    "block_size": "n_positions",
    "d_model": "n_embd",
    "num_layers": "n_layer",
    "num_heads": "n_head",
    "ffn_hidden": "n_inner",
}
# GPT-2's activation_function -> GPTConfig.gelu
_GELU = {"gelu": "exact", "gelu_new": "tanh", "gelu_pytorch_tanh": "tanh"}


def _check_expressible(config: GPTConfig) -> None:
    for name, allowed in _EXPRESSIBLE.items():
        if getattr(config, name) not in allowed:
            raise ValueError(
                f"GPT-2 cannot express GPTConfig.{name}={getattr(config, name)!r} (it needs {allowed[0]!r})"
            )


def gpt2_config(config: GPTConfig) -> transformers.GPT2Config:
    """The ``transformers.GPT2Config`` of the same architecture as the course's ``config``.

    Sizes map one to one (``vocab_size``, ``n_positions = block_size``, ``n_embd = d_model``,
    ``n_layer``, ``n_head``, ``n_inner = ffn_hidden``), LayerNorm's eps is PyTorch's 1e-5 in both,
    the GELU flavour follows ``config.gelu`` ("exact" -> "gelu", "tanh" -> "gelu_new"), and the
    three dropouts take ``config.dropout``. No bos/eos token is set (the course's vocabularies have none).
    """
    from transformers import GPT2Config

    if not isinstance(config, GPTConfig):
        raise ValueError(f"config must be a GPTConfig, got {type(config).__name__}")
    _check_expressible(config)
    return GPT2Config(
        **{theirs: getattr(config, ours) for ours, theirs in _SIZES.items()},
        activation_function="gelu" if config.gelu == "exact" else "gelu_new",
        resid_pdrop=config.dropout,
        embd_pdrop=config.dropout,
        attn_pdrop=config.dropout,
        layer_norm_epsilon=1e-5,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )


def weight_map(config: GPTConfig) -> list[tuple[str, str, bool]]:
    """Rows ``(course name, GPT-2 name, transposed)`` for every tensor of a course GPT's state dict.

    ``transposed`` is True where GPT-2 stores a ``Conv1D`` weight ``(in, out)`` against the course's
    ``nn.Linear`` weight ``(out, in)``. Bias rows appear only when ``config.bias``; the tied output
    layer (``head.weight`` = ``lm_head.weight``) is listed once, as the token embedding.
    """
    _check_expressible(config)
    rows = [("tok_emb.weight", "transformer.wte.weight", False), ("pos_emb.weight", "transformer.wpe.weight", False)]
    layer = [
        ("norm1", "ln_1", None),
        ("attn.qkv", "attn.c_attn", True),
        ("attn.proj", "attn.c_proj", True),
        ("norm2", "ln_2", None),
        ("ffn.linear1", "mlp.c_fc", True),
        ("ffn.linear2", "mlp.c_proj", True),
    ]
    for i in range(config.num_layers):
        for ours, theirs, linear in layer:
            rows.append((f"blocks.{i}.{ours}.weight", f"transformer.h.{i}.{theirs}.weight", bool(linear)))
            if config.bias:
                rows.append((f"blocks.{i}.{ours}.bias", f"transformer.h.{i}.{theirs}.bias", False))
    rows.append(("norm_f.weight", "transformer.ln_f.weight", False))
    if config.bias:
        rows.append(("norm_f.bias", "transformer.ln_f.bias", False))
    return rows


@torch.no_grad()
def gpt_to_hf(model: GPT) -> transformers.GPT2LMHeadModel:
    """A ``GPT2LMHeadModel`` computing the same logits as the course ``model``, in its dtype, on the CPU.

    ``model(idx (B, T))`` and ``gpt_to_hf(model)(idx).logits`` are both ``(B, T, V)`` and equal to
    rounding. Every tensor is copied (the two models share no storage); missing biases become zeros.
    """
    from transformers import GPT2LMHeadModel

    if not isinstance(model, GPT):
        raise ValueError(f"model must be a course_utils.gpt.GPT, got {type(model).__name__}")
    config = model.config
    hf = GPT2LMHeadModel(gpt2_config(config))
    dtype = next(model.parameters()).dtype
    hf = hf.to(dtype=dtype).eval()
    ours, theirs = model.state_dict(), hf.state_dict()
    copied = set()
    for course_name, hf_name, transposed in weight_map(config):
        tensor = ours[course_name].detach().cpu()
        theirs[hf_name].copy_(tensor.T if transposed else tensor)  # Conv1D: (in, out)
        copied.add(hf_name)
    for name, tensor in theirs.items():  # the biases a bias=False course model does not have
        if name not in copied and name.endswith(".bias"):
            tensor.zero_()
    hf.tie_weights()
    return hf


@torch.no_grad()
def hf_to_gpt(model: transformers.GPT2LMHeadModel) -> GPT:
    """The course ``GPT`` (``bias=True``) computing the same logits as a ``GPT2LMHeadModel``, on the CPU.

    Reads the sizes from ``model.config``; an activation other than GPT-2's GELUs, a scaling of the
    attention GPT-2 normally does not use, or an untied output layer raises ``ValueError``.
    """
    from transformers import GPT2LMHeadModel

    if not isinstance(model, GPT2LMHeadModel):
        raise ValueError(f"model must be a transformers GPT2LMHeadModel, got {type(model).__name__}")
    hc = model.config
    if hc.activation_function not in _GELU:
        raise ValueError(f"activation_function={hc.activation_function!r} has no course equivalent ({sorted(_GELU)})")
    if not hc.scale_attn_weights or hc.scale_attn_by_inverse_layer_idx:
        raise ValueError("the course GPT scales attention scores by 1/sqrt(d_head) only (scale_attn_* differ)")
    if not hc.tie_word_embeddings:
        raise ValueError("tie_word_embeddings=False: the course GPT2 mapping needs a tied output layer")
    if abs(hc.layer_norm_epsilon - 1e-5) > 1e-12:
        raise ValueError(f"layer_norm_epsilon={hc.layer_norm_epsilon}: the course's LayerNorm uses 1e-5")
    sizes = {ours: getattr(hc, theirs) for ours, theirs in _SIZES.items()}  # n_inner None: GPTConfig's 4 D
    config = GPTConfig(**sizes, dropout=hc.resid_pdrop, bias=True, gelu=_GELU[hc.activation_function])
    dtype = next(model.parameters()).dtype
    gpt = GPT(config).to(dtype=dtype).eval()
    ours, theirs = gpt.state_dict(), model.state_dict()
    for course_name, hf_name, transposed in weight_map(config):
        tensor = theirs[hf_name].detach().cpu()
        ours[course_name].copy_(tensor.T if transposed else tensor)  # nn.Linear: (out, in)
    return gpt
