"""Mistake bank of unit 05: plausible wrong answers, each of which must lose its cell's points."""

from notebook_cells import Mistake, bank_tests

UNIT = "05_attention"

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

BANK = [
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
]

test_bank_covers_every_answer, test_solution_passes, test_mistake_loses_points = bank_tests(UNIT, BANK)
