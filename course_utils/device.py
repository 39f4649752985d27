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
