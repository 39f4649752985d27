"""Mistake bank of unit 08: plausible wrong answers, each of which must lose its cell's points."""

from notebook_cells import FRAMES_READER, Mistake, answer_source, bank_tests

UNIT = "08_taming_transformers"

SCHEDULE = dict(answer="schedule_answer", test="schedule_test")
RMS = dict(answer="rmsnorm_answer", test="rmsnorm_test")
SWIGLU = dict(answer="swiglu_answer", test="swiglu_test")
ROPE = dict(answer="rope_answer", test="rope_test")
SMOOTH = dict(answer="smoothing_answer", test="smoothing_test")
T5 = dict(answer="t5bias_answer", test="t5bias_test")

BANK = [
    # ---------------------------------------------------------------- Part A: warmup_cosine_lr
    Mistake(
        "schedule: warm-up starts at 0 (step / W)",
        **SCHEDULE,
        patches=(("return (step + 1) / warmup_steps", "return step / warmup_steps"),),
    ),
    Mistake(
        "schedule: warm-up includes step W (overshoots 1)",
        **SCHEDULE,
        patches=(("if step < warmup_steps:", "if step <= warmup_steps:"),),
    ),
    Mistake(
        "schedule: min_ratio ignored",
        **SCHEDULE,
        patches=(("return min_ratio + (1 - min_ratio) * cosine", "return cosine"),),
    ),
    Mistake(
        "schedule: min_ratio added without rescaling",
        **SCHEDULE,
        patches=(("return min_ratio + (1 - min_ratio) * cosine", "return min_ratio + cosine"),),
    ),
    Mistake(
        "schedule: cosine progress counted from step 0 over the whole run",
        **SCHEDULE,
        patches=(
            ("progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)", "progress = step / total_steps"),
        ),
    ),
    Mistake(
        "schedule: no clamp after total_steps (the cosine rises again)",
        **SCHEDULE,
        patches=(("progress = min(progress, 1.0)", "progress = progress"),),
    ),
    Mistake(
        "schedule: a full cosine period instead of half",
        **SCHEDULE,
        patches=(("math.cos(math.pi * progress)", "math.cos(2 * math.pi * progress)"),),
    ),
    Mistake(
        "schedule: linear decay instead of cosine",
        **SCHEDULE,
        patches=(("cosine = 0.5 * (1 + math.cos(math.pi * progress))", "cosine = 1 - progress"),),
    ),
    # ---------------------------------------------------------------- Part B: RMSNorm
    Mistake(
        "rmsnorm: subtracts the mean (LayerNorm statistics)",
        **RMS,
        patches=(
            (
                "mean_square = x.pow(2).mean(dim=-1, keepdim=True)",
                "mean_square = (x - x.mean(dim=-1, keepdim=True)).pow(2).mean(dim=-1, keepdim=True)",
            ),
        ),
    ),
    Mistake(
        "rmsnorm: eps outside the square root",
        **RMS,
        patches=(("x * torch.rsqrt(mean_square + self.eps)", "x / (mean_square.sqrt() + self.eps)"),),
    ),
    Mistake(
        "rmsnorm: eps ignored", **RMS, patches=(("torch.rsqrt(mean_square + self.eps)", "torch.rsqrt(mean_square)"),)
    ),
    Mistake(
        "rmsnorm: divides by the mean square, not its root",
        **RMS,
        patches=(("x * torch.rsqrt(mean_square + self.eps)", "x / (mean_square + self.eps)"),),
    ),
    Mistake(
        "rmsnorm: sum of squares instead of mean",
        **RMS,
        patches=(("x.pow(2).mean(dim=-1, keepdim=True)", "x.pow(2).sum(dim=-1, keepdim=True)"),),
    ),
    Mistake(
        "rmsnorm: normalises over the first axis",
        **RMS,
        patches=(("x.pow(2).mean(dim=-1, keepdim=True)", "x.pow(2).mean(dim=0, keepdim=True)"),),
    ),
    Mistake(
        "rmsnorm: gain never applied",
        **RMS,
        patches=(("mean_square + self.eps) * self.weight", "mean_square + self.eps)"),),
    ),
    Mistake(
        "rmsnorm: gain is a plain tensor, not a Parameter",
        **RMS,
        patches=(("self.weight = nn.Parameter(torch.ones(d_model))", "self.weight = torch.ones(d_model)"),),
    ),
    Mistake(
        "rmsnorm: gain starts at 0",
        **RMS,
        patches=(("nn.Parameter(torch.ones(d_model))", "nn.Parameter(torch.zeros(d_model))"),),
    ),
    # ---------------------------------------------------------------- Part C: SwiGLUFeedForward
    Mistake(
        "swiglu: sigmoid gate (plain GLU)",
        **SWIGLU,
        patches=(("gate = F.silu(self.w_gate(x))", "gate = torch.sigmoid(self.w_gate(x))"),),
    ),
    Mistake(
        "swiglu: GELU gate (GEGLU)",
        **SWIGLU,
        patches=(("gate = F.silu(self.w_gate(x))", "gate = F.gelu(self.w_gate(x))"),),
    ),
    Mistake(
        "swiglu: ReLU gate", **SWIGLU, patches=(("gate = F.silu(self.w_gate(x))", "gate = F.relu(self.w_gate(x))"),)
    ),
    Mistake(
        "swiglu: activation on the up branch",
        **SWIGLU,
        patches=(
            ("gate = F.silu(self.w_gate(x))", "gate = self.w_gate(x)"),
            ("gate * self.w_up(x)", "gate * F.silu(self.w_up(x))"),
        ),
    ),
    Mistake(
        "swiglu: no gating (up branch unused)",
        **SWIGLU,
        patches=(("return self.w_down(gate * self.w_up(x))", "return self.w_down(gate)"),),
    ),
    Mistake(
        "swiglu: branches added instead of multiplied",
        **SWIGLU,
        patches=(("gate * self.w_up(x)", "gate + self.w_up(x)"),),
    ),
    Mistake(
        "swiglu: linear layers with biases",
        **SWIGLU,
        patches=(
            ("self.w_gate = nn.Linear(d_model, d_hidden, bias=False)", "self.w_gate = nn.Linear(d_model, d_hidden)"),
            ("self.w_up = nn.Linear(d_model, d_hidden, bias=False)", "self.w_up = nn.Linear(d_model, d_hidden)"),
        ),
    ),
    Mistake(
        "swiglu: no down projection",
        **SWIGLU,
        patches=(("return self.w_down(gate * self.w_up(x))", "return gate * self.w_up(x)"),),
    ),
    # ---------------------------------------------------------------- Part D: apply_rope
    Mistake(
        "rope: rotate-half pairing (i, i + d/2) instead of adjacent pairs",
        **ROPE,
        patches=(("x_even, x_odd = x[..., 0::2], x[..., 1::2]", "x_even, x_odd = x.chunk(2, dim=-1)"),),
    ),
    Mistake(
        "rope: rotates clockwise (sign of sin flipped)",
        **ROPE,
        patches=(
            ("out[..., 0::2] = x_even * cos - x_odd * sin", "out[..., 0::2] = x_even * cos + x_odd * sin"),
            ("out[..., 1::2] = x_even * sin + x_odd * cos", "out[..., 1::2] = -x_even * sin + x_odd * cos"),
        ),
    ),
    Mistake(
        "rope: positions start at 1",
        **ROPE,
        patches=(("torch.arange(seq_len, dtype=torch.float64)", "torch.arange(1, seq_len + 1, dtype=torch.float64)"),),
    ),
    Mistake(
        "rope: exponent i/d instead of 2i/d",
        **ROPE,
        patches=(
            ("torch.arange(0, d, 2, dtype=torch.float64) / d", "torch.arange(0, d // 2, dtype=torch.float64) / d"),
        ),
    ),
    Mistake("rope: frequencies base^(+2i/d)", **ROPE, patches=(("base ** (-torch.arange", "base ** (torch.arange"),)),
    Mistake(
        "rope: second coordinate misses the cross term (not a rotation)",
        **ROPE,
        patches=(("out[..., 1::2] = x_even * sin + x_odd * cos", "out[..., 1::2] = x_odd * cos"),),
    ),
    Mistake(
        "rope: cos and sin rounded to float32",
        **ROPE,
        patches=(
            (
                "cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)",
                "cos, sin = angle.cos().float(), angle.sin().float()",
            ),
        ),
    ),
    Mistake(
        "rope: one angle per position for all pairs (theta_0 everywhere)",
        **ROPE,
        patches=(
            (
                "angle = torch.arange(seq_len, dtype=torch.float64)[:, None] * theta",
                "angle = torch.arange(seq_len, dtype=torch.float64)[:, None] * theta[:1]",
            ),
        ),
    ),
    # ---------------------------------------------------------------- Part E: label_smoothed_cross_entropy
    Mistake(
        "smoothing: eps spread over the V - 1 wrong classes only",
        **SMOOTH,
        patches=(
            ("smooth = -log_probs.mean(dim=-1)", "smooth = -(log_probs.sum(dim=-1) + nll) / (logits.shape[-1] - 1)"),
        ),
    ),
    Mistake(
        "smoothing: sum over rows instead of mean",
        **SMOOTH,
        patches=(
            (
                "((1 - smoothing) * nll + smoothing * smooth).mean()",
                "((1 - smoothing) * nll + smoothing * smooth).sum()",
            ),
        ),
    ),
    Mistake("smoothing: NLL not scaled by 1 - eps", **SMOOTH, patches=(("(1 - smoothing) * nll", "nll"),)),
    Mistake(
        "smoothing: log(softmax) underflows for large logits",
        **SMOOTH,
        patches=(("torch.log_softmax(logits, dim=-1)", "torch.log(torch.softmax(logits, dim=-1))"),),
    ),
    Mistake(
        "smoothing: softmax over the batch axis",
        **SMOOTH,
        patches=(("torch.log_softmax(logits, dim=-1)", "torch.log_softmax(logits, dim=0)"),),
    ),
    Mistake(
        "smoothing: uniform term summed over classes instead of averaged",
        **SMOOTH,
        patches=(("smooth = -log_probs.mean(dim=-1)", "smooth = -log_probs.sum(dim=-1)"),),
    ),
    Mistake(
        "smoothing: uniform term uses probabilities, not log-probabilities",
        **SMOOTH,
        patches=(("smooth = -log_probs.mean(dim=-1)", "smooth = -log_probs.exp().mean(dim=-1)"),),
    ),
    # ---------------------------------------------------------------- Part F: t5_bucket and relative_attention
    Mistake(
        "t5: offset taken as query - key (direction reversed)",
        **T5,
        patches=(("offset = relative_position.long()", "offset = -relative_position.long()"),),
    ),
    Mistake(
        "t5: bidirectional keeps all num_buckets per direction (not halved)",
        **T5,
        patches=(("num_buckets = num_buckets // 2", "num_buckets = num_buckets"),),
    ),
    Mistake(
        "t5: bidirectional puts keys before the query in the upper half",
        **T5,
        patches=(("(offset > 0).long() * num_buckets", "(offset < 0).long() * num_buckets"),),
    ),
    Mistake(
        "t5: unidirectional buckets keep the distance of later keys",
        **T5,
        patches=(("distance = (-offset).clamp_min(0)", "distance = offset.abs()"),),
    ),
    Mistake(
        "t5: exact buckets counted from the full num_buckets (before halving)",
        **T5,
        patches=(
            (
                "    if bidirectional:\n        num_buckets = num_buckets // 2",
                "    max_exact = num_buckets // 2\n    if bidirectional:\n        num_buckets = num_buckets // 2",
            ),
            ("    max_exact = num_buckets // 2\n    log_ratio", "    log_ratio"),
        ),
    ),
    Mistake(
        "t5: log bucket not capped at N - 1 (far offsets overflow)",
        **T5,
        patches=(("far = far.clamp_max(num_buckets - 1)", "far = far"),),
    ),
    Mistake("t5: log bucket rounded to nearest", **T5, patches=((".floor().long()", ".round().long()"),)),
    Mistake("t5: log bucket rounded up", **T5, patches=((".floor().long()", ".ceil().long()"),)),
    Mistake(
        "t5: attention offsets query - key",
        **T5,
        patches=(
            (
                "offset = position[None, :] - position[:, None]",
                "offset = position[:, None] - position[None, :]",
            ),
        ),
    ),
    Mistake(
        "t5: bias table read as (H, num_buckets) (heads and buckets mixed up)",
        **T5,
        patches=(
            (
                "bias = bias_table[buckets].permute(2, 0, 1)",
                "bias = bias_table.reshape(-1, bias_table.shape[0])[:, buckets]",
            ),
        ),
    ),
    Mistake(
        "t5: bias added after the softmax",
        **T5,
        patches=(
            ("scores = q @ k.transpose(-2, -1) + bias", "scores = q @ k.transpose(-2, -1)"),
            ("weights = scores.softmax(dim=-1)", "weights = scores.softmax(dim=-1) + bias"),
        ),
    ),
    Mistake(
        "t5: scores scaled by 1 / sqrt(d_head) (T5 does not scale)",
        **T5,
        patches=(
            (
                "scores = q @ k.transpose(-2, -1) + bias",
                "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + bias",
            ),
        ),
    ),
    Mistake(
        "t5: causal mask missing",
        **T5,
        patches=(('scores = scores.masked_fill(future, float("-inf"))', "scores = scores"),),
    ),
    Mistake("t5: causal mask also hides the diagonal", **T5, patches=((".triu(1)", ".triu(0)"),)),
    Mistake(
        "t5: causal attention with bidirectional buckets",
        **T5,
        patches=(("t5_bucket(offset, not causal,", "t5_bucket(offset, True,"),),
    ),
    Mistake(
        "t5: attention ignores max_distance (default 128)",
        **T5,
        patches=(("bias_table.shape[0], max_distance)", "bias_table.shape[0])"),),
    ),
    Mistake("t5: softmax over the queries", **T5, patches=(("scores.softmax(dim=-1)", "scores.softmax(dim=-2)"),)),
    Mistake(
        "t5: bias detached from the table (the table learns nothing)",
        **T5,
        patches=(("bias = bias_table[buckets]", "bias = bias_table.detach()[buckets]"),),
    ),
]

# ---------------------------------------------------------------- shortcuts: the library's answer or a built-in
# Whole answer cells a student looking for a shortcut might submit. Each is correct (it passes its test cell
# with the call guard switched off); with the guard on, each must fail with ForbiddenCall.

SCHEDULE_ALIAS = """\
import course_utils.taming as T

_f = T.warmup_cosine


def warmup_cosine_lr(step, warmup_steps, total_steps, min_ratio=0.0):
    \"\"\"step: int >= 0, warmup_steps: int W >= 0, total_steps: int S > W, min_ratio: float in [0, 1]
    -> float, the learning-rate multiplier at optimizer step `step`.\"\"\"
    return _f(step, warmup_steps, total_steps, min_ratio)
"""

SCHEDULE_COSINE_LR = """\
import torch
from torch.optim.lr_scheduler import CosineAnnealingLR as _Cosine   # a reference taken before the test


def warmup_cosine_lr(step, warmup_steps, total_steps, min_ratio=0.0):
    \"\"\"step: int >= 0, warmup_steps: int W >= 0, total_steps: int S > W, min_ratio: float in [0, 1]
    -> float, the learning-rate multiplier at optimizer step `step`.\"\"\"
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    cosine = _Cosine(optimizer, T_max=total_steps - warmup_steps, eta_min=min_ratio)
    cosine.last_epoch = min(step - warmup_steps, total_steps - warmup_steps)
    return float(cosine._get_closed_form_lr()[0])
"""

RMS_ALIAS = """\
import course_utils.taming as T

_norm_forward = T.RMSNorm.forward


class RMSNorm(nn.Module):
    \"\"\"x (..., D) -> (..., D): x / sqrt(mean(x ** 2 over the last axis) + eps) * weight, weight (D,) starts at 1.\"\"\"

    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        return _norm_forward(self, x)
"""

RMS_SUBCLASS = """\
from course_utils.taming import RMSNorm as _LibraryRMSNorm


class RMSNorm(_LibraryRMSNorm):
    \"\"\"x (..., D) -> (..., D): x / sqrt(mean(x ** 2 over the last axis) + eps) * weight, weight (D,) starts at 1.\"\"\"
"""

RMS_TORCH_SUBCLASS = """\
class RMSNorm(nn.RMSNorm):
    \"\"\"x (..., D) -> (..., D): x / sqrt(mean(x ** 2 over the last axis) + eps) * weight, weight (D,) starts at 1.\"\"\"

    def __init__(self, d_model, eps=1e-6):
        super().__init__(d_model, eps=eps)
"""


def _rms_forward(body):
    return f"""\
class RMSNorm(nn.Module):
    \"\"\"x (..., D) -> (..., D): x / sqrt(mean(x ** 2 over the last axis) + eps) * weight, weight (D,) starts at 1.\"\"\"

    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        return {body}
"""


RMS_MODULE_PATH = """\
import torch.nn.modules.normalization as _normalization


class RMSNorm(nn.Module):
    \"\"\"x (..., D) -> (..., D): x / sqrt(mean(x ** 2 over the last axis) + eps) * weight, weight (D,) starts at 1.\"\"\"

    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.inner = _normalization.RMSNorm(d_model, eps=eps)
        self.weight = self.inner.weight   # the same Parameter: still one parameter tensor

    def forward(self, x):
        return self.inner(x)
"""

RMS_COMPILE = """\
import course_utils.taming as T

_norm_forward = torch.compile(T.RMSNorm.forward, backend="eager")  # compiled lazily: dynamo's copy runs


class RMSNorm(nn.Module):
    \"\"\"x (..., D) -> (..., D): x / sqrt(mean(x ** 2 over the last axis) + eps) * weight, weight (D,) starts at 1.\"\"\"

    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        return _norm_forward(self, x)
"""

SWIGLU_ALIAS = """\
import course_utils.taming as T

_glu_forward = T.GLUFeedForward.forward


class SwiGLUFeedForward(nn.Module):
    \"\"\"x (..., D) -> (..., D): w_down(silu(w_gate(x)) * w_up(x)); w_gate, w_up: D -> F, w_down: F -> D, no biases.\"\"\"

    def __init__(self, d_model, d_hidden):
        super().__init__()
        self.w_gate = nn.Linear(d_model, d_hidden, bias=False)
        self.w_up = nn.Linear(d_model, d_hidden, bias=False)
        self.w_down = nn.Linear(d_hidden, d_model, bias=False)
        self.activation = "swiglu"

    gate = property(lambda self: self.w_gate)
    up = property(lambda self: self.w_up)
    down = property(lambda self: self.w_down)

    def forward(self, x):
        return _glu_forward(self, x)
"""

SWIGLU_SUBCLASS = """\
import course_utils.taming as T


class SwiGLUFeedForward(T.GLUFeedForward):
    \"\"\"x (..., D) -> (..., D): w_down(silu(w_gate(x)) * w_up(x)); w_gate, w_up: D -> F, w_down: F -> D, no biases.\"\"\"

    def __init__(self, d_model, d_hidden):
        super().__init__(d_model, d_hidden, activation="swiglu", bias=False)
        self.w_gate, self.w_up, self.w_down = self.gate, self.up, self.down   # the same layers under the asked names
"""

ROPE_ALIAS = """\
from course_utils.gpt import apply_rope as _rotate_half   # a reference taken before the test


def apply_rope(x, base=10000.0):
    \"\"\"x (..., T, d) float, d even -> (..., T, d) same dtype: pair (2i, 2i+1) at position m rotated by m * base^(-2i/d).\"\"\"
    seq_len, d = x.shape[-2], x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = torch.arange(seq_len, dtype=torch.float64)[:, None] * theta
    angle = torch.cat([angle, angle], dim=-1)                  # the library pairs feature i with i + d/2
    halves = torch.cat([x[..., 0::2], x[..., 1::2]], dim=-1)  # adjacent pairs -> halves
    out = _rotate_half(halves, angle.cos(), angle.sin())
    return torch.stack([out[..., : d // 2], out[..., d // 2:]], dim=-1).reshape(x.shape)
"""


def _smoothing(body, header=""):
    return f"""\
{header}def label_smoothed_cross_entropy(logits, targets, smoothing):
    \"\"\"logits (N, V) float, targets (N,) long, smoothing float in [0, 1] -> 0-dim tensor, the mean over the N rows.\"\"\"
    return {body}
"""


# Part F shortcuts reuse the solution's own (correct) half of the cell, so that the blocked call is the only difference.
_T5_SOLUTION = answer_source(UNIT, "t5bias_answer")
_T5_BUCKET = _T5_SOLUTION[: _T5_SOLUTION.index("def relative_attention")]
_T5_ATTENTION = _T5_SOLUTION[_T5_SOLUTION.index("def relative_attention") :]
_T5_SIGNATURE = """\
def relative_attention(q, k, v, bias_table, causal=False, max_distance=128):
    \"\"\"q, k, v (B, H, T, d_head), bias_table (num_buckets, H) -> (B, H, T, d_head).\"\"\"
"""
_T5_MASK = """\
    seq_len = q.shape[-2]
    position = torch.arange(seq_len)
    buckets = t5_bucket(position[None, :] - position[:, None], not causal, bias_table.shape[0], max_distance)
    mask = bias_table[buckets].permute(2, 0, 1)                          # (H, T, T)
    if causal:
        mask = mask.masked_fill(torch.ones(seq_len, seq_len, dtype=torch.bool).triu(1), float("-inf"))
"""


def _t5_sdpa(call, header=""):
    """The solution's t5_bucket, and attention through a blocked SDPA reached by ``call``."""
    return f"{header}{_T5_BUCKET}{_T5_SIGNATURE}{_T5_MASK}    return {call}\n"


T5_BUCKET_ALIAS = (
    """\
import course_utils.taming as T

_library_buckets = T.t5_buckets


def t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    \"\"\"relative_position (...) int: key position - query position -> (...) int64 bucket ids.\"\"\"
    return _library_buckets(relative_position, bidirectional, num_buckets, max_distance)


"""
    + _T5_ATTENTION
)

T5_BIAS_SUBCLASS = (
    "from course_utils.taming import RelativePositionBias as _LibraryBias\n\n\n"
    + _T5_BUCKET
    + """\
class _TableBias(_LibraryBias):
    \"\"\"The lecture's module, with its embedding swapped for the given table.\"\"\"


"""
    + _T5_SIGNATURE
    + """\
    seq_len = q.shape[-2]
    module = _TableBias(bias_table.shape[1], bias_table.shape[0], max_distance, bidirectional=not causal)
    bias = torch.func.functional_call(module, {"embedding.weight": bias_table}, (seq_len, seq_len))   # (H, T, T)
    scores = q @ k.transpose(-2, -1) + bias
    if causal:
        scores = scores.masked_fill(torch.ones(seq_len, seq_len, dtype=torch.bool).triu(1), float("-inf"))
    return scores.softmax(dim=-1) @ v
"""
)

T5_BIAS_FORWARD_ALIAS = (
    "import course_utils.taming as T\n\n_bias_forward = T.RelativePositionBias.forward\n\n\n"
    + _T5_BUCKET
    + """\
class _Table:
    \"\"\"Just enough of an nn.Embedding: .weight and a lookup that keeps the gradient.\"\"\"

    def __init__(self, weight):
        self.weight = weight

    def __call__(self, ids):
        return self.weight[ids]


class _Settings:
    def __init__(self, bias_table, bidirectional, max_distance):
        self.embedding = _Table(bias_table)
        self.num_buckets, self.max_distance, self.bidirectional = bias_table.shape[0], max_distance, bidirectional


"""
    + _T5_SIGNATURE
    + """\
    seq_len = q.shape[-2]
    bias = _bias_forward(_Settings(bias_table, not causal, max_distance), seq_len, seq_len)   # (H, T, T)
    scores = q @ k.transpose(-2, -1) + bias
    if causal:
        scores = scores.masked_fill(torch.ones(seq_len, seq_len, dtype=torch.bool).triu(1), float("-inf"))
    return scores.softmax(dim=-1) @ v
"""
)

T5_GPT_ATTENTION = (
    "import math\n\nfrom course_utils.gpt import CausalSelfAttention as _GPTAttention, GPTConfig as _GPTConfig\n\n\n"
    + _T5_BUCKET
    + _T5_SIGNATURE
    + _T5_MASK
    + """\
    batch_size, num_heads, _, d_head = q.shape
    attention = _GPTAttention(_GPTConfig(vocab_size=2, num_heads=num_heads, d_model=num_heads * d_head))
    merged = [t.transpose(1, 2).reshape(batch_size, seq_len, num_heads * d_head) for t in (q * math.sqrt(d_head), k, v)]
    del attention.qkv, attention.proj
    attention.qkv = lambda x: torch.cat(merged, dim=-1)                  # the given q, k, v instead of projections
    attention.proj = nn.Identity()
    out = attention(torch.zeros(batch_size, seq_len, num_heads * d_head, dtype=q.dtype), bias=mask)
    return out.view(batch_size, seq_len, num_heads, d_head).transpose(1, 2)
"""
)


# flex_attention itself refuses gradients on the CPU (the hidden tests need them), but its operator does not: passing the
# table as a score_mod buffer, the operator adds T5's bias with gradients to q, k, v and the table.
T5_FLEX_OP = (
    """\
import torch
from torch._higher_order_ops import flex_attention as _flex_op  # the operator behind flex_attention
from torch.nn.attention.flex_attention import create_block_mask


"""
    + _T5_BUCKET
    + _T5_SIGNATURE
    + """\
    seq_len = q.shape[-2]
    position = torch.arange(seq_len)
    buckets = t5_bucket(position[None, :] - position[:, None], not causal, bias_table.shape[0], max_distance)

    def score_mod(score, b, h, q_idx, kv_idx, table):  # the table passed as a buffer, so that it gets gradients
        return score + table[buckets[q_idx, kv_idx], h]

    def mask_mod(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx if causal else kv_idx >= 0

    blocks = create_block_mask(mask_mod, None, None, seq_len, seq_len, device=q.device)
    return _flex_op(q, k, v, score_mod, blocks.as_tuple(), 1.0, {}, (bias_table,), ())[0]
"""
)


SHORTCUTS = [
    Mistake(
        "shortcut (alias): course_utils.taming.warmup_cosine under another name", **SCHEDULE, source=SCHEDULE_ALIAS
    ),
    Mistake(
        "shortcut (path): CosineAnnealingLR taken before the test, warm-up by hand",
        **SCHEDULE,
        source=SCHEDULE_COSINE_LR,
    ),
    Mistake("shortcut (alias): course_utils.taming.RMSNorm.forward under another name", **RMS, source=RMS_ALIAS),
    Mistake("shortcut (subclass): of course_utils.taming.RMSNorm", **RMS, source=RMS_SUBCLASS),
    Mistake("shortcut (subclass): of nn.RMSNorm", **RMS, source=RMS_TORCH_SUBCLASS),
    Mistake(
        "shortcut (path): torch.rms_norm, the operator behind F.rms_norm",
        **RMS,
        source=_rms_forward("torch.rms_norm(x, (x.shape[-1],), self.weight, self.eps)"),
    ),
    Mistake(
        "shortcut (path): torch.ops.aten.rms_norm",
        **RMS,
        source=_rms_forward("torch.ops.aten.rms_norm(x, [x.shape[-1]], self.weight, self.eps)"),
    ),
    Mistake(
        "shortcut (path): torch._fused_rms_norm",
        **RMS,
        source=_rms_forward("torch._fused_rms_norm(x, [x.shape[-1]], self.weight, self.eps)[0]"),
    ),
    Mistake("shortcut (path): torch.nn.modules.normalization.RMSNorm inside", **RMS, source=RMS_MODULE_PATH),
    Mistake("shortcut (compile): torch.compile of course_utils.taming.RMSNorm.forward", **RMS, source=RMS_COMPILE),
    Mistake(
        "shortcut (alias): course_utils.taming.GLUFeedForward.forward under another name", **SWIGLU, source=SWIGLU_ALIAS
    ),
    Mistake("shortcut (subclass): of course_utils.taming.GLUFeedForward", **SWIGLU, source=SWIGLU_SUBCLASS),
    Mistake(
        "shortcut (alias): course_utils.gpt.apply_rope on de-interleaved features (no built-in does RoPE)",
        **ROPE,
        source=ROPE_ALIAS,
    ),
    Mistake(
        "shortcut (alias): course_utils.taming.label_smoothed_cross_entropy under another name",
        **SMOOTH,
        source=_smoothing(
            "_f(logits, targets, smoothing)",
            "import course_utils.taming as T\n\n_f = T.label_smoothed_cross_entropy\n\n\n",
        ),
    ),
    Mistake(
        "shortcut (path): torch._C._nn.cross_entropy_loss, the operator behind F.cross_entropy",
        **SMOOTH,
        source=_smoothing("torch._C._nn.cross_entropy_loss(logits, targets, None, 1, -100, smoothing)"),
    ),
    Mistake(
        "shortcut (path): torch.ops.aten.cross_entropy_loss",
        **SMOOTH,
        source=_smoothing("torch.ops.aten.cross_entropy_loss(logits, targets, None, 1, -100, smoothing)"),
    ),
    Mistake(
        "shortcut (path): F.cross_entropy in a functools.partial taken before the test",
        **SMOOTH,
        source=_smoothing(
            "_cross_entropy(logits, targets, label_smoothing=smoothing)",
            "import functools\n\n_cross_entropy = functools.partial(F.cross_entropy, reduction='mean')\n\n\n",
        ),
    ),
    Mistake(
        "shortcut (path): torch.nn.modules.loss.CrossEntropyLoss",
        **SMOOTH,
        source=_smoothing("torch.nn.modules.loss.CrossEntropyLoss(label_smoothing=smoothing)(logits, targets)"),
    ),
    Mistake("shortcut (alias): course_utils.taming.t5_buckets under another name", **T5, source=T5_BUCKET_ALIAS),
    Mistake("shortcut (subclass): of course_utils.taming.RelativePositionBias", **T5, source=T5_BIAS_SUBCLASS),
    Mistake(
        "shortcut (alias): course_utils.taming.RelativePositionBias.forward on a stand-in object",
        **T5,
        source=T5_BIAS_FORWARD_ALIAS,
    ),
    Mistake(
        "shortcut (path): torch.ops.aten.scaled_dot_product_attention with the bias as a float mask",
        **T5,
        source=_t5_sdpa("torch.ops.aten.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0)"),
    ),
    Mistake(
        "shortcut (path): torch._scaled_dot_product_attention_math, the operator behind F.scaled_dot_product_attention",
        **T5,
        source=_t5_sdpa("torch._scaled_dot_product_attention_math(q, k, v, attn_mask=mask, scale=1.0)[0]"),
    ),
    Mistake(
        "shortcut (path): F.scaled_dot_product_attention in a functools.partial taken before the test",
        **T5,
        source=_t5_sdpa(
            "_attend(q, k, v, attn_mask=mask)",
            "import functools\n\n_attend = functools.partial(F.scaled_dot_product_attention, scale=1.0)\n\n\n",
        ),
    ),
    Mistake(
        "shortcut (path): course_utils.gpt.CausalSelfAttention with its projections replaced by the given q, k, v",
        **T5,
        source=T5_GPT_ATTENTION,
    ),
    Mistake(
        "shortcut (flex_attention): its operator torch._higher_order_ops.flex_attention, the table as a score_mod buffer",
        **T5,
        source=T5_FLEX_OP,
    ),
]

# Frame reads: a whole answer cell whose code walks its callers' frames (sys._getframe(1) and f_back to the
# top; f_locals and f_globals; one level into tuples, lists and dicts) for the test's own reference, by the
# names the earlier test cells used and by shape, returns it, and falls back to something wrong. They earned
# the points where a test computed its reference before the call; the test cells now compute it after.
_SCHEDULE_FRAMES = (
    FRAMES_READER
    + """
def warmup_cosine_lr(step, warmup_steps, total_steps, min_ratio=0.0):
    found = _answer_key(("_want", "_expected"), kind=float)
    return float(found) if found is not None else 0.0
"""
)
_RMS_FRAMES = (
    FRAMES_READER
    + """
class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        found = _answer_key(("_expected", "_want", "_ref_out"), shape=x.shape)
        return found.clone() if found is not None else x * self.weight
"""
)
_SWIGLU_FRAMES = (
    FRAMES_READER
    + """
class SwiGLUFeedForward(nn.Module):
    def __init__(self, d_model, d_hidden):
        super().__init__()
        self.w_gate = nn.Linear(d_model, d_hidden, bias=False)
        self.w_up = nn.Linear(d_model, d_hidden, bias=False)
        self.w_down = nn.Linear(d_hidden, d_model, bias=False)

    def forward(self, x):
        found = _answer_key(("_expected", "_want"), shape=x.shape)
        return found.clone() if found is not None else self.w_down(self.w_up(x))
"""
)
_ROPE_FRAMES = (
    FRAMES_READER
    + """
def apply_rope(x, base=10000.0):
    found = _answer_key(("_expected", "_want"), shape=x.shape)
    return found.to(x.dtype).clone() if found is not None else x.clone()
"""
)
_SMOOTH_FRAMES = (
    FRAMES_READER
    + """
def label_smoothed_cross_entropy(logits, targets, smoothing):
    names = {0.0: ("_want0",), 0.3: ("_want3",)}.get(smoothing, ()) + ("_want",)
    found = _answer_key(names, shape=())
    if found is None:
        return logits.sum() * 0.0
    return found.detach().to(logits.dtype) + 0.0 * logits.sum()  # carries a (zero) gradient
"""
)
_T5_FRAMES = (
    FRAMES_READER
    + "\n"
    + _T5_BUCKET
    + '''

class _Replay(torch.autograd.Function):
    """Forward: the test's output; backward: the test's gradients (computed with the same output weights)."""

    @staticmethod
    def forward(ctx, q, k, v, table, out, grads):
        ctx.grads = grads
        return out.detach().clone()

    @staticmethod
    def backward(ctx, grad_output):
        g = ctx.grads
        if g is None:
            return None, None, None, None, None, None
        return g[0], g[1], g[2], g[3], None, None


def relative_attention(q, k, v, bias_table, causal=False, max_distance=128):
    out = _answer_key(("_want",), shape=q.shape)
    if out is None:
        return q * 0.0 + 0.0 * (k.sum() + v.sum() + bias_table.sum())
    grads = _answer_key(("_want_grads",), kind=tuple)
    if grads is not None and [tuple(g.shape) for g in grads] != [tuple(t.shape) for t in (q, k, v, bias_table)]:
        grads = None
    return _Replay.apply(q, k, v, bias_table, out, grads)
'''
)

BANK += [
    Mistake("frames: the test's _want from the callers' frames", **SCHEDULE, source=_SCHEDULE_FRAMES),
    Mistake("frames: the test's expected normalized output from the callers' frames", **RMS, source=_RMS_FRAMES),
    Mistake(
        "frames: the test's expected feed-forward output from the callers' frames", **SWIGLU, source=_SWIGLU_FRAMES
    ),
    Mistake("frames: the test's expected rotation from the callers' frames", **ROPE, source=_ROPE_FRAMES),
    Mistake("frames: the test's _want0, _want3 and _want from the callers' frames", **SMOOTH, source=_SMOOTH_FRAMES),
    Mistake(
        "frames: the test's _want and _want_grads from the callers' frames, replayed by an autograd.Function",
        **T5,
        source=_T5_FRAMES,
    ),
]

test_bank_covers_every_answer, test_solution_passes, test_mistake_loses_points = bank_tests(UNIT, BANK + SHORTCUTS)
