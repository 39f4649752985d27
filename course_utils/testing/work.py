"""How a test's call did its work: the tensor operations it ran, the largest tensor it made, the dtypes.

Some exercise parts teach a *method* (BPTT by hand, tiled attention, a chunkwise recurrence, a scan), and
right values reached another way must not earn their points. Their tests run the student's code inside
``watch_work()`` and then assert what the method implies about the work, with
:func:`course_utils.testing.checks.check_method`:

    with forbid(...), watch_work() as small:
        bptt_grads(x, y, W_hx, W_hh, W_qh)                    # H = 4
    with forbid(...), watch_work() as large:
        bptt_grads(x, y, W_hx_big, W_hh_big, W_qh_big)        # H = 32
    check_method(large.ops <= 1.2 * small.ops + 10, "bptt_grads", "the work grew with the hidden size", hint=...)

The watch counts at PyTorch's dispatcher (a ``TorchDispatchMode``), below the torch-function layer: it sees
every ATen operation, also those run inside a custom ``autograd.Function``, a torch-function handler or a
composite operator. Operations that reach the dispatcher while the torch-function layer is switched off
(``torch._C.DisableTorchFunction``) are refused, since they would also hide from the call guard
(:mod:`course_utils.testing.guard` applies the same rule to its blocks).

What a :class:`Work` records:

- ``ops``: ATen operations run (views and in-place ones included; a composite such as ``F.linear`` counts
  as the kernels it runs);
- ``largest`` / ``largest_op``: the number of elements of the largest tensor an operation returned, and
  which operation returned it;
- ``dtypes``: every dtype an operation returned (a complex dtype betrays the complex-step derivative);
- ``counts``: operations by ATen name (``"aten::mm"``);
- ``elements``: elements returned, by ATen name; ``exponentials`` sums those of the operations that
  compute exponentials (``EXPONENTIALS``: exp, sigmoid, softmax, logsumexp and their kin, in place or not);
- ``python_steps``: bytecode instructions run by Python code outside the installed packages and the course
  library, i.e. the student's own (``course_utils.testing.guard.count_python_steps``): work done on plain floats and
  lists, which runs no tensor operation.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from .guard import count_python_steps
from .layer import function_layer_required

__all__ = ["EXPONENTIALS", "Work", "watch_work"]

# ATen operations that compute exponentials (an in-place variant, "aten::exp_", counts as its operation)
EXPONENTIALS = frozenset(
    "aten::exp aten::exp2 aten::expm1 aten::pow aten::sigmoid aten::_softmax aten::_log_softmax aten::logsumexp "
    "aten::logaddexp aten::logaddexp2".split()
)


@dataclass
class Work:
    """What ran inside one ``watch_work()`` block (filled in while it runs)."""

    ops: int = 0
    largest: int = 0
    largest_op: str = ""
    dtypes: set[torch.dtype] = field(default_factory=set)
    counts: Counter = field(default_factory=Counter)
    elements: Counter = field(default_factory=Counter)
    python_steps: int = 0

    @property
    def complex(self) -> bool:
        """True when some operation returned a complex tensor."""
        return any(dtype.is_complex for dtype in self.dtypes)

    @property
    def exponentials(self) -> int:
        """Elements returned by the operations of ``EXPONENTIALS``."""
        return sum(n for name, n in self.elements.items() if name.rstrip("_") in EXPONENTIALS)

    def record(self, name: str, result: object) -> None:
        self.ops += 1
        self.counts[name] += 1
        for item in result if isinstance(result, (tuple, list)) else (result,):
            if isinstance(item, torch.Tensor):
                self.dtypes.add(item.dtype)
                self.elements[name] += item.numel()
                if item.numel() > self.largest:
                    self.largest, self.largest_op = item.numel(), name


@contextlib.contextmanager
def watch_work() -> Iterator[Work]:
    """Record the work of the enclosed block into the :class:`Work` it yields.

    Watches may nest (each records what runs inside it). Raises ``AssertionError`` (the guard's
    ``ForbiddenCall``) when an operation runs with the torch-function layer switched off.
    """
    work = Work()
    steps = [0]
    try:
        with function_layer_required(on_op=work.record), count_python_steps(steps):
            yield work
    finally:
        work.python_steps = steps[0]
