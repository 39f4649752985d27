"""Unit 11: LoRA, a low-rank update of a frozen linear layer (Hu et al., "LoRA: Low-Rank Adaptation of
Large Language Models", 2021).

A pretrained ``nn.Linear`` computes ``W x + b`` with ``W (out, in)``. LoRA keeps ``W`` and ``b`` frozen
and learns a rank-``r`` correction::

    y = W x + b + (alpha / r) * B (A dropout(x)),     A (r, in), B (out, r)

``r * (in + out)`` numbers are trained instead of ``in * out``. ``B`` starts at zero, so before the first
step the adapted model computes exactly what the pretrained one did. After training, ``W + (alpha / r) B A``
is one matrix of the original shape: :meth:`LoRALinear.merge` / :func:`merge_lora` fold the update in, and
inference costs what it did before.

The conventions are those of ``peft`` (``LoraConfig`` / ``get_peft_model``): ``A`` is initialised like an
``nn.Linear`` weight (``kaiming_uniform_`` with ``a = sqrt(5)``), ``B`` with zeros, ``scaling = alpha / r``,
dropout acts on the input of the LoRA branch only, and a target name matches a module whose qualified name
equals it or ends with ``"." + target``. With ``lora_A`` / ``lora_B`` copied across, a model adapted here
and the same model adapted by ``peft`` return the same outputs (tests/library/test_lora.py).

    model = ...                                    # any nn.Module with named nn.Linear layers
    names = add_lora(model, ["query", "value"], rank=8, alpha=16)
    trainable_parameters(model)                    # only the lora_A / lora_B numbers
    ...                                            # train
    model = merge_lora(model)                      # plain nn.Linear layers again
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from .primitives import trainable_parameters  # noqa: F401 - re-exported: unit 11 counts what LoRA trains


def _check_settings(caller: str, rank: int, alpha: float | None, dropout: float) -> None:
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"{caller}: rank must be an integer >= 1, got {rank!r}")
    if alpha is not None and not alpha > 0:
        raise ValueError(f"{caller}: alpha must be > 0 (or None for alpha = rank), got {alpha!r}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"{caller}: dropout must be in [0, 1), got {dropout!r}")


class LoRALinear(nn.Module):
    """A frozen ``nn.Linear`` plus a trainable low-rank update ``scaling * B A``.

    ``base`` is the wrapped layer (its parameters get ``requires_grad = False``); ``lora_A (rank, in_features)``
    is kaiming-uniform, ``lora_B (out_features, rank)`` zeros, ``scaling = alpha / rank`` (``alpha=None`` means
    ``alpha = rank``, scaling 1). ``dropout`` is applied to the input of the LoRA branch only. ``merged`` says
    whether the update currently sits inside ``base.weight``.
    """

    def __init__(self, base: nn.Linear, rank: int, alpha: float | None = None, dropout: float = 0.0):
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise ValueError(f"LoRALinear: base must be an nn.Linear, got {type(base).__name__}")
        _check_settings("LoRALinear", rank, alpha, dropout)
        self.base = base
        for p in base.parameters():
            p.requires_grad_(False)
        self.rank = rank
        self.alpha = float(rank if alpha is None else alpha)
        self.scaling = self.alpha / rank
        w = base.weight  # (out, in)
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features, dtype=w.dtype, device=w.device))  # (r, in)
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank, dtype=w.dtype, device=w.device))  # (out, r)
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.merged = False

    @property
    def in_features(self) -> int:
        return self.base.in_features

    @property
    def out_features(self) -> int:
        return self.base.out_features

    def delta_weight(self) -> torch.Tensor:
        """The update ``scaling * B @ A``, shape ``(out_features, in_features)`` like ``base.weight``."""
        return self.scaling * (self.lora_B @ self.lora_A)  # (out, in)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x (..., in_features)`` -> ``(..., out_features)``: ``base(x) + scaling * B A dropout(x)``
        (just ``base(x)`` while merged, since the update is then inside ``base.weight``)."""
        if x.dim() < 1 or x.shape[-1] != self.in_features:
            raise ValueError(f"LoRALinear: x must be (..., {self.in_features}), got shape {tuple(x.shape)}")
        y = self.base(x)  # (..., out)
        if self.merged:
            return y
        h = F.linear(self.dropout(x), self.lora_A)  # (..., r)
        return y + F.linear(h, self.lora_B) * self.scaling  # (..., out)

    @torch.no_grad()
    def merge(self) -> None:
        """Add ``scaling * B @ A`` into ``base.weight``; the forward pass then uses ``base`` alone."""
        if self.merged:
            raise ValueError("LoRALinear.merge: already merged (call unmerge() first)")
        self.base.weight += self.delta_weight()
        self.merged = True

    @torch.no_grad()
    def unmerge(self) -> None:
        """Subtract ``scaling * B @ A`` from ``base.weight`` again (up to float rounding)."""
        if not self.merged:
            raise ValueError("LoRALinear.unmerge: not merged")
        self.base.weight -= self.delta_weight()
        self.merged = False

    def extra_repr(self) -> str:
        return f"rank={self.rank}, alpha={self.alpha:g}, scaling={self.scaling:g}, merged={self.merged}"


def _matches(name: str, targets: Sequence[str]) -> bool:
    return any(name == t or name.endswith("." + t) for t in targets)


def _set_submodule(model: nn.Module, name: str, module: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, module)


def add_lora(
    model: nn.Module, targets: Sequence[str], rank: int, alpha: float | None = None, dropout: float = 0.0
) -> list[str]:
    """Wrap every ``nn.Linear`` of ``model`` whose qualified name equals a target or ends with
    ``"." + target`` in a :class:`LoRALinear` (in place), and freeze every other parameter (the ``lora_A`` /
    ``lora_B`` of LoRALinears already in the model are left as they are).

    Returns the qualified names replaced, in ``named_modules`` order. Linears already inside a LoRALinear
    are left alone. Raises ``ValueError`` if ``targets`` is empty or a bare string, or if nothing matches.
    """
    if isinstance(targets, str) or not isinstance(targets, Sequence) or len(targets) == 0:
        raise ValueError(f"add_lora: targets must be a non-empty list of module names, got {targets!r}")
    _check_settings("add_lora", rank, alpha, dropout)
    inside = {name for name, m in model.named_modules() if isinstance(m, LoRALinear)}
    found = [
        name
        for name, m in model.named_modules()
        if name and isinstance(m, nn.Linear) and name.rpartition(".")[0] not in inside and _matches(name, targets)
    ]
    if not found:
        linears = [name for name, m in model.named_modules() if isinstance(m, nn.Linear)]
        raise ValueError(
            f"add_lora: no nn.Linear of the model matches targets {list(targets)}; "
            f"its nn.Linear modules include {linears[:6]}"
        )
    adapters = {id(p) for m in model.modules() if isinstance(m, LoRALinear) for p in (m.lora_A, m.lora_B)}
    for p in model.parameters():
        if id(p) not in adapters:  # as peft: earlier adapters stay as they are, everything else is frozen
            p.requires_grad_(False)
    for name in found:
        _set_submodule(model, name, LoRALinear(model.get_submodule(name), rank, alpha, dropout))
    return found


def merge_lora(model: nn.Module) -> nn.Module:
    """Merge every :class:`LoRALinear` of ``model`` (``W <- W + scaling * B @ A``) and put its plain
    ``nn.Linear`` back in its place. Returns the model (the base layer itself if ``model`` is a LoRALinear).
    The merged layers keep ``requires_grad = False``. Raises ``ValueError`` if there is no LoRALinear."""
    if isinstance(model, LoRALinear):
        if not model.merged:
            model.merge()
        return model.base
    names = [name for name, m in model.named_modules() if isinstance(m, LoRALinear)]
    if not names:
        raise ValueError(f"merge_lora: {type(model).__name__} contains no LoRALinear (call add_lora first)")
    for name in names:
        layer = model.get_submodule(name)
        if not layer.merged:
            layer.merge()
        _set_submodule(model, name, layer.base)
    return model
