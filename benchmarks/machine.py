"""One line naming the machine a benchmark ran on, printed first so that its figures can be compared.

>>> print(machine_line())  # doctest: +SKIP
machine: CPU Intel(R) Xeon(R) Processor @ 2.50GHz, 2 cores, 2 threads, ATen CPU capability AVX512, torch 2.5.1
"""

from __future__ import annotations

import os
import platform

import torch

from benchmarks.notebook_times import cpu_model


def machine_line(device: torch.device | str = "cpu") -> str:
    """``"machine: <where>, <n> cores, <n> threads, ATen CPU capability <ISA>, torch <version>"``.

    ``<where>`` is the GPU's name when ``device`` is a CUDA device, else ``"CPU "`` and the model from
    ``/proc/cpuinfo`` (``platform.processor()`` where that file has none). The thread count is
    ``torch.get_num_threads()``: what the CPU work of this process may use, after ``OMP_NUM_THREADS``.
    """
    device = torch.device(device)
    if device.type == "cuda":
        where = torch.cuda.get_device_name(device)
    else:
        model = cpu_model()
        if model == "unknown CPU":
            model = platform.processor() or model
        where = f"CPU {model}"
    return (
        f"machine: {where}, {os.cpu_count()} cores, {torch.get_num_threads()} threads, "
        f"ATen CPU capability {torch.backends.cpu.get_cpu_capability()}, torch {torch.__version__}"
    )
