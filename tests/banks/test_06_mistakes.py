"""Mistake bank of unit 06: plausible wrong answers, each of which must lose its cell's points."""

from notebook_cells import Mistake, bank_tests, frames_entry, honest_renamed

UNIT = "06_attention"

_SOFTMAX = "weights = torch.softmax(scores, dim=-1)"
_FILL = 'scores = scores.masked_fill(~mask, float("-inf"))  # (..., T_q, T_k)'
_NAN = "return torch.nan_to_num(weights, nan=0.0)"
_SCORES = "scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, T_k)"
_WEIGHTS = "weights = masked_softmax(scores, mask)  # (..., T_q, T_k)"
_SPLIT_VIEW = "x = x.reshape(batch_size, seq_len, num_heads, d_head)  # (B, T, H, d_head)"
_SPLIT_RET = "return x.transpose(1, 2)  # (B, H, T, d_head)"
_MERGE_T = "x = x.transpose(1, 2)  # (B, T, H, d_head)"
_MERGE_RET = "return x.reshape(batch_size, seq_len, num_heads * d_head)  # (B, T, D)"
_FEATURES = "features = torch.tanh(q[:, :, None, :] + k[:, None, :, :])  # (B, T_q, T_k, h)"

# Shortcuts: whole answer cells that reach a blocked function instead of building the part. Each is
# correct (it would earn the points without the call guard) and must fail by ForbiddenCall.
_SOFTMAX_ALIAS = """\
import course_utils.attention as A

_f = A.masked_softmax


def masked_softmax(scores, mask=None):
    return _f(scores, mask)
"""
_SOFTMAX_SAFE = """\
import torch

_safe_softmax = torch.ops.aten._safe_softmax.default  # softmax that gives 0 on rows of -inf


def masked_softmax(scores, mask=None):
    if mask is None:
        return torch.softmax(scores, dim=-1)
    return _safe_softmax(scores.masked_fill(~mask, float("-inf")), -1)
"""
_SOFTMAX_MASKED = """\
import torch
from torch.masked._ops import softmax as _softmax


def masked_softmax(scores, mask=None):
    if mask is None:
        return torch.softmax(scores, dim=-1)
    return _softmax(scores, -1, mask=mask.expand(scores.shape)).nan_to_num(0.0)
"""
_SOFTMAX_SDPA = """\
import functools

import torch

_attend = functools.partial(torch._C._nn.scaled_dot_product_attention, scale=1.0)


def masked_softmax(scores, mask=None):
    eye = torch.eye(scores.shape[-1], dtype=scores.dtype).expand(*scores.shape[:-2], -1, -1)  # keys = values = I
    return _attend(scores, eye, eye, attn_mask=mask).nan_to_num(0.0)  # softmax(scores @ I) @ I
"""
_SDPA_ALIAS = """\
import course_utils.attention as A

_f = A.scaled_dot_product_attention


def scaled_dot_product_attention(query, key, value, mask=None):
    return _f(query, key, value, mask)
"""
_SDPA_MATH = """\
import torch


def scaled_dot_product_attention(query, key, value, mask=None):
    bias = None if mask is None else torch.zeros(mask.shape, dtype=query.dtype).masked_fill(~mask, float("-inf"))
    output, weights = torch._scaled_dot_product_attention_math(query, key, value, attn_mask=bias)
    return output, weights
"""
_SDPA_ATEN = """\
import torch

_sdpa = torch.ops.aten.scaled_dot_product_attention


def scaled_dot_product_attention(query, key, value, mask=None):
    output = _sdpa(query, key, value, attn_mask=mask)
    eye = torch.eye(key.shape[-2], dtype=query.dtype).expand(*key.shape[:-1], key.shape[-2])  # values = I
    return output, _sdpa(query, key, eye, attn_mask=mask)  # attention over I gives the weights
"""
_SDPA_MHA = """\
import torch
from torch.nn.functional import multi_head_attention_forward as _mha


def scaled_dot_product_attention(query, key, value, mask=None):
    *batch, T_q, d_k = query.shape
    T_k, d_v = value.shape[-2:]
    width = max(d_k, d_v)  # one head of this width; zero-padding does not change q.k
    pad = lambda x: torch.nn.functional.pad(x, (0, width - x.shape[-1])).reshape(-1, x.shape[-2], width).transpose(0, 1)
    q = pad(query) * (width / d_k) ** 0.5  # undo the 1/sqrt(width) that the built-in applies
    blocked = None if mask is None else ~mask.expand(*batch, T_q, T_k).reshape(-1, T_q, T_k)
    eye = torch.eye(width, dtype=query.dtype)
    out, weights = _mha(q, pad(key), pad(value), width, 1, None, None, None, None, False, 0.0, eye, None,
                        training=False, attn_mask=blocked, use_separate_proj_weight=True, q_proj_weight=eye,
                        k_proj_weight=eye, v_proj_weight=eye, average_attn_weights=False)
    output = out.transpose(0, 1)[..., :d_v].reshape(*batch, T_q, d_v)
    return output, weights.reshape(*batch, T_q, T_k)
"""
# The torch-function layer switched off: forbidden operators called from C code (map over a partial) while
# torch._C.DisableTorchFunction is on, unseen by the guard's profile hook and torch-function mode; the
# guard's dispatch-level watch refuses the operations that run beneath it.
_SOFTMAX_LAYER_OFF = """\
import functools

import torch

_off = torch._C.DisableTorchFunction
_kernel = functools.partial(torch._masked_softmax)  # True in its mask = left out


def masked_softmax(scores, mask=None):
    if mask is None:
        return torch.softmax(scores, dim=-1)
    blocked = (~mask).expand(scores.shape).contiguous()
    with _off():
        weights = list(map(_kernel, [scores], [blocked], [-1], [2]))[0]
    return torch.nan_to_num(weights, nan=0.0)
"""
_SDPA_LAYER_OFF = """\
import functools

import torch

_off = torch._C.DisableTorchFunction
_attend = functools.partial(torch._C._nn.scaled_dot_product_attention)


def scaled_dot_product_attention(query, key, value, mask=None):
    eye = torch.eye(key.shape[-2], dtype=query.dtype).expand(*key.shape[:-1], key.shape[-2])  # values = I
    with _off():
        output, weights = map(_attend, [query, query], [key, key], [value, eye], [mask, mask])
    return output.nan_to_num(0.0), weights.nan_to_num(0.0)
"""
_SOFTMAX_FLEX = """\
import torch
from torch.nn.attention.flex_attention import flex_attention


def masked_softmax(scores, mask=None):
    T_q, T_k = scores.shape[-2:]
    s = scores.reshape(-1, 1, T_q, T_k)  # (N, 1, T_q, T_k): flex wants 4-D
    keep = torch.ones_like(s, dtype=torch.bool) if mask is None else mask.expand(scores.shape).reshape(s.shape)
    q, k = s.new_zeros(s.shape[0], 1, T_q, 1), s.new_zeros(s.shape[0], 1, T_k, 1)
    eye = torch.eye(T_k, dtype=s.dtype).expand(s.shape[0], 1, T_k, T_k)  # values = I give the weights

    def score_mod(score, b, h, q_idx, kv_idx):  # ignore q.k (= 0): the score is the given one
        return torch.where(keep[b, h, q_idx, kv_idx], s[b, h, q_idx, kv_idx], -float("inf"))

    return flex_attention(q, k, eye, score_mod=score_mod).reshape(scores.shape)
"""
_SOFTMAX_COMPILE = """\
import torch

import course_utils.attention as A

_f = A.masked_softmax
torch._dynamo.config.recompile_limit = 64  # one compiled copy per shape, dtype and mask: no fallback to eager
_compiled = torch.compile(_f, backend="eager")  # compiled lazily: the library's code runs as dynamo's copy


def masked_softmax(scores, mask=None):
    return _compiled(scores, mask)
"""
_SOFTMAX_JIT = """\
import torch

import course_utils.attention as A

_example = torch.randn(2, 3, 4), torch.rand(2, 3, 4) > 0.5
_with_mask = torch.jit.trace(A.masked_softmax, _example)  # a TorchScript copy: only C++ runs when called
_without_mask = torch.jit.trace(lambda scores: A.masked_softmax(scores), _example[:1])


def masked_softmax(scores, mask=None):
    return _without_mask(scores) if mask is None else _with_mask(scores, mask)
"""
_SDPA_FLEX = """\
import torch
from torch.nn.attention.flex_attention import flex_attention


def scaled_dot_product_attention(query, key, value, mask=None):
    batch, (T_q, d_k), T_k = query.shape[:-2], query.shape[-2:], key.shape[-2]
    q, k, v = query.reshape(-1, 1, T_q, d_k), key.reshape(-1, 1, T_k, d_k), value.reshape(-1, 1, T_k, value.shape[-1])
    keep = None if mask is None else mask.expand(*batch, T_q, T_k).reshape(-1, 1, T_q, T_k)

    def score_mod(score, b, h, q_idx, kv_idx):
        return score if keep is None else torch.where(keep[b, h, q_idx, kv_idx], score, -float("inf"))

    eye = torch.eye(T_k, dtype=query.dtype).expand(q.shape[0], 1, T_k, T_k)  # values = I give the weights
    output = flex_attention(q, k, v, score_mod=score_mod).reshape(*batch, T_q, -1)
    weights = flex_attention(q, k, eye, score_mod=score_mod).reshape(*batch, T_q, T_k)
    return output, weights
"""
_SDPA_FLEX_OP = """\
import torch
from torch._higher_order_ops import flex_attention as _flex_op  # the operator behind flex_attention
from torch.nn.attention.flex_attention import create_block_mask


def scaled_dot_product_attention(query, key, value, mask=None):
    batch, (T_q, d_k), T_k = query.shape[:-2], query.shape[-2:], key.shape[-2]
    q, k, v = query.reshape(-1, 1, T_q, d_k), key.reshape(-1, 1, T_k, d_k), value.reshape(-1, 1, T_k, value.shape[-1])
    keep = torch.ones(T_q, T_k, dtype=torch.bool) if mask is None else mask
    keep = keep.expand(*batch, T_q, T_k).reshape(-1, 1, T_q, T_k)

    def mask_mod(b, h, q_idx, kv_idx):
        return keep[b, h, q_idx, kv_idx]

    blocks = create_block_mask(mask_mod, q.shape[0], 1, T_q, T_k, device=query.device).as_tuple()
    eye = torch.eye(T_k, dtype=query.dtype).expand(q.shape[0], 1, T_k, T_k)  # values = I give the weights
    output = _flex_op(q, k, v, lambda score, *_: score, blocks, d_k**-0.5, {})[0]
    weights = _flex_op(q, k, eye, lambda score, *_: score, blocks, d_k**-0.5, {})[0]
    return output.reshape(*batch, T_q, -1), weights.reshape(*batch, T_q, T_k)
"""
_SPLIT_ALIAS = """\
import course_utils.attention as A

_f = A.split_heads


def split_heads(x, num_heads):
    return _f(x, num_heads)
"""
_SPLIT_PARTIAL = """\
import functools

import course_utils.attention

split_heads = functools.partial(course_utils.attention.split_heads)
"""
_MERGE_ALIAS = """\
import course_utils.attention as A

_f = A.merge_heads


def merge_heads(x):
    return _f(x)
"""
_MERGE_PARTIAL = """\
import functools

import course_utils.attention

merge_heads = functools.partial(course_utils.attention.merge_heads)
"""
_ADDITIVE_ALIAS = """\
import torch
import course_utils.attention as A

_Scorer = A.AdditiveAttention


def additive_scores(query, key, W_q, W_k, w_v):
    scorer = _Scorer(W_q.shape[1], W_k.shape[1], W_q.shape[0]).to(query.dtype)
    with torch.no_grad():
        scorer.W_q.weight.copy_(W_q)
        scorer.W_k.weight.copy_(W_k)
        scorer.w_v.weight.copy_(w_v[None])
        return scorer.scores(query, key)
"""
_ADDITIVE_SUBCLASS = """\
import torch
from course_utils.attention import AdditiveAttention


class _Scorer(AdditiveAttention):
    def __init__(self, W_q, W_k, w_v):
        super().__init__(W_q.shape[1], W_k.shape[1], W_q.shape[0])
        self.to(W_q.dtype)
        with torch.no_grad():
            self.W_q.weight.copy_(W_q)
            self.W_k.weight.copy_(W_k)
            self.w_v.weight.copy_(w_v[None])


def additive_scores(query, key, W_q, W_k, w_v):
    with torch.no_grad():
        return _Scorer(W_q, W_k, w_v).scores(query, key)
"""

_CROSS_PAD = "visible = visible & (positions[None, None, :] < memory_lengths[:, None, None])  # padded keys"
_CROSS_CAUSAL = "visible = visible & torch.ones(T_q, T_k, dtype=torch.bool, device=x.device).tril(T_k - T_q)"
_CROSS_ATTEND = (
    "out, weights = scaled_dot_product_attention(q, k, v, visible[:, None])  # (B, H, T_q, d_v), (B, H, T_q, T_k)"
)
_CROSS_RET = "return merge_heads(out) @ W_o.T, weights  # (B, T_q, H*d_v) -> (B, T_q, D_out)"
_GQA_K = "key = key.repeat_interleave(group_size, dim=1)"
_GQA_V = "value = value.repeat_interleave(group_size, dim=1)"
_GQA_ATTEND = "scaled_dot_product_attention(query, key, value, mask)"
_GQA_RET = "return output, weights"


def _own_scores(scale: str, mask: str) -> str:
    """The attention written out by hand (instead of calling Part B), scaled by ``scale``."""
    return (
        f"scores = q @ k.transpose(-2, -1) / math.sqrt({scale})  # (B, H, T_q, T_k)\n"
        f"    weights = masked_softmax(scores, {mask})  # (B, H, T_q, T_k)\n"
        "    out = weights @ v  # (B, H, T_q, d_v)"
    )


# Shortcuts of Parts F and G (correct cells that reach a blocked function, as above).
_CROSS_MASK = """\
    T_q, T_k = x.shape[1], memory.shape[1]
    visible = torch.ones(x.shape[0], 1, T_q, T_k, dtype=torch.bool)  # (B, 1, T_q, T_k)
    if memory_lengths is not None:
        visible = visible & (torch.arange(T_k) < memory_lengths[:, None])[:, None, None, :]
    if causal:
        visible = visible & torch.ones(T_q, T_k, dtype=torch.bool).tril(T_k - T_q)
"""
_CROSS_ALIAS = (
    """\
import torch
from course_utils.attention import merge_heads as _merge
from course_utils.attention import scaled_dot_product_attention as _attend
from course_utils.attention import split_heads as _split


def cross_attention(x, memory, W_q, W_k, W_v, W_o, num_heads, memory_lengths=None, causal=False):
"""
    + _CROSS_MASK
    + """\
    q, k, v = (_split(t, num_heads) for t in (x @ W_q.T, memory @ W_k.T, memory @ W_v.T))
    out, weights = _attend(q, k, v, visible)
    return _merge(out) @ W_o.T, weights
"""
)
_CROSS_C_PATH = (
    """\
import torch

_attend = torch._C._nn.scaled_dot_product_attention


def cross_attention(x, memory, W_q, W_k, W_v, W_o, num_heads, memory_lengths=None, causal=False):
"""
    + _CROSS_MASK
    + """\
    B = x.shape[0]
    heads = lambda t: t.reshape(B, t.shape[1], num_heads, -1).transpose(1, 2)  # (B, H, T, d)
    q, k, v = heads(x @ W_q.T), heads(memory @ W_k.T), heads(memory @ W_v.T)
    out = _attend(q, k, v, attn_mask=visible).nan_to_num(0.0)  # (B, H, T_q, d_v)
    eye = torch.eye(T_k, dtype=x.dtype).expand(B, num_heads, T_k, T_k)  # values = I give the weights
    weights = _attend(q, k, eye, attn_mask=visible).nan_to_num(0.0)
    return out.transpose(1, 2).reshape(B, T_q, -1) @ W_o.T, weights
"""
)
_CROSS_ATEN_MATH = (
    """\
import torch

_math = torch.ops.aten._scaled_dot_product_attention_math  # returns (output, weights)


def cross_attention(x, memory, W_q, W_k, W_v, W_o, num_heads, memory_lengths=None, causal=False):
"""
    + _CROSS_MASK
    + """\
    B = x.shape[0]
    heads = lambda t: t.reshape(B, t.shape[1], num_heads, -1).transpose(1, 2)  # (B, H, T, d)
    bias = torch.zeros(visible.shape, dtype=x.dtype).masked_fill(~visible, float("-inf"))
    out, weights = _math(heads(x @ W_q.T), heads(memory @ W_k.T), heads(memory @ W_v.T), attn_mask=bias)
    out, weights = out.nan_to_num(0.0), weights.nan_to_num(0.0)
    return out.transpose(1, 2).reshape(B, T_q, -1) @ W_o.T, weights
"""
)
_CROSS_MHA_SUBCLASS = (
    """\
import math

import torch
import torch.nn as nn


class _Heads(nn.MultiheadAttention):
    # nn.MultiheadAttention over tensors projected already: identity projections, every head zero-padded
    def __init__(self, width, num_heads, dtype):
        super().__init__(width * num_heads, num_heads, bias=False, batch_first=True, dtype=dtype)
        with torch.no_grad():
            self.in_proj_weight.copy_(torch.eye(width * num_heads, dtype=dtype).repeat(3, 1))
            self.out_proj.weight.copy_(torch.eye(width * num_heads, dtype=dtype))


def cross_attention(x, memory, W_q, W_k, W_v, W_o, num_heads, memory_lengths=None, causal=False):
"""
    + _CROSS_MASK
    + """\
    B = x.shape[0]
    d_k, d_v = W_q.shape[0] // num_heads, W_v.shape[0] // num_heads
    width = max(d_k, d_v)

    def padded(t, d):  # (B, T, H*d) -> (B, T, H*width), each head zero-padded (q.k does not change)
        t = t.reshape(B, t.shape[1], num_heads, d)
        return nn.functional.pad(t, (0, width - d)).reshape(B, t.shape[1], num_heads * width)

    q = padded(x @ W_q.T, d_k) * math.sqrt(width / d_k)  # the module divides by sqrt(width)
    k, v = padded(memory @ W_k.T, d_k), padded(memory @ W_v.T, d_v)
    ignore = (~visible).expand(B, num_heads, T_q, T_k).reshape(B * num_heads, T_q, T_k)  # True = ignore
    out, weights = _Heads(width, num_heads, x.dtype)(q, k, v, attn_mask=ignore, average_attn_weights=False)
    out = out.nan_to_num(0.0).reshape(B, T_q, num_heads, width)[..., :d_v].reshape(B, T_q, num_heads * d_v)
    return out @ W_o.T, weights.nan_to_num(0.0)
"""
)
_GQA_ALIAS = """\
import course_utils.attention as A

_attend_all = A.scaled_dot_product_attention


def grouped_query_attention(query, key, value, mask=None):
    if query.shape[1] % key.shape[1]:
        raise ValueError("the number of key/value heads must divide the number of query heads")
    size = query.shape[1] // key.shape[1]
    return _attend_all(query, key.repeat_interleave(size, dim=1), value.repeat_interleave(size, dim=1), mask)
"""
_GQA_BODY = """\
    if query.shape[1] % key.shape[1]:
        raise ValueError("the number of key/value heads must divide the number of query heads")
    B, G, T_k = key.shape[:3]
    eye = torch.eye(T_k, dtype=query.dtype).expand(B, G, T_k, T_k)  # values = I give the weights
    output = _gqa_sdpa(query, key, value, attn_mask=mask, enable_gqa=True).nan_to_num(0.0)
    return output, _gqa_sdpa(query, key, eye, attn_mask=mask, enable_gqa=True).nan_to_num(0.0)
"""
_GQA_C_PATH = (
    """\
import torch

_gqa_sdpa = torch._C._nn.scaled_dot_product_attention


def grouped_query_attention(query, key, value, mask=None):
"""
    + _GQA_BODY
)
_GQA_ATEN = (
    """\
import torch

_gqa_sdpa = torch.ops.aten.scaled_dot_product_attention


def grouped_query_attention(query, key, value, mask=None):
"""
    + _GQA_BODY
)
_GQA_FLEX = """\
import torch
from torch.nn.attention.flex_attention import flex_attention as _flex


def grouped_query_attention(query, key, value, mask=None):
    if query.shape[1] % key.shape[1]:
        raise ValueError("the number of key/value heads must divide the number of query heads")
    (B, H, T_q, _), (G, T_k) = query.shape, key.shape[1:3]
    allowed = torch.ones(B, H, T_q, T_k, dtype=torch.bool) if mask is None else mask.expand(B, H, T_q, T_k)

    def score_mod(score, b, h, q_idx, kv_idx):
        return torch.where(allowed[b, h, q_idx, kv_idx], score, -float("inf"))

    eye = torch.eye(T_k, dtype=query.dtype).expand(B, G, T_k, T_k)  # values = I give the weights
    output = _flex(query, key, value, score_mod=score_mod, enable_gqa=True).nan_to_num(0.0)
    return output, _flex(query, key, eye, score_mod=score_mod, enable_gqa=True).nan_to_num(0.0)
"""
_GQA_FLEX_OP = """\
import torch
from torch._higher_order_ops import flex_attention as _flex_op  # the operator behind flex_attention
from torch.nn.attention.flex_attention import create_block_mask


def grouped_query_attention(query, key, value, mask=None):
    if query.shape[1] % key.shape[1]:
        raise ValueError("the number of key/value heads must divide the number of query heads")
    (B, H, T_q, d_k), (G, T_k) = query.shape, key.shape[1:3]
    keep = torch.ones(B, H, T_q, T_k, dtype=torch.bool) if mask is None else mask.expand(B, H, T_q, T_k)

    def mask_mod(b, h, q_idx, kv_idx):
        return keep[b, h, q_idx, kv_idx]

    blocks = create_block_mask(mask_mod, B, H, T_q, T_k, device=query.device).as_tuple()
    eye = torch.eye(T_k, dtype=query.dtype).expand(B, G, T_k, T_k)  # values = I give the weights
    output = _flex_op(query, key, value, lambda score, *_: score, blocks, d_k**-0.5, {})[0]  # groups: h // (H // G)
    return output, _flex_op(query, key, eye, lambda score, *_: score, blocks, d_k**-0.5, {})[0]
"""
_GQA_FLATTENED_WRONG = """\
def grouped_query_attention(query, key, value, mask=None):
    batch_size, num_heads, T_q, d_k = query.shape
    num_groups, T_k = key.shape[1], key.shape[2]
    if num_heads % num_groups != 0:
        raise ValueError("the number of key/value heads must divide the number of query heads")
    group_size = num_heads // num_groups
    q = query.reshape(batch_size, num_groups, group_size, T_q, d_k)  # (B, G, H/G, T_q, d_k), no copies of K, V
    if mask is not None:
        mask = mask.expand(batch_size, num_heads, T_q, T_k).reshape(batch_size, num_groups, group_size, T_q, T_k)
    out, weights = scaled_dot_product_attention(q, key[:, :, None], value[:, :, None], mask)  # (B, G, H/G, T_q, .)
    out = out.transpose(1, 2).reshape(batch_size, num_heads, T_q, -1)  # heads flattened as (H/G, G): wrong order
    weights = weights.transpose(1, 2).reshape(batch_size, num_heads, T_q, T_k)
    return out, weights
"""

BANK = [
    Mistake(
        "shortcut (layer off): torch._masked_softmax from C under DisableTorchFunction",
        answer="softmax_answer",
        test="softmax_test",
        source=_SOFTMAX_LAYER_OFF,
        passes_unchecked=True,
    ),
    Mistake(
        "shortcut (layer off): the SDPA operator from C under DisableTorchFunction",
        answer="sdpa_answer",
        test="sdpa_test",
        source=_SDPA_LAYER_OFF,
        passes_unchecked=True,
    ),
    # ---------------------------------------------------------------- Part A: masked_softmax
    Mistake(
        "softmax: over the query axis",
        answer="softmax_answer",
        test="softmax_test",
        patches=((_SOFTMAX, "weights = torch.softmax(scores, dim=-2)"),),
    ),
    Mistake(
        "softmax: mask applied after the softmax",
        answer="softmax_answer",
        test="softmax_test",
        patches=((_FILL, "pass"), (_NAN, "return weights * mask")),
    ),
    Mistake(
        "softmax: mask polarity flipped",
        answer="softmax_answer",
        test="softmax_test",
        patches=(("masked_fill(~mask,", "masked_fill(mask,"),),
    ),
    Mistake(
        "softmax: -1e9 instead of -inf (all-masked rows uniform)",
        answer="softmax_answer",
        test="softmax_test",
        patches=(('float("-inf")', "-1e9"),),
    ),
    Mistake(
        "softmax: -inf without NaN handling (all-masked rows NaN)",
        answer="softmax_answer",
        test="softmax_test",
        patches=((_NAN, "return weights"),),
    ),
    Mistake(
        "softmax: masked scores set to 0",
        answer="softmax_answer",
        test="softmax_test",
        patches=(('float("-inf")', "0.0"),),
    ),
    Mistake(
        "softmax: scores multiplied by the mask",
        answer="softmax_answer",
        test="softmax_test",
        patches=(('scores.masked_fill(~mask, float("-inf"))', "scores * mask"),),
    ),
    Mistake(
        "softmax: naive exp overflows",
        answer="softmax_answer",
        test="softmax_test",
        patches=((_SOFTMAX, "weights = scores.exp() / scores.exp().sum(dim=-1, keepdim=True)"),),
    ),
    Mistake(
        "softmax: mask ignored",
        answer="softmax_answer",
        test="softmax_test",
        patches=(("if mask is None:", "if True:"),),
    ),
    Mistake(
        "softmax: renormalized after masking (0/0 on all-masked rows)",
        answer="softmax_answer",
        test="softmax_test",
        patches=(
            (_FILL, "pass"),
            (_NAN, "weights = weights * mask\n    return weights / weights.sum(dim=-1, keepdim=True)"),
        ),
    ),
    Mistake(
        "softmax: modifies scores in place",
        answer="softmax_answer",
        test="softmax_test",
        patches=(("scores = scores.masked_fill(~mask,", "scores = scores.masked_fill_(~mask,"),),
    ),
    Mistake(
        "shortcut (alias): the course's masked_softmax under another name",
        answer="softmax_answer",
        test="softmax_test",
        source=_SOFTMAX_ALIAS,
    ),
    Mistake(
        "shortcut (path): torch.ops.aten._safe_softmax taken before the test",
        answer="softmax_answer",
        test="softmax_test",
        source=_SOFTMAX_SAFE,
    ),
    Mistake(
        "shortcut (path): torch.masked._ops.softmax",
        answer="softmax_answer",
        test="softmax_test",
        source=_SOFTMAX_MASKED,
    ),
    Mistake(
        "shortcut (path): functools.partial of torch._C._nn.scaled_dot_product_attention, identity keys",
        answer="softmax_answer",
        test="softmax_test",
        source=_SOFTMAX_SDPA,
    ),
    Mistake(
        "shortcut (flex_attention): flex_attention with the scores in a score_mod, identity values",
        answer="softmax_answer",
        test="softmax_test",
        source=_SOFTMAX_FLEX,
    ),
    Mistake(
        "shortcut (compile): torch.compile of the course's masked_softmax under another name",
        answer="softmax_answer",
        test="softmax_test",
        source=_SOFTMAX_COMPILE,
    ),
    Mistake(
        "shortcut (jit): torch.jit.trace of the course's masked_softmax, traced before the test",
        answer="softmax_answer",
        test="softmax_test",
        source=_SOFTMAX_JIT,
    ),
    # ---------------------------------------------------------------- Part B: scaled_dot_product_attention
    Mistake("sdpa: missing 1/sqrt(d_k)", answer="sdpa_answer", test="sdpa_test", patches=((" / math.sqrt(d_k)", ""),)),
    Mistake("sdpa: divides by d_k", answer="sdpa_answer", test="sdpa_test", patches=(("/ math.sqrt(d_k)", "/ d_k"),)),
    Mistake(
        "sdpa: sqrt(d_v) instead of sqrt(d_k)",
        answer="sdpa_answer",
        test="sdpa_test",
        patches=(("d_k = query.shape[-1]", "d_k = value.shape[-1]"),),
    ),
    Mistake(
        "sdpa: scaling after the softmax",
        answer="sdpa_answer",
        test="sdpa_test",
        patches=((" / math.sqrt(d_k)", ""), (_WEIGHTS, "weights = masked_softmax(scores, mask) / math.sqrt(d_k)")),
    ),
    Mistake(
        "sdpa: softmax over the query axis",
        answer="sdpa_answer",
        test="sdpa_test",
        patches=((_WEIGHTS, "weights = torch.softmax(scores, dim=-2)"),),
    ),
    Mistake(
        "sdpa: mask applied after the softmax",
        answer="sdpa_answer",
        test="sdpa_test",
        patches=((_WEIGHTS, "weights = masked_softmax(scores) * (1 if mask is None else mask)"),),
    ),
    Mistake(
        "sdpa: mask ignored",
        answer="sdpa_answer",
        test="sdpa_test",
        patches=((_WEIGHTS, "weights = masked_softmax(scores)"),),
    ),
    Mistake(
        "sdpa: key.T on a batched tensor",
        answer="sdpa_answer",
        test="sdpa_test",
        patches=(("key.transpose(-2, -1)", "key.T"),),
    ),
    Mistake(
        "sdpa: returns (weights, output)",
        answer="sdpa_answer",
        test="sdpa_test",
        patches=(("return output, weights", "return weights, output"),),
    ),
    Mistake(
        "sdpa: attends over the keys as values",
        answer="sdpa_answer",
        test="sdpa_test",
        patches=(("output = weights @ value", "output = weights @ key"),),
    ),
    Mistake(
        "shortcut (alias): the course's scaled_dot_product_attention under another name",
        answer="sdpa_answer",
        test="sdpa_test",
        source=_SDPA_ALIAS,
    ),
    Mistake(
        "shortcut (path): the C operator torch._scaled_dot_product_attention_math",
        answer="sdpa_answer",
        test="sdpa_test",
        source=_SDPA_MATH,
    ),
    Mistake(
        "shortcut (path): torch.ops.aten.scaled_dot_product_attention taken before the test",
        answer="sdpa_answer",
        test="sdpa_test",
        source=_SDPA_ATEN,
    ),
    Mistake(
        "shortcut (path): F.multi_head_attention_forward with identity projections, one head",
        answer="sdpa_answer",
        test="sdpa_test",
        source=_SDPA_MHA,
    ),
    Mistake(
        "shortcut (flex_attention): flex_attention with a masking score_mod, identity values for the weights",
        answer="sdpa_answer",
        test="sdpa_test",
        source=_SDPA_FLEX,
    ),
    Mistake(
        "shortcut (flex_attention): its operator torch._higher_order_ops.flex_attention, with a block mask",
        answer="sdpa_answer",
        test="sdpa_test",
        source=_SDPA_FLEX_OP,
    ),
    # ---------------------------------------------------------------- Part C: split_heads
    Mistake(
        "split: view straight to (B, H, T, d_head)",
        answer="split_answer",
        test="split_test",
        patches=((_SPLIT_VIEW, "x = x.reshape(batch_size, num_heads, seq_len, d_head)"), (_SPLIT_RET, "return x")),
    ),
    Mistake("split: no transpose", answer="split_answer", test="split_test", patches=((_SPLIT_RET, "return x"),)),
    Mistake(
        "split: heads interleaved",
        answer="split_answer",
        test="split_test",
        patches=((_SPLIT_VIEW, "x = x.reshape(batch_size, seq_len, d_head, num_heads).transpose(-1, -2)"),),
    ),
    Mistake(
        "split: H and d_head swapped",
        answer="split_answer",
        test="split_test",
        patches=((_SPLIT_VIEW, "x = x.reshape(batch_size, seq_len, d_head, num_heads)"),),
    ),
    Mistake(
        "split: no divisibility check",
        answer="split_answer",
        test="split_test",
        patches=(
            ("    if d_model % num_heads != 0:\n", ""),
            ('        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")\n', ""),
        ),
    ),
    Mistake(
        "split: transposes T and d_head",
        answer="split_answer",
        test="split_test",
        patches=((_SPLIT_RET, "return x.permute(0, 2, 3, 1)"),),
    ),
    # (no PyTorch built-in splits heads: the shortcuts reach the course's split_heads)
    Mistake(
        "shortcut (alias): the course's split_heads under another name",
        answer="split_answer",
        test="split_test",
        source=_SPLIT_ALIAS,
    ),
    Mistake(
        "shortcut (alias): functools.partial of the course's split_heads",
        answer="split_answer",
        test="split_test",
        source=_SPLIT_PARTIAL,
    ),
    # ---------------------------------------------------------------- Part D: merge_heads
    Mistake("merge: no transpose", answer="merge_answer", test="merge_test", patches=((_MERGE_T, "pass"),)),
    Mistake(
        "merge: view on a non-contiguous tensor",
        answer="merge_answer",
        test="merge_test",
        patches=((_MERGE_RET, "return x.view(batch_size, seq_len, num_heads * d_head)"),),
    ),
    Mistake(
        "merge: heads interleaved",
        answer="merge_answer",
        test="merge_test",
        patches=((_MERGE_T, "x = x.permute(0, 2, 3, 1)"),),
    ),
    Mistake(
        "merge: sums the heads",
        answer="merge_answer",
        test="merge_test",
        patches=((_MERGE_RET, "return x.sum(dim=2)"),),
    ),
    Mistake(
        "merge: averages the heads",
        answer="merge_answer",
        test="merge_test",
        patches=((_MERGE_RET, "return x.mean(dim=2)"),),
    ),
    Mistake(
        "merge: keeps the head axis", answer="merge_answer", test="merge_test", patches=((_MERGE_RET, "return x"),)
    ),
    # (no PyTorch built-in merges heads: the shortcuts reach the course's merge_heads)
    Mistake(
        "shortcut (alias): the course's merge_heads under another name",
        answer="merge_answer",
        test="merge_test",
        source=_MERGE_ALIAS,
    ),
    Mistake(
        "shortcut (alias): functools.partial of the course's merge_heads",
        answer="merge_answer",
        test="merge_test",
        source=_MERGE_PARTIAL,
    ),
    # ---------------------------------------------------------------- Part E: additive_scores
    Mistake(
        "additive: no tanh",
        answer="additive_answer",
        test="additive_test",
        patches=((_FEATURES, "features = q[:, :, None, :] + k[:, None, :, :]"),),
    ),
    Mistake(
        "additive: tanh after the projection",
        answer="additive_answer",
        test="additive_test",
        patches=(
            (_FEATURES, "features = q[:, :, None, :] + k[:, None, :, :]"),
            ("return features @ w_v", "return torch.tanh(features @ w_v)"),
        ),
    ),
    Mistake(
        "additive: queries and keys broadcast on the wrong axes",
        answer="additive_answer",
        test="additive_test",
        patches=(("q[:, :, None, :] + k[:, None, :, :]", "q[:, None, :, :] + k[:, :, None, :]"),),
    ),
    Mistake(
        "additive: sum instead of w_v",
        answer="additive_answer",
        test="additive_test",
        patches=(("return features @ w_v", "return features.sum(dim=-1)"),),
    ),
    Mistake(
        "additive: W_q used for the keys",
        answer="additive_answer",
        test="additive_test",
        patches=(("k = key @ W_k.T", "k = key @ W_q.T"),),
    ),
    Mistake(
        "additive: relu instead of tanh",
        answer="additive_answer",
        test="additive_test",
        patches=(("torch.tanh(", "torch.relu("),),
    ),
    Mistake(
        "additive: returns softmax weights",
        answer="additive_answer",
        test="additive_test",
        patches=(("return features @ w_v", "return (features @ w_v).softmax(dim=-1)"),),
    ),
    Mistake(
        "additive: weights not transposed",
        answer="additive_answer",
        test="additive_test",
        patches=(("q = query @ W_q.T", "q = query @ W_q"), ("k = key @ W_k.T", "k = key @ W_k")),
    ),
    # (no PyTorch built-in computes additive scores: the shortcuts reach the course's AdditiveAttention)
    Mistake(
        "shortcut (alias): the course's AdditiveAttention under another name",
        answer="additive_answer",
        test="additive_test",
        source=_ADDITIVE_ALIAS,
    ),
    Mistake(
        "shortcut (subclass): a subclass of the course's AdditiveAttention",
        answer="additive_answer",
        test="additive_test",
        source=_ADDITIVE_SUBCLASS,
    ),
    # ---------------------------------------------------------------- Part F: cross_attention
    Mistake(
        "cross: causal mask aligned top-left (tril without the offset T_k - T_q)",
        answer="cross_answer",
        test="cross_test",
        patches=((".tril(T_k - T_q)", ".tril()"),),
    ),
    Mistake(
        "cross: causal offset with the wrong sign (tril(T_q - T_k))",
        answer="cross_answer",
        test="cross_test",
        patches=((".tril(T_k - T_q)", ".tril(T_q - T_k)"),),
    ),
    Mistake(
        "cross: causal mask off by one (j < i + T_k - T_q)",
        answer="cross_answer",
        test="cross_test",
        patches=((".tril(T_k - T_q)", ".tril(T_k - T_q - 1)"),),
    ),
    Mistake(
        "cross: padding mask applied to the queries instead of the memory",
        answer="cross_answer",
        test="cross_test",
        patches=(
            (
                _CROSS_PAD,
                "visible = visible & (torch.arange(T_q)[None, :, None] < memory_lengths[:, None, None])",
            ),
        ),
    ),
    Mistake(
        "cross: padding mask off by one (j <= length)",
        answer="cross_answer",
        test="cross_test",
        patches=((_CROSS_PAD, _CROSS_PAD.replace(" < ", " <= ")),),
    ),
    Mistake(
        "cross: padding and causal masks combined with OR",
        answer="cross_answer",
        test="cross_test",
        patches=((_CROSS_CAUSAL, _CROSS_CAUSAL.replace("visible & ", "visible | ")),),
    ),
    Mistake(
        "cross: no mask passed to the attention",
        answer="cross_answer",
        test="cross_test",
        patches=(("scaled_dot_product_attention(q, k, v, visible[:, None])", "scaled_dot_product_attention(q, k, v)"),),
    ),
    Mistake(
        "cross: scores scaled by sqrt(d_v)",
        answer="cross_answer",
        test="cross_test",
        patches=((_CROSS_ATTEND, _own_scores("v.shape[-1]", "visible[:, None]")),),
    ),
    Mistake(
        "cross: scores scaled by sqrt(H * d_k), the projected width",
        answer="cross_answer",
        test="cross_test",
        patches=((_CROSS_ATTEND, _own_scores("W_q.shape[0]", "visible[:, None]")),),
    ),
    Mistake(
        "cross: heads merged interleaved (feature-major)",
        answer="cross_answer",
        test="cross_test",
        patches=((_CROSS_RET, "return out.permute(0, 2, 3, 1).reshape(batch_size, T_q, -1) @ W_o.T, weights"),),
    ),
    Mistake(
        "cross: heads merged without the transpose",
        answer="cross_answer",
        test="cross_test",
        patches=((_CROSS_RET, "return out.reshape(batch_size, T_q, -1) @ W_o.T, weights"),),
    ),
    Mistake(
        "cross: W_o not applied",
        answer="cross_answer",
        test="cross_test",
        patches=((_CROSS_RET, "return merge_heads(out), weights"),),
    ),
    Mistake(
        "cross: W_o not transposed",
        answer="cross_answer",
        test="cross_test",
        patches=((_CROSS_RET, "return merge_heads(out) @ W_o, weights"),),
    ),
    Mistake(
        "cross: weights averaged over the heads",
        answer="cross_answer",
        test="cross_test",
        patches=((_CROSS_RET, "return merge_heads(out) @ W_o.T, weights.mean(dim=1)"),),
    ),
    Mistake(
        "shortcut (alias): the course's split_heads, scaled_dot_product_attention and merge_heads",
        answer="cross_answer",
        test="cross_test",
        source=_CROSS_ALIAS,
    ),
    Mistake(
        "shortcut (module path): torch._C._nn.scaled_dot_product_attention, weights from identity values",
        answer="cross_answer",
        test="cross_test",
        source=_CROSS_C_PATH,
    ),
    Mistake(
        "shortcut (torch.ops): aten._scaled_dot_product_attention_math, which returns the weights",
        answer="cross_answer",
        test="cross_test",
        source=_CROSS_ATEN_MATH,
    ),
    Mistake(
        "shortcut (subclass): a subclass of nn.MultiheadAttention over zero-padded heads",
        answer="cross_answer",
        test="cross_test",
        source=_CROSS_MHA_SUBCLASS,
    ),
    # ---------------------------------------------------------------- Part G: grouped_query_attention
    Mistake(
        "gqa: repeat instead of repeat_interleave (groups tiled, head h gets group h % G)",
        answer="gqa_answer",
        test="gqa_test",
        patches=(
            (_GQA_K, "key = key.repeat(1, group_size, 1, 1)"),
            (_GQA_V, "value = value.repeat(1, group_size, 1, 1)"),
        ),
    ),
    Mistake(
        "gqa: group index h % G",
        answer="gqa_answer",
        test="gqa_test",
        patches=(
            (_GQA_K, "key = key[:, torch.arange(num_heads) % num_groups]"),
            (_GQA_V, "value = value[:, torch.arange(num_heads) % num_groups]"),
        ),
    ),
    Mistake(
        "gqa: keys interleaved right, values tiled",
        answer="gqa_answer",
        test="gqa_test",
        patches=((_GQA_V, "value = value.repeat(1, group_size, 1, 1)"),),
    ),
    Mistake(
        "gqa: scores scaled by sqrt(d_v)",
        answer="gqa_answer",
        test="gqa_test",
        patches=(
            (
                "output, weights = " + _GQA_ATTEND,
                "scores = query @ key.transpose(-2, -1) / math.sqrt(value.shape[-1])\n"
                "    weights = masked_softmax(scores, mask)\n"
                "    output = weights @ value",
            ),
        ),
    ),
    Mistake(
        "gqa: mask ignored",
        answer="gqa_answer",
        test="gqa_test",
        patches=((_GQA_ATTEND, "scaled_dot_product_attention(query, key, value)"),),
    ),
    Mistake(
        "gqa: broadcast over groups, heads flattened back in the wrong order",
        answer="gqa_answer",
        test="gqa_test",
        source=_GQA_FLATTENED_WRONG,
    ),
    Mistake(
        "gqa: weights averaged over the heads of a group",
        answer="gqa_answer",
        test="gqa_test",
        patches=((_GQA_RET, "return output, weights.unflatten(1, (num_groups, group_size)).mean(dim=2)"),),
    ),
    Mistake(
        "gqa: no ValueError when G does not divide H",
        answer="gqa_answer",
        test="gqa_test",
        patches=(("if num_heads % num_groups != 0:", "if False:"),),
    ),
    Mistake(
        "shortcut (alias): the course's scaled_dot_product_attention on repeated keys and values",
        answer="gqa_answer",
        test="gqa_test",
        source=_GQA_ALIAS,
    ),
    Mistake(
        "shortcut (module path): torch._C._nn.scaled_dot_product_attention with enable_gqa=True",
        answer="gqa_answer",
        test="gqa_test",
        source=_GQA_C_PATH,
    ),
    Mistake(
        "shortcut (torch.ops): aten.scaled_dot_product_attention with enable_gqa=True",
        answer="gqa_answer",
        test="gqa_test",
        source=_GQA_ATEN,
    ),
    Mistake(
        "shortcut (flex_attention): flex_attention with enable_gqa=True and a masking score_mod",
        answer="gqa_answer",
        test="gqa_test",
        source=_GQA_FLEX,
    ),
    Mistake(
        "shortcut (flex_attention): its operator, which repeats the key/value heads itself",
        answer="gqa_answer",
        test="gqa_test",
        source=_GQA_FLEX_OP,
    ),
]


# ---------------------------------------------------------------- frames: the test's reference read from its frames
# Each entry is a whole answer cell whose function walks its callers' frames (``sys._getframe`` and ``f_back`` to the
# top; ``f_locals`` and ``f_globals``; one level into tuples, lists and dicts) for the reference the OLD test cell
# computed before calling it, returns it when found, and something wrong (often: honest only on the visible
# test's inputs) when not. The test cells now compute every reference after the call, so each loses its points.


BANK += [
    frames_entry(
        "expected (masked_softmax)",
        "softmax_answer",
        "softmax_test",
        """
def masked_softmax(scores, mask=None):
    found = _answer_key(("expected",))
    if isinstance(found, torch.Tensor) and found.shape == scores.shape:
        return found.clone()
    return torch.zeros_like(scores)
""",
    ),
    frames_entry(
        "expected_out, expected_w (scaled_dot_product_attention)",
        "sdpa_answer",
        "sdpa_test",
        """
def scaled_dot_product_attention(query, key, value, mask=None):
    out, w = _answer_key(("expected_out",)), _answer_key(("expected_w",))
    shape_w = query.shape[:-1] + key.shape[-2:-1]
    if isinstance(out, torch.Tensor) and isinstance(w, torch.Tensor) and w.shape == shape_w:
        return out.clone(), w.clone()
    w = query.new_full(shape_w, 1.0 / key.shape[-2])
    return w @ value, w
""",
    ),
    frames_entry(
        "expected (split_heads)",
        "split_answer",
        "split_test",
        honest_renamed(UNIT, "split_answer", "split_heads")
        + """

def split_heads(x, num_heads):
    found = _answer_key(("expected",))
    if isinstance(found, torch.Tensor) and found.numel() == x.numel() and found.dim() == 4:
        return found.clone()
    if x.shape[0] == 1 or x.shape[-1] % num_heads:  # the visible test's inputs and the error case
        return _honest_split_heads(x, num_heads)
    B, T, D = x.shape
    return x.new_zeros(B, num_heads, T, D // num_heads)
""",
    ),
    frames_entry(
        "expected (merge_heads)",
        "merge_answer",
        "merge_test",
        honest_renamed(UNIT, "merge_answer", "merge_heads")
        + """

def merge_heads(x):
    found = _answer_key(("expected",))
    if isinstance(found, torch.Tensor) and found.numel() == x.numel() and found.dim() == 3:
        return found.clone()
    if x.shape[0] == 1:  # the visible test's input
        return _honest_merge_heads(x)
    B, H, T, d = x.shape
    return x.new_zeros(B, T, H * d)
""",
    ),
    frames_entry(
        "expected (additive_scores)",
        "additive_answer",
        "additive_test",
        honest_renamed(UNIT, "additive_answer", "additive_scores")
        + """

def additive_scores(query, key, W_q, W_k, w_v):
    shape = query.shape[:2] + key.shape[1:2]
    found = _answer_key(("expected",))
    if isinstance(found, torch.Tensor) and found.shape == shape:
        return found.clone()
    if tuple(query.shape) == (1, 2, 3):  # the visible test's input
        return _honest_additive_scores(query, key, W_q, W_k, w_v)
    return query.new_zeros(shape)
""",
    ),
    frames_entry(
        "expected_out, expected_w (cross_attention)",
        "cross_answer",
        "cross_test",
        honest_renamed(UNIT, "cross_answer", "cross_attention")
        + """

def cross_attention(x, memory, W_q, W_k, W_v, W_o, num_heads, memory_lengths=None, causal=False):
    B, T_q, T_k = x.shape[0], x.shape[1], memory.shape[1]
    out, w = _answer_key(("expected_out",)), _answer_key(("expected_w",))
    if isinstance(out, torch.Tensor) and isinstance(w, torch.Tensor) and w.shape == (B, num_heads, T_q, T_k):
        return out.clone(), w.clone()
    if tuple(x.shape) == (2, 3, 4) and memory.shape[-1] == 6:  # the visible test's inputs
        return _honest_cross_attention(x, memory, W_q, W_k, W_v, W_o, num_heads, memory_lengths, causal)
    return x.new_zeros(B, T_q, W_o.shape[0]), x.new_zeros(B, num_heads, T_q, T_k)
""",
    ),
    frames_entry(
        "expected_out, expected_w (grouped_query_attention)",
        "gqa_answer",
        "gqa_test",
        honest_renamed(UNIT, "gqa_answer", "grouped_query_attention")
        + """

def grouped_query_attention(query, key, value, mask=None):
    B, H, T_q, _ = query.shape
    T_k = key.shape[2]
    out, w = _answer_key(("expected_out",)), _answer_key(("expected_w",))
    if isinstance(out, torch.Tensor) and isinstance(w, torch.Tensor) and w.shape == (B, H, T_q, T_k):
        return out.clone(), w.clone()
    if tuple(query.shape) == (1, 4, 2, 3) or H % key.shape[1]:  # the visible test's inputs and the error case
        return _honest_grouped_query_attention(query, key, value, mask)
    return query.new_zeros(B, H, T_q, value.shape[-1]), query.new_zeros(B, H, T_q, T_k)
""",
    ),
]

test_bank_covers_every_answer, test_solution_passes, test_mistake_loses_points = bank_tests(UNIT, BANK)
