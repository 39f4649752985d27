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
    Mistake("schedule: warm-up starts at 0 (step / W)", **SCHEDULE,
            patches=(("return (step + 1) / warmup_steps", "return step / warmup_steps"),)),
    Mistake("schedule: warm-up includes step W (overshoots 1)", **SCHEDULE,
            patches=(("if step < warmup_steps:", "if step <= warmup_steps:"),)),
    Mistake("schedule: min_ratio ignored", **SCHEDULE,
            patches=(("return min_ratio + (1 - min_ratio) * cosine", "return cosine"),)),
    Mistake("schedule: min_ratio added without rescaling", **SCHEDULE,
            patches=(("return min_ratio + (1 - min_ratio) * cosine", "return min_ratio + cosine"),)),
    Mistake("schedule: cosine progress counted from step 0 over the whole run", **SCHEDULE,
            patches=(("progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)",
                      "progress = step / total_steps"),)),
    Mistake("schedule: no clamp after total_steps (the cosine rises again)", **SCHEDULE,
            patches=(("progress = min(progress, 1.0)", "progress = progress"),)),
    Mistake("schedule: a full cosine period instead of half", **SCHEDULE,
            patches=(("math.cos(math.pi * progress)", "math.cos(2 * math.pi * progress)"),)),
    Mistake("schedule: linear decay instead of cosine", **SCHEDULE,
            patches=(("cosine = 0.5 * (1 + math.cos(math.pi * progress))", "cosine = 1 - progress"),)),
    # ---------------------------------------------------------------- Part B: RMSNorm
    Mistake("rmsnorm: subtracts the mean (LayerNorm statistics)", **RMS,
            patches=(("mean_square = x.pow(2).mean(dim=-1, keepdim=True)",
                      "mean_square = (x - x.mean(dim=-1, keepdim=True)).pow(2).mean(dim=-1, keepdim=True)"),)),
    Mistake("rmsnorm: eps outside the square root", **RMS,
            patches=(("x * torch.rsqrt(mean_square + self.eps)", "x / (mean_square.sqrt() + self.eps)"),)),
    Mistake("rmsnorm: eps ignored", **RMS,
            patches=(("torch.rsqrt(mean_square + self.eps)", "torch.rsqrt(mean_square)"),)),
    Mistake("rmsnorm: divides by the mean square, not its root", **RMS,
            patches=(("x * torch.rsqrt(mean_square + self.eps)", "x / (mean_square + self.eps)"),)),
    Mistake("rmsnorm: sum of squares instead of mean", **RMS,
            patches=(("x.pow(2).mean(dim=-1, keepdim=True)", "x.pow(2).sum(dim=-1, keepdim=True)"),)),
    Mistake("rmsnorm: normalises over the first axis", **RMS,
            patches=(("x.pow(2).mean(dim=-1, keepdim=True)", "x.pow(2).mean(dim=0, keepdim=True)"),)),
    Mistake("rmsnorm: gain never applied", **RMS,
            patches=(("mean_square + self.eps) * self.weight", "mean_square + self.eps)"),)),
    Mistake("rmsnorm: gain is a plain tensor, not a Parameter", **RMS,
            patches=(("self.weight = nn.Parameter(torch.ones(d_model))", "self.weight = torch.ones(d_model)"),)),
    Mistake("rmsnorm: gain starts at 0", **RMS,
            patches=(("nn.Parameter(torch.ones(d_model))", "nn.Parameter(torch.zeros(d_model))"),)),
    # ---------------------------------------------------------------- Part C: SwiGLUFeedForward
    Mistake("swiglu: sigmoid gate (plain GLU)", **SWIGLU,
            patches=(("gate = F.silu(self.w_gate(x))", "gate = torch.sigmoid(self.w_gate(x))"),)),
    Mistake("swiglu: GELU gate (GEGLU)", **SWIGLU,
            patches=(("gate = F.silu(self.w_gate(x))", "gate = F.gelu(self.w_gate(x))"),)),
    Mistake("swiglu: ReLU gate", **SWIGLU,
            patches=(("gate = F.silu(self.w_gate(x))", "gate = F.relu(self.w_gate(x))"),)),
    Mistake("swiglu: activation on the up branch", **SWIGLU,
            patches=(("gate = F.silu(self.w_gate(x))", "gate = self.w_gate(x)"),
                     ("gate * self.w_up(x)", "gate * F.silu(self.w_up(x))"))),
    Mistake("swiglu: no gating (up branch unused)", **SWIGLU,
            patches=(("return self.w_down(gate * self.w_up(x))", "return self.w_down(gate)"),)),
    Mistake("swiglu: branches added instead of multiplied", **SWIGLU,
            patches=(("gate * self.w_up(x)", "gate + self.w_up(x)"),)),
    Mistake("swiglu: linear layers with biases", **SWIGLU,
            patches=(("self.w_gate = nn.Linear(d_model, d_hidden, bias=False)", "self.w_gate = nn.Linear(d_model, d_hidden)"),
                     ("self.w_up = nn.Linear(d_model, d_hidden, bias=False)", "self.w_up = nn.Linear(d_model, d_hidden)"))),
    Mistake("swiglu: no down projection", **SWIGLU,
            patches=(("return self.w_down(gate * self.w_up(x))", "return gate * self.w_up(x)"),)),
    # ---------------------------------------------------------------- Part D: apply_rope
    Mistake("rope: rotate-half pairing (i, i + d/2) instead of adjacent pairs", **ROPE,
            patches=(("x_even, x_odd = x[..., 0::2], x[..., 1::2]", "x_even, x_odd = x.chunk(2, dim=-1)"),)),
    Mistake("rope: rotates clockwise (sign of sin flipped)", **ROPE,
            patches=(("out[..., 0::2] = x_even * cos - x_odd * sin", "out[..., 0::2] = x_even * cos + x_odd * sin"),
                     ("out[..., 1::2] = x_even * sin + x_odd * cos", "out[..., 1::2] = -x_even * sin + x_odd * cos"))),
    Mistake("rope: positions start at 1", **ROPE,
            patches=(("torch.arange(seq_len, dtype=torch.float64)", "torch.arange(1, seq_len + 1, dtype=torch.float64)"),)),
    Mistake("rope: exponent i/d instead of 2i/d", **ROPE,
            patches=(("torch.arange(0, d, 2, dtype=torch.float64) / d", "torch.arange(0, d // 2, dtype=torch.float64) / d"),)),
    Mistake("rope: frequencies base^(+2i/d)", **ROPE,
            patches=(("base ** (-torch.arange", "base ** (torch.arange"),)),
    Mistake("rope: second coordinate misses the cross term (not a rotation)", **ROPE,
            patches=(("out[..., 1::2] = x_even * sin + x_odd * cos", "out[..., 1::2] = x_odd * cos"),)),
    Mistake("rope: cos and sin rounded to float32", **ROPE,
            patches=(("cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)",
                      "cos, sin = angle.cos().float(), angle.sin().float()"),)),
    Mistake("rope: one angle per position for all pairs (theta_0 everywhere)", **ROPE,
            patches=(("angle = torch.arange(seq_len, dtype=torch.float64)[:, None] * theta",
                      "angle = torch.arange(seq_len, dtype=torch.float64)[:, None] * theta[:1]"),)),
    # ---------------------------------------------------------------- Part E: label_smoothed_cross_entropy
    Mistake("smoothing: eps spread over the V - 1 wrong classes only", **SMOOTH,
            patches=(("smooth = -log_probs.mean(dim=-1)", "smooth = -(log_probs.sum(dim=-1) + nll) / (logits.shape[-1] - 1)"),)),
    Mistake("smoothing: sum over rows instead of mean", **SMOOTH,
            patches=(("((1 - smoothing) * nll + smoothing * smooth).mean()", "((1 - smoothing) * nll + smoothing * smooth).sum()"),)),
    Mistake("smoothing: NLL not scaled by 1 - eps", **SMOOTH,
            patches=(("(1 - smoothing) * nll", "nll"),)),
    Mistake("smoothing: log(softmax) underflows for large logits", **SMOOTH,
            patches=(("torch.log_softmax(logits, dim=-1)", "torch.log(torch.softmax(logits, dim=-1))"),)),
    Mistake("smoothing: softmax over the batch axis", **SMOOTH,
            patches=(("torch.log_softmax(logits, dim=-1)", "torch.log_softmax(logits, dim=0)"),)),
    Mistake("smoothing: uniform term summed over classes instead of averaged", **SMOOTH,
            patches=(("smooth = -log_probs.mean(dim=-1)", "smooth = -log_probs.sum(dim=-1)"),)),
    Mistake("smoothing: uniform term uses probabilities, not log-probabilities", **SMOOTH,
            patches=(("smooth = -log_probs.mean(dim=-1)", "smooth = -log_probs.exp().mean(dim=-1)"),)),
]

test_bank_covers_every_answer, test_solution_passes, test_mistake_loses_points = bank_tests(UNIT, BANK)
