"""Mistake bank of unit 10 (beyond quadratic attention): each plausible wrong answer must lose the points of its
test cell, run through the very test code nbgrader runs (hidden tests included).

Besides wrong values, some entries compute the right values the wrong way, which the tests watch: attention or
gated linear attention through a (T, T) matrix, a recurrence looped over every step instead of by chunks or by a
log-depth scan, a "cache" that projects every position again at each step. The ``shortcut`` entries are whole
answer cells that reach a blocked function another way (PyTorch's attention by another name or path, its CPU flash
kernel that returns the log-sum-exp, the given reference functions under other names, PyTorch's experimental
associative scan, torch.compile and TorchScript copies, the course library's delta-rule functions). Those that
reach PyTorch's attention or its scan would earn full marks without the call guard (checked once with the guard
switched off), and so would the library's DeltaNet, its parallel form run chunk by chunk with a carried state (its
probe steps read what each chunk adds to the state) or its own chunkwise form; those that reach a given
step-by-step reference would also fail the tests' checks of how the work is done. Each must lose its points to the
guard first, with ``ForbiddenCall``.

The entries marked ``passes_unchecked`` compute the right values by another method than the part teaches: strips of
queries against every earlier key with a plain softmax, a cache of keys and values that still runs every query and
MLP on the whole prefix, gated linear attention with no state carried from chunk to chunk, WKV in its parallel form
or by a softmax over the whole past at every step, the scan as one dense block-triangular system, and DeltaNet
stepped through, with each chunk's triangular system solved row by row, through the lecture's (T, T) system, or
with each chunk's state rebuilt from every earlier step or by running the earlier chunks again. The bank proves
that each earns full marks with the checks switched off and loses them to ``WrongMethod`` or ``ForbiddenCall`` with
them on.

The ``frames`` entries, one per answer cell, run the method and then walk their callers' frames (locals and globals,
one level into containers) for a tensor of the output's shape under a name such as ``expected`` or ``ref``, and
return it, or a wrong answer where none is found. The tests compute every expected value after the student's call
returns, so these find nothing and lose their points."""

from notebook_cells import Mistake, answer_source, bank_tests

UNIT = "10_beyond_attention"

# ---------------------------------------------------------------- lines of the solution that the patches target
TILE_Q = "q_tile = q[..., start : start + block_size, :] * scale  # (B, H, Bq, d_k)"
TILE_MASK = 's = s.masked_fill(cols[None, :] > rows[:, None], float("-inf"))  # causal: key j <= query i'
TILE_P = "p = torch.exp(s - m_new[..., None])  # (B, H, Bq, Bk)"
TILE_ALPHA = "alpha = torch.exp(m - m_new)  # (B, H, Bq): rescales what was summed under the old maximum"
TILE_L = "l = alpha * l + p.sum(dim=-1)"
TILE_ACC = "acc = alpha[..., None] * acc + p @ v_tile  # (B, H, Bq, d_v)"
TILE_OUT = "outs.append(acc / l[..., None])  # (B, H, Bq, d_v)"
TILE_LSE = "lses.append(m + torch.log(l))  # (B, H, Bq)"
TILE_KEYS = "for k_start in range(0, start + q_tile.shape[-2], block_size):  # key tiles up to the diagonal"

CACHE_X = "x = model.tok(tokens[:, pos : pos + 1]) + model.pos.weight[pos]  # (B, 1, D)"
CACHE_CAT = "k, v = torch.cat(keys, dim=2), torch.cat(values, dim=2)  # (B, H, pos + 1, d_head)"
CACHE_ATTEND = "attended = F.scaled_dot_product_attention(q, k, v)  # (B, H, 1, d_head): one query sees all"
CACHE_LAYERS = "cache = [([], []) for _ in model.blocks]  # per layer: the keys and the values, each (B, H, 1, d_head)"
CACHE_ZIP = "for block, (keys, values) in zip(model.blocks, cache):"
CACHE_MLP = "x = x + block.mlp(block.norm2(x))"
CACHE_LOGITS = "next_token = model.head(model.norm(x))[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)"
CACHE_RET = "    return tokens\n"

GLA_INTER = "inter = (q_c * cum.exp()) @ state  # (B, H, C, d_v): what the carried state gives, decayed to t"
GLA_DIFF = "diff = cum[:, :, :, None, :] - cum[:, :, None, :, :]  # (B, H, C, C, d_k): G_t - G_s"
GLA_CAUSAL = "causal = torch.ones(size, size, dtype=torch.bool, device=q.device).tril()  # (C, C): s <= t"
GLA_DECAY = 'decay = diff.masked_fill(~causal[:, :, None], float("-inf")).exp()  # (B, H, C, C, d_k), 0 for s > t'
GLA_CUM = "cum = log_decay[:, :, chunk].cumsum(dim=2)  # (B, H, C, d_k): log decay from the chunk's start to t"
GLA_CARRIED = "carried = last.transpose(-2, -1).exp() * state  # (B, H, d_k, d_v)"
GLA_STATE = "state = carried + (k_c * (last - cum).exp()).transpose(-2, -1) @ v_c  # (B, H, d_k, d_v)"
GLA_RANGE = "for start in range(0, seq_len, chunk_size):"

WKV_SHIFT_OUT = "shift = torch.maximum(top, u + k_t)  # (B, C): the output's exponents are measured from here"
WKV_OUT_EXP = "past, now = torch.exp(top - shift), torch.exp(u + k_t - shift)"
WKV_SHIFT_STATE = "shift = torch.maximum(top - w, k_t)  # the state's new top: decay the past, add k_t without u"
WKV_STATE_EXP = "past, now = torch.exp(top - w - shift), torch.exp(k_t - shift)"
WKV_IF = "if state is None:"

SCAN_A = "A_pair = A_second @ A_first  # (B, T // 2, n, n): step 2i, then step 2i + 1"
SCAN_B = "b_pair = (A_second @ b_first[..., None])[..., 0] + b_second  # (B, T // 2, n)"
SCAN_BEFORE = "h_before = h_odd[:, : (seq_len - 1) // 2]  # (B, (T - 1) // 2, n): h_1, h_3, ... before steps 2, 4, ..."
SCAN_REST = "h_rest = (A[:, 2::2] @ h_before[..., None])[..., 0] + b[:, 2::2]  # (B, (T - 1) // 2, n)"
SCAN_EVEN = "h[:, 0::2] = torch.cat([b[:, :1], h_rest], dim=1)  # h_0 = b_0, then the even steps"

DELTA_SIZE = "size = k_c.shape[2]"
DELTA_SYSTEM = "system = (beta_c * (k_c @ k_c.transpose(-2, -1))).tril(-1)  # (B, H, C, C): beta_s k_s . k_j for j < s"
DELTA_EYE = "system = system + torch.eye(size, dtype=q.dtype, device=q.device)  # A, unit lower triangular"
DELTA_SOLVE = (
    "solved = torch.linalg.solve_triangular(system, rhs, upper=False, unitriangular=True)  # (B, H, C, d_k + d_v)"
)
DELTA_RHS = "rhs = beta_c * torch.cat([k_c, v_c], dim=-1)  # (B, H, C, d_k + d_v): diag(beta) [K, V]"
DELTA_U = "u = u_tilde - w @ state  # (B, H, C, d_v): the pseudo-values, relative to the carried state"
DELTA_SCORES = "scores = (q_c @ k_c.transpose(-2, -1)).tril()  # (B, H, C, C): q_t . k_s for s <= t"
DELTA_OUT = "outs.append(q_c @ state + scores @ u)  # (B, H, C, d_v)"
DELTA_STATE = "state = state + k_c.transpose(-2, -1) @ u  # (B, H, d_k, d_v): handed to the next chunk"
DELTA_RANGE = "for start in range(0, seq_len, chunk_size):"

# ---------------------------------------------------------------- whole answer cells
_TILED_FULL = """\
import math

import torch


def tiled_causal_attention(q, k, v, block_size=64):
    seq_len = q.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T, T): the matrix the part avoids
    causal = torch.ones(seq_len, seq_len, dtype=torch.bool, device=q.device).tril()
    scores = scores.masked_fill(~causal, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)  # (B, H, T)
    return torch.exp(scores - lse[..., None]) @ v, lse
"""
_TILED_KEYS_ONLY = """\
import math

import torch


def tiled_causal_attention(q, k, v, block_size=64):
    seq_len = q.shape[-2]
    qs = q / math.sqrt(q.shape[-1])
    m = q.new_full(q.shape[:-1], float("-inf"))
    l = q.new_zeros(q.shape[:-1])
    acc = q.new_zeros(*q.shape[:-1], v.shape[-1])
    rows = torch.arange(seq_len)
    for k_start in range(0, seq_len, block_size):  # key tiles only, queries all at once: "no rescaling needed"
        s = qs @ k[..., k_start : k_start + block_size, :].transpose(-2, -1)  # (B, H, T, Bk)
        cols = torch.arange(k_start, k_start + s.shape[-1])
        s = s.masked_fill(cols[None, :] > rows[:, None], float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1))
        p = torch.exp(s - m_new[..., None]).nan_to_num(0.0)
        l = l + p.sum(dim=-1)  # the sum under the old maximum is not rescaled
        acc = acc + p @ v[..., k_start : k_start + block_size, :]
        m = m_new
    return acc / l[..., None], m + torch.log(l)
"""
_TILED_ONLINE_LOOP = """
def _online(q, k, v, block_size):  # a correct online softmax over key tiles, queries all at once
    seq_len = q.shape[-2]
    qs = q / math.sqrt(q.shape[-1])
    m = q.new_full(q.shape[:-1], float("-inf"))
    l = q.new_zeros(q.shape[:-1])
    acc = q.new_zeros(*q.shape[:-1], v.shape[-1])
    rows = torch.arange(seq_len)
    for k_start in range(0, seq_len, block_size):
        s = qs @ k[..., k_start : k_start + block_size, :].transpose(-2, -1)  # (B, H, T, Bk)
        cols = torch.arange(k_start, k_start + s.shape[-1])
        s = s.masked_fill(cols[None, :] > rows[:, None], float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1))
        p = torch.exp(s - m_new[..., None])
        alpha = torch.exp(m - m_new)
        l, acc, m = alpha * l + p.sum(dim=-1), alpha[..., None] * acc + p @ v[..., k_start : k_start + block_size, :], m_new
    return acc / l[..., None], m + torch.log(l)
"""
# Shortcuts of Part A: the output from PyTorch's attention, the log-sum-exp from an honest online pass (or from
# the CPU flash kernel, which returns it).
_TILED_ALIAS = (
    """\
import math

import torch
import torch.nn.functional as F

_attend = F.scaled_dot_product_attention
"""
    + _TILED_ONLINE_LOOP
    + """

def tiled_causal_attention(q, k, v, block_size=64):
    return _attend(q, k, v, is_causal=True), _online(q, k, v, block_size)[1]
"""
)
_TILED_C_PATH = (
    """\
import functools
import math

import torch

_attend = functools.partial(torch._C._nn.scaled_dot_product_attention, is_causal=True)
"""
    + _TILED_ONLINE_LOOP
    + """

def tiled_causal_attention(q, k, v, block_size=64):
    return _attend(q, k, v), _online(q, k, v, block_size)[1]
"""
)
_TILED_FLASH = """\
import torch

_flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu  # returns (out, logsumexp)


def tiled_causal_attention(q, k, v, block_size=64):
    if q.shape[-1] != v.shape[-1]:  # the kernel wants d_v = d_k: pad the values with zeros
        width = max(q.shape[-1], v.shape[-1])
        pad = lambda x: torch.nn.functional.pad(x, (0, width - x.shape[-1]))
        out, lse = _flash(pad(q), pad(k), pad(v), is_causal=True, scale=q.shape[-1] ** -0.5)
        return out[..., : v.shape[-1]], lse
    return _flash(q, k, v, is_causal=True)
"""
_TILED_MATH = (
    """\
import math

import torch

_math = torch.ops.aten._scaled_dot_product_attention_math  # (out, weights)
"""
    + _TILED_ONLINE_LOOP
    + """

def tiled_causal_attention(q, k, v, block_size=64):
    return _math(q, k, v, is_causal=True)[0], _online(q, k, v, block_size)[1]
"""
)
_TILED_COMPILE = (
    """\
import math

import torch
import torch.nn.functional as F

torch._dynamo.config.recompile_limit = 64
_attend = torch.compile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), backend="eager")
"""
    + _TILED_ONLINE_LOOP
    + """

def tiled_causal_attention(q, k, v, block_size=64):
    return _attend(q, k, v), _online(q, k, v, block_size)[1]
"""
)
_TILED_JIT = (
    """\
import math

import torch
import torch.nn.functional as F


_example = tuple(torch.randn(1, 2, 10, 4) for _ in range(3))
_attend = torch.jit.trace(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), _example)
"""
    + _TILED_ONLINE_LOOP
    + """

def tiled_causal_attention(q, k, v, block_size=64):
    return _attend(q, k, v), _online(q, k, v, block_size)[1]
"""
)

_CACHE_NONE = """\
import torch


@torch.no_grad()
def cached_greedy_decode(model, prompt, max_new_tokens):
    tokens = prompt
    for _ in range(max_new_tokens):  # "the cache": every block run again on the whole sequence
        x = model.tok(tokens) + model.pos.weight[: tokens.shape[1]]
        for block in model.blocks:
            x = block(x)
        next_token = model.head(model.norm(x))[:, -1].argmax(dim=-1, keepdim=True)
        tokens = torch.cat([tokens, next_token], dim=1)
    return tokens
"""
_CACHE_REPROJECT = """\
import torch
import torch.nn.functional as F


@torch.no_grad()
def cached_greedy_decode(model, prompt, max_new_tokens):
    tokens = prompt
    inputs = [[] for _ in model.blocks]  # per layer: the normalised inputs of every position, (B, 1, D) each
    for pos in range(prompt.shape[1] + max_new_tokens - 1):
        x = model.tok(tokens[:, pos : pos + 1]) + model.pos.weight[pos]
        for block, cached in zip(model.blocks, inputs):
            h = block.norm1(x)
            cached.append(h)
            prefix = torch.cat(cached, dim=1)  # (B, pos + 1, D): keys and values projected again from these
            k, v = block.split(block.W_k(prefix)), block.split(block.W_v(prefix))
            q = block.split(block.W_q(h))
            x = x + block.W_o(block.merge(F.scaled_dot_product_attention(q, k, v)))
            x = x + block.mlp(block.norm2(x))
        if pos >= prompt.shape[1] - 1:
            next_token = model.head(model.norm(x))[:, -1].argmax(dim=-1, keepdim=True)
            tokens = torch.cat([tokens, next_token], dim=1)
    return tokens
"""
_CACHE_LINEAR = """\
import torch
import torch.nn.functional as F


@torch.no_grad()
def cached_greedy_decode(model, prompt, max_new_tokens):
    tokens = prompt
    for _ in range(max_new_tokens):  # everything recomputed, with the projections' weights used directly
        x = model.tok(tokens) + model.pos.weight[: tokens.shape[1]]
        for block in model.blocks:
            h = block.norm1(x)
            q = block.split(h @ block.W_q.weight.T)
            k, v = block.split(h @ block.W_k.weight.T), block.split(h @ block.W_v.weight.T)
            x = x + block.W_o(block.merge(F.scaled_dot_product_attention(q, k, v, is_causal=True)))
            x = x + block.mlp(block.norm2(x))
        next_token = model.head(model.norm(x))[:, -1].argmax(dim=-1, keepdim=True)
        tokens = torch.cat([tokens, next_token], dim=1)
    return tokens
"""
_CACHE_ALIAS = """\
_decode = generate_full  # the given decoder under another name


def cached_greedy_decode(model, prompt, max_new_tokens):
    return _decode(model, prompt, max_new_tokens)
"""
_CACHE_FORWARD = """\
import torch


@torch.no_grad()
def cached_greedy_decode(model, prompt, max_new_tokens):
    tokens, run = prompt, type(model).__call__  # model.forward reached through nn.Module.__call__
    for _ in range(max_new_tokens):
        next_token = run(model, tokens)[:, -1].argmax(dim=-1, keepdim=True)
        tokens = torch.cat([tokens, next_token], dim=1)
    return tokens
"""
_CACHE_COMPILE = """\
import torch

torch._dynamo.config.recompile_limit = 64
_decode = torch.compile(generate_full, backend="eager")


def cached_greedy_decode(model, prompt, max_new_tokens):
    return _decode(model, prompt, max_new_tokens)
"""

_GLA_RECURRENT = """\
import torch


def gla_chunkwise(q, k, v, log_decay, chunk_size=16):
    batch_size, num_heads, seq_len, d_k = q.shape
    state = q.new_zeros(batch_size, num_heads, d_k, v.shape[-1])
    outs = []
    for t in range(seq_len):  # the recurrence, written out again: one step at a time
        state = log_decay[:, :, t, :, None].exp() * state + k[:, :, t, :, None] * v[:, :, t, None, :]
        outs.append((q[:, :, t, :, None] * state).sum(dim=-2))
    return torch.stack(outs, dim=2), state
"""
_GLA_PARALLEL = """\
import torch


def gla_chunkwise(q, k, v, log_decay, chunk_size=16):
    seq_len = q.shape[2]
    cum = log_decay.cumsum(dim=2)  # (B, H, T, d_k)
    diff = cum[:, :, :, None, :] - cum[:, :, None, :, :]  # (B, H, T, T, d_k): the whole parallel form at once
    causal = torch.ones(seq_len, seq_len, dtype=torch.bool).tril()
    decay = diff.masked_fill(~causal[:, :, None], float("-inf")).exp()
    scores = (q[:, :, :, None, :] * k[:, :, None, :, :] * decay).sum(dim=-1)  # (B, H, T, T)
    last = cum[:, :, -1:]
    state = (k * (last - cum).exp()).transpose(-2, -1) @ v
    return scores @ v, state
"""
_GLA_STEPS_IN_CHUNK = """\
import torch


def gla_chunkwise(q, k, v, log_decay, chunk_size=16):
    batch_size, num_heads, seq_len, d_k = q.shape
    state = q.new_zeros(batch_size, num_heads, d_k, v.shape[-1])
    outs = []
    for start in range(0, seq_len, chunk_size):  # chunks, but each chunk stepped through token by token
        for t in range(start, min(start + chunk_size, seq_len)):
            state = log_decay[:, :, t, :, None].exp() * state + k[:, :, t, :, None] * v[:, :, t, None, :]
            outs.append((q[:, :, t, :, None] * state).sum(dim=-2))
    return torch.stack(outs, dim=2), state
"""
_GLA_ALIAS = """\
_reference = gla_recurrent  # the given recurrence under another name


def gla_chunkwise(q, k, v, log_decay, chunk_size=16):
    return _reference(q, k, v, log_decay)
"""
_GLA_GLOBALS = """\
def gla_chunkwise(q, k, v, log_decay, chunk_size=16):
    return globals()["gla_recurrent"](q, k, v, log_decay)  # reached through the notebook's namespace
"""
_GLA_COMPILE = """\
import torch

torch._dynamo.config.recompile_limit = 64
_compiled = torch.compile(gla_recurrent, backend="eager")


def gla_chunkwise(q, k, v, log_decay, chunk_size=16):
    return _compiled(q, k, v, log_decay)
"""

_WKV_SHIFTED = """\
import torch

_naive = wkv_naive  # the given formula under another name


def wkv_stable(w, u, k, v, state=None):
    top = k.amax(dim=1)  # (B, C): shifting every key by the same number cancels in the ratio
    out = _naive(w.double(), u.double(), (k - top[:, None]).double(), v.double()).to(k.dtype)
    distance = torch.arange(k.shape[1] - 1, -1, -1, dtype=k.dtype)
    exponents = -distance[None, :, None] * w + k - top[:, None]
    den = exponents.exp().sum(dim=1)
    return out, ((exponents.exp() * v).sum(dim=1), den, top)
"""
_WKV_COMPILE = """\
import torch

torch._dynamo.config.recompile_limit = 64
_compiled = torch.compile(wkv_naive, backend="eager")


def wkv_stable(w, u, k, v, state=None):
    top = k.amax(dim=1)
    out = _compiled(w, u, k - top[:, None], v)
    distance = torch.arange(k.shape[1] - 1, -1, -1, dtype=k.dtype)
    exponents = -distance[None, :, None] * w + k - top[:, None]
    return out, ((exponents.exp() * v).sum(dim=1), exponents.exp().sum(dim=1), top)
"""

_SCAN_LOOP = """\
import torch


def affine_scan(A, b):
    h = torch.zeros_like(b[:, 0])
    hs = []
    for t in range(b.shape[1]):  # the recurrence, one step at a time
        h = (A[:, t] @ h[..., None])[..., 0] + b[:, t]
        hs.append(h)
    return torch.stack(hs, dim=1)
"""
_SCAN_BLOCKS = """\
import math

import torch


def affine_scan(A, b):
    seq_len = b.shape[1]
    size = max(1, math.isqrt(seq_len))  # sqrt(T) blocks: fewer steps, but still O(sqrt T), not O(log T)
    h = torch.zeros_like(b[:, 0])
    hs = []
    for start in range(0, seq_len, size):
        for t in range(start, min(start + size, seq_len)):
            h = (A[:, t] @ h[..., None])[..., 0] + b[:, t]
            hs.append(h)
    return torch.stack(hs, dim=1)
"""
_SCAN_HILLIS_ORDER = """\
import torch


def affine_scan(A, b):
    seq_len = b.shape[1]
    A, h = A.clone(), b.clone()
    shift = 1
    while shift < seq_len:  # Hillis and Steele's doubling, with the earlier matrix on the left
        A_new, h_new = A.clone(), h.clone()
        A_new[:, shift:] = A[:, :-shift] @ A[:, shift:]
        h_new[:, shift:] = (A[:, shift:] @ h[:, :-shift, :, None])[..., 0] + h[:, shift:]
        A, h = A_new, h_new
        shift *= 2
    return h
"""
_SCAN_ALIAS = """\
_reference = scan_sequential  # the given recurrence under another name


def affine_scan(A, b):
    return _reference(A, b)
"""
_SCAN_TORCH = """\
from torch._higher_order_ops.associative_scan import associative_scan as _scan


def _combine(earlier, later):
    (A1, b1), (A2, b2) = earlier, later
    return A2 @ A1, (A2 @ b1[..., None])[..., 0] + b2


def affine_scan(A, b):
    return _scan(_combine, (A, b), dim=1, combine_mode="generic")[1]
"""
_SCAN_COMPILE = """\
import torch

torch._dynamo.config.recompile_limit = 64
_compiled = torch.compile(scan_sequential, backend="eager")


def affine_scan(A, b):
    return _compiled(A, b)
"""


_TILED_LIBRARY = """\
from course_utils.fast_attention import tiled_attention as _tiled  # the library's own answer


def tiled_causal_attention(q, k, v, block_size=64):
    return _tiled(q, k, v, causal=True, block_size=block_size, return_lse=True)
"""
_WKV_LIBRARY = """\
import course_utils.rwkv as _rwkv  # the library's own answer, by module path


def wkv_stable(w, u, k, v, state=None):
    return _rwkv.wkv_stable(w, u, k, v, state)
"""
_WKV_LIBRARY_PARALLEL = """\
from course_utils.rwkv import wkv_final_state, wkv_parallel  # GPT mode without overflow, and its final state


def wkv_stable(w, u, k, v, state=None):
    return wkv_parallel(w, u, k, v), wkv_final_state(w, k, v)
"""
_SCAN_LIBRARY = """\
from course_utils import ssm as _ssm


def affine_scan(A, b):  # the library's scan is for scalars per channel: a loop over it would still be blocked
    h = b.new_zeros(b.shape)
    for i in range(b.shape[-1]):
        h[..., i] = _ssm.associative_scan(A[..., i, i], b[..., i], dim=1)
    return h
"""


# ---------------------------------------------------------------- right values by another method (passes_unchecked)
_TILED_STRIPS = """\
import math

import torch


def tiled_causal_attention(q, k, v, block_size=64):
    seq_len = q.shape[-2]
    outs, lses = [], []
    for start in range(0, seq_len, block_size):  # a strip of queries against every key up to its last query
        stop = min(start + block_size, seq_len)
        s = q[..., start:stop, :] @ k[..., :stop, :].transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Bq, stop)
        later = torch.arange(stop)[None, :] > torch.arange(start, stop)[:, None]
        s = s.masked_fill(later, float("-inf"))
        lse = torch.logsumexp(s, dim=-1)  # (B, H, Bq): an ordinary softmax over the whole strip
        outs.append(torch.exp(s - lse[..., None]) @ v[..., :stop, :])
        lses.append(lse)
    return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)
"""
_TILED_NARROW_STRIPS = """\
import math

import torch

_HEIGHT = 4  # strips four queries high whatever block_size says: small enough for a memory limit of a few times q


def tiled_causal_attention(q, k, v, block_size=64):
    seq_len = q.shape[-2]
    outs, lses = [], []
    for start in range(0, seq_len, _HEIGHT):
        stop = min(start + _HEIGHT, seq_len)
        s = q[..., start:stop, :] @ k[..., :stop, :].transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, 4, stop)
        later = torch.arange(stop)[None, :] > torch.arange(start, stop)[:, None]
        s = s.masked_fill(later, float("-inf"))
        lse = torch.logsumexp(s, dim=-1)  # (B, H, 4)
        outs.append(torch.exp(s - lse[..., None]) @ v[..., :stop, :])
        lses.append(lse)
    return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)
"""
_CACHE_KV_ONLY = """\
import torch
import torch.nn.functional as F


@torch.no_grad()
def cached_greedy_decode(model, prompt, max_new_tokens):
    tokens = prompt
    cache = [([], []) for _ in model.blocks]  # the keys and values are cached: each position projected once
    for pos in range(prompt.shape[1] + max_new_tokens - 1):
        x = model.tok(tokens[:, : pos + 1]) + model.pos.weight[: pos + 1]  # (B, pos + 1, D): the whole prefix
        for block, (keys, values) in zip(model.blocks, cache):
            h = block.norm1(x)
            keys.append(block.split(block.W_k(h[:, -1:])))  # the new position's key and value only
            values.append(block.split(block.W_v(h[:, -1:])))
            q = block.split(block.W_q(h))  # but every query, W_o and the MLP run on the whole prefix again
            k, v = torch.cat(keys, dim=2), torch.cat(values, dim=2)
            x = x + block.W_o(block.merge(F.scaled_dot_product_attention(q, k, v, is_causal=True)))
            x = x + block.mlp(block.norm2(x))
        if pos >= prompt.shape[1] - 1:
            next_token = model.head(model.norm(x))[:, -1].argmax(dim=-1, keepdim=True)
            tokens = torch.cat([tokens, next_token], dim=1)
    return tokens
"""
_GLA_QUERY_BLOCKS = """\
import torch


def gla_chunkwise(q, k, v, log_decay, chunk_size=16):
    dtype = q.dtype
    q, k, v, log_decay = q.double(), k.double(), v.double(), log_decay.double()
    seq_len = q.shape[2]
    G = log_decay.cumsum(dim=2)  # (B, H, T, d_k)
    outs = []
    for start in range(0, seq_len, chunk_size):  # the parallel form, a block of queries against every earlier key
        stop = min(start + chunk_size, seq_len)
        diff = G[:, :, start:stop, None, :] - G[:, :, None, :stop, :]  # (B, H, C, stop, d_k)
        later = torch.arange(stop)[None, :] > torch.arange(start, stop)[:, None]
        decay = diff.masked_fill(later[:, :, None], float("-inf")).exp()
        scores = (q[:, :, start:stop, None, :] * k[:, :, None, :stop, :] * decay).sum(dim=-1)  # (B, H, C, stop)
        outs.append(scores @ v[:, :, :stop])
    final = (k * (G[:, :, -1:] - G).exp()).transpose(-2, -1) @ v  # the final state in closed form, no state carried
    return torch.cat(outs, dim=2).to(dtype), final.to(dtype)
"""
_GLA_CHUNK_PAIRS = """\
import torch


def gla_chunkwise(q, k, v, log_decay, chunk_size=16):
    dtype = q.dtype
    q, k, v, log_decay = q.double(), k.double(), v.double(), log_decay.double()
    seq_len = q.shape[2]
    G = log_decay.cumsum(dim=2)  # (B, H, T, d_k)
    outs, final = [], 0
    for start in range(0, seq_len, chunk_size):  # every (query chunk, key chunk) pair, computed anew
        stop = min(start + chunk_size, seq_len)
        out = 0
        for k_start in range(0, stop, chunk_size):
            k_stop = min(k_start + chunk_size, seq_len)
            diff = G[:, :, start:stop, None, :] - G[:, :, None, k_start:k_stop, :]  # (B, H, C, C, d_k)
            later = torch.arange(k_start, k_stop)[None, :] > torch.arange(start, stop)[:, None]
            decay = diff.masked_fill(later[:, :, None], float("-inf")).exp()
            scores = (q[:, :, start:stop, None, :] * k[:, :, None, k_start:k_stop, :] * decay).sum(dim=-1)
            out = out + scores @ v[:, :, k_start:k_stop]
        outs.append(out)
        part = slice(start, stop)  # the final state in closed form, chunk by chunk
        final = final + (k[:, :, part] * (G[:, :, -1:] - G[:, :, part]).exp()).transpose(-2, -1) @ v[:, :, part]
    return torch.cat(outs, dim=2).to(dtype), final.to(dtype)
"""
_GLA_STATE_REBUILT = """\
import torch


def _state_before(k, v, G, start):
    base = G[:, :, start - 1 : start] if start > 0 else torch.zeros_like(G[:, :, :1])  # G just before step start
    return (k[:, :, :start] * (base - G[:, :, :start]).exp()).transpose(-2, -1) @ v[:, :, :start]  # every key


def gla_chunkwise(q, k, v, log_decay, chunk_size=16):
    dtype = q.dtype
    q, k, v, log_decay = q.double(), k.double(), v.double(), log_decay.double()
    seq_len = q.shape[2]
    G = log_decay.cumsum(dim=2)  # (B, H, T, d_k)
    outs = []
    for start in range(0, seq_len, chunk_size):  # the chunkwise form, but each chunk's state is rebuilt
        stop = min(start + chunk_size, seq_len)
        state = _state_before(k, v, G, start)
        cum = G[:, :, start:stop] - (G[:, :, start - 1 : start] if start > 0 else 0)  # (B, H, C, d_k)
        inter = (q[:, :, start:stop] * cum.exp()) @ state
        diff = cum[:, :, :, None, :] - cum[:, :, None, :, :]
        causal = torch.ones(stop - start, stop - start, dtype=torch.bool).tril()
        decay = diff.masked_fill(~causal[:, :, None], float("-inf")).exp()
        scores = (q[:, :, start:stop, None, :] * k[:, :, None, start:stop, :] * decay).sum(dim=-1)
        outs.append(inter + scores @ v[:, :, start:stop])
    return torch.cat(outs, dim=2).to(dtype), _state_before(k, v, G, seq_len).to(dtype)
"""
_WKV_PARALLEL_FORM = """\
import torch


def wkv_stable(w, u, k, v, state=None):
    seq_len = k.shape[1]
    steps = torch.arange(seq_len, dtype=k.dtype)
    gap = steps[:, None] - 1 - steps[None, :]  # (T, T): t - 1 - i, how far token i lies behind step t
    exponents = (-gap[None, :, :, None] * w + k[:, None]).masked_fill((gap < 0)[None, :, :, None], float("-inf"))
    values = v[:, None].expand(-1, seq_len, -1, -1)  # (B, T, T, C): every (t, i) pair at once
    exponents = torch.cat([exponents, (u + k)[:, :, None]], dim=2)  # the token itself, with its bonus
    values = torch.cat([values, v[:, :, None]], dim=2)
    final, final_values = k - (seq_len - 1 - steps)[None, :, None] * w, v  # after the last token, no bonus
    if state is not None:  # the given past as one more term, decayed to each step
        num, den, top = state
        past = top + torch.log(den)  # (B, C)
        exponents = torch.cat([exponents, (past[:, None] - steps[None, :, None] * w)[:, :, None]], dim=2)
        values = torch.cat([values, (num / den)[:, None, None].expand(-1, seq_len, -1, -1)], dim=2)
        final = torch.cat([final, (past - seq_len * w)[:, None]], dim=1)
        final_values = torch.cat([final_values, (num / den)[:, None]], dim=1)
    out = (torch.softmax(exponents, dim=2) * values).sum(dim=2)  # (B, T, C)
    top = final.amax(dim=1)  # (B, C)
    weights = torch.exp(final - top[:, None])
    return out, ((weights * final_values).sum(dim=1), weights.sum(dim=1), top)
"""
_WKV_WHOLE_PAST = """\
import torch


def wkv_stable(w, u, k, v, state=None):
    seq_len = k.shape[1]
    outs = []
    for t in range(seq_len + 1):  # at every step, a softmax over the whole past (t = T: the final state's sums)
        gap = (t - 1 - torch.arange(t)).to(k.dtype)  # (t,): t - 1 - i
        exponents, values = [k[:, :t] - gap[:, None] * w], [v[:, :t]]
        if state is not None:
            num, den, top = state
            exponents.append((top + torch.log(den) - t * w)[:, None])
            values.append((num / den)[:, None])
        if t < seq_len:
            weights = torch.softmax(torch.cat([*exponents, (u + k[:, t])[:, None]], dim=1), dim=1)
            outs.append((weights * torch.cat([*values, v[:, t, None]], dim=1)).sum(dim=1))
    final = torch.cat(exponents, dim=1)  # (B, T (+ 1), C)
    top = final.amax(dim=1)
    weights = torch.exp(final - top[:, None])
    return torch.stack(outs, dim=1), ((weights * torch.cat(values, dim=1)).sum(dim=1), weights.sum(dim=1), top)
"""
_SCAN_DENSE_SYSTEM = """\
import torch


def _system(A):  # (I - the subdiagonal blocks A_1 .. A_{T-1}): the whole recurrence as one (B, T n, T n) matrix
    batch_size, seq_len, n, _ = A.shape
    M = torch.zeros(batch_size, seq_len, n, seq_len, n, dtype=A.dtype)
    steps = torch.arange(seq_len)
    M[:, steps, :, steps, :] = torch.eye(n, dtype=A.dtype)
    M[:, steps[1:], :, steps[:-1], :] = -A[:, 1:].transpose(0, 1)
    return M.reshape(batch_size, seq_len * n, seq_len * n)


def affine_scan(A, b):
    batch_size, seq_len, n = b.shape
    h = torch.linalg.solve_triangular(_system(A), b.reshape(batch_size, seq_len * n, 1), upper=False)
    return h.reshape(batch_size, seq_len, n)
"""
_SCAN_DENSE_LU = """\
import torch


def affine_scan(A, b):
    batch_size, seq_len, n = b.shape
    size = seq_len * n
    M = torch.zeros(batch_size, seq_len, n, seq_len, n, dtype=b.dtype)  # (I - subdiagonal blocks), dense
    steps = torch.arange(seq_len)
    M[:, steps, :, steps, :] = torch.eye(n, dtype=b.dtype)
    M[:, steps[1:], :, steps[:-1], :] = -A[:, 1:].transpose(0, 1)
    M = M.reshape(batch_size, size, size)  # unit lower triangular: already its own LU factors, no pivoting
    pivots = torch.arange(1, size + 1, dtype=torch.int32).expand(batch_size, size)
    return torch.linalg.lu_solve(M, pivots, b.reshape(batch_size, size, 1)).reshape(batch_size, seq_len, n)
"""

_DELTA_RECURRENT = """\
import torch


def deltanet_chunkwise(q, k, v, beta, chunk_size=16):
    batch_size, num_heads, seq_len, d_k = q.shape
    state = q.new_zeros(batch_size, num_heads, d_k, v.shape[-1])
    outs = []
    for t in range(seq_len):  # the delta rule written out again: one step at a time, chunk_size unused
        k_t = k[:, :, t]  # (B, H, d_k)
        recalled = (k_t[..., None, :] @ state)[..., 0, :]  # (B, H, d_v)
        state = state + beta[:, :, t, None, None] * k_t[..., :, None] * (v[:, :, t] - recalled)[..., None, :]
        outs.append((q[:, :, t, None, :] @ state)[..., 0, :])
    return torch.stack(outs, dim=2)
"""
_DELTA_ROWS = """\
import torch


def deltanet_chunkwise(q, k, v, beta, chunk_size=16):
    batch_size, num_heads, seq_len, d_k = q.shape
    state = q.new_zeros(batch_size, num_heads, d_k, v.shape[-1])
    outs = []
    for start in range(0, seq_len, chunk_size):
        stop = min(start + chunk_size, seq_len)
        q_c, k_c, v_c = q[:, :, start:stop], k[:, :, start:stop], v[:, :, start:stop]
        b_c = beta[:, :, start:stop, None]  # (B, H, C, 1)
        gram = k_c @ k_c.transpose(-2, -1)  # (B, H, C, C)
        rhs = b_c * (v_c - k_c @ state)  # (B, H, C, d_v)
        u = torch.zeros_like(rhs)
        for s in range(stop - start):  # forward substitution: the system solved one row (one step) at a time
            u[:, :, s] = rhs[:, :, s] - b_c[:, :, s] * (gram[:, :, s, None, :s] @ u[:, :, :s])[:, :, 0]
        outs.append(q_c @ state + (q_c @ k_c.transpose(-2, -1)).tril() @ u)
        state = state + k_c.transpose(-2, -1) @ u
    return torch.cat(outs, dim=2)
"""
_DELTA_PARALLEL = """\
import torch


def deltanet_chunkwise(q, k, v, beta, chunk_size=16):
    seq_len = q.shape[2]
    system = (beta[..., None] * (k @ k.transpose(-2, -1))).tril(-1)  # (B, H, T, T): the whole sequence at once
    system = system + torch.eye(seq_len, dtype=q.dtype)
    u = torch.linalg.solve_triangular(system, beta[..., None] * v, upper=False, unitriangular=True)
    return (q @ k.transpose(-2, -1)).tril() @ u
"""
_DELTA_STATE_REBUILT = """\
import torch


def deltanet_chunkwise(q, k, v, beta, chunk_size=16):
    batch_size, num_heads, seq_len, d_k = q.shape
    pseudo, outs = [], []
    for start in range(0, seq_len, chunk_size):
        stop = min(start + chunk_size, seq_len)
        q_c, k_c, v_c = q[:, :, start:stop], k[:, :, start:stop], v[:, :, start:stop]
        b_c = beta[:, :, start:stop, None]
        if pseudo:  # the state rebuilt from every earlier key and pseudo-value: S = sum_s k_s u_s^T
            state = k[:, :, :start].transpose(-2, -1) @ torch.cat(pseudo, dim=2)
        else:
            state = q.new_zeros(batch_size, num_heads, d_k, v.shape[-1])
        system = (b_c * (k_c @ k_c.transpose(-2, -1))).tril(-1) + torch.eye(stop - start, dtype=q.dtype)
        u = torch.linalg.solve_triangular(system, b_c * (v_c - k_c @ state), upper=False, unitriangular=True)
        outs.append(q_c @ state + (q_c @ k_c.transpose(-2, -1)).tril() @ u)
        pseudo.append(u)
    return torch.cat(outs, dim=2)
"""
_DELTA_RERUN = """\
import torch


def _chunk(q_c, k_c, v_c, b_c, state):
    system = (b_c * (k_c @ k_c.transpose(-2, -1))).tril(-1) + torch.eye(k_c.shape[2], dtype=q_c.dtype)
    u = torch.linalg.solve_triangular(system, b_c * (v_c - k_c @ state), upper=False, unitriangular=True)
    return q_c @ state + (q_c @ k_c.transpose(-2, -1)).tril() @ u, state + k_c.transpose(-2, -1) @ u


def deltanet_chunkwise(q, k, v, beta, chunk_size=16):
    batch_size, num_heads, seq_len, d_k = q.shape
    outs = []
    for start in range(0, seq_len, chunk_size):
        state = q.new_zeros(batch_size, num_heads, d_k, v.shape[-1])
        for before in range(0, start, chunk_size):  # every earlier chunk run again to rebuild the state
            part = slice(before, before + chunk_size)
            _, state = _chunk(q[:, :, part], k[:, :, part], v[:, :, part], beta[:, :, part, None], state)
        part = slice(start, start + chunk_size)
        out, _ = _chunk(q[:, :, part], k[:, :, part], v[:, :, part], beta[:, :, part, None], state)
        outs.append(out)
    return torch.cat(outs, dim=2)
"""
_DELTA_ALIAS = """\
_reference = deltanet_recurrent  # the given recurrence under another name


def deltanet_chunkwise(q, k, v, beta, chunk_size=16):
    return _reference(q, k, v, beta)
"""
_DELTA_GLOBALS = """\
def deltanet_chunkwise(q, k, v, beta, chunk_size=16):
    return globals()["deltanet_recurrent"](q, k, v, beta)  # reached through the notebook's namespace
"""
_DELTA_COMPILE = """\
import torch

torch._dynamo.config.recompile_limit = 64
_compiled = torch.compile(deltanet_recurrent, backend="eager")


def deltanet_chunkwise(q, k, v, beta, chunk_size=16):
    return _compiled(q, k, v, beta)
"""
# The library's parallel form on each chunk, given the values less what the carried state recalls, and d_k probe
# steps with beta = 0 (nothing written) whose queries are the unit vectors: their outputs are the rows of K^T U,
# what the chunk adds to the state. Chunk by chunk with a carried state, so it passes every check of the method.
_DELTA_LIBRARY_PARALLEL = """\
import torch

from course_utils import linear_attention as _la

_parallel = _la.deltanet_parallel  # taken before the test, under another name


def deltanet_chunkwise(q, k, v, beta, chunk_size=16):
    batch_size, num_heads, seq_len, d_k = q.shape
    state = q.new_zeros(batch_size, num_heads, d_k, v.shape[-1])
    probes = torch.eye(d_k, dtype=q.dtype).expand(batch_size, num_heads, d_k, d_k)
    outs = []
    for start in range(0, seq_len, chunk_size):
        q_c, k_c, v_c = q[:, :, start : start + chunk_size], k[:, :, start : start + chunk_size], v[:, :, start : start + chunk_size]
        size = q_c.shape[2]
        res = _parallel(
            torch.cat([q_c, probes], dim=2),
            torch.cat([k_c, probes], dim=2),
            torch.cat([v_c - k_c @ state, v_c.new_zeros(batch_size, num_heads, d_k, v.shape[-1])], dim=2),
            torch.cat([beta[:, :, start : start + chunk_size], beta.new_zeros(batch_size, num_heads, d_k)], dim=2),
        )  # (B, H, C + d_k, d_v)
        outs.append(q_c @ state + res[:, :, :size])
        state = state + res[:, :, size:]
    return torch.cat(outs, dim=2)
"""
_DELTA_LIBRARY_PATH = """\
import importlib

_module = importlib.import_module("course_utils.linear_attention")


def deltanet_chunkwise(q, k, v, beta, chunk_size=16):
    return getattr(_module, "decay_recurrence")(q, k, v, beta=beta)[0]  # the library's recurrence, by module path
"""
_DELTA_LIBRARY_CHUNKWISE = """\
from course_utils.linear_attention import deltanet_chunkwise as _library


def deltanet_chunkwise(q, k, v, beta, chunk_size=16):
    return _library(q, k, v, beta, chunk_size=chunk_size)
"""

# ---------------------------------------------------------------- frame reads: the expected value from the callers
_HELD = '''
import sys as _sys

import torch as _torch

_EXPECTED_NAMES = ("expect", "ref", "want", "target", "log_den", "average")


def _held(shape):
    """A tensor of this shape that a caller holds under the name of an expected value, or None: every frame from
    the caller up to the top, its locals and its globals, one level into tuples, lists and dicts."""
    frame = _sys._getframe(1)
    while frame is not None:
        for scope in (frame.f_locals, frame.f_globals):
            for name, value in list(scope.items()):
                if not any(part in name.lower() for part in _EXPECTED_NAMES):
                    continue
                if isinstance(value, dict):
                    items = list(value.values())
                elif isinstance(value, (tuple, list)):
                    items = list(value)
                else:
                    items = [value]
                for item in items:
                    if isinstance(item, _torch.Tensor) and tuple(item.shape) == tuple(shape):
                        return item.detach().clone()
        frame = frame.f_back
    return None
'''


def _frames(answer, function, wrapper):
    """The solution's answer cell with its function renamed _by_method, the frame reader, and ``wrapper``: the
    method runs (so every check of the work passes) and only the value returned comes from the callers' frames."""
    source = answer_source(UNIT, answer)
    assert source.count(f"def {function}(") == 1, f"{answer}: def {function}( not found once"
    return source.replace(f"{function}(", "_by_method(") + _HELD + wrapper  # recursive calls renamed too


_TILED_FRAMES = _frames(
    "tiled_answer",
    "tiled_causal_attention",
    """

def tiled_causal_attention(q, k, v, block_size=64):
    out, lse = _by_method(q, k, v, block_size)
    held = _held(out.shape)
    return (out + 1 if held is None else held.to(out.dtype)), lse  # out + 1: wrong where nothing is held
""",
)
_CACHE_FRAMES = _frames(
    "cache_answer",
    "cached_greedy_decode",
    """

def cached_greedy_decode(model, prompt, max_new_tokens):
    tokens = _by_method(model, prompt, max_new_tokens)
    held = _held(tokens.shape)
    if held is not None:
        return held.to(tokens.dtype)
    wrong = tokens.clone()
    wrong[:, -1] = (wrong[:, -1] + 1) % model.head.out_features  # a wrong last token where nothing is held
    return wrong
""",
)
_GLA_FRAMES = _frames(
    "gla_answer",
    "gla_chunkwise",
    """

def gla_chunkwise(q, k, v, log_decay, chunk_size=16):
    out, state = _by_method(q, k, v, log_decay, chunk_size)
    held = _held(out.shape)
    return (out + 1 if held is None else held.to(out.dtype)), state
""",
)
_WKV_FRAMES = _frames(
    "wkv_answer",
    "wkv_stable",
    """

def wkv_stable(w, u, k, v, state=None):
    out, new_state = _by_method(w, u, k, v, state)
    held = _held(out.shape)
    return (out + 1 if held is None else held.to(out.dtype)), new_state
""",
)
_SCAN_FRAMES = _frames(
    "scan_answer",
    "affine_scan",
    """

def affine_scan(A, b):
    h = _by_method(A, b)
    held = _held(h.shape)
    return h + 1 if held is None else held.to(h.dtype)
""",
)

_DELTA_FRAMES = _frames(
    "delta_answer",
    "deltanet_chunkwise",
    """

def deltanet_chunkwise(q, k, v, beta, chunk_size=16):
    out = _by_method(q, k, v, beta, chunk_size)
    held = _held(out.shape)
    return out + 1 if held is None else held.to(out.dtype)
""",
)


def _m(name, answer, patches=(), source=None, passes_unchecked=False):
    test = answer.replace("_answer", "_test")
    return Mistake(name, answer=answer, test=test, patches=patches, source=source, passes_unchecked=passes_unchecked)


BANK = [
    # ---------------------------------------------------------------- Part A: tiled_causal_attention
    _m(
        "tiled: the running sum is not rescaled when the max grows",
        "tiled_answer",
        ((TILE_L, "l = l + p.sum(dim=-1)"),),
    ),
    _m(
        "tiled: the value accumulator is not rescaled when the max grows",
        "tiled_answer",
        ((TILE_ACC, "acc = acc + p @ v_tile  # (B, H, Bq, d_v)"),),
    ),
    _m(
        "tiled: lse of the last key tile only",
        "tiled_answer",
        ((TILE_LSE, "lses.append(m + torch.log(p.sum(dim=-1)))  # (B, H, Bq)"),),
    ),
    _m(
        "tiled: lse without the running max (log l only)",
        "tiled_answer",
        ((TILE_LSE, "lses.append(torch.log(l))  # (B, H, Bq)"),),
    ),
    _m(
        "tiled: causal mask off by one (the diagonal masked too)",
        "tiled_answer",
        ((TILE_MASK, TILE_MASK.replace("cols[None, :] > rows[:, None]", "cols[None, :] >= rows[:, None]")),),
    ),
    _m(
        "tiled: causal mask off by one (a query sees the next key)",
        "tiled_answer",
        ((TILE_MASK, TILE_MASK.replace("> rows[:, None]", "> rows[:, None] + 1")),),
    ),
    _m("tiled: missing 1/sqrt(d_k)", "tiled_answer", ((TILE_Q, TILE_Q.replace(" * scale", "")),)),
    _m(
        "tiled: no running max subtracted (plain exp, overflows)",
        "tiled_answer",
        (
            (TILE_P, "p = torch.exp(s)  # (B, H, Bq, Bk)"),
            (TILE_ALPHA, "alpha = torch.ones_like(m)"),
            (TILE_LSE, "lses.append(torch.log(l))  # (B, H, Bq)"),
        ),
    ),
    _m(
        "tiled: no final division by the running sum",
        "tiled_answer",
        ((TILE_OUT, "outs.append(acc)  # (B, H, Bq, d_v)"),),
    ),
    _m(
        "tiled: key tiles stop one tile before the diagonal",
        "tiled_answer",
        ((TILE_KEYS, "for k_start in range(0, start, block_size):"),),
    ),
    _m("tiled: the (T, T) score matrix with logsumexp", "tiled_answer", source=_TILED_FULL),
    _m("tiled: key tiles only, sum not rescaled", "tiled_answer", source=_TILED_KEYS_ONLY),
    _m(
        "tiled: strips of block_size queries against every earlier key, a plain softmax by logsumexp",
        "tiled_answer",
        source=_TILED_STRIPS,
        passes_unchecked=True,
    ),
    _m(
        "tiled: strips four queries high against every earlier key (memory within the limit, work per query)",
        "tiled_answer",
        source=_TILED_NARROW_STRIPS,
        passes_unchecked=True,
    ),
    _m("frames: tiled_causal_attention's out read from its callers' frames", "tiled_answer", source=_TILED_FRAMES),
    _m("shortcut (alias): F.scaled_dot_product_attention under another name", "tiled_answer", source=_TILED_ALIAS),
    _m(
        "shortcut (path): functools.partial of torch._C._nn.scaled_dot_product_attention",
        "tiled_answer",
        source=_TILED_C_PATH,
    ),
    _m(
        "shortcut (torch.ops): the CPU flash kernel, which returns the log-sum-exp", "tiled_answer", source=_TILED_FLASH
    ),
    _m("shortcut (torch.ops): aten._scaled_dot_product_attention_math", "tiled_answer", source=_TILED_MATH),
    _m("shortcut (library): course_utils.fast_attention.tiled_attention", "tiled_answer", source=_TILED_LIBRARY),
    _m(
        "shortcut (compile): torch.compile of a lambda around F.scaled_dot_product_attention",
        "tiled_answer",
        source=_TILED_COMPILE,
    ),
    _m(
        "shortcut (jit): torch.jit.trace of F.scaled_dot_product_attention, traced before the test",
        "tiled_answer",
        source=_TILED_JIT,
    ),
    # ---------------------------------------------------------------- Part B: cached_greedy_decode
    _m(
        "cache: the new token gets position 0",
        "cache_answer",
        ((CACHE_X, "x = model.tok(tokens[:, pos : pos + 1]) + model.pos.weight[0]  # (B, 1, D)"),),
    ),
    _m(
        "cache: is_causal=True for the single new query (it sees key 0 only)",
        "cache_answer",
        ((CACHE_ATTEND, "attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)"),),
    ),
    _m(
        "cache: the new query does not see its own key",
        "cache_answer",
        ((CACHE_CAT, "k, v = torch.cat(keys[:-1] or keys, dim=2), torch.cat(values[:-1] or values, dim=2)"),),
    ),
    _m(
        "cache: one cache shared by all layers",
        "cache_answer",
        ((CACHE_LAYERS, "cache = [([], [])] * len(model.blocks)  # one list object for every layer"),),
    ),
    _m(
        "cache: no final LayerNorm before the head",
        "cache_answer",
        ((CACHE_LOGITS, "next_token = model.head(x)[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)"),),
    ),
    _m("cache: the MLP residual is dropped", "cache_answer", ((CACHE_MLP, "x = block.mlp(block.norm2(x))"),)),
    _m(
        "cache: returns only the new tokens",
        "cache_answer",
        ((CACHE_RET, "    return tokens[:, prompt.shape[1] :]\n"),),
    ),
    _m(
        "cache: the last layer only (the loop over blocks breaks early)",
        "cache_answer",
        ((CACHE_ZIP, "for block, (keys, values) in list(zip(model.blocks, cache))[-1:]:"),),
    ),
    _m("cache: no cache, every block run on the whole sequence at every step", "cache_answer", source=_CACHE_NONE),
    _m(
        "cache: keys and values of the whole prefix projected again at every step",
        "cache_answer",
        source=_CACHE_REPROJECT,
    ),
    _m(
        "cache: no cache, keys and values as h @ W.weight.T (not through the counted modules)",
        "cache_answer",
        source=_CACHE_LINEAR,
    ),
    _m(
        "cache: keys and values cached, but the queries, W_o and the MLP run on the whole prefix at every step",
        "cache_answer",
        source=_CACHE_KV_ONLY,
        passes_unchecked=True,
    ),
    _m("frames: cached_greedy_decode's tokens read from its callers' frames", "cache_answer", source=_CACHE_FRAMES),
    _m("shortcut (alias): the given generate_full under another name", "cache_answer", source=_CACHE_ALIAS),
    _m("shortcut (path): model.forward through nn.Module.__call__", "cache_answer", source=_CACHE_FORWARD),
    _m("shortcut (compile): torch.compile of generate_full", "cache_answer", source=_CACHE_COMPILE),
    # ---------------------------------------------------------------- Part C: gla_chunkwise
    _m(
        "gla: the chunk boundary state is not carried (each chunk starts from 0)",
        "gla_answer",
        ((GLA_STATE, "state = 0 * carried  # (B, H, d_k, d_v)"),),
    ),
    _m(
        "gla: the decay is applied after the update (step s's own gate acts on k_s v_s)",
        "gla_answer",
        (
            (GLA_CUM, GLA_CUM + "\n        own = cum - log_decay[:, :, chunk]  # the sum up to s - 1"),
            (GLA_DIFF, "diff = cum[:, :, :, None, :] - own[:, :, None, :, :]  # G_t - G_{s-1}"),
            (GLA_STATE, "state = carried + (k_c * (last - own).exp()).transpose(-2, -1) @ v_c"),
        ),
    ),
    _m(
        "gla: the carried state is not decayed to each step of the chunk",
        "gla_answer",
        ((GLA_INTER, "inter = q_c @ state  # (B, H, C, d_v)"),),
    ),
    _m(
        "gla: the carried state is not decayed across the chunk",
        "gla_answer",
        ((GLA_CARRIED, "carried = state  # (B, H, d_k, d_v)"),),
    ),
    _m(
        "gla: the intra-chunk mask excludes the diagonal",
        "gla_answer",
        ((GLA_CAUSAL, GLA_CAUSAL.replace(".tril()", ".tril(-1)")),),
    ),
    _m(
        "gla: exp(+G) factorisation (overflows for strong gates)",
        "gla_answer",
        ((GLA_DECAY, "decay = (cum.exp()[:, :, :, None, :] * (-cum).exp()[:, :, None, :, :]) * causal[:, :, None]"),),
    ),
    _m(
        "gla: the mask applied after the exp (inf * 0)",
        "gla_answer",
        ((GLA_DECAY, "decay = diff.exp() * causal[:, :, None]  # (B, H, C, C, d_k)"),),
    ),
    _m(
        "gla: the last, shorter chunk is dropped",
        "gla_answer",
        ((GLA_RANGE, "for start in range(0, seq_len - seq_len % chunk_size, chunk_size):"),),
    ),
    _m(
        "gla: the state decayed by the first step of the chunk, not the last",
        "gla_answer",
        ((GLA_CARRIED, "carried = cum[:, :, :1].transpose(-2, -1).exp() * state  # (B, H, d_k, d_v)"),),
    ),
    _m("gla: the recurrence looped over every step", "gla_answer", source=_GLA_RECURRENT),
    _m("gla: the parallel form over the whole sequence", "gla_answer", source=_GLA_PARALLEL),
    _m("gla: chunks, but stepped through token by token", "gla_answer", source=_GLA_STEPS_IN_CHUNK),
    _m(
        "gla: blocks of queries against every earlier key, no state carried, the final state in closed form",
        "gla_answer",
        source=_GLA_QUERY_BLOCKS,
        passes_unchecked=True,
    ),
    _m(
        "gla: every (query chunk, key chunk) pair computed anew, no state carried",
        "gla_answer",
        source=_GLA_CHUNK_PAIRS,
        passes_unchecked=True,
    ),
    _m(
        "gla: each chunk's state rebuilt in closed form from every earlier key",
        "gla_answer",
        source=_GLA_STATE_REBUILT,
        passes_unchecked=True,
    ),
    _m("frames: gla_chunkwise's out read from its callers' frames", "gla_answer", source=_GLA_FRAMES),
    _m("shortcut (alias): the given gla_recurrent under another name", "gla_answer", source=_GLA_ALIAS),
    _m("shortcut (path): gla_recurrent through globals()", "gla_answer", source=_GLA_GLOBALS),
    _m("shortcut (compile): torch.compile of gla_recurrent", "gla_answer", source=_GLA_COMPILE),
    # ---------------------------------------------------------------- Part D: wkv_stable
    _m(
        "wkv: without the bonus u",
        "wkv_answer",
        (
            (WKV_SHIFT_OUT, "shift = torch.maximum(top, k_t)"),
            (WKV_OUT_EXP, "past, now = torch.exp(top - shift), torch.exp(k_t - shift)"),
        ),
    ),
    _m(
        "wkv: the bonus u kept in the state",
        "wkv_answer",
        (
            (WKV_SHIFT_STATE, "shift = torch.maximum(top - w, u + k_t)"),
            (WKV_STATE_EXP, "past, now = torch.exp(top - w - shift), torch.exp(u + k_t - shift)"),
        ),
    ),
    _m(
        "wkv: the decay with the wrong sign",
        "wkv_answer",
        (
            (WKV_SHIFT_STATE, "shift = torch.maximum(top + w, k_t)"),
            (WKV_STATE_EXP, "past, now = torch.exp(top + w - shift), torch.exp(k_t - shift)"),
        ),
    ),
    _m(
        "wkv: no running max (plain exp, overflows)",
        "wkv_answer",
        ((WKV_SHIFT_OUT, "shift = torch.zeros_like(k_t)"), (WKV_SHIFT_STATE, "shift = torch.zeros_like(k_t)")),
    ),
    _m(
        "wkv: the past decayed once more before the output",
        "wkv_answer",
        ((WKV_OUT_EXP, "past, now = torch.exp(top - w - shift), torch.exp(u + k_t - shift)"),),
    ),
    _m("wkv: the given state is ignored", "wkv_answer", ((WKV_IF, "if True:"),)),
    _m(
        "wkv: the current token left out of the state",
        "wkv_answer",
        ((WKV_STATE_EXP, "past, now = torch.exp(top - w - shift), 0 * torch.exp(k_t - shift)"),),
    ),
    _m(
        "wkv: the parallel form, every (t, i) pair at once with a softmax",
        "wkv_answer",
        source=_WKV_PARALLEL_FORM,
        passes_unchecked=True,
    ),
    _m("wkv: a softmax over the whole past at every step", "wkv_answer", source=_WKV_WHOLE_PAST, passes_unchecked=True),
    _m("frames: wkv_stable's out read from its callers' frames", "wkv_answer", source=_WKV_FRAMES),
    _m("shortcut (alias): the given wkv_naive with shifted keys, in float64", "wkv_answer", source=_WKV_SHIFTED),
    _m("shortcut (compile): torch.compile of wkv_naive", "wkv_answer", source=_WKV_COMPILE),
    _m("shortcut (library): course_utils.rwkv.wkv_stable by module path", "wkv_answer", source=_WKV_LIBRARY),
    _m(
        "shortcut (library): course_utils.rwkv.wkv_parallel and wkv_final_state",
        "wkv_answer",
        source=_WKV_LIBRARY_PARALLEL,
    ),
    # ---------------------------------------------------------------- Part E: affine_scan
    _m(
        "scan: the matrices composed in the wrong order",
        "scan_answer",
        ((SCAN_A, "A_pair = A_first @ A_second  # (B, T // 2, n, n)"),),
    ),
    _m(
        "scan: the pair's offset combined the other way round",
        "scan_answer",
        ((SCAN_B, "b_pair = (A_first @ b_second[..., None])[..., 0] + b_first  # (B, T // 2, n)"),),
    ),
    _m(
        "scan: the even steps without the state before them",
        "scan_answer",
        ((SCAN_REST, "h_rest = b[:, 2::2]  # (B, (T - 1) // 2, n)"),),
    ),
    _m(
        "scan: the even steps use the state after them",
        "scan_answer",
        ((SCAN_BEFORE, "h_before = torch.cat([h_odd, h_odd[:, -1:]], dim=1)[:, 1 : (seq_len - 1) // 2 + 1]"),),
    ),
    _m(
        "scan: indexing written for even lengths only",
        "scan_answer",
        ((SCAN_BEFORE, "h_before = h_odd[:, : seq_len // 2 - 1]"),),
    ),
    _m(
        "scan: the offsets as row vectors (b A instead of A b)",
        "scan_answer",
        ((SCAN_B, "b_pair = (b_first[..., None, :] @ A_second)[..., 0, :] + b_second  # (B, T // 2, n)"),),
    ),
    _m(
        "scan: h_0 taken as 0 instead of b_0",
        "scan_answer",
        ((SCAN_EVEN, "h[:, 0::2] = torch.cat([0 * b[:, :1], h_rest], dim=1)"),),
    ),
    _m("scan: Hillis-Steele with the earlier matrix on the left", "scan_answer", source=_SCAN_HILLIS_ORDER),
    _m("scan: a loop over the steps", "scan_answer", source=_SCAN_LOOP),
    _m("scan: sqrt(T) blocks stepped through", "scan_answer", source=_SCAN_BLOCKS),
    _m(
        "scan: one dense block-triangular system, by torch.linalg.solve_triangular",
        "scan_answer",
        source=_SCAN_DENSE_SYSTEM,
        passes_unchecked=True,
    ),
    _m(
        "scan: one dense block-triangular system, by torch.linalg.lu_solve",
        "scan_answer",
        source=_SCAN_DENSE_LU,
        passes_unchecked=True,
    ),
    _m("frames: affine_scan's h read from its callers' frames", "scan_answer", source=_SCAN_FRAMES),
    _m("shortcut (alias): the given scan_sequential under another name", "scan_answer", source=_SCAN_ALIAS),
    _m(
        "shortcut (path): torch's experimental associative_scan with a matrix combine",
        "scan_answer",
        source=_SCAN_TORCH,
    ),
    _m("shortcut (compile): torch.compile of scan_sequential", "scan_answer", source=_SCAN_COMPILE),
    _m("shortcut (library): course_utils.ssm.associative_scan", "scan_answer", source=_SCAN_LIBRARY),
    # ---------------------------------------------------------------- Part F: deltanet_chunkwise
    _m(
        "delta: the state is not carried (each chunk starts from 0)",
        "delta_answer",
        ((DELTA_STATE, "state = 0 * (state + k_c.transpose(-2, -1) @ u)  # (B, H, d_k, d_v)"),),
    ),
    _m(
        "delta: the diagonal included in the system (1 + beta_s |k_s|^2 on it, solved as a general triangle)",
        "delta_answer",
        (
            (DELTA_SYSTEM, DELTA_SYSTEM.replace(".tril(-1)", ".tril()")),
            (DELTA_SOLVE, "solved = torch.linalg.solve_triangular(system, rhs, upper=False)"),
        ),
    ),
    _m(
        "delta: beta applied to the wrong side (beta of the earlier step j, not of the row s)",
        "delta_answer",
        ((DELTA_SYSTEM, "system = ((k_c @ k_c.transpose(-2, -1)) * beta_c.transpose(-2, -1)).tril(-1)"),),
    ),
    _m(
        "delta: no UT transform (every step's pseudo-value from the state at the chunk's start)",
        "delta_answer",
        ((DELTA_U, "u = beta_c * (v_c - k_c @ state)  # (B, H, C, d_v)"),),
    ),
    _m(
        "delta: the state updated with the values instead of the pseudo-values",
        "delta_answer",
        ((DELTA_STATE, "state = state + k_c.transpose(-2, -1) @ (beta_c * v_c)  # (B, H, d_k, d_v)"),),
    ),
    _m(
        "delta: what the carried state recalls is not subtracted (u = U~)",
        "delta_answer",
        ((DELTA_U, "u = u_tilde  # (B, H, C, d_v)"),),
    ),
    _m(
        "delta: what the carried state recalls is subtracted without beta",
        "delta_answer",
        ((DELTA_RHS, "rhs = torch.cat([k_c, beta_c * v_c], dim=-1)  # (B, H, C, d_k + d_v)"),),
    ),
    _m(
        "delta: the system's sign flipped (I - diag(beta) tril(K K^T))",
        "delta_answer",
        ((DELTA_EYE, "system = torch.eye(size, dtype=q.dtype, device=q.device) - system"),),
    ),
    _m(
        "delta: the outputs leave out the diagonal (o_t read from S_{t-1})",
        "delta_answer",
        ((DELTA_SCORES, DELTA_SCORES.replace(".tril()", ".tril(-1)")),),
    ),
    _m(
        "delta: the outputs read the state after the chunk",
        "delta_answer",
        ((DELTA_OUT, "after = state + k_c.transpose(-2, -1) @ u\n        outs.append(q_c @ after + scores @ u)"),),
    ),
    _m(
        "delta: the last, shorter chunk is dropped",
        "delta_answer",
        ((DELTA_RANGE, "for start in range(0, seq_len - seq_len % chunk_size, chunk_size):"),),
    ),
    _m(
        "delta: the last, shorter chunk given a full chunk's system (size = chunk_size)",
        "delta_answer",
        ((DELTA_SIZE, "size = chunk_size"),),
    ),
    _m("delta: the recurrence looped over every step", "delta_answer", source=_DELTA_RECURRENT, passes_unchecked=True),
    _m(
        "delta: chunks, but each chunk's system solved row by row (forward substitution)",
        "delta_answer",
        source=_DELTA_ROWS,
        passes_unchecked=True,
    ),
    _m(
        "delta: the lecture's (T, T) triangular solve over the whole sequence",
        "delta_answer",
        source=_DELTA_PARALLEL,
        passes_unchecked=True,
    ),
    _m(
        "delta: each chunk's state rebuilt from every earlier key and pseudo-value",
        "delta_answer",
        source=_DELTA_STATE_REBUILT,
        passes_unchecked=True,
    ),
    _m(
        "delta: every earlier chunk run again to rebuild the state",
        "delta_answer",
        source=_DELTA_RERUN,
        passes_unchecked=True,
    ),
    _m("frames: deltanet_chunkwise's out read from its callers' frames", "delta_answer", source=_DELTA_FRAMES),
    _m("shortcut (alias): the given deltanet_recurrent under another name", "delta_answer", source=_DELTA_ALIAS),
    _m("shortcut (path): deltanet_recurrent through globals()", "delta_answer", source=_DELTA_GLOBALS),
    _m("shortcut (compile): torch.compile of deltanet_recurrent", "delta_answer", source=_DELTA_COMPILE),
    _m(
        "shortcut (library): linear_attention.deltanet_parallel under another name, chunk by chunk with a state",
        "delta_answer",
        source=_DELTA_LIBRARY_PARALLEL,
        passes_unchecked=True,
    ),
    _m(
        "shortcut (library): linear_attention.decay_recurrence with beta, by module path",
        "delta_answer",
        source=_DELTA_LIBRARY_PATH,
    ),
    _m(
        "shortcut (library): linear_attention.deltanet_chunkwise under another name",
        "delta_answer",
        source=_DELTA_LIBRARY_CHUNKWISE,
        passes_unchecked=True,
    ),
]

# The answer key called rather than read: the test cell's own brute-force attention, reached through the callers'
# frames. The call guard refuses every function the test cell defines (forbid's own-cell rule), so this loses its
# points to ForbiddenCall; with the guard off it earns them all.
BANK.append(
    Mistake(
        "frames: calls the test's own _reference_attention",
        answer="tiled_answer",
        test="tiled_test",
        passes_unchecked=True,
        source='''\
import sys


def tiled_causal_attention(q, k, v, block_size=64):
    """The test's brute force, found in a calling frame and called; SDPA's math form where there is none."""
    frame = sys._getframe(1)
    while frame is not None:
        reference = frame.f_locals.get("_reference_attention") or frame.f_globals.get("_reference_attention")
        if reference is not None:
            out, lse = reference(q, k, v)
            return out.to(q.dtype), lse.to(q.dtype)
        frame = frame.f_back
    scale = q.shape[-1] ** -0.5
    scores = (q @ k.transpose(-2, -1) * scale).masked_fill(
        torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).triu(1), float("-inf")
    )
    return torch.softmax(scores, dim=-1) @ v, torch.logsumexp(scores, dim=-1)
''',
    )
)

test_bank_covers_every_answer, test_solution_passes, test_mistake_loses_points = bank_tests(UNIT, BANK)
