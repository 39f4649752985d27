"""Unit 10: peak memory counted tensor by tensor, the same on every device.

``PeakMemory`` is the counter lecture 10 builds in its first section: a ``TorchDispatchMode`` that adds
the bytes of every tensor an operation inside the block creates, and subtracts them when the tensor's
storage is freed. Its ``peak`` is the most bytes the block held at once, its inputs not counted. It
depends only on the operations and the shapes, so it reads the same on a laptop, a server and a GPU,
and it sees what autograd saves for the backward pass and what the backward pass creates::

    with PeakMemory() as memory:
        loss = model(x).sum()
        loss.backward()
    memory.peak      # bytes; memory.current: what is still alive at the end of the block
"""

from __future__ import annotations

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

__all__ = ["PeakMemory"]


class PeakMemory(TorchDispatchMode):
    """``with PeakMemory() as m: ...`` -> ``m.peak``, ``m.current`` (bytes of tensors made in the block)."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # no torch._dynamo wrapper: it would import dynamo (~2.5 s) on the first operation

    def __enter__(self):
        self.live: dict[int, int] = {}
        self.current = 0
        self.peak = 0
        return super().__enter__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                key = storage.data_ptr()
                if key in self.live or storage.nbytes() == 0:  # a view of a tensor already counted
                    continue
                self.live[key] = storage.nbytes()
                self.current += storage.nbytes()
                self.peak = max(self.peak, self.current)
                weakref.finalize(storage, self._free, key)
        return out

    def _free(self, key: int) -> None:
        self.current -= self.live.pop(key, 0)
