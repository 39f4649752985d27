"""Device selection: the same notebook runs on a laptop CPU, a CUDA GPU or Apple silicon."""

from __future__ import annotations

import os

import torch

_CHOICES = ("cuda", "mps", "cpu")


def get_device(prefer: str | None = None, verbose: bool = False) -> torch.device:
    """Return the best available device: CUDA, then MPS, then CPU.

    ``prefer`` (or the environment variable ``COURSE_DEVICE``) forces one of
    ``"cuda"``, ``"mps"`` or ``"cpu"``; asking for a device that is not present raises
    ``ValueError`` instead of failing later inside torch.
    """
    choice = prefer if prefer is not None else os.environ.get("COURSE_DEVICE", "").strip()
    choice = choice.lower()
    if choice:
        if choice not in _CHOICES:
            raise ValueError(f"device must be one of {_CHOICES}, got {choice!r}")
        if choice == "cuda" and not torch.cuda.is_available():
            raise ValueError("device 'cuda' was asked for but torch.cuda.is_available() is False")
        if choice == "mps" and not _mps_available():
            raise ValueError("device 'mps' was asked for but no Apple MPS backend is available")
        device = torch.device(choice)
    elif torch.cuda.is_available():
        device = torch.device("cuda")
    elif _mps_available():
        device = torch.device("mps")
    else:
        device = torch.device("cpu")
    if verbose:
        print(f"using device: {describe(device)}")
    return device


def describe(device: torch.device) -> str:
    """A one-line human description of ``device`` (GPU name for CUDA)."""
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return device.type


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def native_bf16(device: torch.device | str = "cpu") -> bool:
    """True when ``device`` computes in bfloat16 in hardware, so bf16 autocast can pay off there.

    CUDA: ``torch.cuda.is_bf16_supported()`` (Ampere and later). CPU: only where PyTorch's kernels
    use AVX-512 *and* the CPU has the AVX512-BF16 or AMX-BF16 instructions; on other CPUs (most
    laptops, AVX2 only) bf16 is emulated and runs many times slower than fp32, so the course keeps
    fp32 there. Apple's MPS: False (the course does not use bf16 on it).
    """
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device.type != "cpu":
        return False
    if not torch.backends.cpu.get_cpu_capability().startswith("AVX512"):
        return False  # includes ATEN_CPU_CAPABILITY=avx2/default on an AVX-512 machine
    return bool({"avx512_bf16", "amx_bf16"} & _cpu_flags())


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()
