"""Training for a time budget: the loop that ``benchmarks.char_lm`` and ``benchmarks.vit_fashion`` share.

A benchmark at a fixed budget does not know in advance how many steps it will take, so its schedule
cannot count steps to the end of the run. Here the run is measured by its *progress*, the fraction of
the budget spent: ``elapsed / seconds`` on a clock (wall time by default), or ``step / steps`` when a
fixed step count is asked for instead (a comparison that does not depend on the machine, or a smoke
test). The run stops at the first step that would start with progress >= 1, and the learning-rate
schedule is a function of the step and the progress, so that a decay ends exactly when the budget does.

Each step: draw a batch, set every parameter group's learning rate, compute the loss (under bf16
autocast if asked), ``zero_grad``, ``backward``, clip the gradient norm if asked, ``optimizer.step()``.
Evaluation on held-out data is the caller's, after the loop; during the loop an optional ``report``
sees the training loss at a fixed cadence (every ``report_every`` seconds of the clock, or every
``report_every_steps`` steps in a fixed-step run).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass
class BudgetRun:
    """What :func:`train_for_budget` did.

    ``steps``: optimizer steps taken; ``samples``: training examples seen, the sum of ``len(y)`` over
    the batches; ``seconds``: wall seconds (``time.perf_counter``) the loop took, whichever clock counted
    the budget; ``last_loss``: the training loss of the last step (nan if no step was taken).
    """

    steps: int
    samples: int
    seconds: float
    last_loss: float


def train_for_budget(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    next_batch: Callable[[], tuple[torch.Tensor, torch.Tensor]],
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    lr_at: Callable[[int, float], float],
    seconds: float,
    *,
    steps: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
    grad_clip: float | None = None,
    bf16: bool = False,
    report: Callable[[int, float, float, int], None] | None = None,
    report_every: float = 30.0,
    report_every_steps: int = 500,
) -> BudgetRun:
    """Train ``model`` until ``seconds`` of ``clock`` are spent (or exactly ``steps`` steps, if given).

    - ``next_batch()`` returns ``(x, y)``: inputs of any shape ``(B, ...)`` and targets ``(B, ...)``;
      ``len(y)`` counts the samples. ``loss_fn(x, y)`` returns the scalar loss to minimise.
    - ``lr_at(step, progress)``: the learning rate of the 0-based ``step``, given the fraction of the run
      done before it, ``progress`` in ``[0, 1)``; it is written into every parameter group.
    - ``clock``: a function returning seconds, e.g. ``time.process_time`` to count this process's CPU
      time instead of wall time.
    - ``grad_clip``: the largest gradient norm over ``model.parameters()`` (None: no clipping).
    - ``bf16``: compute the loss under CPU bf16 autocast.
    - ``report(step, elapsed, loss, samples)`` is called after the step that passes each multiple of
      ``report_every`` clock seconds (with ``elapsed`` the clock reading before that step), or in a
      fixed-step run after every ``report_every_steps``-th step.

    Returns a :class:`BudgetRun`. Raises ValueError if ``seconds`` is not positive or ``steps`` is
    given and below 1.
    """
    if not seconds > 0:
        raise ValueError(f"seconds must be positive, got {seconds}")
    if steps is not None and steps < 1:
        raise ValueError(f"steps must be at least 1 when given, got {steps}")
    step, samples, loss = 0, 0, None
    start, wall_start, next_report = clock(), time.perf_counter(), report_every
    while True:
        elapsed = clock() - start
        progress = elapsed / seconds if steps is None else step / steps
        if progress >= 1:
            break
        x, y = next_batch()
        lr = lr_at(step, progress)
        for group in optimizer.param_groups:
            group["lr"] = lr
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = loss_fn(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        step, samples = step + 1, samples + len(y)
        if report is not None:
            if steps is None and elapsed >= next_report:
                report(step, elapsed, loss.item(), samples)
                next_report += report_every
            elif steps is not None and step % report_every_steps == 0:
                report(step, elapsed, loss.item(), samples)
    last_loss = math.nan if loss is None else loss.item()
    return BudgetRun(steps=step, samples=samples, seconds=time.perf_counter() - wall_start, last_loss=last_loss)
