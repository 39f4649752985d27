"""Long-context cost of softmax attention and of what replaces it: time and peak memory against sequence length.

    python -m benchmarks.long_context                           # CPU: capped so that it ends in a few minutes
    python -m benchmarks.long_context --budget 30 --max-len 16384 --device cuda

One layer's token mixing for ``B`` sequences of ``T`` tokens, ``H`` heads of width ``d_head`` (float32):

- ``naive``      softmax attention building the ``(T, T)`` scores (``course_utils.fast_attention.naive_attention``)
- ``sdpa``       PyTorch's ``F.scaled_dot_product_attention`` (a fused kernel: FlashAttention on a recent GPU)
- ``tiled``      the course's ``tiled_attention`` with the online softmax (blocks of 128)
- ``lin-rec``    linear attention, recurrent form (a Python loop over ``T``)
- ``lin-chunk``  linear attention, chunkwise form (chunks of 64)
- ``delta-chunk`` DeltaNet's delta rule, chunkwise (``course_utils.linear_attention.deltanet_chunkwise``, chunks of
                 64, unit-norm keys, ``β`` in (0, 1)); it decodes with one step of ``decay_recurrence`` on a
                 ``d × d`` state
- ``scan-seq``   Mamba's selective scan over ``D = H * d_head`` channels with ``N = 16`` states, step by step
                 (``course_utils.ssm.selective_scan_sequential``)
- ``scan-par``   the same with the associative scan (``selective_scan_parallel``): ``log2 T`` steps over all
                 ``(B, T, D, N)`` states, ``O(T log T)`` work; it pays on a GPU, not on a CPU

Training needs the backward pass too. Three more methods time one forward **and backward** pass (the
gradients with respect to ``q, k, v`` for a given gradient of the output), each in its own two tables:

- ``naive-bwd``  autograd through ``naive_attention``: it saves the ``(T, T)`` weights for the backward
- ``sdpa-bwd``   autograd through ``F.scaled_dot_product_attention`` (FlashAttention's kernels on a recent GPU)
- ``tiled-bwd``  the course's ``flash_attention`` (``course_utils.fast_attention.TiledAttention``, blocks of
                 128): the tiled forward saves only the output and its log-sum-exp, and the backward
                 recomputes each tile of the weights from them

Two measurements per length ``T`` (the second for the forward methods only):

1. **forward**: one causal pass over ``T`` tokens (the fastest of ``--repeats`` runs: the one least slowed
   by other work on the machine), and its peak memory beyond the inputs; for the ``-bwd`` methods one forward
   and backward pass, whose peak includes what autograd saves and the three gradients. On CUDA the peak is
   ``torch.cuda.max_memory_allocated``. On a CPU there is no allocator counter, so the peak is the process's
   resident-set high-water mark (``VmHWM``), reset before each pass through ``/proc/self/clear_refs``; glibc
   is first told (``mallopt``) to serve every block of 64 KiB or more by ``mmap``, so that freed tensors
   leave the resident set and new ones enter it, and ``malloc_trim`` releases the pages of free heap chunks
   before each pass, so that a pass reusing them counts them too. These memory passes run after all
   timings, in a fresh process per method (the setting slows small allocations), each after one unmeasured
   warm-up pass; a 64 MiB tensor checks the method in each process (printed).
2. **per generated token**: the time to mix one new token into a context of ``T`` tokens, and the memory held
   between tokens: the key-value cache ``2 B H T d_head`` numbers for the softmax methods (one layer of the
   library's ``KVCache``; each step appends the new token's key and value and attends), the fixed state
   (``S`` and ``z`` per head; the delta rule's ``S``; the scan's ``h (B, D, N)``) for the recurrent ones.
   These sizes are computed from the tensors' shapes, not measured. The two linear forms decode alike (one
   recurrent step), and so do the two scans.

A method leaves the table once its next length is predicted (from its growth so far) to take more than
``--budget`` seconds per pass or more than ``--max-memory`` GiB; the output says where each stopped. Last,
each method's growth exponent: the least-squares slope of log time against log T over ``T >= --fit-from``
(2 for quadratic work, 1 for linear; small T is dominated by fixed overheads and would bias it down).
"""

from __future__ import annotations

import argparse
import ctypes
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from benchmarks.machine import machine_line
from course_utils.fast_attention import flash_attention, naive_attention, tiled_attention
from course_utils.linear_attention import (
    decay_recurrence,
    deltanet_chunkwise,
    linear_attention_chunkwise,
    linear_attention_recurrent,
)
from course_utils.self_attention import KVCache
from course_utils.ssm import selective_scan_parallel, selective_scan_sequential

SOFTMAX = ("naive", "sdpa", "tiled")  # quadratic work; they decode from a key-value cache
FORWARD = SOFTMAX + ("lin-rec", "lin-chunk", "delta-chunk", "scan-seq", "scan-par")
BACKWARD = ("naive-bwd", "sdpa-bwd", "tiled-bwd")  # forward and backward pass (training)
METHODS = FORWARD + BACKWARD
STATE_N = 16  # selective-scan state size per channel
MiB = 2**20
ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- peak memory


class ProcessPeak:
    """Peak bytes allocated while a function runs, beyond what was allocated before it (see the module doc).

    What the device pays, not :class:`course_utils.memory.PeakMemory`'s count of the tensors that pass the
    dispatcher: a fused kernel's workspace (SDPA's) is not such a tensor, and the allocator's peak includes it.
    """

    CPU_METHOD = (
        "resident-set high-water mark (VmHWM, reset by /proc/self/clear_refs after malloc_trim), mallopt mmap >= 64 KiB"
    )

    def __init__(self, device: torch.device):
        self.device, self.available = device, True
        if device.type == "cuda":
            self.method = "torch.cuda.max_memory_allocated"
            return
        try:  # Linux with glibc only
            libc = ctypes.CDLL("libc.so.6")
            with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
                f.write("5")
            libc.mallopt(-3, 64 * 1024)  # M_MMAP_THRESHOLD: blocks >= 64 KiB by mmap, returned on free
            self.trim = libc.malloc_trim
            self.method = self.CPU_METHOD
        except OSError as exc:
            self.available, self.method = False, f"not measured on this system ({exc})"

    @staticmethod
    def _status(field: str) -> int:
        with open("/proc/self/status", encoding="ascii") as f:
            line = next(line for line in f if line.startswith(field + ":"))
        return int(line.split()[1]) * 1024  # kB -> bytes

    def measure(self, fn: Callable[[], object]) -> int:
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            out = fn()
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - base
        else:  # free heap pages leave the resident set, so that reusing them counts too
            self.trim(0)
            with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
                f.write("5")  # VmHWM := VmRSS
            base = self._status("VmRSS")
            out = fn()
            peak = self._status("VmHWM") - base
        del out
        return peak


# --------------------------------------------------------------------------- the cases


def inputs(method: str, seq_len: int, args, device) -> tuple:
    gen = torch.Generator(device=device).manual_seed(seq_len)
    if method.startswith("scan"):
        channels = args.heads * args.d_head
        u = torch.randn(args.batch, seq_len, channels, generator=gen, device=device)  # (B, T, D)
        delta = F.softplus(torch.randn(args.batch, seq_len, channels, generator=gen, device=device) - 2)  # (B, T, D)
        A = -torch.rand(channels, STATE_N, generator=gen, device=device) - 0.1  # (D, N)
        B, C = (torch.randn(args.batch, seq_len, STATE_N, generator=gen, device=device) for _ in range(2))  # (B, T, N)
        return u, delta, A, B, C
    shape = (args.batch, args.heads, seq_len, args.d_head)
    q, k, v = (torch.randn(shape, generator=gen, device=device) for _ in range(3))  # (B, H, T, d_head) each
    if method == "delta-chunk":  # the delta rule is stable with unit-norm keys and 0 < beta < 1
        beta = torch.rand(shape[:3], generator=gen, device=device)  # (B, H, T)
        return q, F.normalize(k, dim=-1), v, beta
    if method in BACKWARD:  # leaves that want gradients, and the gradient of the output
        grad_out = torch.randn(shape, generator=gen, device=device)  # (B, H, T, d_head)
        return q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), grad_out
    return q, k, v


def warmed_pass(method: str, seq_len: int, args, device) -> Callable[[], object]:
    """:func:`forward_fn` on fresh :func:`inputs`, run once unmeasured (first-call allocations, thread pools and
    kernels' workspaces are not the method's)."""
    fn = forward_fn(method, inputs(method, seq_len, args, device))
    fn()
    return fn


def with_backward(attend: Callable[..., torch.Tensor], data: tuple) -> Callable[[], tuple]:
    """A forward and a backward pass: the gradients ``(dq, dk, dv)`` of ``attend(q, k, v)`` for ``grad_out``."""
    q, k, v, grad_out = data

    def step():
        with torch.enable_grad():
            return torch.autograd.grad(attend(q, k, v), (q, k, v), grad_out)

    return step


def softmax_attention(method: str, causal: bool = True) -> Callable[..., torch.Tensor]:
    """``(q, k, v) -> out`` of a softmax method (``naive``, ``sdpa``, ``tiled``, and their ``-bwd`` forms, where
    ``tiled-bwd`` is the differentiable ``flash_attention``); tiles of 128."""
    return {
        "naive": lambda q, k, v: naive_attention(q, k, v, causal=causal),
        "sdpa": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
        "tiled": lambda q, k, v: tiled_attention(q, k, v, causal=causal, block_size=128),
        "tiled-bwd": lambda q, k, v: flash_attention(q, k, v, block_size=128, causal=causal),
    }[method if method == "tiled-bwd" else method.removesuffix("-bwd")]


def forward_fn(method: str, data: tuple) -> Callable[[], object]:
    """One pass of ``method`` over ``data`` (from :func:`inputs`); for the ``-bwd`` methods, forward and backward."""
    if method in BACKWARD:
        return with_backward(softmax_attention(method), data)
    if method in SOFTMAX:
        return lambda: softmax_attention(method)(*data)
    return {
        "lin-rec": lambda: linear_attention_recurrent(*data),
        "lin-chunk": lambda: linear_attention_chunkwise(*data, chunk_size=64),
        "delta-chunk": lambda: deltanet_chunkwise(*data, chunk_size=64),
        "scan-seq": lambda: selective_scan_sequential(*data),
        "scan-par": lambda: selective_scan_parallel(*data),
    }[method]


def token_fn(method: str, seq_len: int, args, device) -> tuple[Callable[[], object], int]:
    """One decoding step with a context of ``seq_len`` tokens, and the bytes held between steps."""
    gen = torch.Generator(device=device).manual_seed(seq_len)
    batch, heads, d = args.batch, args.heads, args.d_head

    def randn(*shape):
        return torch.randn(*shape, generator=gen, device=device)

    if method in SOFTMAX:  # one layer's cache of T tokens: T - 1 in it, the new token's key and value appended
        cache = KVCache(1, batch, heads, seq_len, d, device=device)
        cache.append(0, randn(batch, heads, seq_len - 1, d), randn(batch, heads, seq_len - 1, d))
        cache.advance(seq_len - 1)
        q, k, v = (randn(batch, heads, 1, d) for _ in range(3))  # (B, H, 1, d) each
        attend = softmax_attention(method, causal=False)  # the new token sees every cached one
        return (lambda: attend(q, *cache.append(0, k, v))), cache.nbytes
    if method in ("lin-rec", "lin-chunk"):
        state = (randn(batch, heads, d, d).abs(), randn(batch, heads, d).abs())  # S, z
        q, k, v = (randn(batch, heads, 1, d) for _ in range(3))  # (B, H, 1, d) each
        held = sum(s.numel() * s.element_size() for s in state)
        return (lambda: linear_attention_recurrent(q, k, v, state=state, return_state=True)), held
    if method == "delta-chunk":
        S = randn(batch, heads, d, d)  # (B, H, d_k, d_v)
        q, v = randn(batch, heads, 1, d), randn(batch, heads, 1, d)  # (B, H, 1, d)
        k = F.normalize(randn(batch, heads, 1, d), dim=-1)  # (B, H, 1, d_k)
        beta = torch.rand(batch, heads, 1, generator=gen, device=device)  # (B, H, 1)
        return (lambda: decay_recurrence(q, k, v, beta=beta, state=S)), S.numel() * S.element_size()
    channels = heads * d
    h = randn(batch, channels, STATE_N)  # (B, D, N)
    A = -torch.rand(channels, STATE_N, generator=gen, device=device)
    u, delta, B, C = randn(batch, channels), randn(batch, channels).exp(), randn(batch, STATE_N), randn(batch, STATE_N)

    def scan_step():
        h_new = torch.exp(delta[..., None] * A) * h + (delta * u)[..., None] * B[:, None, :]  # (B, D, N)
        return (h_new * C[:, None, :]).sum(dim=-1), h_new  # (B, D)

    return scan_step, h.numel() * h.element_size()


def timed(fn: Callable[[], object], device, repeats: int, min_seconds: float = 0.0) -> float:
    """Fewest seconds per call over ``repeats`` runs (each call repeated until ``min_seconds`` have passed)."""

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    times = []
    for _ in range(repeats):
        count, start = 0, time.perf_counter()
        while True:
            fn()
            count += 1
            sync()
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                break
        times.append(elapsed / count)
    return min(times)


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ``log y`` against ``log x``."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def predicted(history: list[tuple[int, float]], next_len: int, default_exponent: float) -> float:
    """Extrapolate the last measurement to ``next_len`` with the latest local growth exponent."""
    (t1, y1) = history[-1]
    exponent = default_exponent
    if len(history) >= 2:
        (t0, y0) = history[-2]
        exponent = max(default_exponent, math.log(y1 / y0) / math.log(t1 / t0))
    return y1 * (next_len / t1) ** exponent


def memory_child(args, method: str, lengths: list[int]) -> None:
    """In a fresh process (so that no earlier allocation left freed memory resident): set up the CPU
    measurement first, then print ``T bytes`` for each length, and ``check bytes`` for a 64 MiB tensor."""
    device = torch.device("cpu")
    memory = ProcessPeak(device)
    if not memory.available:
        print(f"unavailable {memory.method}")
        return
    torch.ones(16 * MiB)  # the first operation's own allocations (ATen's start-up) are not the check's
    print(f"check {memory.measure(lambda: torch.ones(16 * MiB))}")
    for seq_len in lengths:
        print(f"{seq_len} {memory.measure(warmed_pass(method, seq_len, args, device))}", flush=True)


def measure_memory(args, device, lengths: dict[str, list[int]]) -> dict[str, dict[int, int]]:
    """Peak bytes of one pass (forward, or forward and backward) per method and length: in this process on
    CUDA, in one child process per method on a CPU (``--memory-child``). Prints the method and its check."""
    result: dict[str, dict[int, int]] = {m: {} for m in args.methods}
    if device.type == "cuda":
        memory = ProcessPeak(device)
        for method in args.methods:
            for seq_len in lengths[method]:
                result[method][seq_len] = memory.measure(warmed_pass(method, seq_len, args, device))
        print(f"peak memory: {memory.method}")
        return result
    checks, note = [], ""
    for method in args.methods:
        if not lengths[method]:
            continue
        cmd = [sys.executable, "-m", "benchmarks.long_context", "--memory-child", method]
        cmd += ["--lengths", *map(str, lengths[method]), "--batch", str(args.batch)]
        cmd += ["--heads", str(args.heads), "--d-head", str(args.d_head)]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            key, _, value = line.partition(" ")
            if key == "unavailable":
                note = value
            elif key == "check":
                checks.append(int(value) / MiB)
            else:
                result[method][int(key)] = int(value)
    if note:
        print(f"peak memory: not measured ({note})")
    else:
        print(
            f"peak memory: {ProcessPeak.CPU_METHOD}, one process per method; check: a 64 MiB tensor reads as "
            f"{min(checks):.1f} .. {max(checks):.1f} MiB"
        )
    return result


# --------------------------------------------------------------------------- the run


def run(args) -> None:
    device = torch.device(
        "cuda" if args.device == "auto" and torch.cuda.is_available() else args.device.replace("auto", "cpu")
    )
    lengths = [2**i for i in range(int(math.log2(args.min_len)), int(math.log2(args.max_len)) + 1)]
    print(machine_line(device))
    print(
        f"sizes: batch {args.batch}, heads {args.heads}, d_head {args.d_head} (scan: D = {args.heads * args.d_head}, "
        f"N = {STATE_N}), float32, T = {lengths[0]} .. {lengths[-1]}; cap: {args.budget:g} s per pass, "
        f"{args.max_memory:g} GiB per pass; times: the fastest of {args.repeats} runs"
    )
    fwd_time: dict[str, dict[int, float]] = {m: {} for m in args.methods}
    tok_time: dict[str, dict[int, float]] = {m: {} for m in args.methods}
    held: dict[str, dict[int, int]] = {m: {} for m in args.methods}
    stopped: dict[str, str] = {}
    for method in args.methods:
        for seq_len in lengths:
            history = sorted(fwd_time[method].items())
            if history:
                guess = predicted(history, seq_len, 2 if method in SOFTMAX + BACKWARD else 1)
                if guess > args.budget:
                    stopped[method] = f"stopped before T = {seq_len}: predicted {guess:.1f} s per pass"
                    break
            if method in ("naive", "naive-bwd"):  # the scores, their softmax, the mask fill (and 2 gradients)
                need = (3 if method == "naive" else 5) * args.batch * args.heads * seq_len**2 * 4 / 2**30
                if need > args.max_memory:
                    stopped[method] = f"stopped before T = {seq_len}: ~{need:.1f} GiB of scores"
                    break
            fwd = warmed_pass(method, seq_len, args, device)
            first = timed(fwd, device, 1)
            fwd_time[method][seq_len] = first if first > args.budget / 3 else timed(fwd, device, args.repeats)
            del fwd
            if method in BACKWARD:
                continue
            step, nbytes = token_fn(method, seq_len, args, device)
            step()
            tok_time[method][seq_len] = timed(step, device, args.repeats, min_seconds=0.05)
            held[method][seq_len] = nbytes
            del step
        print(f"  timed {method:9s} {stopped.get(method, 'all lengths')}", flush=True)

    fwd_mem = measure_memory(args, device, {m: sorted(fwd_time[m]) for m in args.methods})

    forward = [m for m in args.methods if m not in BACKWARD]
    backward = [m for m in args.methods if m in BACKWARD]

    def table(title: str, values: dict, fmt: Callable[[float], str], exponent: bool, methods: list[str]) -> None:
        if not methods:
            return
        print(f"\n{title}")
        print("| T | " + " | ".join(methods) + " |")
        print("|---:|" + "---:|" * len(methods))
        for seq_len in lengths:
            cells = [fmt(values[m][seq_len]) if seq_len in values[m] else "-" for m in methods]
            if any(c != "-" for c in cells):
                print(f"| {seq_len} | " + " | ".join(cells) + " |")
        if exponent:
            cells = []
            for m in methods:
                points = sorted((t, y) for t, y in values[m].items() if t >= args.fit_from and y > 0)
                cells.append(f"{slope(*zip(*points)):.2f}" if len(points) >= 2 else "-")
            print(f"| exponent (T >= {args.fit_from}) | " + " | ".join(cells) + " |")

    ms, mib = (lambda s: f"{1e3 * s:.3g}"), (lambda b: f"{b / MiB:.3g}")
    table("forward pass, ms", fwd_time, ms, True, forward)
    table("forward pass, peak MiB beyond the inputs", fwd_mem, mib, True, forward)
    table("one generated token, ms", tok_time, ms, True, forward)
    table("held between generated tokens, MiB (from shapes)", held, mib, False, forward)
    table("forward + backward pass (training), ms", fwd_time, ms, True, backward)
    table("forward + backward pass (training), peak MiB beyond the inputs", fwd_mem, mib, True, backward)
    print()
    for method, why in stopped.items():
        print(f"{method}: {why}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="auto: CUDA when present")
    parser.add_argument("--min-len", type=int, default=256)
    parser.add_argument("--max-len", type=int, default=16384)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--d-head", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per case; the fastest is printed")
    parser.add_argument(
        "--budget", type=float, default=None, help="seconds per pass before a method stops (CPU 2, CUDA 10)"
    )
    parser.add_argument(
        "--max-memory",
        type=float,
        default=None,
        help="GiB per pass before naive attention (and naive-bwd) stops (CPU 4, CUDA half the GPU)",
    )
    parser.add_argument("--fit-from", type=int, default=1024, help="smallest T in the exponent fit")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS), help="default: all")
    parser.add_argument("--memory-child", choices=METHODS, help=argparse.SUPPRESS)  # internal: see measure_memory
    parser.add_argument("--lengths", type=int, nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child:
        with torch.no_grad():
            memory_child(args, args.memory_child, args.lengths)
        return
    if args.min_len < 1 or args.max_len < args.min_len:
        parser.error("need 1 <= --min-len <= --max-len")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is available")
    cuda = args.device != "cpu" and torch.cuda.is_available()
    if args.budget is None:
        args.budget = 10.0 if cuda else 2.0
    if args.max_memory is None:
        args.max_memory = torch.cuda.get_device_properties(0).total_memory / 2**31 if cuda else 4.0
    with torch.no_grad():
        run(args)


if __name__ == "__main__":
    main()
