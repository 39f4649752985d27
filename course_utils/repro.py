"""Seeding, so that lectures re-execute to the same printed output."""

from __future__ import annotations

import os
import random

import numpy as np
import torch


def seed_everything(seed: int = 0) -> torch.Generator:
    """Seed Python's ``random``, NumPy and torch (CPU and every GPU) with ``seed``.

    Returns a fresh ``torch.Generator`` seeded the same way, handy for a
    ``DataLoader(generator=...)`` whose shuffling must not depend on what ran before.
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)  # inherited by worker processes
    return torch.Generator().manual_seed(seed)
