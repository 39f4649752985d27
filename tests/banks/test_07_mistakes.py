"""Mistake bank of unit 07: plausible wrong answers, each of which must lose its cell's points."""

from notebook_cells import Mistake, bank_tests

UNIT = "07_taming_transformers"

SCHEDULE = dict(answer="schedule_answer", test="schedule_test")
RMS = dict(answer="rmsnorm_answer", test="rmsnorm_test")
SWIGLU = dict(answer="swiglu_answer", test="swiglu_test")
ROPE = dict(answer="rope_answer", test="rope_test")
SMOOTH = dict(answer="smoothing_answer", test="smoothing_test")

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
]

test_bank_covers_every_answer, test_solution_passes, test_mistake_loses_points = bank_tests(UNIT, BANK + SHORTCUTS)
