"""Tests of course_utils.memory: the peak counts tensors alive together, frees, views and a backward pass."""

import torch

from course_utils.memory import PeakMemory


def test_peak_counts_what_is_alive_together():
    x = torch.ones(1000)
    with PeakMemory() as memory:
        a, b = x * 2, x * 3  # 4000 bytes each, alive together
        del a, b
        c = x + 1  # after the first two were freed
        view = c[:10]  # a view adds nothing
    assert memory.peak == 8000 and memory.current == 4000
    assert view.shape == (10,)


def test_peak_sees_saved_activations_and_the_backward_pass():
    w = torch.ones(100, 100, requires_grad=True)
    x = torch.ones(8, 100)
    with PeakMemory() as without_grad:
        with torch.no_grad():
            torch.tanh(torch.tanh(x @ w) @ w)
    with PeakMemory() as with_grad:
        torch.tanh(torch.tanh(x @ w) @ w).sum().backward()
    assert with_grad.peak > without_grad.peak  # the saved activations and w.grad (40000 bytes)
    assert with_grad.peak >= 40000
