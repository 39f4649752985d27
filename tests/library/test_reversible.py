"""Tests of course_utils.reversible: the inverse, gradients against a plain stack's autograd, memory in depth."""

import pytest
import torch
import torch.nn as nn

from course_utils.memory import PeakMemory
from course_utils.reversible import ReversibleBlock, ReversibleSequence


def mlp(width, seed, dtype=torch.float64):
    torch.manual_seed(seed)
    return nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width)).to(
        dtype
    )


def blocks(depth, width=8, dtype=torch.float64):
    return [ReversibleBlock(mlp(width, 2 * i, dtype), mlp(width, 2 * i + 1, dtype)) for i in range(depth)]


def plain(stack, x1, x2):
    # the same blocks run as ordinary layers: autograd keeps every activation
    for block in stack.blocks:
        x1, x2 = block(x1, x2)
    return x1, x2


def test_block_formula_and_inverse():
    block = blocks(1)[0]
    x1, x2 = torch.randn(2, 2, 5, 8, dtype=torch.float64).unbind(0)
    y1, y2 = block(x1, x2)
    torch.testing.assert_close(y1, x1 + block.f(x2), rtol=0, atol=0)
    torch.testing.assert_close(y2, x2 + block.g(y1), rtol=0, atol=0)
    back1, back2 = block.inverse(y1, y2)
    assert (back1 - x1).abs().max() < 1e-12 and (back2 - x2).abs().max() < 1e-12
    stack = ReversibleSequence(blocks(6))
    with torch.no_grad():
        back1, back2 = stack.inverse(*stack(x1, x2))
    assert (back1 - x1).abs().max() < 1e-12 and (back2 - x2).abs().max() < 1e-12


def test_gradients_equal_a_plain_stack():
    stack = ReversibleSequence(blocks(4))
    shared = ReversibleBlock(stack.blocks[0].f, mlp(8, 99))  # f shared with block 0: its gradient sums both uses
    stack = ReversibleSequence([*stack.blocks, shared])
    x1, x2 = torch.randn(2, 3, 7, 8, dtype=torch.float64).unbind(0)
    target = torch.randn(3, 7, 8, dtype=torch.float64)

    def grads(run):
        a, b = x1.clone().requires_grad_(), x2.clone().requires_grad_()
        y1, y2 = run(stack, a, b)
        loss = ((y1 - target) ** 2).sum() + (y1 * y2).sum()
        return torch.autograd.grad(loss, [a, b, *stack.parameters()])

    reversible = grads(lambda s, a, b: s(a, b))
    reference = grads(plain)
    assert len(reversible) == 2 + len(list(stack.parameters()))
    for got, want in zip(reversible, reference):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10)
    assert all(g.abs().sum() > 0 for g in reversible)


def test_activation_memory_constant_in_depth():
    def peak(depth, reversible):
        stack = ReversibleSequence(blocks(depth, width=16, dtype=torch.float32))
        x1, x2 = torch.randn(2, 4, 256, 16).unbind(0)
        x1.requires_grad_()
        with PeakMemory() as memory:
            y1, y2 = stack(x1, x2) if reversible else plain(stack, x1, x2)
            (y1.sum() + y2.sum()).backward()
        return memory.peak

    rev = {d: peak(d, True) for d in (2, 4, 8)}
    normal = {d: peak(d, False) for d in (2, 4, 8)}
    assert rev[8] < 1.2 * rev[2]  # only parameter gradients grow with depth
    assert normal[8] > 3 * normal[2] and normal[4] > 1.6 * normal[2]  # every layer's activations kept
    assert rev[8] < normal[8] / 4


def test_bad_input():
    with pytest.raises(ValueError, match="nn.Module"):
        ReversibleBlock(lambda x: x, nn.Identity())
    with pytest.raises(ValueError, match="ReversibleBlock"):
        ReversibleSequence([])
    with pytest.raises(ValueError, match="shape"):
        ReversibleSequence(blocks(1))(torch.zeros(2, 8, dtype=torch.float64), torch.zeros(3, 8, dtype=torch.float64))
