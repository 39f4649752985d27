# ruff: noqa: E501
"""The cells of lectures/10_beyond_attention.ipynb: (kind, source, tags). Built by notes/build_lecture10.py."""

IGNORE = ("nbval-ignore-output",)

CELLS = []


def md(text):
    CELLS.append(("markdown", text, ()))


def code(text, tags=()):
    CELLS.append(("code", text, tags))


md(r"""
# Unit 10: Beyond quadratic attention

Softmax attention compares every position with every earlier one. For a sequence of $T$ tokens that
is $T^2$ scores per head and layer: double the context, and the time and the memory of attention
grow fourfold. Generation has a second cost: a transformer that writes token $t$ looks back at all
$t-1$ tokens before it, so its memory grows with every token it writes. This last unit is about the
ideas that attack these costs, from the ones that keep attention *exact* (a key-value cache,
FlashAttention's tiling with the online softmax) to the ones that change the model: linear attention,
which turns a transformer into a recurrent network with a matrix-valued state, and a whole family of
recent models that turn out to be the same recurrence with a different one-line update — RetNet,
gated linear attention and Mamba-2, DeltaNet, xLSTM's mLSTM — plus RWKV, the state-space models S4
and Mamba, xLSTM's sLSTM and the Reformer's hashing. Every form is built from scratch, checked
against a second form of the same computation, and the unit ends by training four of these models
for the same number of steps on the course's text.

**Learning goals.** After this unit you can

- measure how the time and memory of softmax attention grow with $T$, and explain why;
- generate with a key-value cache and show it writes the same tokens as generation without it;
- compute exact attention block by block with the online softmax (the idea of FlashAttention),
  equal to `F.scaled_dot_product_attention` while never holding a $T\times T$ matrix;
- write linear attention in its parallel, recurrent and chunkwise forms and show they are equal;
- write RetNet, gated linear attention, DeltaNet and the mLSTM as one recurrence
  $S_t = a_t\,S_{t-1} + k_t v_t^\top$, each in a recurrent and a parallel form;
- compute RWKV's WKV operator stably, and run an RWKV block in "GPT mode" and "RNN mode";
- discretise a state-space model, compute it as a convolution and as a recurrence, and run Mamba's
  selective scan sequentially and as a parallel associative scan;
- explain the sLSTM's exponential gates and their stabiliser, and Reformer's LSH buckets;
- read an equal-steps comparison of these models over several seeds for what it does and does not show.

**Prerequisites.** Unit 05 (LSTM and GRU cells), unit 06 (scaled dot-product attention, masks,
`F.scaled_dot_product_attention`), unit 07 (the decoder-only GPT, greedy decoding) and unit 08
(`course_utils.gpt.GPT`, the character language model at a fixed step budget).
""")

code(r"""
import math
import time
import weakref

import matplotlib.pyplot as plt
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from course_utils import fast_attention as fa
from course_utils import get_device, seed_everything
from course_utils import linear_attention as la
from course_utils import rwkv, ssm
from course_utils.data import python_docs_text, train_val_split
from course_utils.gpt import GPT, GPTConfig
from course_utils.progress import progress

seed_everything(0)
device = get_device()        # the comparison in section 10 trains here (a GPU if there is one)
cpu = torch.device("cpu")    # timings run on the CPU, so that their ratios mean the same everywhere
torch.set_printoptions(precision=4, sci_mode=False)


def max_diff(a, b):
    # largest absolute difference of two tensors, as a Python float
    return (a - b).abs().max().item()


def rand(*shape, seed=0, dtype=torch.float64):
    # a reproducible standard-normal tensor, float64 unless asked otherwise
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)
""")

md(r"""
## 1. What softmax attention costs

Causal softmax attention (unit 06) for one head with queries, keys and values $Q, K \in \mathbb{R}^{T\times d_k}$,
$V \in \mathbb{R}^{T\times d_v}$ is

$$O = \mathrm{softmax}\Big(\frac{QK^\top}{\sqrt{d_k}} + M\Big)V, \qquad M_{ts} = \begin{cases}0 & s \le t\\ -\infty & s > t.\end{cases}$$

Written this way it builds the $T\times T$ score matrix, so it needs $O(T^2 d)$ time and $O(T^2)$
memory per head. We write it from scratch, batch-first with heads, `(B, H, T, d)`, and check it
against PyTorch's fused `F.scaled_dot_product_attention` (SDPA) in float64, where both should agree
to rounding.
""")

code(r"""
def naive_attention(q, k, v):
    # causal softmax attention that materialises the scores: q, k (B, H, T, d_k), v (B, H, T, d_v)
    seq_len, d_k = q.shape[-2:]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)                              # (B, H, T, T)
    future = torch.ones(seq_len, seq_len, dtype=torch.bool, device=q.device).triu(1)  # (T, T)
    weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)            # (B, H, T, T)
    return weights @ v                                                             # (B, H, T, d_v)


q, k, v = rand(2, 3, 50, 16, seed=1), rand(2, 3, 50, 16, seed=2), rand(2, 3, 50, 8, seed=3)
reference = F.scaled_dot_product_attention(q, k, v, is_causal=True)               # (B, H, T, d_v)
print("naive attention equals F.scaled_dot_product_attention:", max_diff(naive_attention(q, k, v), reference) < 1e-12)
print("and course_utils.fast_attention.naive_attention:", max_diff(naive_attention(q, k, v), fa.naive_attention(q, k, v)) < 1e-12)
assert max_diff(naive_attention(q, k, v), reference) < 1e-12
assert max_diff(naive_attention(q, k, v), fa.naive_attention(q, k, v)) < 1e-12
""")

md(r"""
To *measure* memory the same way on any device we count it ourselves. `PeakMemory` below is a
`TorchDispatchMode`: PyTorch calls it for every elementary operation run inside the `with` block,
so it sees every tensor that an operation creates, adds its bytes to a running total, and subtracts
them again (through a `weakref.finalize` on the tensor's storage) when the tensor is freed. Its
`peak` is the most memory the computation held at once, not counting its inputs. It depends only on
the operations and the shapes, so it gives the same numbers on a laptop, a server and a GPU
(`torch.cuda.max_memory_allocated` would measure the same on CUDA, but there is no CPU equivalent).
""")

code(r"""
class PeakMemory(TorchDispatchMode):
    # `with PeakMemory() as m: ...` -> m.peak: the most bytes of tensors created in the block alive at once
    def __enter__(self):
        self.live, self.current, self.peak = {}, 0, 0
        return super().__enter__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                key = storage.data_ptr()
                if key in self.live or storage.nbytes() == 0:    # a view of a tensor we already count
                    continue
                self.live[key] = storage.nbytes()
                self.current += storage.nbytes()
                self.peak = max(self.peak, self.current)
                weakref.finalize(storage, self._free, key)
        return out

    def _free(self, key):
        self.current -= self.live.pop(key, 0)


x = rand(1000, dtype=torch.float32)
with PeakMemory() as memory:
    a, b = x * 2, x * 3          # two new tensors of 4000 bytes each, alive together
    del a, b
    c = x + 1                    # a third one, after the first two were freed
print("peak bytes:", memory.peak, "| still alive:", memory.current)
assert memory.peak == 8000 and memory.current == 4000
""")

md(r"""
Now the cost against $T$: one head-batch of 4 heads with $d = 32$, in float32 on the CPU, each time
the fastest of three runs. We fit the growth exponent, the slope of $\log(\text{cost})$ against
$\log T$: 2 means quadratic. Memory is exactly quadratic (the scores, the mask, the softmax); time
approaches 2 once the $T^2$ work outweighs fixed overheads, and for comparison we time SDPA too.
From here on the course's version, `course_utils.fast_attention.naive_attention`, does the work.
""")

code(
    r"""
def seconds(fn, *args, repeats=3):
    # fastest of `repeats` calls of fn(*args), in seconds (the first call warms up)
    fn(*args)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - start)
    return best


def slope(xs, ys):
    # least-squares slope of log y against log x: the growth exponent
    lx, ly = torch.tensor(xs, dtype=torch.float64).log(), torch.tensor(ys, dtype=torch.float64).log()
    lx = lx - lx.mean()
    return ((lx * (ly - ly.mean())).sum() / (lx * lx).sum()).item()


LENGTHS = (256, 512, 1024, 2048)
cost = {"naive time": [], "sdpa time": [], "naive memory": []}
with torch.no_grad():
    for seq_len in LENGTHS:
        q = k = v = rand(1, 4, seq_len, 32, seed=seq_len, dtype=torch.float32)    # (B, H, T, d)
        cost["naive time"].append(seconds(fa.naive_attention, q, k, v))
        cost["sdpa time"].append(seconds(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True), q, k, v))
        with PeakMemory() as memory:
            fa.naive_attention(q, k, v)
        cost["naive memory"].append(memory.peak)
for seq_len, t_naive, t_sdpa, mem in zip(LENGTHS, cost["naive time"], cost["sdpa time"], cost["naive memory"]):
    print(f"T = {seq_len:5d}: naive {1000 * t_naive:7.2f} ms, SDPA {1000 * t_sdpa:6.2f} ms, naive peak memory {mem / 2**20:6.1f} MiB")
growth = {name: slope(LENGTHS, values) for name, values in cost.items()}
print("growth exponents:", {name: round(g, 2) for name, g in growth.items()})
assert 1.9 < growth["naive memory"] < 2.1, f"memory grows as T^2: got exponent {growth['naive memory']:.2f}"
assert cost["naive memory"][-1] > 100 * 2**20, "over a hundred megabytes at T = 2048"
time_exponent = slope(LENGTHS[1:], cost["naive time"][1:])
assert time_exponent > 1.3, f"time grows faster than linearly, towards T^2: got exponent {time_exponent:.2f}"
assert cost["sdpa time"][-1] < cost["naive time"][-1], "the fused SDPA is faster than the naive formula at T = 2048"

fig, ax = plt.subplots(figsize=(6, 3.2))
for name, values in cost.items():
    ax.loglog(LENGTHS, values if "memory" in name else [1e3 * t for t in values], "o-", label=name + (" (bytes)" if "memory" in name else " (ms)"))
ax.loglog(LENGTHS, [cost["naive memory"][0] * (n / LENGTHS[0]) ** 2 for n in LENGTHS], "k:", label="T² reference")
ax.set(xlabel="sequence length T", title="causal softmax attention, 4 heads, d = 32 (CPU)")
ax.legend(fontsize=8)
plt.show()
""",
    IGNORE,
)

md(r"""
The memory line follows the $T^2$ reference line: at $T = 2048$ four heads of naive attention
already hold more than a hundred megabytes at their peak, and a real model has dozens of heads and layers. SDPA is faster
(it is fused and, on a GPU, tiled as in section 3), but the naive formula's time also bends
towards slope 2. The rest of this unit is about two ways out: compute the *same* attention with less
memory (sections 2–3), or change the model so that nothing grows as $T^2$ (sections 4–9).

## 2. A key-value cache for generation

A causal model that writes one token at a time runs its whole forward pass over the entire prefix
for every new token, although the keys and values of the old positions never change (causality: a
position's keys and values depend only on the positions before it). A **key-value cache** keeps,
for every layer, the keys and values of the positions already seen; each new token computes only its
own query, key and value, appends the key and value to the cache and attends to the cache. The
output is the same *exactly* — the cache changes where the arithmetic is done, not what is computed —
but a step now costs $O(t\,d)$ for attention plus $O(d^2)$ for the projections instead of a full
forward pass over $t$ tokens.

Below, greedy generation with `course_utils.gpt.GPT` (Pre-LN, learned positions, unit 07) twice:
calling the model on the whole prefix at every step, and a step function that reads the model's own
weights and carries a cache. The cache adds nothing to the model, so `GPT` itself needs no change.
""")

code(r"""
@torch.no_grad()
def generate_without_cache(model, prompt, max_new_tokens):
    # greedy decoding, recomputing the whole prefix at every step: prompt (B, T0) -> (B, T0 + n)
    idx = prompt
    for _ in range(max_new_tokens):
        logits = model(idx[:, -model.config.block_size:])                   # (B, t, V)
        idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return idx


@torch.no_grad()
def gpt_step(model, token, position, cache):
    # one token through a Pre-LN GPT with a key-value cache: token (B, 1) -> logits (B, V); cache: [(K, V)] per layer
    config = model.config
    assert config.norm_first and config.position == "learned" and config.residual == "plain"
    num_heads, d_head = config.num_heads, config.d_model // config.num_heads
    x = model.tok_emb(token) + model.pos_emb.weight[position]                 # (B, 1, D)
    for layer, block in enumerate(model.blocks):
        q, k, v = block.attn.qkv(block.norm1(x)).split(config.d_model, dim=-1)  # (B, 1, D) each
        q, k, v = (t.view(t.shape[0], 1, num_heads, d_head).transpose(1, 2) for t in (q, k, v))  # (B, H, 1, d_head)
        if cache[layer] is not None:
            k = torch.cat([cache[layer][0], k], dim=2)                        # (B, H, t, d_head)
            v = torch.cat([cache[layer][1], v], dim=2)                        # (B, H, t, d_head)
        cache[layer] = (k, v)
        weights = (q @ k.transpose(-2, -1) / math.sqrt(d_head)).softmax(-1)   # (B, H, 1, t): every cached key is in the past
        out = (weights @ v).transpose(1, 2).reshape(x.shape)                  # (B, 1, D)
        x = x + block.attn.proj(out)
        x = x + block.ffn(block.norm2(x))
    return model.head(model.norm_f(x))[:, -1]                                 # (B, V)


@torch.no_grad()
def generate_with_cache(model, prompt, max_new_tokens):
    # greedy decoding with a key-value cache: prompt (B, T0) -> (B, T0 + n)
    cache, idx = [None] * model.config.num_layers, prompt
    for position in range(prompt.shape[1] + max_new_tokens - 1):
        logits = gpt_step(model, idx[:, position:position + 1], position, cache)   # (B, V)
        if position >= prompt.shape[1] - 1:
            idx = torch.cat([idx, logits.argmax(-1, keepdim=True)], dim=1)
    return idx


seed_everything(0)
model = GPT(GPTConfig(vocab_size=100, block_size=256, num_layers=2, num_heads=4, d_model=64)).eval()
prompt = torch.randint(0, 100, (1, 16), generator=torch.Generator().manual_seed(0))   # (1, T0)
same = torch.equal(generate_with_cache(model.double(), prompt, 60), generate_without_cache(model.double(), prompt, 60))
print("greedy decoding (float64) writes the same 60 tokens with and without the cache:", same)
print("and the same as course_utils.fast_attention.generate_with_cache:",
      torch.equal(fa.generate_with_cache(model, prompt, 60), generate_with_cache(model, prompt, 60)))
assert same and torch.equal(fa.generate_with_cache(model, prompt, 60), generate_with_cache(model, prompt, 60))
""")

md(r"""
How much work does the cache save? Without it, step $i$ runs the model on all $T_0 + i$ tokens of
the prefix: generating $n$ tokens processes $\sum_i (T_0+i) \approx n T_0 + n^2/2$ token positions.
With it, each position goes through the model once. The count below is exact; the timing (float32,
on the CPU, a batch of 4 sequences, 120 new tokens after a 16-token prompt, with the course's
`fa.generate_with_cache` and `fa.generate_without_cache`, which process the prompt in one pass) is
checked only as a coarse ratio that holds on any CPU: for a model this small, fixed per-operation
overheads eat much of the saving, and the gap widens with the model, the batch and the context.
""")

code(
    r"""
new_tokens = 120
positions_without = sum(prompt.shape[1] + i for i in range(new_tokens))           # per sequence
positions_with = prompt.shape[1] + new_tokens - 1
print(f"token positions run through the model: {positions_without} without the cache, {positions_with} with it")
assert positions_without > 10 * positions_with

model = model.float()
prompts = torch.randint(0, 100, (4, 16), generator=torch.Generator().manual_seed(1))   # (B, T0)
t_without = seconds(fa.generate_without_cache, model, prompts, new_tokens, repeats=1)
t_with = seconds(fa.generate_with_cache, model, prompts, new_tokens, repeats=1)
print(f"tokens per second: {4 * new_tokens / t_without:.0f} without the cache, {4 * new_tokens / t_with:.0f} with it "
      f"({t_without / t_with:.1f}x)")
assert t_without > 1.5 * t_with, f"the cache makes generation faster: got {t_without / t_with:.2f}x"
""",
    IGNORE,
)

md(r"""
The cache is not free: it holds $2 \times \text{layers} \times t \times D$ numbers per sequence, growing
with every token (for a 7-billion-parameter model with 32 layers of width 4096 in 16-bit floats,
$2\cdot 32\cdot 4096\cdot 2$ bytes, half a megabyte per token).
Section 4 will replace it with a state of constant size.

## 3. Tiled attention and the online softmax

The $T\times T$ matrix is needed only because the softmax normalises each row over all its entries.
The **online softmax** (Milakov and Gimelshein, "Online normalizer calculation for softmax", 2018)
normalises in one pass instead. Read a row's scores in blocks, and keep three running quantities for
each query: the largest score so far $m$, the sum $\ell = \sum_s e^{x_s - m}$ and the unnormalised
output $a = \sum_s e^{x_s - m} v_s$. When a new block with scores $x_{s}$ arrives,

$$m' = \max\big(m, \max_s x_s\big), \qquad \ell' = e^{m - m'}\ell + \sum_s e^{x_s - m'}, \qquad a' = e^{m - m'}a + \sum_s e^{x_s - m'} v_s,$$

and at the end $o = a/\ell$. The factor $e^{m - m'} \le 1$ rescales what was accumulated so far to the
new maximum, so no exponential ever overflows, and the result is exactly the softmax-weighted sum.
The log-sum-exp of the row, $m + \log \ell$, comes for free (training's backward pass needs it).
**FlashAttention** (Dao et al., "FlashAttention: Fast and Memory-Efficient Exact Attention with
IO-Awareness", 2022) tiles both queries and keys this way, so that each tile fits in a GPU's fast
on-chip memory: it does the same arithmetic as naive attention but moves far fewer bytes, and holds
$O(T\,d)$ memory instead of $O(T^2)$. From scratch, for causal attention (key blocks past the
diagonal are skipped altogether):
""")

code(r"""
def my_tiled_attention(q, k, v, block_size=64):
    # causal attention by blocks with the online softmax: q, k (B, H, T, d_k), v (B, H, T, d_v)
    # -> out (B, H, T, d_v) and the log-sum-exp of each row of scores, lse (B, H, T)
    seq_len, d_k = q.shape[-2:]
    out = q.new_empty(*q.shape[:-1], v.shape[-1])                              # (B, H, T, d_v)
    lse = q.new_empty(q.shape[:-1])                                            # (B, H, T)
    for i in range(0, seq_len, block_size):
        q_block = q[..., i:i + block_size, :] / math.sqrt(d_k)                 # (B, H, bq, d_k)
        rows = torch.arange(i, min(i + block_size, seq_len), device=q.device)  # (bq,)
        m = q.new_full((*q_block.shape[:-1], 1), float("-inf"))               # (B, H, bq, 1) running max
        ell = q.new_zeros(*q_block.shape[:-1], 1)                              # (B, H, bq, 1) running sum
        acc = q.new_zeros(*q_block.shape[:-1], v.shape[-1])                    # (B, H, bq, d_v)
        for j in range(0, min(i + block_size, seq_len), block_size):          # key blocks up to the diagonal
            scores = q_block @ k[..., j:j + block_size, :].transpose(-2, -1)   # (B, H, bq, bk)
            cols = torch.arange(j, min(j + block_size, seq_len), device=q.device)
            scores = scores.masked_fill(cols[None, :] > rows[:, None], float("-inf"))
            m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))        # (B, H, bq, 1)
            p = torch.exp(scores - m_new)                                      # (B, H, bq, bk)
            rescale = torch.exp(m - m_new)                                     # (B, H, bq, 1)
            ell = rescale * ell + p.sum(dim=-1, keepdim=True)
            acc = rescale * acc + p @ v[..., j:j + block_size, :]              # (B, H, bq, d_v)
            m = m_new
        out[..., i:i + block_size, :] = acc / ell
        lse[..., i:i + block_size] = (m + ell.log()).squeeze(-1)
    return out, lse


q, k, v = rand(2, 3, 200, 16, seed=4), rand(2, 3, 200, 16, seed=5), rand(2, 3, 200, 8, seed=6)
out, lse = my_tiled_attention(q, k, v, block_size=64)                          # 200 = 3 full blocks + 8
scores = (q @ k.transpose(-2, -1) / 4).masked_fill(torch.ones(200, 200, dtype=torch.bool).triu(1), float("-inf"))
print("tiled attention equals F.scaled_dot_product_attention (float64):",
      max_diff(out, F.scaled_dot_product_attention(q, k, v, is_causal=True)) < 1e-12)
print("its log-sum-exp equals torch.logsumexp of the masked scores:", max_diff(lse, scores.logsumexp(-1)) < 1e-12)
q32, k32, v32 = q.float(), k.float(), v.float()
print("in float32 too (within 1e-5):",
      max_diff(my_tiled_attention(q32, k32, v32)[0], F.scaled_dot_product_attention(q32, k32, v32, is_causal=True)) < 1e-5)
assert max_diff(out, F.scaled_dot_product_attention(q, k, v, is_causal=True)) < 1e-12
assert max_diff(lse, scores.logsumexp(-1)) < 1e-12
assert max_diff(my_tiled_attention(q32, k32, v32)[0], F.scaled_dot_product_attention(q32, k32, v32, is_causal=True)) < 1e-5
library_out, library_lse = fa.tiled_attention(q, k, v, block_size=64, return_lse=True)
print("course_utils.fast_attention.tiled_attention agrees:", max_diff(out, library_out) < 1e-12 and max_diff(lse, library_lse) < 1e-12)
assert max_diff(out, library_out) < 1e-12 and max_diff(lse, library_lse) < 1e-12
""")

md(r"""
Same numbers; now the memory, measured on the course's versions (`fa.naive_attention`, `fa.tiled_attention`). Naive attention's peak grows fourfold when $T$ doubles, the tiled
version's only twofold: it holds the output, one block of queries with its running statistics and
one $64\times 64$ block of scores at a time. (Our loop is written in Python for clarity, not speed;
FlashAttention's speed comes from running the same loop inside one GPU kernel, where the tiles stay
in fast on-chip memory and the saving is in memory traffic.)
""")

code(
    r"""
peaks = {"naive": [], "tiled": []}
with torch.no_grad():
    for seq_len in (1024, 2048):
        q = k = v = rand(1, 4, seq_len, 32, seed=seq_len, dtype=torch.float32)   # (B, H, T, d)
        for name, fn in (("naive", fa.naive_attention), ("tiled", fa.tiled_attention)):
            with PeakMemory() as memory:
                fn(q, k, v)
            peaks[name].append(memory.peak)
for name, (small, large) in peaks.items():
    print(f"{name}: peak {small / 2**20:6.2f} MiB at T = 1024, {large / 2**20:6.2f} MiB at T = 2048 (x{large / small:.2f})")
assert 3.6 < peaks["naive"][1] / peaks["naive"][0] < 4.4, "naive: quadratic"
assert 1.6 < peaks["tiled"][1] / peaks["tiled"][0] < 2.4, "tiled: linear"
assert peaks["tiled"][1] < peaks["naive"][1] / 20, "tiled attention holds far less at T = 2048"
""",
    IGNORE,
)

md(r"""
## 4. Linear attention

Write one row of causal softmax attention as a weighted average with a *similarity* $\mathrm{sim}(q, k) = \exp(q^\top k/\sqrt{d})$:
$o_t = \sum_{s\le t} \mathrm{sim}(q_t, k_s)\, v_s \,/\, \sum_{s\le t}\mathrm{sim}(q_t, k_s)$. Katharopoulos et
al. ("Transformers are RNNs: Fast Autoregressive Transformers with Linear Attention", 2020) replace
the exponential by a dot product of **feature maps**, $\mathrm{sim}(q, k) = \phi(q)^\top\phi(k)$, with
$\phi(x) = \mathrm{elu}(x) + 1 > 0$ so that the weights stay positive. (Performer, Choromanski et al.,
"Rethinking Attention with Performers", 2020, instead draws random features whose dot product equals
$\exp(q^\top k)$ in expectation, approximating softmax attention itself.) The sums then factor:

$$o_t = \frac{\phi(q_t)^\top \sum_{s\le t} \phi(k_s)\,v_s^\top}{\phi(q_t)^\top \sum_{s \le t}\phi(k_s)}
= \frac{\phi(q_t)^\top S_t}{\phi(q_t)^\top z_t}, \qquad S_t = S_{t-1} + \phi(k_t)\,v_t^\top,\quad z_t = z_{t-1} + \phi(k_t).$$

That is a recurrent network whose state is a $d_k\times d_v$ matrix $S_t$ and a vector $z_t$: each new
token costs $O(d_k d_v)$ whatever $t$ is, and the memory of generation is constant. (We store $S$ as
$d_k \times d_v$ so that $o_t = \phi(q_t)^\top S_t$; many papers write its transpose, $o_t = S_t q_t$.) Three ways to compute
the same thing:

- **parallel**: $O = \big((\phi(Q)\phi(K)^\top) \odot M\big)V$ row-normalised, with $M$ the lower-triangular
  matrix of ones — $O(T^2)$ again, but all matrix products, good for training on short sequences;
- **recurrent**: the loop above, $O(T\, d_k d_v)$, for generation;
- **chunkwise**: cut the sequence into chunks of $C$ tokens, use the parallel form *inside* each chunk
  and carry the state $S$ *between* chunks: $O(T\,C\,d + T\,d_k d_v)$ with matrix products throughout. This is
  how linear-attention models are trained on long sequences.
""")

code(r"""
def elu_feature_map(x):
    return F.elu(x) + 1                                                         # positive features


def linear_parallel(q, k, v):
    # q, k (B, H, T, d_k) after the feature map, v (B, H, T, d_v) -> (B, H, T, d_v)
    weights = (q @ k.transpose(-2, -1)).tril()                                  # (B, H, T, T), zero above the diagonal
    return (weights @ v) / weights.sum(dim=-1, keepdim=True)


def linear_recurrent(q, k, v):
    S = q.new_zeros(*q.shape[:2], q.shape[-1], v.shape[-1])                     # (B, H, d_k, d_v)
    z = q.new_zeros(*q.shape[:2], q.shape[-1])                                  # (B, H, d_k)
    outs = []
    for t in range(q.shape[2]):
        S = S + k[:, :, t, :, None] * v[:, :, t, None, :]                      # + k_t v_t^T
        z = z + k[:, :, t]
        numerator = (q[:, :, t, None, :] @ S).squeeze(-2)                       # (B, H, d_v)
        outs.append(numerator / (q[:, :, t] * z).sum(-1, keepdim=True))
    return torch.stack(outs, dim=2)                                             # (B, H, T, d_v)


def linear_chunkwise(q, k, v, chunk_size=16):
    S = q.new_zeros(*q.shape[:2], q.shape[-1], v.shape[-1])                     # (B, H, d_k, d_v) state between chunks
    z = q.new_zeros(*q.shape[:2], q.shape[-1], 1)                               # (B, H, d_k, 1)
    outs = []
    for c in range(0, q.shape[2], chunk_size):
        qc, kc, vc = (t[:, :, c:c + chunk_size] for t in (q, k, v))             # (B, H, C, d)
        inside = (qc @ kc.transpose(-2, -1)).tril()                             # (B, H, C, C)
        numerator = qc @ S + inside @ vc                                        # (B, H, C, d_v): past chunks + this chunk
        denominator = qc @ z + inside.sum(-1, keepdim=True)                     # (B, H, C, 1)
        outs.append(numerator / denominator)
        S = S + kc.transpose(-2, -1) @ vc
        z = z + kc.sum(dim=2)[..., None]
    return torch.cat(outs, dim=2)                                               # (B, H, T, d_v)


q_raw, k_raw, v = rand(2, 3, 100, 8, seed=7), rand(2, 3, 100, 8, seed=8), rand(2, 3, 100, 4, seed=9)
q, k = elu_feature_map(q_raw), elu_feature_map(k_raw)                          # (B, H, T, d_k)
parallel = linear_parallel(q, k, v)
print("recurrent equals parallel:", max_diff(linear_recurrent(q, k, v), parallel) < 1e-12)
print("chunkwise (chunks of 16, the last one short) equals parallel:", max_diff(linear_chunkwise(q, k, v, 16), parallel) < 1e-12)
assert max_diff(linear_recurrent(q, k, v), parallel) < 1e-12
assert max_diff(linear_chunkwise(q, k, v, 16), parallel) < 1e-12
library = {"parallel": la.linear_attention_parallel(q_raw, k_raw, v), "recurrent": la.linear_attention_recurrent(q_raw, k_raw, v),
           "chunkwise": la.linear_attention_chunkwise(q_raw, k_raw, v, chunk_size=16)}   # they apply elu + 1 themselves
print("course_utils.linear_attention's three forms agree:", all(max_diff(out, parallel) < 1e-12 for out in library.values()))
assert all(max_diff(out, parallel) < 1e-12 for out in library.values())
""")

md(r"""
What generation holds in memory, per layer and head, after $t$ tokens: the key-value cache keeps
$2\,t\,d$ numbers, linear attention its state, $d_k d_v + d_k$ numbers, whatever $t$. The cell counts
bytes in float32 for $d = 64$ and measures, with `PeakMemory`, what *one generation step* allocates
at two context lengths: with a cache the step's attention grows with $t$, the recurrent step does not.
""")

code(r"""
d = 64
print(f"{'tokens so far':>13s} {'KV cache (bytes)':>17s} {'linear-attention state (bytes)':>31s}")
for t in (16, 256, 4096, 65536):
    print(f"{t:13d} {2 * t * d * 4:17d} {(d * d + d) * 4:31d}")

step_peak = {}
for t in (256, 4096):
    K_cache, V_cache = torch.zeros(1, 1, t, d), torch.zeros(1, 1, t, d)           # (B, H, t, d)
    S, z = torch.zeros(1, 1, d, d), torch.zeros(1, 1, d)                           # (B, H, d, d), (B, H, d)
    q_t = k_t = v_t = torch.ones(1, 1, 1, d)                                       # (B, H, 1, d): the new token
    with PeakMemory() as memory:                                                   # softmax step: append, attend to t + 1 keys
        keys, values = torch.cat([K_cache, k_t], 2), torch.cat([V_cache, v_t], 2)
        ((q_t @ keys.transpose(-2, -1)).softmax(-1) @ values)
    step_peak["softmax", t] = memory.peak
    with PeakMemory() as memory:                                                   # linear step: update the state, read it
        S_new, z_new = S + k_t[0, 0, 0, :, None] * v_t[0, 0, 0], z + k_t[:, :, 0]
        (q_t[:, :, 0, None, :] @ S_new).squeeze(-2) / (q_t[:, :, 0] * z_new).sum(-1, keepdim=True)
    step_peak["linear", t] = memory.peak
print("bytes allocated by one generation step at t = 256 and t = 4096:",
      {kind: (step_peak[kind, 256], step_peak[kind, 4096]) for kind in ("softmax", "linear")})
assert step_peak["linear", 256] == step_peak["linear", 4096], "the recurrent step does not depend on t"
assert step_peak["softmax", 4096] > 10 * step_peak["softmax", 256], "the cached step grows with t"
""")

md(r"""
The price is expressiveness: a $d_k\times d_v$ matrix can store only about $d_k$ key-value associations
without interference (a sum of outer products $\sum_s \phi(k_s)v_s^\top$, read out by a dot product), while
softmax attention can retrieve any of its $t$ cached values sharply. Linear attention also never
forgets: $S_t$ only grows. The models of the next section fix that with a *decay*.

## 5. One recurrence, many models

Drop the normaliser $z_t$ (the models below replace it by a normalisation of the output) and give the
state a multiplicative **decay** $a_t$ and a possibly different **write**:

$$S_t = a_t\,S_{t-1} + k_t\,v_t^\top, \qquad o_t = S_t^\top q_t .$$

Each row of the table is a one-line change of this recurrence:

| model | decay $a_t$ | write |
|---|---|---|
| linear attention (Katharopoulos et al. 2020) | $1$ | $k_t v_t^\top$ |
| RetNet (Sun et al. 2023, "Retentive Network") | a fixed $\gamma_h$ per head | $k_t v_t^\top$ |
| gated linear attention / Mamba-2 (Yang et al. 2023, "GLA"; Dao and Gu 2024, "Transformers are SSMs") | data-dependent, $a_t = \sigma(w^\top x_t + b)$ | $k_t v_t^\top$ |
| DeltaNet (Schlag et al. 2021; Yang et al. 2024) | $1$ | $\beta_t\,k_t\,(v_t - S_{t-1}^\top k_t)^\top$: the *delta rule* |
| mLSTM (Beck et al. 2024, "xLSTM") | forget gate $f_t$ | $i_t\,k_t v_t^\top$, exponential $i_t$, with normaliser and stabiliser |

(GLA's decay is a vector per channel and Mamba-2's a scalar per head; we use a scalar per head.)
Each also has a **parallel form**, an attention matrix with a decay mask. Unrolling the recurrence,
$o_t = \sum_{s\le t}\big(\prod_{r=s+1}^{t} a_r\big)(q_t^\top k_s)\,v_s$, so

$$O = \big((QK^\top) \odot D\big)V, \qquad D_{ts} = \prod_{r=s+1}^{t} a_r = \exp\big(L_t - L_s\big)\ (s\le t), \quad L_t = \sum_{r\le t}\log a_r,$$

which for RetNet is $D_{ts} = \gamma^{t-s}$. One recurrent function serves all of them; the parallel
forms follow.
""")

code(r"""
def decay_recurrence(q, k, v, log_decay=None, beta=None):
    # S_t = a_t S_{t-1} + k_t v_t^T (or the delta rule when beta (B, H, T) is given), o_t = S_t^T q_t
    # q, k (B, H, T, d_k), v (B, H, T, d_v); log_decay: None (a_t = 1), (H,) fixed or (B, H, T) per step
    # -> out (B, H, T, d_v), final state (B, H, d_k, d_v)
    batch_size, num_heads, seq_len, d_k = q.shape
    S = q.new_zeros(batch_size, num_heads, d_k, v.shape[-1])                    # (B, H, d_k, d_v)
    outs = []
    for t in range(seq_len):
        if log_decay is not None:
            a_t = log_decay.exp() if log_decay.dim() == 1 else log_decay[:, :, t].exp()   # (H,) or (B, H)
            S = a_t[..., None, None] * S
        k_t, v_t = k[:, :, t], v[:, :, t]                                       # (B, H, d_k), (B, H, d_v)
        if beta is None:
            S = S + k_t[..., :, None] * v_t[..., None, :]
        else:                                                                   # delta rule: correct what S recalls for k_t
            recalled = (k_t[..., None, :] @ S).squeeze(-2)                       # (B, H, d_v) = S^T k_t
            S = S + beta[:, :, t, None, None] * k_t[..., :, None] * (v_t - recalled)[..., None, :]
        outs.append((q[:, :, t, None, :] @ S).squeeze(-2))                      # (B, H, d_v)
    return torch.stack(outs, dim=2), S


def decayed_attention(q, k, v, log_decay_mask):
    # the parallel form: ((Q K^T) * D) V with D = exp(log_decay_mask), -inf above the diagonal
    return ((q @ k.transpose(-2, -1)) * log_decay_mask.exp()) @ v              # (B, H, T, d_v)


def retnet_parallel(q, k, v, gamma):
    # gamma (H,): D_ts = gamma^(t - s) for s <= t
    seq_len = q.shape[2]
    offset = (torch.arange(seq_len)[:, None] - torch.arange(seq_len)[None, :]).to(q.dtype)   # (T, T): t - s
    log_mask = offset * gamma.log()[:, None, None]                                           # (H, T, T)
    return decayed_attention(q, k, v, log_mask.masked_fill(offset < 0, float("-inf")))


def gated_parallel(q, k, v, log_decay):
    # log_decay (B, H, T): D_ts = exp(L_t - L_s) with L the cumulative sum of log a
    L = log_decay.cumsum(dim=-1)                                                # (B, H, T)
    log_mask = L[..., :, None] - L[..., None, :]                                # (B, H, T, T)
    future = torch.ones(q.shape[2], q.shape[2], dtype=torch.bool).triu(1)
    return decayed_attention(q, k, v, log_mask.masked_fill(future, float("-inf")))


q, k, v = rand(2, 3, 60, 8, seed=10), rand(2, 3, 60, 8, seed=11), rand(2, 3, 60, 5, seed=12)
print("a_t = 1 is (unnormalised) linear attention:",
      max_diff(decay_recurrence(q, k, v)[0], (q @ k.transpose(-2, -1)).tril() @ v) < 1e-10)
gamma = 1 - 2.0 ** (-5 - torch.arange(3, dtype=torch.float64))                  # RetNet's per-head decays
print("RetNet, gamma =", [round(g, 5) for g in gamma.tolist()], "recurrent equals parallel:",
      max_diff(decay_recurrence(q, k, v, log_decay=gamma.log())[0], retnet_parallel(q, k, v, gamma)) < 1e-10)
gate_logits = rand(2, 3, 60, seed=13) + 2.0                                     # w^T x_t + b, one per head and step
log_a = F.logsigmoid(gate_logits)                                               # (B, H, T): log a_t = log sigmoid(...)
print("gated (data-dependent decay) recurrent equals parallel:",
      max_diff(decay_recurrence(q, k, v, log_decay=log_a)[0], gated_parallel(q, k, v, log_a)) < 1e-10)
assert max_diff(decay_recurrence(q, k, v)[0], (q @ k.transpose(-2, -1)).tril() @ v) < 1e-10
assert max_diff(decay_recurrence(q, k, v, log_decay=gamma.log())[0], retnet_parallel(q, k, v, gamma)) < 1e-10
assert max_diff(decay_recurrence(q, k, v, log_decay=log_a)[0], gated_parallel(q, k, v, log_a)) < 1e-10
""")

md(r"""
**Forgetting, seen in the state.** With $a_t = 1$ the state's size grows with every token; with a
decay it settles, because old writes fade geometrically (RetNet's effective memory is about
$1/(1-\gamma)$ tokens). The gate of GLA and Mamba-2 lets the *input* decide: a token can close the
gate ($a_t \approx 0$) and wipe the memory, or hold it open.
""")

code(
    r"""
q, k, v = rand(1, 1, 400, 8, seed=14), rand(1, 1, 400, 8, seed=15), rand(1, 1, 400, 8, seed=16)
norms = {}
for name, log_decay in (("a = 1", None), ("RetNet, gamma = 0.95", torch.tensor([0.95], dtype=torch.float64).log())):
    norms[name] = [decay_recurrence(q[:, :, :t], k[:, :, :t], v[:, :, :t], log_decay)[1].norm().item() for t in (100, 400)]
    print(f"{name:22s} state norm after 100 and 400 tokens: {norms[name][0]:.1f}, {norms[name][1]:.1f}")
close = torch.zeros(1, 1, 400, dtype=torch.float64)
close[..., 199] = -50.0                                                        # token 200 closes the gate: a = e^-50
wiped = decay_recurrence(q, k, v, log_decay=close)[0]
restarted = decay_recurrence(q[:, :, 199:], k[:, :, 199:], v[:, :, 199:])[0]
print("after a closed gate the model behaves as if the sequence started there:", max_diff(wiped[:, :, 199:], restarted) < 1e-10)
assert norms["a = 1"][1] > 1.5 * norms["a = 1"][0], "without decay the state keeps growing (as sqrt(t) for random writes)"
assert abs(norms["RetNet, gamma = 0.95"][1] / norms["RetNet, gamma = 0.95"][0] - 1) < 0.5, "with decay it settles"
assert max_diff(wiped[:, :, 199:], restarted) < 1e-10
""",
    IGNORE,
)

md(r"""
**DeltaNet.** Linear attention only *adds* to its memory: writing a new value under a key that is
already stored superimposes the two. The delta rule of Schlag et al. ("Linear Transformers Are
Secretly Fast Weight Programmers", 2021) first reads what the memory recalls for $k_t$,
$S_{t-1}^\top k_t$, and writes only the correction, with a learning rate $\beta_t\in(0,1)$:
$S_t = S_{t-1} + \beta_t k_t (v_t - S_{t-1}^\top k_t)^\top$ — one step of gradient descent on
$\tfrac12\|S^\top k_t - v_t\|^2$. With unit-length keys and $\beta = 1$ it overwrites exactly.

Its parallel form (Yang et al., "Parallelizing Linear Transformers with the Delta Rule over Sequence
Length", 2024) is not a decay mask. Write the state as a sum $S_t = \sum_{s\le t} k_s u_s^\top$ of
"pseudo-values" $u_s = \beta_s(v_s - S_{s-1}^\top k_s)$. Substituting the sum into the definition gives
$u_t + \beta_t\sum_{s<t}(k_t^\top k_s)\,u_s = \beta_t v_t$ for every $t$: a lower-triangular linear system,

$$\big(I + \mathrm{diag}(\beta)\,\mathrm{tril}_{-1}(KK^\top)\big)\,U = \mathrm{diag}(\beta)\,V, \qquad O = \big((QK^\top)\odot M\big)\,U,$$

solved at once with a triangular solve (chunkwise in practice, with the WY representation of the
product of Householder-like factors).
""")

code(r"""
def deltanet_parallel(q, k, v, beta):
    # q, k (B, H, T, d_k) (keys of unit length), v (B, H, T, d_v), beta (B, H, T) -> (B, H, T, d_v)
    seq_len = q.shape[2]
    system = torch.eye(seq_len, dtype=q.dtype) + beta[..., :, None] * (k @ k.transpose(-2, -1)).tril(-1)  # (B, H, T, T)
    u = torch.linalg.solve_triangular(system, beta[..., None] * v, upper=False)  # (B, H, T, d_v) pseudo-values
    return (q @ k.transpose(-2, -1)).tril() @ u


q, k, v = rand(2, 3, 60, 8, seed=17), F.normalize(rand(2, 3, 60, 8, seed=18), dim=-1), rand(2, 3, 60, 5, seed=19)
beta = torch.sigmoid(rand(2, 3, 60, seed=20))                                  # (B, H, T) in (0, 1)
print("DeltaNet recurrent equals parallel (triangular solve):",
      max_diff(decay_recurrence(q, k, v, beta=beta)[0], deltanet_parallel(q, k, v, beta)) < 1e-10)
assert max_diff(decay_recurrence(q, k, v, beta=beta)[0], deltanet_parallel(q, k, v, beta)) < 1e-10

key = F.normalize(rand(1, 1, 1, 8, seed=21), dim=-1)                           # one key, two values written under it
keys, values = key.expand(1, 1, 2, 8), torch.stack([torch.ones(4), -torch.ones(4)]).double()[None, None]   # (1, 1, 2, d)
added = decay_recurrence(keys, keys, values)[1]                                # linear attention: v1 + v2
overwritten = decay_recurrence(keys, keys, values, beta=torch.ones(1, 1, 2, dtype=torch.float64))[1]
print("write (1, 1, 1, 1), then (-1, -1, -1, -1) under the same key; read back: linear attention",
      [round(x, 6) + 0.0 for x in (key[0, 0] @ added[0, 0]).tolist()[0]],
      "| DeltaNet", [round(x, 6) + 0.0 for x in (key[0, 0] @ overwritten[0, 0]).tolist()[0]])
assert torch.allclose(key[0, 0] @ added[0, 0], torch.zeros(1, 4, dtype=torch.float64), atol=1e-12), "the two writes cancel"
assert torch.allclose(key[0, 0] @ overwritten[0, 0], -torch.ones(1, 4, dtype=torch.float64)), "the second write replaces the first"
""")

md(r"""
**The mLSTM** (Beck et al., "xLSTM: Extended Long Short-Term Memory", 2024) is the same recurrence
with LSTM-style gates: a forget gate $f_t = \sigma(\tilde f_t)$ as the decay, an **exponential** input
gate $i_t = \exp(\tilde i_t)$ scaling the write, and LSTM's normaliser state:

$$C_t = f_t C_{t-1} + i_t\,k_t v_t^\top,\quad n_t = f_t n_{t-1} + i_t k_t,\quad h_t = \frac{C_t^\top q_t}{\max\big(|n_t^\top q_t|,\,1\big)}$$

(with $k_t$ scaled by $1/\sqrt{d_k}$). $\exp(\tilde i_t)$ overflows quickly, so the cell keeps a
**stabiliser** $m_t = \max(\log f_t + m_{t-1},\ \tilde i_t)$, the running maximum of the log-gates, and
stores $C_t, n_t$ divided by $e^{m_t}$: the gates become $i'_t = e^{\tilde i_t - m_t} \le 1$ and
$f'_t = e^{\log f_t + m_{t-1} - m_t} \le 1$. The ratio $C^\top q/(n^\top q)$ does not change, and the
lower bound 1 of the denominator becomes $e^{-m_t}$. Starting from $m_0 = -\infty$ makes $m_t$ exactly
the row maximum of the parallel form's log-weights
$\tilde D_{ts} = \sum_{r=s+1}^{t}\log f_r + \tilde i_s$, so the two forms agree to rounding.
""")

code(r"""
def mlstm_recurrent(q, k, v, i_pre, f_pre):
    # q, k (B, H, T, d_k), v (B, H, T, d_v), gate pre-activations i_pre, f_pre (B, H, T) -> (B, H, T, d_v)
    batch_size, num_heads, seq_len, d_k = q.shape
    C = q.new_zeros(batch_size, num_heads, d_k, v.shape[-1])                    # (B, H, d_k, d_v) matrix memory
    n = q.new_zeros(batch_size, num_heads, d_k)                                 # (B, H, d_k) normaliser
    m = q.new_full((batch_size, num_heads), float("-inf"))                      # (B, H) stabiliser
    log_f = F.logsigmoid(f_pre)
    outs = []
    for t in range(seq_len):
        m_new = torch.maximum(log_f[:, :, t] + m, i_pre[:, :, t])
        i_gate = torch.exp(i_pre[:, :, t] - m_new)[..., None]                   # (B, H, 1), at most 1
        f_gate = torch.exp(log_f[:, :, t] + m - m_new)[..., None]               # (B, H, 1), at most 1
        k_t = k[:, :, t] / math.sqrt(d_k)
        C = f_gate[..., None] * C + i_gate[..., None] * k_t[..., :, None] * v[:, :, t, None, :]
        n = f_gate * n + i_gate * k_t
        m = m_new
        numerator = (q[:, :, t, None, :] @ C).squeeze(-2)                       # (B, H, d_v)
        denominator = torch.maximum((n * q[:, :, t]).sum(-1).abs(), torch.exp(-m))[..., None]
        outs.append(numerator / denominator)
    return torch.stack(outs, dim=2)


def mlstm_parallel(q, k, v, i_pre, f_pre):
    seq_len, d_k = q.shape[2:]
    L = F.logsigmoid(f_pre).cumsum(-1)                                          # (B, H, T)
    log_D = L[..., :, None] - L[..., None, :] + i_pre[..., None, :]             # (B, H, T, T): sum of log f + i~_s
    log_D = log_D.masked_fill(torch.ones(seq_len, seq_len, dtype=torch.bool).triu(1), float("-inf"))
    m = log_D.amax(dim=-1, keepdim=True)                                        # (B, H, T, 1) the stabiliser
    weights = (q @ k.transpose(-2, -1) / math.sqrt(d_k)) * torch.exp(log_D - m) # (B, H, T, T)
    denominator = torch.maximum(weights.sum(-1, keepdim=True).abs(), torch.exp(-m))
    return (weights @ v) / denominator


q, k, v = rand(2, 3, 60, 8, seed=22), rand(2, 3, 60, 8, seed=23), rand(2, 3, 60, 5, seed=24)
i_pre, f_pre = 3 * rand(2, 3, 60, seed=25), 3 * rand(2, 3, 60, seed=26)
print("mLSTM recurrent (stabilised) equals parallel:",
      max_diff(mlstm_recurrent(q, k, v, i_pre, f_pre), mlstm_parallel(q, k, v, i_pre, f_pre)) < 1e-10)
big = i_pre + 1000.0                                                           # e^1000 overflows even float64
big_recurrent, big_parallel = mlstm_recurrent(q, k, v, big, f_pre), mlstm_parallel(q, k, v, big, f_pre)
relative = max_diff(big_recurrent, big_parallel) / big_parallel.abs().max().item()
print("with input gates of e^1000 both stay finite:", bool(big_recurrent.isfinite().all()),
      "and equal to rounding (relative difference below 1e-10):", relative < 1e-10)
assert max_diff(mlstm_recurrent(q, k, v, i_pre, f_pre), mlstm_parallel(q, k, v, i_pre, f_pre)) < 1e-10
assert torch.tensor(1000.0, dtype=torch.float64).exp().isinf() and big_recurrent.isfinite().all() and relative < 1e-10
""")

md(r"""
From here on the course's versions in `course_utils.linear_attention` serve (`decay_recurrence`,
`retnet_parallel`, `gated_parallel`, `gated_chunkwise`, `deltanet_parallel`, `mlstm_parallel`,
`mlstm_recurrent`). They agree with ours, and the library adds the chunkwise form of the gated model
(the exercise asks you to write it):
""")

code(r"""
q, k, v = rand(2, 3, 60, 8, seed=52), rand(2, 3, 60, 8, seed=53), rand(2, 3, 60, 5, seed=54)
log_a, beta = F.logsigmoid(rand(2, 3, 60, seed=55) + 2), torch.sigmoid(rand(2, 3, 60, seed=56))
unit_k = F.normalize(k, dim=-1)
checks = {
    "decay_recurrence (gated)": max_diff(la.decay_recurrence(q, k, v, log_decay=log_a)[0], decay_recurrence(q, k, v, log_decay=log_a)[0]),
    "retnet_parallel": max_diff(la.retnet_parallel(q, k, v, gamma), retnet_parallel(q, k, v, gamma)),
    "gated_parallel": max_diff(la.gated_parallel(q, k, v, log_a), gated_parallel(q, k, v, log_a)),
    "gated_chunkwise (chunks of 16)": max_diff(la.gated_chunkwise(q, k, v, log_a, chunk_size=16), gated_parallel(q, k, v, log_a)),
    "deltanet_parallel": max_diff(la.deltanet_parallel(q, unit_k, v, beta), deltanet_parallel(q, unit_k, v, beta)),
    "mlstm_parallel": max_diff(la.mlstm_parallel(q, k, v, i_pre, f_pre), mlstm_parallel(q, k, v, i_pre, f_pre)),
    "mlstm_recurrent": max_diff(la.mlstm_recurrent(q, k, v, i_pre, f_pre), mlstm_recurrent(q, k, v, i_pre, f_pre)),
}
for name, diff in checks.items():
    print(f"course_utils.linear_attention.{name} agrees: {diff < 1e-10}")
assert all(diff < 1e-10 for diff in checks.values())
""")

md(r"""
## 6. RWKV's WKV operator

RWKV (Peng et al., "RWKV: Reinventing RNNs for the Transformer Era", 2023) mixes tokens with an
operator it calls WKV. For each channel $c$ it has a learned decay rate $w_c > 0$ and a "bonus"
$u_c$ for the current token; with keys $k_i$ and values $v_i$ (one number per channel),

$$\mathrm{wkv}_t = \frac{\sum_{i<t} e^{-(t-1-i)w + k_i}\,v_i \;+\; e^{u + k_t}\,v_t}{\sum_{i<t} e^{-(t-1-i)w + k_i} \;+\; e^{u + k_t}}.$$

Read it as attention without queries: the weight of an old token is its key, exponentiated and
discounted by $e^{-w}$ per step of distance. Indeed $\mathrm{wkv}_t = \sum_i \mathrm{softmax}_i(E_{t,:})\,v_i$ with
scores $E_{ti} = k_i - (t-1-i)w$ for $i<t$ and $E_{tt} = u + k_t$: that is the **"GPT mode"**, every
position at once, for training. Written with explicit exponentials, as the formula reads, it overflows
as soon as a key exceeds about 88 in float32. The **"RNN mode"** keeps the two sums as a state
$(a, b)$ and a running maximum exponent $p$, storing $a\,e^{-p}$ and $b\,e^{-p}$, exactly the online
softmax of section 3 with the decay folded in:

- output: $q = \max(p, u + k_t)$, $\ \mathrm{wkv}_t = \dfrac{e^{p-q}a + e^{u+k_t-q}v_t}{e^{p-q}b + e^{u+k_t-q}}$;
- update: $q' = \max(p - w, k_t)$, $\ a \leftarrow e^{p-w-q'}a + e^{k_t-q'}v_t$, $\ b \leftarrow e^{p-w-q'}b + e^{k_t - q'}$, $\ p \leftarrow q'$.
""")

code(r"""
def wkv_scores(w, u, k):
    # E (B, T, T, C): E[t, i] = k_i - (t - 1 - i) w for i < t, u + k_t for i = t, -inf for i > t
    seq_len = k.shape[1]
    distance = (torch.arange(seq_len)[:, None] - 1 - torch.arange(seq_len)[None, :]).to(k.dtype)   # (T, T): t - 1 - i
    E = k[:, None, :, :] - distance[None, :, :, None] * w                      # (B, T, T, C)
    E = torch.where(distance[None, :, :, None] == -1, u + k[:, None, :, :], E)    # the diagonal i = t
    return E.masked_fill(distance[None, :, :, None] < -1, float("-inf"))


def wkv_naive(w, u, k, v):
    # the formula as written: w, u (C,), k, v (B, T, C) -> (B, T, C)
    weights = wkv_scores(w, u, k).exp()                                         # (B, T, T, C)
    return (weights * v[:, None]).sum(2) / weights.sum(2)


def wkv_gpt_mode(w, u, k, v):
    # all positions at once: a softmax over i of the scores
    return (wkv_scores(w, u, k).softmax(dim=2) * v[:, None]).sum(2)             # (B, T, C)


def wkv_rnn_mode(w, u, k, v, state=None):
    # one token at a time with the running-maximum state (a, b, p), each (B, C) -> out (B, T, C), state
    batch_size, seq_len, channels = k.shape
    if state is None:
        state = (k.new_zeros(batch_size, channels), k.new_zeros(batch_size, channels),
                 k.new_full((batch_size, channels), float("-inf")))
    a, b, p = state
    outs = []
    for t in range(seq_len):
        k_t, v_t = k[:, t], v[:, t]                                              # (B, C)
        q = torch.maximum(p, u + k_t)
        e_old, e_new = torch.exp(p - q), torch.exp(u + k_t - q)
        outs.append((e_old * a + e_new * v_t) / (e_old * b + e_new))
        q = torch.maximum(p - w, k_t)
        e_old, e_new = torch.exp(p - w - q), torch.exp(k_t - q)
        a, b, p = e_old * a + e_new * v_t, e_old * b + e_new, q
    return torch.stack(outs, dim=1), (a, b, p)


channels = 6
w, u = torch.linspace(0.05, 2.0, channels, dtype=torch.float64), rand(channels, seed=27)   # (C,) decay rates, bonus
k, v = rand(2, 40, channels, seed=28), rand(2, 40, channels, seed=29)           # (B, T, C)
print("GPT mode equals the formula:", max_diff(wkv_gpt_mode(w, u, k, v), wkv_naive(w, u, k, v)) < 1e-12)
print("RNN mode equals the formula:", max_diff(wkv_rnn_mode(w, u, k, v)[0], wkv_naive(w, u, k, v)) < 1e-12)
first, state = wkv_rnn_mode(w, u, k[:, :25], v[:, :25])
second, _ = wkv_rnn_mode(w, u, k[:, 25:], v[:, 25:], state)
print("RNN mode in two pieces, carrying the state:", max_diff(torch.cat([first, second], 1), wkv_naive(w, u, k, v)) < 1e-12)
assert max_diff(wkv_gpt_mode(w, u, k, v), wkv_naive(w, u, k, v)) < 1e-12
assert max_diff(wkv_rnn_mode(w, u, k, v)[0], wkv_naive(w, u, k, v)) < 1e-12
assert max_diff(torch.cat([first, second], 1), wkv_naive(w, u, k, v)) < 1e-12

k_big = (k + 100).float()                                                      # keys near 100: e^100 > float32's max
w32, u32, v32 = w.float(), u.float(), v.float()
naive_big, rnn_big = wkv_naive(w32, u32, k_big, v32), wkv_rnn_mode(w32, u32, k_big, v32)[0]
print("keys near 100 in float32: the formula gives NaN:", bool(naive_big.isnan().any()),
      "| RNN mode is finite:", bool(rnn_big.isfinite().all()))
# adding a constant to every key multiplies numerator and denominator alike, so wkv is unchanged
print("and equals the formula on keys shifted back by 100:", max_diff(rnn_big, wkv_naive(w32, u32, k_big - 100, v32)) < 1e-4)
assert naive_big.isnan().any() and rnn_big.isfinite().all()
assert max_diff(rnn_big, wkv_naive(w32, u32, k_big - 100, v32)) < 1e-4
print("course_utils.rwkv.wkv_stable and wkv_parallel agree:",
      max_diff(rwkv.wkv_stable(w, u, k, v)[0], wkv_naive(w, u, k, v)) < 1e-12 and max_diff(rwkv.wkv_parallel(w, u, k, v), wkv_naive(w, u, k, v)) < 1e-12)
assert max_diff(rwkv.wkv_stable(w, u, k, v)[0], wkv_naive(w, u, k, v)) < 1e-12
assert max_diff(rwkv.wkv_parallel(w, u, k, v), wkv_naive(w, u, k, v)) < 1e-12
""")

md(r"""
**An RWKV time-mixing block.** Around WKV, RWKV's block computes keys, values and a "receptance"
$r_t$ from a **token shift**: each projection sees a learned per-channel mix
$\mu \odot x_t + (1-\mu)\odot x_{t-1}$ of the current and the previous token's input, and the output
is $W_o\big(\sigma(r_t)\odot \mathrm{wkv}_t\big)$. In GPT mode the shift is one padding of the sequence;
in RNN mode the block carries $x_{t-1}$ as part of its state. The two modes of the whole block
agree, and the RNN mode's state is $4C$ numbers whatever the length of the text:
""")

code(r"""
class TimeMix(nn.Module):
    # RWKV-style time mixing: x (B, T, C) -> (B, T, C), in "gpt" mode or step by step in "rnn" mode
    def __init__(self, channels):
        super().__init__()
        self.mix = nn.Parameter(torch.rand(3, channels))                      # mu for r, k, v
        self.decay = nn.Parameter(torch.linspace(-3, 1, channels))            # w = exp(decay) > 0
        self.bonus = nn.Parameter(torch.zeros(channels))                      # u
        self.receptance, self.key, self.value, self.output = (nn.Linear(channels, channels, bias=False) for _ in range(4))

    def projections(self, x, x_prev):
        mixed = [m * x + (1 - m) * x_prev for m in self.mix]                  # token shift, (B, T, C) each
        return self.receptance(mixed[0]), self.key(mixed[1]), self.value(mixed[2])

    def forward(self, x):                                                     # GPT mode
        x_prev = F.pad(x, (0, 0, 1, -1))                                      # (B, T, C): x_{t-1}, zeros at t = 0
        r, k, v = self.projections(x, x_prev)
        return self.output(torch.sigmoid(r) * wkv_gpt_mode(self.decay.exp(), self.bonus, k, v))

    def step(self, x_t, state):                                               # RNN mode: x_t (B, C)
        x_prev, wkv_state = state
        r, k, v = self.projections(x_t[:, None], x_prev[:, None])             # (B, 1, C) each
        out, wkv_state = wkv_rnn_mode(self.decay.exp(), self.bonus, k, v, wkv_state)
        return self.output(torch.sigmoid(r) * out)[:, 0], (x_t, wkv_state)


torch.manual_seed(0)
block = TimeMix(8).double()
x = rand(2, 30, 8, seed=30)                                                   # (B, T, C)
state, outs = (torch.zeros(2, 8, dtype=torch.float64), None), []
for t in range(30):
    out_t, state = block.step(x[:, t], state)
    outs.append(out_t)
with torch.no_grad():
    print("time-mixing block: GPT mode equals RNN mode:", max_diff(block(x), torch.stack(outs, 1)) < 1e-12)
    assert max_diff(block(x), torch.stack(outs, 1)) < 1e-12
print("RNN-mode state: x_prev, a, b, p =", [tuple(s.shape) for s in (state[0], *state[1])])

torch.manual_seed(0)
rwkv_block = rwkv.RWKVBlock(8).double()                                        # the course's block: time mix + channel mix
with torch.no_grad():
    gpt_mode, _ = rwkv_block(x)
    rnn_state, rnn_outs = None, []
    for t in range(30):
        out_t, rnn_state = rwkv_block(x[:, t:t + 1], rnn_state, mode="recurrent")
        rnn_outs.append(out_t)
print("course_utils.rwkv.RWKVBlock: GPT mode equals RNN mode:", max_diff(gpt_mode, torch.cat(rnn_outs, 1)) < 1e-12)
assert max_diff(gpt_mode, torch.cat(rnn_outs, 1)) < 1e-12
""")

md(r"""
## 7. State-space models: S4 and Mamba

A **state-space model** maps an input signal $u(t)$ to an output $y(t)$ through a hidden state
$h(t)\in\mathbb{R}^N$: $\ h'(t) = A\,h(t) + B\,u(t),\ y(t) = C\,h(t)$. To use it on a sequence we sample
it with a step $\Delta$. The **zero-order hold** assumes $u$ is constant during each step; the linear
ODE can then be solved exactly over the step:

$$h_t = \bar A\,h_{t-1} + \bar B\,u_t, \qquad \bar A = e^{\Delta A}, \qquad \bar B = A^{-1}\big(e^{\Delta A} - I\big)B .$$

S4 (Gu et al., "Efficiently Modeling Long Sequences with Structured State Spaces", 2021) and its
successors use a **diagonal** $A$ (S4D, and Mamba), where both are elementwise. Two checks: $\bar A$
and $\bar B$ are the blocks of one matrix exponential, $\exp\!\big(\Delta\begin{bmatrix}A & B\\ 0 & 0\end{bmatrix}\big) = \begin{bmatrix}\bar A & \bar B\\ 0 & 1\end{bmatrix}$,
and for a constant input the discrete states lie *exactly* on the continuous solution
$h(t) = -A^{-1}(1 - e^{At})B$, however large $\Delta$ is.
""")

code(r"""
def discretize_zoh(A, B, delta):
    # diagonal A (N,) with negative entries, B (N,), step delta > 0 -> A_bar, B_bar (N,)
    A_bar = torch.exp(delta * A)
    return A_bar, (A_bar - 1) / A * B


N, delta = 4, 0.3
A = -torch.tensor([0.5, 1.0, 2.0, 4.0], dtype=torch.float64)                  # stable: negative real parts
B = torch.tensor([1.0, 0.5, -1.0, 2.0], dtype=torch.float64)
A_bar, B_bar = discretize_zoh(A, B, delta)
M = torch.zeros(N + 1, N + 1, dtype=torch.float64)
M[:N, :N], M[:N, N] = torch.diag(A), B
expm = torch.linalg.matrix_exp(delta * M)                                      # (N+1, N+1)
print("ZOH equals the blocks of the matrix exponential:",
      max_diff(expm[:N, :N], torch.diag(A_bar)) < 1e-12 and max_diff(expm[:N, N], B_bar) < 1e-12)
h, states = torch.zeros(N, dtype=torch.float64), []
for _ in range(20):                                                            # u_t = 1 for 20 steps
    h = A_bar * h + B_bar
    states.append(h)
times = delta * torch.arange(1, 21, dtype=torch.float64)[:, None]              # (20, 1)
continuous = -(1 - torch.exp(A * times)) * B / A                               # (20, N)
print("discrete states on the continuous solution for a step input:", max_diff(torch.stack(states), continuous) < 1e-12)
assert max_diff(expm[:N, :N], torch.diag(A_bar)) < 1e-12 and max_diff(expm[:N, N], B_bar) < 1e-12
assert max_diff(torch.stack(states), continuous) < 1e-12
""")

md(r"""
**Convolution or recurrence.** With $\bar A, \bar B, C$ fixed in time, unrolling $h_t$ gives
$y_t = \sum_{j=0}^{t} C\bar A^{j}\bar B\,u_{t-j}$: a causal **convolution** with the kernel
$K_j = C\bar A^j\bar B$. S4 trains in this view — the whole kernel at once, and the convolution with
an FFT in $O(T\log T)$ — and generates in the recurrent view, one step and a state of size $N$ per
token. Both, for $D$ independent channels (each channel its own SSM, as in S4):
""")

code(r"""
def ssm_kernel(A_bar, B_bar, C, seq_len):
    # A_bar, B_bar, C (D, N) -> K (D, T): K_j = sum_n C A_bar^j B_bar
    powers = A_bar[:, None, :] ** torch.arange(seq_len, dtype=A_bar.dtype)[None, :, None]   # (D, T, N)
    return (C[:, None, :] * powers * B_bar[:, None, :]).sum(-1)


def ssm_convolution(u, K):
    # causal convolution by FFT: u (B, T, D), K (D, T) -> (B, T, D); zero-padded to 2T so nothing wraps around
    seq_len = u.shape[1]
    spectrum = torch.fft.rfft(u.transpose(1, 2), n=2 * seq_len) * torch.fft.rfft(K, n=2 * seq_len)   # (B, D, T + 1)
    return torch.fft.irfft(spectrum, n=2 * seq_len)[..., :seq_len].transpose(1, 2)


def ssm_recurrent(u, A_bar, B_bar, C):
    h = u.new_zeros(u.shape[0], *A_bar.shape)                                  # (B, D, N)
    outs = []
    for t in range(u.shape[1]):
        h = A_bar * h + B_bar * u[:, t, :, None]
        outs.append((C * h).sum(-1))                                           # (B, D)
    return torch.stack(outs, dim=1)                                            # (B, T, D)


D_channels, N, seq_len = 3, 8, 100
A = -torch.exp(rand(D_channels, N, seed=31))                                   # (D, N) negative
A_bar, B_bar = discretize_zoh(A, rand(D_channels, N, seed=32), torch.tensor([0.01, 0.1, 1.0], dtype=torch.float64)[:, None])
C = rand(D_channels, N, seed=33)
u = rand(2, seq_len, D_channels, seed=34)                                      # (B, T, D)
print("S4: convolution (by FFT) equals recurrence:",
      max_diff(ssm_convolution(u, ssm_kernel(A_bar, B_bar, C, seq_len)), ssm_recurrent(u, A_bar, B_bar, C)) < 1e-10)
assert max_diff(ssm_convolution(u, ssm_kernel(A_bar, B_bar, C, seq_len)), ssm_recurrent(u, A_bar, B_bar, C)) < 1e-10
library_y = ssm.ssm_convolution(u, ssm.ssm_kernel(A_bar, B_bar, C, seq_len))
print("course_utils.ssm agrees:", max_diff(library_y, ssm_recurrent(u, A_bar, B_bar, C)) < 1e-10
      and max_diff(ssm.ssm_recurrent(u, A_bar, B_bar, C), ssm_recurrent(u, A_bar, B_bar, C)) < 1e-10)
assert max_diff(library_y, ssm_recurrent(u, A_bar, B_bar, C)) < 1e-10
assert max_diff(ssm.ssm_recurrent(u, A_bar, B_bar, C), ssm_recurrent(u, A_bar, B_bar, C)) < 1e-10
""")

md(r"""
**The selective scan.** A fixed kernel treats every token alike: it cannot decide to remember one
token and skip the next. Mamba (Gu and Dao, "Mamba: Linear-Time Sequence Modeling with Selective
State Spaces", 2023) makes $\Delta_t$, $B_t$ and $C_t$ functions of the input, so the model *selects*
what to write and what to read; a large $\Delta_t$ resets the state towards the current input, a
small one ignores it. Per channel, with $B$ discretised by the simpler Euler rule as Mamba's code does,

$$h_t = e^{\Delta_t A} \odot h_{t-1} + \Delta_t\,B_t\,u_t, \qquad y_t = C_t^\top h_t + D\,u_t .$$

The kernel now changes at every step, so the convolution view is gone. What remains parallel is the
**scan**: every step has the form $h_t = a_t h_{t-1} + b_t$, and composing two such steps is again one,
$(a_1, b_1)$ then $(a_2, b_2)$ gives $(a_1 a_2,\ a_2 b_1 + b_2)$. This composition is **associative**, so
the prefix "sums" can be computed in $\lceil\log_2 T\rceil$ rounds, each a single vectorised operation
over all positions (Hillis and Steele's scan: in round $r$ every position combines with the one
$2^r$ places before it). Mamba runs this scan inside one GPU kernel; the same scan computes the
gated recurrence of section 5 (there the "$h$" is a matrix).
""")

code(r"""
def associative_scan(a, b):
    # h_t = a_t h_{t-1} + b_t with h_0 = 0 along dim 1, in ceil(log2 T) rounds: a, b (B, T, ...) -> h (B, T, ...)
    offset = 1
    while offset < a.shape[1]:
        a_prev = torch.cat([torch.ones_like(a[:, :offset]), a[:, :-offset]], dim=1)  # (B, T, ...): identity before the start
        b_prev = torch.cat([torch.zeros_like(b[:, :offset]), b[:, :-offset]], dim=1)
        a, b = a * a_prev, a * b_prev + b                                      # (a_prev, b_prev) then (a, b)
        offset *= 2
    return b


def selective_scan_sequential(u, delta, A, B, C, D):
    # u, delta (B, T, D); A (D, N); B, C (B, T, N); D (D,) -> y (B, T, D)
    h = u.new_zeros(u.shape[0], *A.shape)                                      # (B, D, N)
    outs = []
    for t in range(u.shape[1]):
        h = torch.exp(delta[:, t, :, None] * A) * h + delta[:, t, :, None] * B[:, t, None, :] * u[:, t, :, None]
        outs.append((h * C[:, t, None, :]).sum(-1) + D * u[:, t])
    return torch.stack(outs, dim=1)


def selective_scan_parallel(u, delta, A, B, C, D):
    a = torch.exp(delta[..., None] * A)                                        # (B, T, D, N)
    b = delta[..., None] * B[:, :, None, :] * u[..., None]                     # (B, T, D, N)
    h = associative_scan(a, b)                                                 # (B, T, D, N)
    return (h * C[:, :, None, :]).sum(-1) + D * u


triples = [(rand(5, seed=s), rand(5, seed=s + 100)) for s in (35, 36, 37)]
compose = lambda first, then: (first[0] * then[0], then[0] * first[1] + then[1])
left, right = compose(compose(triples[0], triples[1]), triples[2]), compose(triples[0], compose(triples[1], triples[2]))
print("the composition of steps is associative:", max_diff(left[0], right[0]) < 1e-12 and max_diff(left[1], right[1]) < 1e-12)

batch_size, seq_len, D_channels, N = 2, 100, 4, 8
u = rand(batch_size, seq_len, D_channels, seed=38)
delta = F.softplus(rand(batch_size, seq_len, D_channels, seed=39))             # (B, T, D) > 0, from the input in Mamba
A = -torch.exp(rand(D_channels, N, seed=40))
B_t, C_t = rand(batch_size, seq_len, N, seed=41), rand(batch_size, seq_len, N, seed=42)
skip = rand(D_channels, seed=43)
sequential = selective_scan_sequential(u, delta, A, B_t, C_t, skip)
print(f"selective scan: the associative scan ({math.ceil(math.log2(seq_len))} rounds) equals the step-by-step loop ({seq_len} steps):",
      max_diff(selective_scan_parallel(u, delta, A, B_t, C_t, skip), sequential) < 1e-10)
assert max_diff(left[0], right[0]) < 1e-12 and max_diff(left[1], right[1]) < 1e-12
assert max_diff(selective_scan_parallel(u, delta, A, B_t, C_t, skip), sequential) < 1e-10
library = {"sequential": ssm.selective_scan_sequential(u, delta, A, B_t, C_t, skip),
           "parallel": ssm.selective_scan_parallel(u, delta, A, B_t, C_t, skip)}
print("course_utils.ssm's selective scans agree:", all(max_diff(y, sequential) < 1e-10 for y in library.values()))
assert all(max_diff(y, sequential) < 1e-10 for y in library.values())
""")

md(r"""
## 8. The sLSTM: exponential gates with a stabiliser

xLSTM's second cell, the **sLSTM** (Beck et al. 2024), keeps unit 05's scalar memory cell and its
recurrent connections, and changes the gates. Unit 05's LSTM updates its cell with sigmoid gates,
$c_t = \sigma(\tilde f_t)\,c_{t-1} + \sigma(\tilde i_t)\,z_t$ (with $z_t = \tanh(\tilde z_t)$), so a new input can
be written with weight at most 1, and an old memory is weakened only by closing the forget gate.
The sLSTM makes the input gate exponential and divides by a **normaliser** state that sums the gates:

$$c_t = f_t\,c_{t-1} + i_t\,z_t,\qquad n_t = f_t\,n_{t-1} + i_t,\qquad h_t = o_t \odot \frac{c_t}{n_t},\qquad i_t = e^{\tilde i_t},\ f_t = \sigma(\tilde f_t)\ \text{or}\ e^{\tilde f_t}.$$

$c_t/n_t$ is a weighted average of the past $z$'s, and a large $\tilde i_t$ lets one input outweigh
everything stored before — the paper's "revising storage decisions". As in the mLSTM, a
**stabiliser** $m_t = \max(\log f_t + m_{t-1}, \tilde i_t)$ replaces $i_t, f_t$ by
$e^{\tilde i_t - m_t}$ and $e^{\log f_t + m_{t-1} - m_t}$; $c$ and $n$ are both scaled by $e^{-m_t}$, so
$h_t$ does not change. (In the full cell $\tilde i, \tilde f, \tilde z, \tilde o$ come from $x_t$ and
$h_{t-1}$ through weight matrices, block-diagonal per head; below we feed the pre-activations
directly to look at the memory alone.)
""")

code(r"""
def slstm_cell(i_pre, f_pre, z_pre, o_pre, state, stabilise=True):
    # one sLSTM step on pre-activations (B, H) each; state (c, n, m) each (B, H) -> h (B, H), new state
    c, n, m = state
    log_f = F.logsigmoid(f_pre)
    if stabilise:
        m_new = torch.maximum(log_f + m, i_pre)
        i_gate, f_gate = torch.exp(i_pre - m_new), torch.exp(log_f + m - m_new)
    else:
        m_new, i_gate, f_gate = m, torch.exp(i_pre), torch.exp(log_f)
    c = f_gate * c + i_gate * torch.tanh(z_pre)
    n = f_gate * n + i_gate
    return torch.sigmoid(o_pre) * c / n, (c, n, m_new)


def run_slstm(pre, stabilise=True):
    # pre (4, B, T, H): i, f, z, o pre-activations -> h (B, T, H)
    state = tuple(torch.zeros_like(pre[0, :, 0]) for _ in range(2)) + (torch.full_like(pre[0, :, 0], float("-inf")),)
    if not stabilise:
        state = state[:2] + (torch.zeros_like(pre[0, :, 0]),)
    outs = []
    for t in range(pre.shape[2]):
        h, state = slstm_cell(*pre[:, :, t], state, stabilise=stabilise)
        outs.append(h)
    return torch.stack(outs, dim=1)


pre = 2 * rand(4, 2, 50, 3, seed=44)                                           # (gates, B, T, H)
print("stabilised equals the plain formula (moderate gates, float64):",
      max_diff(run_slstm(pre), run_slstm(pre, stabilise=False)) < 1e-12)
loud = pre.clone().float()
loud[0] += 100.0                                                               # input gates near e^100 (float32 overflows)
print("gates near e^100 in float32: plain gives NaN:", bool(run_slstm(loud, stabilise=False).isnan().any()),
      "| stabilised is finite:", bool(run_slstm(loud).isfinite().all()))
assert max_diff(run_slstm(pre), run_slstm(pre, stabilise=False)) < 1e-12
assert run_slstm(loud, stabilise=False).isnan().any() and run_slstm(loud).isfinite().all()

# course_utils.ssm.SLSTMCell computes its pre-activations as W x + R h; with W = I, no bias and R = 0 it
# sees ours (its order is z, i, f, o)
cell = ssm.SLSTMCell(4 * 3, 3).double()
with torch.no_grad():
    cell.W.weight.copy_(torch.eye(12, dtype=torch.float64))
    cell.W.bias.zero_()
    cell.R.weight.zero_()
    cell_state, cell_outs = None, []
    for t in range(pre.shape[2]):
        h, cell_state = cell(torch.cat([pre[2, :, t], pre[0, :, t], pre[1, :, t], pre[3, :, t]], dim=-1), cell_state)
        cell_outs.append(h)
print("course_utils.ssm.SLSTMCell agrees:", max_diff(torch.stack(cell_outs, 1), run_slstm(pre)) < 1e-12)
assert max_diff(torch.stack(cell_outs, 1), run_slstm(pre)) < 1e-12
""")

md(r"""
**Revising a storage decision.** Store $z = +0.9$ for ten steps, then present one new input
$z = -0.9$ with a strong input gate ($\tilde i = 8$), the forget gate wide open throughout
($\tilde f = 8$). Unit 05's LSTM cell update (same pre-activations, sigmoid gates) can only *add* the
new input to its full memory; the sLSTM's normalised memory moves almost all the way to the new value:
""")

code(
    r"""
steps = 11
i_pre = torch.zeros(1, steps, 1, dtype=torch.float64)
i_pre[:, -1] = 8.0                                                             # the last input is written strongly
f_pre = torch.full((1, steps, 1), 8.0, dtype=torch.float64)                    # forget gate open: sigma(8) = 0.9997
z_pre = torch.full((1, steps, 1), math.atanh(0.9), dtype=torch.float64)
z_pre[:, -1] = math.atanh(-0.9)                                                # tanh(z~) = +0.9 ten times, then -0.9
o_pre = torch.full((1, steps, 1), 30.0, dtype=torch.float64)                   # output gate open: h = c / n
memory_slstm = run_slstm(torch.stack([i_pre, f_pre, z_pre, o_pre]))[0, :, 0]
c = torch.zeros(1, dtype=torch.float64)
for t in range(steps):                                                         # unit 05's update c = f c + i z
    c = torch.sigmoid(f_pre[0, t]) * c + torch.sigmoid(i_pre[0, t]) * torch.tanh(z_pre[0, t])
print(f"after the new input: sLSTM memory c/n = {memory_slstm[-1].item():+.3f} (was {memory_slstm[-2].item():+.3f}); "
      f"LSTM cell c = {c.item():+.3f}")
assert memory_slstm[-1] < -0.8 and abs(memory_slstm[-2] - 0.9) < 1e-9, "the sLSTM's memory is revised to about -0.9"
assert c.item() > 3.0, "the LSTM's cell still holds the sum of what it stored"
""",
    IGNORE,
)

md(r"""
## 9. Reformer: attention within hash buckets

Softmax weights are dominated by the few keys with the largest scores. If we could find, for every
query, the keys that score highest, attending only to them would lose little. The Reformer (Kitaev
et al., "Reformer: The Efficient Transformer", 2020) finds candidates with **locality-sensitive
hashing**: draw a random matrix $R \in \mathbb{R}^{d\times n_b/2}$ and put a unit vector $x$ into bucket
$h(x) = \arg\max\,[\,xR\,;\,-xR\,]$ — the nearest of $n_b$ random directions. Vectors at a small angle
land in the same bucket with high probability. Each query then attends only to keys in its own
bucket (Reformer sorts the positions by bucket and attends within fixed-size chunks, $O(T\log T)$;
it shares queries and keys, $k = q/\|q\|$, so that a query's bucket holds keys). Several independent
**rounds** of hashing reduce the chance of missing a key. Below: the buckets, attention restricted to
them (written with a dense mask, to see the idea, not to save anything), and the measured
probability that a query's true top-scoring key shares its bucket.
""")

code(
    r"""
def lsh_buckets(x, n_buckets, generator):
    # x (B, H, T, d) -> bucket ids (B, H, T) in [0, n_buckets): nearest of n_buckets random directions
    rotations = torch.randn(x.shape[-1], n_buckets // 2, generator=generator, dtype=x.dtype)   # (d, n_b / 2)
    projected = F.normalize(x, dim=-1) @ rotations                             # (B, H, T, n_b / 2)
    return torch.cat([projected, -projected], dim=-1).argmax(dim=-1)


def bucket_attention(q, k, v, q_buckets, k_buckets):
    # causal attention in which a query sees only the keys of its bucket (and itself)
    seq_len = q.shape[-2]
    allowed = (q_buckets[..., :, None] == k_buckets[..., None, :]) | torch.eye(seq_len, dtype=torch.bool)
    allowed = allowed & torch.ones(seq_len, seq_len, dtype=torch.bool).tril()  # (B, H, T, T)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(~allowed, float("-inf"))
    return scores.softmax(-1) @ v


def top_key_recall(q, k, n_buckets, n_rounds, seed=0):
    # fraction of queries whose highest-scoring key shares their bucket in at least one round
    generator = torch.Generator().manual_seed(seed)
    top = (q @ k.transpose(-2, -1)).argmax(dim=-1)                             # (B, H, T_q)
    found = torch.zeros(top.shape, dtype=torch.bool)
    for _ in range(n_rounds):
        generator_state = generator.get_state()
        q_buckets = lsh_buckets(q, n_buckets, generator)
        generator.set_state(generator_state)                                   # the same rotations for the keys
        k_buckets = lsh_buckets(k, n_buckets, generator)
        found |= q_buckets == k_buckets.gather(-1, top)
    return found.double().mean().item()


keys = F.normalize(rand(1, 1, 512, 32, seed=45), dim=-1)                       # (B, H, T, d)
targets = torch.randint(0, 512, (512,), generator=torch.Generator().manual_seed(46))
queries = F.normalize(keys[:, :, targets] + 0.5 * F.normalize(rand(1, 1, 512, 32, seed=47), dim=-1), dim=-1)
print(f"{'buckets':>7s} {'rounds':>6s} {'recall':>7s} {'by chance':>9s}")
recall = {}
for n_buckets in (8, 32):
    for n_rounds in (1, 2, 4):
        recall[n_buckets, n_rounds] = top_key_recall(queries, keys, n_buckets, n_rounds)
        chance = 1 - (1 - 1 / n_buckets) ** n_rounds
        print(f"{n_buckets:7d} {n_rounds:6d} {recall[n_buckets, n_rounds]:7.3f} {chance:9.3f}")
        assert recall[n_buckets, n_rounds] > 3 * chance or recall[n_buckets, n_rounds] > 0.9, "far above chance"
assert all(recall[n, 4] > recall[n, 1] + 0.05 for n in (8, 32)), "more rounds find more top keys"
assert recall[8, 1] > recall[32, 1], "more buckets: smaller buckets, more misses"
assert recall[8, 1] > 0.5, "with 8 buckets a query's best key shares its bucket most of the time"

buckets = lsh_buckets(keys, 8, torch.Generator().manual_seed(0))              # shared QK: queries hash like keys
assert torch.equal(buckets, fa.lsh_buckets(keys, 8, torch.Generator().manual_seed(0))), "course_utils agrees"
values = rand(1, 1, 512, 16, seed=48)
one_bucket = torch.zeros(1, 1, 512, dtype=torch.long)
assert max_diff(bucket_attention(keys, keys, values, one_bucket, one_bucket), naive_attention(keys, keys, values)) < 1e-12, \
    "with a single bucket it is ordinary causal attention"
approximate = bucket_attention(keys, keys, values, buckets, buckets)            # (B, H, T, d_v)
assert approximate.isfinite().all(), "no query is left without a key: each sees at least itself"
library = fa.lsh_attention(keys, keys, values, 8, torch.Generator().manual_seed(0))
assert max_diff(approximate, library) < 1e-12, "course_utils.fast_attention.lsh_attention agrees"
sizes = torch.bincount(buckets.flatten(), minlength=8)
print("bucket sizes:", sizes.tolist(), "| each query sees", f"{(sizes.double() ** 2).sum().item() / 512**2:.0%}",
      "of the score matrix (before the causal mask)")
assert (sizes**2).sum() < 0.2 * 512**2, "about an eighth of the score matrix"
""",
    IGNORE,
)

md(r"""
With shared queries and keys the hash is exact about one thing: a query always lands with itself,
so no row of the restricted attention is empty (checked above, along with the course's
`fa.lsh_attention`, which computes the same and takes several rounds if asked).
The rest is probability. Eight buckets cut the score matrix to about an eighth, and a query's best
key shares its bucket most of the time; more rounds recover more of the misses, at the price of one
more attention pass per round. Our queries are noisy copies of their best keys, a favourable case:
how much hashing loses depends on how far a query's top keys stand out from the rest. The same idea,
hashing to find near neighbours, is the basis of approximate nearest-neighbour search.
""")


md(r"""
## 10. Four models at equal steps

Finally the question a practitioner asks: what do these models buy, and what do they cost, as
language models? We train four small character-level models on the course's text (the Python
documentation shipped with CPython, as in unit 08) that differ **only in how they mix tokens**:

- **softmax**: causal softmax attention (SDPA), with learned positions;
- **linear**: linear attention with $\phi = \mathrm{elu}+1$ (section 4), with learned positions;
- **gated**: gated linear attention with a data-dependent decay per head (section 5, GLA / Mamba-2
  style), the output normalised per head (RMS) as RetNet and GLA do;
- **rwkv**: section 6's time-mixing block with token shift and WKV.

Everything else is shared: width 64, 4 heads, 2 Pre-LN blocks with a GELU MLP, GPT-2's
initialisation, AdamW at $3\cdot10^{-3}$ with a short warm-up, clipping at 1, and the same
**150 steps** of 16 windows of 32 characters for every model and seed. The decaying and
token-shifting models need no position embeddings: the order is in their recurrence. Training uses
each model's parallel form and generation its step form. The RWKV block trains with WKV computed as
a batched matrix product over channels (every channel's decay matrix times its $e^{k}v$ column),
which never builds the $(B, T, T, C)$ tensor of section 6's softmax form and is checked equal to it below;
the keys are shifted by their maximum first, which changes nothing (section 6) and keeps every
exponential at most 1. Every model must produce the same logits step by step as in parallel.
""")

code(r"""
def wkv_by_matmul(w, u, k, v):
    # GPT mode as batched matrix products over channels: w, u (C,), k, v (B, T, C) -> (B, T, C)
    seq_len = k.shape[1]
    lag = (torch.arange(seq_len, device=k.device)[:, None] - 1 - torch.arange(seq_len, device=k.device)[None, :]).to(k.dtype)  # (T, T)
    decay = torch.exp(-lag.clamp_min(0)[None] * w[:, None, None])                 # (C, T, T): e^{-(t-1-i) w}
    decay = torch.where(lag[None] == -1, u.exp()[:, None, None], decay)         # the current token: e^u
    decay = decay.masked_fill(lag[None] < -1, 0.0)                               # no future
    ek = torch.exp(k - k.amax(dim=1, keepdim=True))                              # (B, T, C), at most 1
    numerator = decay @ (ek * v).permute(2, 1, 0)                                # (C, T, B)
    denominator = decay @ ek.permute(2, 1, 0)                                    # (C, T, B)
    return (numerator / denominator).permute(2, 1, 0)                            # (B, T, C)


class FastTimeMix(TimeMix):
    # section 6's block with WKV by matmuls in GPT mode; RNN mode (step) unchanged
    def forward(self, x):
        r, k, v = self.projections(x, F.pad(x, (0, 0, 1, -1)))
        return self.output(torch.sigmoid(r) * wkv_by_matmul(self.decay.exp(), self.bonus, k, v))


w, u = torch.linspace(0.05, 2.0, 6, dtype=torch.float64), rand(6, seed=49)
k, v = rand(2, 40, 6, seed=50), rand(2, 40, 6, seed=51)
print("WKV by matmuls equals the formula:", max_diff(wkv_by_matmul(w, u, k, v), wkv_naive(w, u, k, v)) < 1e-12)
assert max_diff(wkv_by_matmul(w, u, k, v), wkv_naive(w, u, k, v)) < 1e-12
""")

code(r"""
class Mixer(nn.Module):
    # one token-mixing layer of the given kind: x (B, T, D) -> (B, T, D) in parallel, or one token with a state
    def __init__(self, kind, d_model, num_heads):
        super().__init__()
        self.kind, self.num_heads = kind, num_heads
        if kind == "rwkv":
            self.time_mix = FastTimeMix(d_model)                              # section 6's block, WKV by matmuls
            return
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.proj = nn.Linear(d_model, d_model, bias=False)
        if kind == "gated":
            self.gate = nn.Linear(d_model, num_heads)                         # a_t = sigmoid(w^T x_t + b) per head

    def split(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)                                # (B, T, D) each
        shape = (x.shape[0], x.shape[1], self.num_heads, -1)
        return (t.view(shape).transpose(1, 2) for t in (q, k, v))             # (B, H, T, d_head) each

    def merge(self, out):                                                     # (B, H, T, d_head) -> (B, T, D)
        return self.proj(out.transpose(1, 2).flatten(2))

    def forward(self, x):
        if self.kind == "rwkv":
            return self.time_mix(x)
        q, k, v = self.split(x)
        if self.kind == "softmax":
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif self.kind == "linear":
            out = la.linear_attention_parallel(q, k, v)
        else:                                                                 # gated: decay per head and step
            log_a = F.logsigmoid(self.gate(x)).transpose(1, 2)                # (B, H, T)
            out = F.rms_norm(la.gated_parallel(q, k / math.sqrt(k.shape[-1]), v, log_a), (v.shape[-1],))
        return self.merge(out)

    def step(self, x, state):
        # x (B, 1, D) one new token; state: KV cache (softmax) or a fixed-size recurrent state
        if self.kind == "rwkv":
            state = state or (x.new_zeros(x.shape[0], x.shape[2]), None)       # (previous x, WKV state)
            out, state = self.time_mix.step(x[:, 0], state)
            return out[:, None], state
        q, k, v = self.split(x)                                               # (B, H, 1, d_head)
        if self.kind == "softmax":
            if state is not None:
                k, v = torch.cat([state[0], k], dim=2), torch.cat([state[1], v], dim=2)   # (B, H, t, d_head)
            return self.merge(F.scaled_dot_product_attention(q, k, v)), (k, v)
        if self.kind == "linear":
            out, state = la.linear_attention_recurrent(q, k, v, state=state, return_state=True)
            return self.merge(out), state
        log_a = F.logsigmoid(self.gate(x)).transpose(1, 2)                    # (B, H, 1)
        out, state = la.decay_recurrence(q, k / math.sqrt(k.shape[-1]), v, log_decay=log_a, state=state)
        return self.merge(F.rms_norm(out, (v.shape[-1],))), state


class MixerLM(nn.Module):
    # a Pre-LN language model whose blocks mix tokens with `kind`: idx (B, T) -> logits (B, T, V)
    def __init__(self, kind, vocab_size, d_model=64, num_heads=4, num_layers=2, max_len=512):
        super().__init__()
        self.kind = kind
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        # softmax and linear attention see order only through positions; decay and token shift carry it in the others
        self.pos_emb = nn.Embedding(max_len, d_model) if kind in ("softmax", "linear") else None
        self.mixers = nn.ModuleList(Mixer(kind, d_model, num_heads) for _ in range(num_layers))
        self.mlps = nn.ModuleList(nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))
                                  for _ in range(num_layers))
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(2 * num_layers + 1))
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight
        for module in self.modules():                                         # GPT-2's initialisation (unit 08)
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)

    def embed(self, idx, start=0):
        x = self.tok_emb(idx)                                                 # (B, T, D)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(start, start + idx.shape[1], device=idx.device))
        return x

    def forward(self, idx):
        x = self.embed(idx)
        for i, (mixer, mlp) in enumerate(zip(self.mixers, self.mlps)):
            x = x + mixer(self.norms[2 * i](x))
            x = x + mlp(self.norms[2 * i + 1](x))
        return self.head(self.norms[-1](x))                                   # (B, T, V)

    def step(self, token, position, states):
        # token (B, 1) at `position`, states: one per layer (None at the start) -> logits (B, V), states
        x, new_states = self.embed(token, position), []
        for i, (mixer, mlp, state) in enumerate(zip(self.mixers, self.mlps, states)):
            out, state = mixer.step(self.norms[2 * i](x), state)
            x = x + out
            x = x + mlp(self.norms[2 * i + 1](x))
            new_states.append(state)
        return self.head(self.norms[-1](x))[:, -1], new_states


KINDS = ("softmax", "linear", "gated", "rwkv")
idx = torch.randint(0, 50, (2, 20), generator=torch.Generator().manual_seed(0))    # (B, T)
for kind in KINDS:
    torch.manual_seed(0)
    lm = MixerLM(kind, vocab_size=50).double()
    with torch.no_grad():
        parallel, states, stepped = lm(idx), [None] * len(lm.mixers), []
        for t in range(idx.shape[1]):
            logits, states = lm.step(idx[:, t:t + 1], t, states)
            stepped.append(logits)
    print(f"{kind:8s}: step by step equals parallel: {max_diff(torch.stack(stepped, 1), parallel) < 1e-10}, "
          f"{sum(p.numel() for p in lm.parameters()):,} parameters")
    assert max_diff(torch.stack(stepped, 1), parallel) < 1e-10
""")

md(r"""
The training loop is unit 08's, shortened. One run is scored by its cross-entropy on the first 128
validation windows; each model trains with three seeds (initialisation and window order).
""")

code(
    r"""
# Not checked: this cell only trains (its progress line varies); the next cell prints and checks the results
text = python_docs_text(max_chars=300_000)
chars = sorted(set(text))
stoi = {c: i for i, c in enumerate(chars)}
train_text, val_text = train_val_split(text, 0.1)
train_ids = torch.tensor([stoi[c] for c in train_text], device=device)           # (N_train,)
val_ids = torch.tensor([stoi[c] for c in val_text], device=device)               # (N_val,)
vocab_size, SEQ_LEN, BATCH, STEPS, SEEDS = len(chars), 32, 16, 150, (0, 1, 2)
VAL_X = val_ids[: 128 * SEQ_LEN].view(128, SEQ_LEN)                             # (128, T)
VAL_Y = val_ids[1: 128 * SEQ_LEN + 1].view(128, SEQ_LEN)                        # (128, T)


def train_mixer_lm(kind, seed):
    # STEPS steps of AdamW from `seed`; returns (trained model, validation loss in nats per character)
    seed_everything(seed)
    generator = torch.Generator().manual_seed(seed)
    lm = MixerLM(kind, vocab_size).to(device)
    opt = torch.optim.AdamW(lm.parameters(), lr=3e-3, betas=(0.9, 0.98), weight_decay=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / 20))
    offsets = torch.arange(SEQ_LEN, device=device)
    for step in range(STEPS):
        starts = torch.randint(len(train_ids) - SEQ_LEN - 1, (BATCH,), generator=generator).to(device)
        x, y = train_ids[starts[:, None] + offsets], train_ids[starts[:, None] + offsets + 1]   # (B, T) each
        loss = F.cross_entropy(lm(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(lm.parameters(), 1.0)
        opt.step()
        scheduler.step()
    lm.eval()
    with torch.no_grad():
        return lm, F.cross_entropy(lm(VAL_X).flatten(0, 1), VAL_Y.flatten()).item()


val_loss, trained = {kind: [] for kind in KINDS}, {}
for kind, seed in progress([(kind, seed) for kind in KINDS for seed in SEEDS], desc="equal-steps runs", unit="run"):
    lm, loss = train_mixer_lm(kind, seed)
    val_loss[kind].append(loss)
    if seed == SEEDS[0]:
        trained[kind] = lm.cpu()
""",
    IGNORE,
)

code(
    r"""
frequencies = torch.bincount(train_ids.cpu(), minlength=vocab_size).double() / len(train_ids)
unigram_entropy = -(frequencies[frequencies > 0] * frequencies[frequencies > 0].log()).sum().item()
mean = {kind: sum(v) / len(v) for kind, v in val_loss.items()}
spread = {kind: torch.tensor(v).std().item() for kind, v in val_loss.items()}
print(f"unigram entropy (letter frequencies only): {unigram_entropy:.3f} nats/char; log V = {math.log(vocab_size):.3f}")
print(f"{'mixer':8s} {'val loss, mean ± sd':>20s}   per seed")
for kind in KINDS:
    print(f"{kind:8s} {mean[kind]:12.3f} ± {spread[kind]:.3f}   " + ", ".join(f"{v:.3f}" for v in val_loss[kind]))
for kind in KINDS:
    assert max(val_loss[kind]) < unigram_entropy - 0.4, f"{kind} learns more than letter frequencies in every seed"
    assert spread[kind] < 0.1, f"{kind}: seeds agree within a few hundredths"
assert max(val_loss["gated"]) < min(val_loss["softmax"]) - 0.05, "gated beats softmax in every seed at this budget"
assert max(val_loss["rwkv"]) < min(val_loss["softmax"]) - 0.2, "RWKV beats softmax in every seed at this budget"
assert max(val_loss["rwkv"]) < min(val_loss["gated"]), "RWKV's token shift is worth more still"
assert abs(mean["linear"] - mean["softmax"]) < 0.15, "linear and softmax attention are close at this budget"
""",
    IGNORE,
)

md(r"""
**Reading the table.** At this budget the two models with a built-in sense of *recency* win
clearly, in every seed: the gated model (its decay lets each head keep a short memory) and, further
ahead, the RWKV block, whose token shift hands every layer the previous character directly — for a
character model a very useful fact. Softmax and linear attention must first learn from
their position embeddings that nearby characters matter, and after 150 steps they are about
level with each other. This is a statement about *150 steps on tiny models*, not about the
architectures at scale, where the papers cited below train for billions of tokens. One limit of
every fixed-size state is structural, though: it cannot hold an exact copy of an arbitrarily long
context, so tasks that need exact retrieval from far back (copying, looking up a name mentioned
pages ago) favour the softmax model's growing cache — that is what the cache buys. A finding at one
budget and size does not transfer automatically to another (unit 08).

**Generation: memory and speed against context length.** Now what each model *holds* while it
writes. The softmax model's key-value cache grows by $2\cdot\text{layers}\cdot D$ numbers per token;
the others carry a state whose size does not depend on how much they have read. We let each
trained model (seed 0) write 512 characters after a prompt, one token at a time on the CPU, and
record, every 64 tokens, the bytes of its state and the time per token. (Greedy decoding of models
this small soon repeats itself; the samples are printed only to show that all four generate.)
""")

code(r"""
def state_bytes(states):
    # total bytes of every tensor in a (nested) generation state
    return sum(t.numel() * t.element_size() for t in tree_flatten(states)[0] if isinstance(t, torch.Tensor))


@torch.no_grad()
def generate_and_measure(lm, prompt_ids, max_new_tokens, every=64):
    # greedy decoding step by step on the CPU; returns the text ids and [(tokens so far, state bytes, s per token)]
    states, ids, record = [None] * len(lm.mixers), list(prompt_ids), []
    logits = None
    for position, token in enumerate(prompt_ids):
        logits, states = lm.step(torch.tensor([[token]]), position, states)
    start = time.perf_counter()
    for position in range(len(prompt_ids), len(prompt_ids) + max_new_tokens):
        ids.append(logits.argmax(-1).item())
        logits, states = lm.step(torch.tensor([[ids[-1]]]), position, states)
        if (position + 1) % every == 0:
            record.append((position + 1, state_bytes(states), (time.perf_counter() - start) / every))
            start = time.perf_counter()
    return ids, record


prompt_ids = [stoi[c] for c in "The function returns "]
records, samples = {}, {}
for kind in KINDS:
    ids, records[kind] = generate_and_measure(trained[kind], prompt_ids, 512 - len(prompt_ids))
    samples[kind] = "".join(chars[i] for i in ids[:100])
print(f"{'tokens':>6s} " + " ".join(f"{kind + ' (bytes)':>16s}" for kind in KINDS))
for row in range(len(records["softmax"])):
    print(f"{records['softmax'][row][0]:6d} " + " ".join(f"{records[kind][row][1]:16,d}" for kind in KINDS))
""")

code(
    r"""
# Not checked: timing (per-token times vary with the machine and its load); the sample text varies with the hardware
for kind in KINDS:
    times = [1e3 * r[2] for r in records[kind]]
    print(f"{kind:8s} ms per token at 64 .. 512 tokens: " + " ".join(f"{t:5.2f}" for t in times))
for kind in KINDS:
    print(f"{kind:8s} greedy sample: {samples[kind]!r}")
fig, axes = plt.subplots(1, 2, figsize=(10, 3.2))
for kind in KINDS:
    tokens = [r[0] for r in records[kind]]
    axes[0].plot(tokens, [r[1] / 1024 for r in records[kind]], "o-", label=kind)
    axes[1].plot(tokens, [1e3 * r[2] for r in records[kind]], "o-", label=kind)
axes[0].set(xlabel="tokens in the context", ylabel="state (KiB)", title="what generation holds")
axes[1].set(xlabel="tokens in the context", ylabel="ms per token", title="time per generated token (CPU)")
axes[0].legend()
plt.tight_layout()
plt.show()
""",
    IGNORE,
)

code(r"""
growth = {kind: records[kind][-1][1] / records[kind][0][1] for kind in KINDS}
print("state after 512 tokens / after 64 tokens:", {kind: round(g, 3) for kind, g in growth.items()})
assert growth["softmax"] == 8.0, "the KV cache grows linearly: 8 times the tokens, 8 times the bytes"
assert all(growth[kind] == 1.0 for kind in ("linear", "gated", "rwkv")), "a recurrent state does not grow"
layers, d_model = len(trained["softmax"].mixers), 64
assert records["softmax"][-1][1] == 2 * layers * 512 * d_model * 4, "cache = 2 x layers x tokens x D floats"
final = {kind: records[kind][-1][1] for kind in KINDS}
assert final["rwkv"] < final["gated"] < final["linear"] < final["softmax"], "RWKV's state is the smallest"
""")

md(r"""
The byte counts are exact: the cache grows linearly, the states stay flat (RWKV's is the smallest,
$4D$ numbers per layer; the linear and gated models hold a $d_{head}\times d_{head}$ matrix per head).
The per-token *times* of models this small are set mostly by the fixed cost of the many small
operations of a step, not by the arithmetic, so they are shown, not compared; at long contexts the
softmax model's attention over its cache dominates (the course's `benchmarks/long_context.py`
measures time and memory per token up to many thousands of tokens). What each buys and costs, in one line each:

- **softmax attention**: exact retrieval from anywhere in the context; memory and per-token work grow with the context;
- **linear attention**: a constant state and constant work per token, but a state that only accumulates, and
  it learned no faster here;
- **gated linear attention / Mamba-2 / RetNet**: a constant state that can forget, trainable in parallel or by chunks;
  the decay gave it a head start here;
- **RWKV**: the smallest state, a stable recurrence and a token shift that made it the best of the four at this tiny budget.

## Check yourself

1. Doubling $T$ multiplies the memory of naive attention by how much? And that of tiled attention? Why does
   the tiled version still do $O(T^2)$ arithmetic?
2. In the online softmax, why must the accumulated output be multiplied by $e^{m - m'}$ when a new block arrives?
   What goes wrong if you forget it?
3. A key-value cache makes generation faster. Does it change a single output token? Why is the cache's size, not its speed,
   what limits long contexts?
4. Write the recurrent state of linear attention after $t$ tokens. Which part of the parallel form does the chunkwise form
   still compute as a matrix, and why is that worth doing?
5. Which one line of the recurrence $S_t = a_t S_{t-1} + k_t v_t^\top$ changes between linear attention, RetNet,
   gated linear attention and DeltaNet?
6. Why does the delta rule overwrite a stored value where linear attention adds to it? What must hold for the keys?
7. RWKV's WKV is unchanged when every key is shifted by the same constant. Use that to explain how its stable
   recurrence avoids overflow.
8. Why does a selective SSM (Mamba) have no convolution view, while S4 does? Which operation makes the scan parallel?
9. An sLSTM stores $+0.9$, then sees $-0.9$ with a large input gate. Why does its memory move to about $-0.9$ while an
   LSTM's cell does not?
10. In the equal-steps table, RWKV beat softmax attention. Give two reasons why that need not hold for a large model
    trained for a long time.

## Summary

- Naive softmax attention builds a $T\times T$ matrix: memory grows as $T^2$ (measured exactly), time towards $T^2$.
- A key-value cache computes the same tokens with one position per step instead of the whole prefix;
  its memory grows with the context.
- Tiled attention with the online softmax (FlashAttention's idea) equals SDPA, returns the log-sum-exp, and
  holds $O(T\,d)$ memory.
- Linear attention replaces $\exp(q^\top k)$ by $\phi(q)^\top\phi(k)$: parallel, recurrent and chunkwise forms are equal,
  and generation carries a $d_k\times d_v$ state.
- RetNet, gated linear attention / Mamba-2, DeltaNet and the mLSTM are one recurrence with different decays and writes;
  each has a parallel form (a decay mask, a triangular solve, a stabilised log-weight matrix) equal to its recurrence.
- RWKV's WKV is attention without queries with per-channel decay; the running-maximum recurrence is its stable RNN mode.
- State-space models: zero-order hold discretises exactly; S4 is a convolution and a recurrence; Mamba's selective scan
  is a recurrence that an associative scan computes in $\log_2 T$ rounds.
- The sLSTM's exponential gates, normaliser and stabiliser let a new input overrule the memory.
- Reformer's random-rotation hashing puts a query's top key in its bucket far more often than chance, more so with more rounds.
- At 150 steps on the course's text, the models with a recency bias (gated, RWKV) learned fastest; softmax and linear
  attention were level; recurrent models generate with a constant state.
- From now on use `course_utils.fast_attention`, `course_utils.linear_attention`, `course_utils.rwkv` and `course_utils.ssm`.

## References

- Vaswani et al., "Attention Is All You Need" (2017).
- Milakov and Gimelshein, "Online normalizer calculation for softmax" (2018).
- Dao et al., "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness" (2022).
- Katharopoulos et al., "Transformers are RNNs: Fast Autoregressive Transformers with Linear Attention" (2020).
- Choromanski et al., "Rethinking Attention with Performers" (2020).
- Sun et al., "Retentive Network: A Successor to Transformer for Large Language Models" (RetNet, 2023).
- Yang et al., "Gated Linear Attention Transformers with Hardware-Efficient Training" (GLA, 2023).
- Dao and Gu, "Transformers are SSMs: Generalized Models and Efficient Algorithms Through Structured State Space Duality" (Mamba-2, 2024).
- Schlag et al., "Linear Transformers Are Secretly Fast Weight Programmers" (2021).
- Yang et al., "Parallelizing Linear Transformers with the Delta Rule over Sequence Length" (DeltaNet, 2024).
- Beck et al., "xLSTM: Extended Long Short-Term Memory" (2024).
- Peng et al., "RWKV: Reinventing RNNs for the Transformer Era" (2023).
- Gu et al., "Efficiently Modeling Long Sequences with Structured State Spaces" (S4, 2021).
- Gu and Dao, "Mamba: Linear-Time Sequence Modeling with Selective State Spaces" (2023).
- Hillis and Steele, "Data Parallel Algorithms" (1986); Blelloch, "Prefix Sums and Their Applications" (1990).
- Kitaev et al., "Reformer: The Efficient Transformer" (2020).
- Hochreiter and Schmidhuber, "Long Short-Term Memory" (1997).
""")
