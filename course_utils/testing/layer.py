"""Beneath the torch-function layer: a watch at PyTorch's dispatcher that no tensor operation bypasses.

The call guard (:mod:`course_utils.testing.guard`) and the work watch (:mod:`course_utils.testing.work`) see
PyTorch through torch-function modes. Code can switch that layer off (``torch._C.DisableTorchFunction``) or
pop the modes from C, and run operators unseen. ``function_layer_required()`` pushes a ``TorchDispatchMode``,
which sees every ATen operation however it was called (from C code, inside a custom ``autograd.Function``, a
composite operator, a torch-function handler), and refuses any that did not come through the torch-function
layer. It also reports each operation to the blocks that asked (``on_op``), which is how the work watch
counts.

What it cannot see: operations run while Python dispatch is switched off as well
(``torch._C._DisableTorchDispatch``), since no Python code runs there; the grader's review flags
``torch._C`` in an answer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["ForbiddenCall", "function_layer_required"]


class ForbiddenCall(AssertionError):
    """A forbidden function ran while a test called the student's code (or the guard was switched off)."""


_LAYER_OFF = (
    "your code switched PyTorch's torch-function layer off (torch._C.DisableTorchFunction, or the tests' torch "
    "function modes popped) and ran tensor operations beneath it, where this test cannot see what runs: "
    "call PyTorch normally"
)


class _Layer:
    """Shared by every active ``function_layer_required`` block of the process (they nest)."""

    def __init__(self) -> None:
        self.blocks = 0  # active blocks
        self.inside = 0  # calls of the counting torch-function mode now running
        self.callbacks: list[Any] = []  # on_op of each block: (aten name, result) -> None
        self.refused: list[str] = []


_LAYER = _Layer()


class _Counting(TorchFunctionMode):
    """Marks the operations that came through the torch-function layer (where the guard's mode sees them)."""

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        layer = _LAYER
        layer.inside += 1
        try:
            return func(*args, **(kwargs or {}))
        finally:
            layer.inside -= 1


class _Below(TorchDispatchMode):
    """At the dispatcher, below the torch-function layer: every ATen operation, however it was called.

    An operation that did not come through the torch-function layer (it was switched off with
    ``DisableTorchFunction``, or the modes above were popped) is refused.
    """

    supports_higher_order_operators = True  # flex_attention and the like come here too, and are judged alike

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # no torch._dynamo wrapper: it imports dynamo (~2.5 s) on the first operation

    def __torch_dispatch__(self, func, types_, args=(), kwargs=None, _all_off=torch._C._is_torch_function_all_disabled):
        layer = _LAYER
        if layer.inside == 0 or _all_off():
            layer.refused.append(_LAYER_OFF)
            raise ForbiddenCall(_LAYER_OFF)
        result = getattr(func, "_op", func)(*args, **(kwargs or {}))  # the C operator: one Python frame less
        if layer.callbacks:
            packet = getattr(func, "_overloadpacket", None)  # "aten::mul", whichever overload ran
            name = packet._qualified_op_name if packet is not None else func.name()
            for callback in layer.callbacks:
                callback(name, result)
        return result


@contextlib.contextmanager
def function_layer_required(on_op: Any = None, counted_by_caller: bool = False) -> Iterator[None]:
    """Refuse tensor operations that bypass the torch-function layer inside the block.

    Pushes a counting ``TorchFunctionMode`` and, beneath it, a ``TorchDispatchMode`` that sees every ATen
    operation. ``on_op(name, result)``, if given, is called after each operation ("aten::mm", its output).
    Raises :class:`ForbiddenCall` at the refused operation, and again when the block ends (so catching it
    does not help). ``counted_by_caller``: the caller's own torch-function mode, entered right after, keeps
    ``_LAYER.inside`` itself (``forbid``'s does), which saves a mode per operation.
    """
    layer = _LAYER
    outermost = layer.blocks == 0
    modes: tuple[Any, ...] = ()
    if outermost:
        layer.refused = []
        modes = (None if counted_by_caller else _Counting(), _Below())
        modes[1].__enter__()
        if modes[0] is not None:
            modes[0].__enter__()
    layer.blocks += 1
    if on_op is not None:
        layer.callbacks.append(on_op)
    try:
        yield
    finally:
        if on_op is not None:
            layer.callbacks.remove(on_op)
        layer.blocks -= 1
        if outermost:
            problem = _exit_modes(modes)
            if layer.refused:
                raise ForbiddenCall(layer.refused[0]) from None
            if problem:
                raise ForbiddenCall(f"the guard was switched off while your code ran ({problem})")


def _exit_modes(modes: tuple[Any, ...]) -> str | None:
    """Leave the counting and dispatch modes; a message when the student's code changed their stacks."""
    problem = None
    counting, below = modes
    top = torch._C._len_torch_function_stack()
    if counting is None:
        pass
    elif top and torch._C._get_function_stack_at(top - 1) is counting:
        counting.__exit__(None, None, None)
    else:
        problem = "the torch function mode stack was changed"
    top = torch._C._len_torch_dispatch_stack()
    if top and torch._C._get_dispatch_stack_at(top - 1) is below:
        below.__exit__(None, None, None)
    else:
        problem = "the torch dispatch mode stack was changed"
    return problem
