"""Figures the lectures share: training curves and heatmaps."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch

from .training import History


def plot_history(history: History, ax: plt.Axes | None = None, title: str = "training") -> plt.Axes:
    """Draw per-step training loss (faint), and per-epoch train/validation loss at epoch ends."""
    if not history.step_loss:
        raise ValueError("plot_history: the history is empty (did fit run?)")
    ax = ax or plt.subplots(figsize=(6, 3.5))[1]
    ax.plot(history.step_loss, alpha=0.35, label="train (step)")
    epochs = len(history.train_loss)
    if epochs:
        steps_per_epoch = len(history.step_loss) / epochs
        ends = [round((i + 1) * steps_per_epoch) - 1 for i in range(epochs)]
        ax.plot(ends, history.train_loss, "o-", label="train (epoch mean)")
        if history.val_loss:
            ax.plot(ends, history.val_loss, "s-", label="validation")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title(title)
    ax.legend()
    return ax


def plot_heatmap(
    matrix: torch.Tensor,
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    ax: plt.Axes | None = None,
    title: str = "",
    cmap: str = "viridis",
) -> plt.Axes:
    """Draw a 2-D tensor of shape ``(rows, cols)`` with optional tick labels."""
    if not isinstance(matrix, torch.Tensor) or matrix.dim() != 2:
        raise ValueError(f"plot_heatmap needs a 2-D tensor, got {getattr(matrix, 'shape', type(matrix))}")
    ax = ax or plt.subplots(figsize=(5, 4))[1]
    image = ax.imshow(matrix.detach().cpu().float().numpy(), cmap=cmap, aspect="auto")
    if x_labels is not None:
        ax.set_xticks(range(len(x_labels)), x_labels, rotation=90)
    if y_labels is not None:
        ax.set_yticks(range(len(y_labels)), y_labels)
    ax.set_title(title)
    ax.figure.colorbar(image, ax=ax)
    return ax
