"""Environment settings that make PyTorch on this CPU compute like another instruction set.

    python tests/isa_env.py other    # an ISA other than this machine's: AVX-512 -> AVX2, AVX2 -> baseline
    python tests/isa_env.py avx2     # as an AVX2 machine without AVX-512 computes (most laptops)
    python tests/isa_env.py default  # ATen's unvectorised kernels, oneDNN at SSE4.1, MKL in compatible mode

Prints ``NAME=value`` pairs on one line, for ``env $(python tests/isa_env.py other) pytest ...``.
These are read when torch loads: ATen's CPU kernels (``ATEN_CPU_CAPABILITY``), oneDNN
(``ONEDNN_MAX_CPU_ISA``: convolutions, LSTM) and MKL (``MKL_ENABLE_INSTRUCTIONS``, and
``MKL_CBWR``, which changes the bits of matrix products). They cannot add an instruction set the CPU
lacks, only take some away, and a run under them need not reproduce another CPU bit for bit: it
computes with different rounding, which is what a test of the lectures' validation needs.
With ``other``, exits 3 (printing nothing) when no lower ISA can be emulated here (an ARM CPU,
or an x86 CPU already at the baseline).
"""

from __future__ import annotations

import platform
import sys

SETTINGS = {
    "avx2": {
        "ATEN_CPU_CAPABILITY": "avx2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "MKL_CBWR": "AVX2",
    },
    "default": {
        "ATEN_CPU_CAPABILITY": "default",
        "ONEDNN_MAX_CPU_ISA": "SSE41",
        "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
        "MKL_CBWR": "COMPATIBLE",
    },
}


def native_capability() -> str:
    """What ATen uses on this CPU when nothing is set: 'AVX512', 'AVX2', 'DEFAULT', 'SVE256', ..."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in SETTINGS["avx2"]}
    out = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip().upper()


def other_isa() -> str | None:
    """The ISA to emulate for a second opinion: one step below this machine's, or None."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    capability = native_capability()
    if capability.startswith("AVX512"):
        return "avx2"
    if capability == "AVX2":
        return "default"
    return None


def main(argv: list[str]) -> int:
    which = argv[1] if len(argv) > 1 else "other"
    if which == "other":
        which = other_isa()
        if which is None:
            return 3
    if which not in SETTINGS:
        raise SystemExit(f"isa_env: expected one of other, {', '.join(SETTINGS)}; got {which!r}")
    print(" ".join(f"{k}={v}" for k, v in SETTINGS[which].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
