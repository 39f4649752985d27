"""Mistake bank of unit 07: plausible wrong answers, each of which must lose its cell's points."""

from notebook_cells import FRAMES_READER, Mistake, bank_tests

UNIT = "07_transformers"

POS = dict(answer="positions_answer", test="positions_test")
CAUSAL = dict(answer="causal_answer", test="causal_test")
ENC = dict(answer="encoder_answer", test="encoder_test")
BEAM = dict(answer="beam_answer", test="beam_test")

# Shortcuts: whole answer cells that reach a blocked function instead of building the part. Each is
# correct (it would earn the points without the call guard) and must fail by ForbiddenCall.
_POS_ALIAS = """\
import course_utils.transformer as T

_f = T.sinusoidal_positions


def sinusoidal_positions(seq_len, d_model):
    return _f(seq_len, d_model)
"""
_POS_MODULE = """\
from course_utils.transformer import SinusoidalPositionalEncoding as _Encoding


def sinusoidal_positions(seq_len, d_model):
    return _Encoding(d_model, max_len=seq_len).P.clone()  # the module's buffer is the table
"""
_POS_ROPE = """\
import torch
from course_utils.gpt import rope_tables


def sinusoidal_positions(seq_len, d_model):
    cos, sin = rope_tables(seq_len, d_model)  # (T, D): the angles of the pairs, repeated for both halves
    P = torch.empty(seq_len, d_model)
    P[:, 0::2] = sin[:, : d_model // 2]
    P[:, 1::2] = cos[:, : d_model // 2]
    return P
"""
_CAUSAL_ALIAS = """\
import course_utils.attention as A

_attend, _causal = A.scaled_dot_product_attention, A.causal_mask


def causal_attention(q, k, v):
    return _attend(q, k, v, _causal(q.shape[-2], device=q.device))
"""
_CAUSAL_MATH = """\
import torch


def causal_attention(q, k, v):
    output, weights = torch._scaled_dot_product_attention_math(q, k, v, is_causal=True)
    return output, weights
"""
_CAUSAL_PARTIAL = """\
import functools

import torch
import torch.nn.functional as F

_causal_sdpa = functools.partial(F.scaled_dot_product_attention, is_causal=True)


def causal_attention(q, k, v):
    T = q.shape[-2]
    eye = torch.eye(T, dtype=q.dtype).expand(*k.shape[:-1], T)  # values = I give the weights
    return _causal_sdpa(q, k, v), _causal_sdpa(q, k, eye)
"""
_CAUSAL_MASK = """\
import math

from course_utils.attention import causal_mask


def causal_attention(q, k, v):
    mask = causal_mask(q.shape[-2], device=q.device)  # (T, T) True = may attend
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T, T)
    weights = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    return weights @ v, weights
"""
_CAUSAL_TORCH_MASK = """\
import math

import torch.nn as nn


def causal_attention(q, k, v):
    future = nn.Transformer.generate_square_subsequent_mask(q.shape[-2], dtype=q.dtype)  # (T, T) -inf above
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + future  # (..., T, T)
    weights = scores.softmax(dim=-1)
    return weights @ v, weights
"""
_CAUSAL_FLEX = """\
import torch
from torch.nn.attention.flex_attention import flex_attention


def causal_attention(q, k, v):
    batch, (T, d_k), d_v = q.shape[:-2], q.shape[-2:], v.shape[-1]
    q4, k4, v4 = q.reshape(-1, 1, T, d_k), k.reshape(-1, 1, T, d_k), v.reshape(-1, 1, T, d_v)  # flex wants 4-D

    def causal(score, b, h, q_idx, kv_idx):
        return torch.where(kv_idx <= q_idx, score, -float("inf"))

    eye = torch.eye(T, dtype=q.dtype).expand(q4.shape[0], 1, T, T)  # values = I give the weights
    output = flex_attention(q4, k4, v4, score_mod=causal).reshape(*batch, T, d_v)
    weights = flex_attention(q4, k4, eye, score_mod=causal).reshape(*batch, T, T)
    return output, weights
"""
_CAUSAL_FLEX_OP = """\
import torch
from torch._higher_order_ops import flex_attention as _flex_op  # the operator behind flex_attention
from torch.nn.attention.flex_attention import create_block_mask


def causal_attention(q, k, v):
    batch, (T, d_k), d_v = q.shape[:-2], q.shape[-2:], v.shape[-1]
    q4, k4, v4 = q.reshape(-1, 1, T, d_k), k.reshape(-1, 1, T, d_k), v.reshape(-1, 1, T, d_v)

    def causal(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx

    blocks = create_block_mask(causal, None, None, T, T, device=q.device).as_tuple()
    eye = torch.eye(T, dtype=q.dtype).expand(q4.shape[0], 1, T, T)  # values = I give the weights
    output = _flex_op(q4, k4, v4, lambda score, *_: score, blocks, d_k**-0.5, {})[0]
    weights = _flex_op(q4, k4, eye, lambda score, *_: score, blocks, d_k**-0.5, {})[0]
    return output.reshape(*batch, T, d_v), weights.reshape(*batch, T, T)
"""
_ENC_INIT = """\
    def __init__(self, d_model, num_heads, d_ff):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
"""
_ENC_ALIAS = (
    """\
import course_utils.transformer as T

_Layer = T.EncoderLayer


class EncoderLayer(nn.Module):
"""
    + _ENC_INIT
    + """
    def forward(self, x, mask=None):
        layer = _Layer(self.linear1.in_features, self.self_attn.num_heads, self.linear1.out_features, norm_first=True)
        layer.self_attn, layer.norm1, layer.norm2 = self.self_attn, self.norm1, self.norm2
        layer.ffn.linear1, layer.ffn.linear2 = self.linear1, self.linear2
        return layer(x, mask)
"""
)
_ENC_SUBCLASS = """\
from course_utils.transformer import EncoderLayer as _Layer


class EncoderLayer(_Layer):
    def __init__(self, d_model, num_heads, d_ff):
        super().__init__(d_model, num_heads, d_ff, norm_first=True)
        self.linear1, self.linear2 = self.ffn.linear1, self.ffn.linear2  # the same modules under the graded names
"""
_ENC_TORCH = (
    """\
import torch
from torch.nn.modules.transformer import TransformerEncoderLayer as _TorchLayer


class EncoderLayer(nn.Module):
"""
    + _ENC_INIT
    + """
    def forward(self, x, mask=None):
        a = self.self_attn
        layer = _TorchLayer(a.d_model, a.num_heads, self.linear1.out_features, dropout=0.0, batch_first=True,
                            norm_first=True).to(x.dtype)
        with torch.no_grad():
            layer.self_attn.in_proj_weight.copy_(torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]))
            layer.self_attn.in_proj_bias.copy_(torch.cat([a.q_proj.bias, a.k_proj.bias, a.v_proj.bias]))
            layer.self_attn.out_proj.load_state_dict(a.out_proj.state_dict())
            for name in ("linear1", "linear2", "norm1", "norm2"):
                getattr(layer, name).load_state_dict(getattr(self, name).state_dict())
        padding = None if mask is None else ~mask.reshape(mask.shape[0], -1)  # (B, T) True = pad
        return layer(x, src_key_padding_mask=padding)
"""
)
_ENC_FUSED = (
    """\
import torch

_fused = torch.ops.aten._transformer_encoder_layer_fwd


class EncoderLayer(nn.Module):
"""
    + _ENC_INIT
    + """
    def forward(self, x, mask=None):
        a = self.self_attn
        qkv_weight = torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight])
        qkv_bias = torch.cat([a.q_proj.bias, a.k_proj.bias, a.v_proj.bias])
        padding = None if mask is None else ~mask.reshape(mask.shape[0], -1)  # (B, T) True = pad
        return _fused(x, a.d_model, a.num_heads, qkv_weight, qkv_bias, a.out_proj.weight, a.out_proj.bias, False,
                      True, 1e-5, self.norm1.weight, self.norm1.bias, self.norm2.weight, self.norm2.bias,
                      self.linear1.weight, self.linear1.bias, self.linear2.weight, self.linear2.bias,
                      padding, None if padding is None else 1)
"""
)
_BEAM_ALIAS = """\
import course_utils.decoding as D

_f = D.beam_search


def beam_search(log_prob_fn, beam_size, max_len, bos_id, eos_id, length_penalty=0.0):
    best = _f(log_prob_fn, beam_size, max_len, bos_id, eos_id, length_penalty)[0]  # sorted best first
    return best.tokens, best.score
"""
_BEAM_PARTIAL = """\
import functools

import course_utils.decoding

_search = functools.partial(course_utils.decoding.beam_search)


def beam_search(log_prob_fn, beam_size, max_len, bos_id, eos_id, length_penalty=0.0):
    tokens, _, score = _search(log_prob_fn, beam_size, max_len, bos_id, eos_id, length_penalty=length_penalty)[0]
    return tokens, score
"""

BANK = [
    # ---------------------------------------------------------------- Part A: sinusoidal_positions
    Mistake("positions: base 100 instead of 10000", **POS, patches=(("position / 10000 **", "position / 100 **"),)),
    Mistake(
        "positions: sin and cos swapped",
        **POS,
        patches=(
            ("P[:, 0::2] = torch.sin(angle)", "P[:, 0::2] = torch.cos(angle)"),
            ("P[:, 1::2] = torch.cos(angle)", "P[:, 1::2] = torch.sin(angle)"),
        ),
    ),
    Mistake(
        "positions: sines then cosines, not interleaved",
        **POS,
        patches=(
            (
                "P[:, 0::2] = torch.sin(angle)\n    P[:, 1::2] = torch.cos(angle)",
                "P = torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)",
            ),
        ),
    ),
    Mistake(
        "positions: exponent j/D instead of 2j/D",
        **POS,
        patches=(
            (
                "two_j = torch.arange(0, d_model, 2, dtype=torch.float64)",
                "two_j = torch.arange(d_model // 2, dtype=torch.float64)",
            ),
        ),
    ),
    Mistake(
        "positions: exponent 2i/D with i the feature index",
        **POS,
        patches=(
            (
                "two_j = torch.arange(0, d_model, 2, dtype=torch.float64)",
                "two_j = 2 * torch.arange(0, d_model, 2, dtype=torch.float64)",
            ),
        ),
    ),
    Mistake(
        "positions: positions start at 1",
        **POS,
        patches=(("torch.arange(seq_len, dtype=torch.float64)", "torch.arange(1, seq_len + 1, dtype=torch.float64)"),),
    ),
    Mistake(
        "positions: multiplies by the frequency denominator",
        **POS,
        patches=(("position / 10000 **", "position * 10000 **"),),
    ),
    Mistake("positions: transposed (D, T)", **POS, patches=(("return P.float()", "return P.float().T"),)),
    Mistake("positions: returns float64", **POS, patches=(("return P.float()", "return P"),)),
    # (no PyTorch built-in makes the table: the shortcuts reach the course's position tables)
    Mistake("shortcut (alias): the course's sinusoidal_positions under another name", **POS, source=_POS_ALIAS),
    Mistake("shortcut (alias): the buffer of the course's SinusoidalPositionalEncoding", **POS, source=_POS_MODULE),
    Mistake("shortcut (library helper): the rotary tables course_utils.gpt.rope_tables", **POS, source=_POS_ROPE),
    # ---------------------------------------------------------------- Part B: causal_attention
    Mistake("causal: triu instead of tril (attends to the future)", **CAUSAL, patches=((".tril()", ".triu()"),)),
    Mistake("causal: diagonal excluded", **CAUSAL, patches=((".tril()", ".tril(-1)"),)),
    Mistake(
        "causal: masked scores set to 0 instead of -inf",
        **CAUSAL,
        patches=(('scores.masked_fill(~mask, float("-inf"))', "scores.masked_fill(~mask, 0.0)"),),
    ),
    Mistake(
        "causal: mask applied after the softmax",
        **CAUSAL,
        patches=(
            ('    scores = scores.masked_fill(~mask, float("-inf"))\n', ""),
            ("weights = scores.softmax(dim=-1)", "weights = scores.softmax(dim=-1).masked_fill(~mask, 0.0)"),
        ),
    ),
    Mistake(
        "causal: mask inverted (True = blocked)",
        **CAUSAL,
        patches=(("scores.masked_fill(~mask,", "scores.masked_fill(mask,"),),
    ),
    Mistake("causal: no 1/sqrt(d_k)", **CAUSAL, patches=((" / math.sqrt(q.shape[-1])", ""),)),
    Mistake(
        "causal: softmax over the queries", **CAUSAL, patches=(("scores.softmax(dim=-1)", "scores.softmax(dim=-2)"),)
    ),
    Mistake(
        "shortcut (alias): the course's scaled_dot_product_attention and causal_mask", **CAUSAL, source=_CAUSAL_ALIAS
    ),
    Mistake("shortcut (path): the C operator torch._scaled_dot_product_attention_math", **CAUSAL, source=_CAUSAL_MATH),
    Mistake(
        "shortcut (path): functools.partial of F.scaled_dot_product_attention(is_causal=True)",
        **CAUSAL,
        source=_CAUSAL_PARTIAL,
    ),
    Mistake("shortcut (library helper): the course's causal_mask", **CAUSAL, source=_CAUSAL_MASK),
    Mistake(
        "shortcut (library helper): nn.Transformer.generate_square_subsequent_mask", **CAUSAL, source=_CAUSAL_TORCH_MASK
    ),
    Mistake("shortcut (flex_attention): flex_attention with a causal score_mod", **CAUSAL, source=_CAUSAL_FLEX),
    Mistake(
        "shortcut (flex_attention): its operator torch._higher_order_ops.flex_attention, causal block mask",
        **CAUSAL,
        source=_CAUSAL_FLEX_OP,
    ),
    # ---------------------------------------------------------------- Part C: EncoderLayer
    Mistake(
        "encoder: Post-LN (norm after the residual)",
        **ENC,
        patches=(
            (
                "h = self.norm1(x)                                 # (B, T, D)\n"
                "        x = x + self.self_attn(h, h, h, mask)[0]          # residual around attention\n"
                "        z = F.relu(self.linear1(self.norm2(x)))           # (B, T, d_ff)\n"
                "        x = x + self.linear2(z)                           # residual around the MLP\n",
                "x = self.norm1(x + self.self_attn(x, x, x, mask)[0])\n"
                "        x = self.norm2(x + self.linear2(F.relu(self.linear1(x))))\n",
            ),
        ),
    ),
    Mistake(
        "encoder: no residual around attention",
        **ENC,
        patches=(("x = x + self.self_attn(h, h, h, mask)[0]", "x = self.self_attn(h, h, h, mask)[0]"),),
    ),
    Mistake(
        "encoder: no residual around the MLP", **ENC, patches=(("x = x + self.linear2(z)", "x = self.linear2(z)"),)
    ),
    Mistake(
        "encoder: residual taken from the normalized input",
        **ENC,
        patches=(("x = x + self.self_attn(h, h, h, mask)[0]", "x = h + self.self_attn(h, h, h, mask)[0]"),),
    ),
    Mistake(
        "encoder: norm1 used for both sublayers",
        **ENC,
        patches=(("self.linear1(self.norm2(x))", "self.linear1(self.norm1(x))"),),
    ),
    Mistake(
        "encoder: no ReLU in the MLP",
        **ENC,
        patches=(("z = F.relu(self.linear1(self.norm2(x)))", "z = self.linear1(self.norm2(x))"),),
    ),
    Mistake(
        "encoder: GELU instead of ReLU", **ENC, patches=(("z = F.relu(self.linear1(", "z = F.gelu(self.linear1("),)
    ),
    Mistake(
        "encoder: mask not passed to attention",
        **ENC,
        patches=(("self.self_attn(h, h, h, mask)", "self.self_attn(h, h, h)"),),
    ),
    Mistake(
        "encoder: MLP normalized output without residual input",
        **ENC,
        patches=(("x = x + self.linear2(z)", "x = self.norm2(x) + self.linear2(z)"),),
    ),
    Mistake("shortcut (alias): the course's EncoderLayer under another name", **ENC, source=_ENC_ALIAS),
    Mistake("shortcut (subclass): a subclass of the course's EncoderLayer", **ENC, source=_ENC_SUBCLASS),
    Mistake("shortcut (path): torch.nn.modules.transformer.TransformerEncoderLayer", **ENC, source=_ENC_TORCH),
    Mistake("shortcut (path): the C operator torch.ops.aten._transformer_encoder_layer_fwd", **ENC, source=_ENC_FUSED),
    # ---------------------------------------------------------------- Part D: beam_search
    Mistake(
        "beam: sums probabilities instead of log-probs", **BEAM, patches=(("lp + token_lp", "lp + math.exp(token_lp)"),)
    ),
    Mistake(
        "beam: multiplies log-probs",
        **BEAM,
        patches=(("alive = [([bos_id], 0.0)]", "alive = [([bos_id], 1.0)]"), ("lp + token_lp", "lp * -token_lp")),
    ),
    Mistake(
        "beam: <eos> does not finish a hypothesis",
        **BEAM,
        patches=(("if tokens[-1] == eos_id or step == max_len:", "if step == max_len:"),),
    ),
    Mistake(
        "beam: finished hypotheses dropped unless they reach max_len",
        **BEAM,
        patches=(
            ("finished.append((tokens[1:], lp))", "finished.append((tokens[1:], lp)) if step == max_len else None"),
        ),
    ),
    Mistake(
        "beam: no length normalization",
        **BEAM,
        patches=(("return hypothesis[1] / len(hypothesis[0]) ** length_penalty", "return hypothesis[1]"),),
    ),
    Mistake(
        "beam: length counts <bos>",
        **BEAM,
        patches=(("/ len(hypothesis[0]) ** length_penalty", "/ (len(hypothesis[0]) + 1) ** length_penalty"),),
    ),
    Mistake(
        "beam: one step too few",
        **BEAM,
        patches=(("for step in range(1, max_len + 1):", "for step in range(1, max_len):"),),
    ),
    Mistake(
        "beam: returns <bos> in the tokens",
        **BEAM,
        patches=(("finished.append((tokens[1:], lp))", "finished.append((tokens, lp))"),),
    ),
    Mistake(
        "beam: keeps the worst extensions",
        **BEAM,
        patches=(("candidates.sort(key=lambda c: c[1], reverse=True)", "candidates.sort(key=lambda c: c[1])"),),
    ),
    Mistake(
        "beam: best finished by log-prob, normalized score returned",
        **BEAM,
        patches=(("best = max(finished, key=score)", "best = max(finished, key=lambda h: h[1])"),),
    ),
    Mistake("beam: beam_size ignored (greedy)", **BEAM, patches=(("candidates[:beam_size]", "candidates[:1]"),)),
    # (no PyTorch built-in does beam search: the shortcuts reach the course's beam_search)
    Mistake("shortcut (alias): the course's beam_search under another name", **BEAM, source=_BEAM_ALIAS),
    Mistake("shortcut (alias): functools.partial of the course's beam_search", **BEAM, source=_BEAM_PARTIAL),
]

# Frame reads: a whole answer cell whose code walks its callers' frames (sys._getframe(1) and f_back to the
# top; f_locals and f_globals; one level into tuples, lists and dicts) for the test's own reference, by the
# names the earlier test cells used and by shape, returns it, and falls back to something wrong. They earned
# the points where a test computed its reference before the call; the test cells now compute it after.
_POS_FRAMES = (
    FRAMES_READER
    + """
def sinusoidal_positions(seq_len, d_model):
    found = _answer_key(("_expected", "_reference", "_want"), shape=(seq_len, d_model))
    return found.float().clone() if found is not None else torch.zeros(seq_len, d_model)
"""
)
_CAUSAL_FRAMES = (
    FRAMES_READER
    + """
def causal_attention(q, k, v):
    T = q.shape[-2]
    output = _answer_key(("_ref_out", "_reference"), shape=(*q.shape[:-1], v.shape[-1]))
    weights = _answer_key(("_ref_w",), shape=(*q.shape[:-1], T))
    if weights is None:  # causal rows that sum to 1, whatever the scores
        weights = torch.ones(T, T, dtype=q.dtype).tril()
        weights = (weights / weights.sum(-1, keepdim=True)).expand(*q.shape[:-1], T)
    if output is None:
        output = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    return output.clone(), weights.clone()
"""
)
_ENC_FRAMES = (
    FRAMES_READER
    + "\n\nclass EncoderLayer(nn.Module):\n"
    + _ENC_INIT
    + """
    def forward(self, x, mask=None):
        found = _answer_key(("_expected",), shape=x.shape)
        return found.clone() if found is not None else x + 0.0
"""
)
_BEAM_FRAMES = (
    FRAMES_READER
    + """
def beam_search(log_prob_fn, beam_size, max_len, bos_id, eos_id, length_penalty=0.0):
    found = _answer_key(("_expected", "_want", "_reference"), kind=tuple)
    if found is not None and len(found) == 2:
        return list(found[0]), float(found[1])
    return [eos_id], 0.0
"""
)

BANK += [
    Mistake("frames: the test's _expected table from the callers' frames", **POS, source=_POS_FRAMES),
    Mistake(
        "frames: the test's _reference, _ref_out and _ref_w from the callers' frames", **CAUSAL, source=_CAUSAL_FRAMES
    ),
    Mistake(
        "frames: the test's _expected (nn.TransformerEncoderLayer output) from the callers' frames",
        **ENC,
        source=_ENC_FRAMES,
    ),
    Mistake("frames: the test's expected (tokens, score) from the callers' frames", **BEAM, source=_BEAM_FRAMES),
]

test_bank_covers_every_answer, test_solution_passes, test_mistake_loses_points = bank_tests(UNIT, BANK)
