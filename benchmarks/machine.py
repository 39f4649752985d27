"""One line naming the machine a benchmark ran on, printed first so that its figures can be compared.

>>> print(machine_line())  # doctest: +SKIP
machine: CPU Intel(R) Xeon(R) Processor @ 2.50GHz, 2 cores, 2 threads, ATen CPU capability AVX512, torch 2.5.1
"""

from __future__ import annotations

import os
import platform
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo``; where that file has none, ``platform.processor()`` or the
    architecture (on Linux ``platform.processor()`` is ``''`` or ``'x86_64'``, never a model)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine() or "unknown CPU"


def machine_line(device: torch.device | str = "cpu") -> str:
    """``"machine: <where>, <n> cores, <n> threads, ATen CPU capability <ISA>, torch <version>"``.

    ``<where>`` is the GPU's name when ``device`` is a CUDA device, else ``"CPU "`` and the model from
    ``/proc/cpuinfo`` (``platform.processor()`` where that file has none). The thread count is
    ``torch.get_num_threads()``: what the CPU work of this process may use, after ``OMP_NUM_THREADS``.
    """
    import torch  # here, so that cpu_model() costs no torch import

    device = torch.device(device)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU {cpu_model()}"
    return (
        f"machine: {where}, {os.cpu_count()} cores, {torch.get_num_threads()} threads, "
        f"ATen CPU capability {torch.backends.cpu.get_cpu_capability()}, torch {torch.__version__}"
    )
