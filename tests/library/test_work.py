"""The work watch (course_utils.testing.work.watch_work), check_method, and the guard's watch below the
torch-function layer (course_utils.testing.guard.function_layer_required): what a method check measures, and what
cannot hide from it."""

import functools
import sys

import pytest
import torch
import torch.nn as nn

from course_utils.testing.checks import WrongMethod, check_method, watch_work
from course_utils.testing.guard import ForbiddenCall, forbid, function_layer_required

_OFF = torch._C.DisableTorchFunction


def _lstm_inputs():
    g = torch.Generator().manual_seed(0)
    x, h = torch.randn(2, 3, generator=g), torch.randn(2, 4, generator=g)
    return x, (h, h.clone()), torch.randn(16, 3, generator=g), torch.randn(16, 4, generator=g)


def test_watch_counts_operations_and_the_largest_tensor():
    a = torch.randn(8, 8)
    with watch_work() as work:
        b = a @ a  # one mm
        c = b.sum()
    assert work.ops >= 2 and work.counts["aten::mm"] == 1
    assert work.largest == 64 and work.largest_op == "aten::mm"
    assert work.dtypes == {torch.float32} and not work.complex
    assert torch.equal(c, (a @ a).sum())


def test_work_grows_with_a_loop_and_not_with_one_batched_call():
    x = torch.randn(64, 8)
    with watch_work() as looped:
        torch.stack([row.tanh() for row in x])
    with watch_work() as batched:
        x.tanh()
    assert looped.ops > 64 > batched.ops
    assert batched.largest == looped.largest == 64 * 8


def test_complex_arithmetic_is_seen():
    w = torch.randn(5, dtype=torch.float64)
    with watch_work() as work:
        derivative = (w + 1e-20j).sin().imag / 1e-20
    assert work.complex and torch.allclose(derivative, w.cos())


def test_work_inside_a_custom_autograd_function_is_counted():
    class Hidden(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return (x[:, None, :] * x[None, :, :]).sum(0)  # a (64, 64, 64) product inside

        @staticmethod
        def backward(ctx, grad):
            return grad

    with watch_work() as work:
        Hidden.apply(torch.randn(64, 64))
    assert work.largest == 64**3 and work.counts["aten::mul"] == 1


def test_nested_watches_each_record_their_block():
    a = torch.randn(3)
    with watch_work() as outer:
        a + 1
        with watch_work() as inner:
            a * 2
    assert inner.ops == 1 and outer.ops == 2


def test_operations_beneath_a_switched_off_function_layer_are_refused():
    with pytest.raises(ForbiddenCall, match="torch-function layer off"):
        with watch_work():
            with _OFF():
                torch.randn(3) + 1


def test_a_forbidden_operator_called_from_c_with_the_layer_off_fails():
    """The gap the guard used to name: map over a partial of torch.lstm_cell under DisableTorchFunction."""
    x, state, w_ih, w_hh = _lstm_inputs()
    cell = functools.partial(torch.lstm_cell)

    def shortcut():
        with _OFF():
            return list(map(cell, [x], [state], [w_ih], [w_hh]))[0]

    shortcut()  # works outside a block
    with pytest.raises(ForbiddenCall):
        with forbid(torch.lstm_cell):
            try:
                shortcut()
            except ForbiddenCall:
                pass  # caught by the student's code: still recorded, and raised when the block ends


def test_popping_the_guards_torch_function_mode_from_c_fails():
    x, state, w_ih, w_hh = _lstm_inputs()
    pop, push = torch._C._pop_torch_function_stack, torch._C._push_on_torch_function_stack

    def shortcut():
        modes = [pop() for _ in range(torch._C._len_torch_function_stack())]
        try:
            return torch.lstm_cell(x, state, w_ih, w_hh)
        finally:
            for mode in reversed(modes):
                push(mode)

    with pytest.raises(ForbiddenCall):
        with forbid(torch.lstm_cell):
            shortcut()


def test_honest_code_runs_unchanged_under_the_layer():
    """Parameters (a tensor subclass), autograd, in-place updates and printing all pass through."""
    layer = nn.Linear(4, 3)
    x = torch.randn(5, 4)
    expected = layer(x)
    with forbid(torch.lstm_cell), watch_work() as work:
        out = layer(x)
        loss = out.pow(2).mean()
        loss.backward()
        with torch.no_grad():
            layer.weight -= 0.1 * layer.weight.grad
        repr(out)
    assert torch.equal(out, expected) and layer.weight.grad is not None and work.ops > 5


def test_the_layer_leaves_no_mode_behind():
    before = torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack()
    with function_layer_required():
        torch.randn(2) * 2
    with pytest.raises(ForbiddenCall):
        with function_layer_required():
            with _OFF():
                torch.randn(2) * 2
    assert (torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack()) == before


def test_check_method_raises_wrong_method_with_the_hint():
    check_method(True, "f", "never shown")
    with pytest.raises(WrongMethod, match=r"f: its work grew 8x\nHint: derive the gradient"):
        check_method(False, "f", "its work grew 8x", hint="derive the gradient")
    assert issubclass(WrongMethod, AssertionError)  # nbgrader scores an AssertionError 0
    with pytest.raises(TypeError, match="must be a bool"):
        check_method(torch.tensor(True), "f", "a tensor is not a measured fact")


def test_exponentials_are_counted_by_the_elements_they_return():
    x = torch.randn(4, 6)
    with watch_work() as work:
        x.exp()
        torch.softmax(x, dim=-1)
        x.clone().sigmoid_()
        x.tanh()  # not an exponential here
    assert work.exponentials == 3 * 24
    assert work.elements["aten::tanh"] == 24


def _python_sum_of_squares(x):
    total = 0.0
    for row in x.tolist():
        for value in row:
            total += value * value
    return torch.tensor(total)


def test_python_steps_count_work_on_plain_numbers_that_tensor_operations_miss():
    x = torch.randn(20, 20)
    with watch_work() as tensors:
        (x * x).sum()
    with watch_work() as floats:
        _python_sum_of_squares(x)
    assert floats.ops <= tensors.ops  # no tensor operation per number...
    assert floats.python_steps > 20 * 20 > tensors.python_steps  # ...but a Python step for each
    assert sys.gettrace() is None  # the counter's trace function is gone after the block
