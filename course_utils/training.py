"""A small, readable training loop with progress bars and a history to plot.

    history = fit(model, train_loader, loss_fn, optimizer, epochs=3, val_loader=val_loader)
    plot_history(history)            # from course_utils.plotting

``loss_fn(model, batch) -> scalar tensor`` receives the whole batch (already moved to the
device), so the same loop serves classifiers, language models and seq2seq models.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from .progress import progress as progress_bar

LossFn = Callable[[torch.nn.Module, Any], torch.Tensor]


@dataclass
class History:
    """Losses recorded by :func:`fit`: one entry per optimizer step and per epoch."""

    step_loss: list[float] = field(default_factory=list)  # training loss at every step
    train_loss: list[float] = field(default_factory=list)  # mean training loss per epoch
    val_loss: list[float] = field(default_factory=list)  # validation loss per epoch (if any)
    lr: list[float] = field(default_factory=list)  # learning rate at every step


def to_device(batch: Any, device: torch.device | str) -> Any:
    """Move every tensor inside ``batch`` (tensor, tuple, list or dict, nested) to ``device``."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(v, device) for v in batch)
    return batch


@torch.no_grad()
def evaluate_loss(model: torch.nn.Module, loader: Iterable, loss_fn: LossFn, device: torch.device | str) -> float:
    """Mean of ``loss_fn`` over the batches of ``loader`` in eval mode (batches weighted equally)."""
    was_training = model.training
    model.eval()
    losses = [loss_fn(model, to_device(batch, device)).item() for batch in loader]
    model.train(was_training)
    if not losses:
        raise ValueError("evaluate_loss: the loader yielded no batches")
    return sum(losses) / len(losses)


def fit(
    model: torch.nn.Module,
    train_loader: Iterable,
    loss_fn: LossFn,
    optimizer: torch.optim.Optimizer,
    epochs: int = 1,
    device: torch.device | str | None = None,
    val_loader: Iterable | None = None,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    clip_norm: float | None = None,
    progress: bool = True,
) -> History:
    """Train ``model`` for ``epochs`` passes over ``train_loader`` and return its :class:`History`.

    ``scheduler`` (if given) steps after every optimizer step; ``clip_norm`` clips the global
    gradient norm. ``device`` defaults to the device of the model's first parameter.
    """
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1, got {epochs}")
    if device is None:
        device = next(model.parameters()).device
    history = History()
    model.train()
    try:
        steps = epochs * len(train_loader)  # type: ignore[arg-type]
    except TypeError:  # a loader without a length
        steps = None
    # One bar for the whole run: it ends as one line, "training: 300/300 step in 4.1 s, epoch=3/3, loss=0.21".
    bar = progress_bar(desc="training", total=steps, unit="step", disable=not progress)
    try:
        for epoch in range(epochs):
            total, count = 0.0, 0
            for batch in train_loader:
                loss = loss_fn(model, to_device(batch, device))
                if not torch.isfinite(loss):
                    raise FloatingPointError(f"loss became {loss.item()} at step {len(history.step_loss)}")
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if clip_norm is not None:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
                optimizer.step()
                history.lr.append(optimizer.param_groups[0]["lr"])
                if scheduler is not None:
                    scheduler.step()
                history.step_loss.append(loss.item())
                total, count = total + loss.item(), count + 1
                bar.update(1)
                bar.set_postfix(epoch=f"{epoch + 1}/{epochs}", loss=f"{loss.item():.3f}", refresh=False)
            if count == 0:
                raise ValueError("fit: the training loader yielded no batches")
            history.train_loss.append(total / count)
            if val_loader is not None:
                history.val_loss.append(evaluate_loss(model, val_loader, loss_fn, device))
    finally:
        bar.close()
    return history
