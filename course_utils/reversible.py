"""Unit 10: reversible residual layers (Gomez et al. 2017, "The Reversible Residual Network"), as the
Reformer (Kitaev et al. 2020) uses them so that activation memory does not grow with depth.

A :class:`ReversibleBlock` splits the activations into two halves ``x1, x2`` of one shape and computes

    y1 = x1 + f(x2),    y2 = x2 + g(y1),

which can be undone exactly: ``x2 = y2 - g(y1)``, ``x1 = y1 - f(x2)`` (:meth:`ReversibleBlock.inverse`).
A :class:`ReversibleSequence` of blocks runs its forward pass without keeping any activation and saves only
its final outputs; its backward pass walks the blocks from the last, recomputing each block's inputs from
its outputs and back-propagating through that one block. ``f`` and ``g`` must be deterministic (no
dropout): the backward pass recomputes them. Shapes: ``x1, x2`` any equal shape, e.g. ``(B, T, D)``.
"""

from __future__ import annotations

import torch
import torch.nn as nn

__all__ = ["ReversibleBlock", "ReversibleSequence"]


def _check_halves(a: object, b: object, names: str) -> None:
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or not a.is_floating_point():
        raise ValueError(f"{names} must be floating tensors, got {type(a).__name__}, {type(b).__name__}")
    if a.shape != b.shape or a.dtype != b.dtype:
        raise ValueError(
            f"{names} must share shape and dtype, got {tuple(a.shape)} {a.dtype}, {tuple(b.shape)} {b.dtype}"
        )


class ReversibleBlock(nn.Module):
    """``(x1, x2) -> (y1, y2)`` with ``y1 = x1 + f(x2)``, ``y2 = x2 + g(y1)``; ``f, g`` map a half to its shape."""

    def __init__(self, f: nn.Module, g: nn.Module):
        super().__init__()
        if not isinstance(f, nn.Module) or not isinstance(g, nn.Module):
            raise ValueError(f"f and g must be nn.Modules, got {type(f).__name__}, {type(g).__name__}")
        self.f, self.g = f, g

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``x1, x2`` (one shape, e.g. ``(B, T, D)``) -> ``y1, y2`` of that shape."""
        _check_halves(x1, x2, "x1, x2")
        y1 = x1 + self.f(x2)
        y2 = x2 + self.g(y1)
        return y1, y2

    def inverse(self, y1: torch.Tensor, y2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The block's inputs from its outputs: ``x2 = y2 - g(y1)``, then ``x1 = y1 - f(x2)``."""
        _check_halves(y1, y2, "y1, y2")
        x2 = y2 - self.g(y1)
        x1 = y1 - self.f(x2)
        return x1, x2


class _Reversible(torch.autograd.Function):
    """Forward through ``blocks`` keeping nothing but the outputs; backward by inverting block by block."""

    @staticmethod
    def forward(ctx, x1, x2, blocks, params, *flat_params):
        with torch.no_grad():
            for block in blocks:
                x1, x2 = block(x1, x2)
        ctx.blocks, ctx.params = blocks, params
        ctx.save_for_backward(x1, x2)  # the only activations kept: the final (y1, y2)
        return x1, x2

    @staticmethod
    def backward(ctx, dy1, dy2):
        y1, y2 = ctx.saved_tensors
        grads = {id(p): None for p in ctx.params}

        def add(params, found):
            for p, grad in zip(params, found):
                if grad is not None:
                    grads[id(p)] = grad if grads[id(p)] is None else grads[id(p)] + grad

        for block in reversed(ctx.blocks):
            f_params = [p for p in block.f.parameters() if p.requires_grad]
            g_params = [p for p in block.g.parameters() if p.requires_grad]
            with torch.enable_grad():  # y2 = x2 + g(y1): recompute g(y1), recover x2, back-propagate dy2 through g
                z1 = y1.detach().requires_grad_()
                g_out = block.g(z1)
                dz1, *found = torch.autograd.grad(g_out, [z1, *g_params], dy2, allow_unused=True)
            add(g_params, found)
            dx1 = dy1 + (dz1 if dz1 is not None else 0)  # y1 = x1 + f(x2): dL/dx1 = dL/dy1 in full
            x2 = (y2 - g_out).detach()
            del g_out
            with torch.enable_grad():  # y1 = x1 + f(x2): recompute f(x2), recover x1, back-propagate dx1 through f
                x2.requires_grad_()
                f_out = block.f(x2)
                dx2, *found = torch.autograd.grad(f_out, [x2, *f_params], dx1, allow_unused=True)
            add(f_params, found)
            x1 = (z1 - f_out).detach()
            del f_out
            dy1, dy2 = dx1, dy2 + (dx2 if dx2 is not None else 0)
            y1, y2 = x1, x2.detach()
        return (dy1, dy2, None, None, *(grads[id(p)] for p in ctx.params))


class ReversibleSequence(nn.Module):
    """Reversible blocks in a row: ``(x1, x2) -> (y1, y2)``, activation memory independent of depth.

    With autograd on, :meth:`forward` keeps only the last block's outputs and its backward pass recomputes
    every block's inputs from its outputs (:meth:`ReversibleBlock.inverse`), one block at a time, so
    gradients equal a plain stack's up to the rounding of the inversion. Costs one more forward pass of
    ``f`` and ``g`` per block in the backward.
    """

    def __init__(self, blocks):
        super().__init__()
        blocks = list(blocks)
        if not blocks or not all(isinstance(b, ReversibleBlock) for b in blocks):
            raise ValueError("blocks must be a non-empty iterable of ReversibleBlock")
        self.blocks = nn.ModuleList(blocks)

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``x1, x2`` (one shape, e.g. ``(B, T, D)``) -> ``y1, y2`` of that shape."""
        _check_halves(x1, x2, "x1, x2")
        params = list({id(p): p for p in self.parameters() if p.requires_grad}.values())  # each shared one once
        return _Reversible.apply(x1, x2, list(self.blocks), params, *params)

    def inverse(self, y1: torch.Tensor, y2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The inputs from the outputs, the blocks undone from the last."""
        for block in reversed(self.blocks):
            y1, y2 = block.inverse(y1, y2)
        return y1, y2
