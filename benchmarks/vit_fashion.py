"""Train the course's Vision Transformer on Fashion-MNIST for a wall-time budget; print test accuracy.

    python -m benchmarks.vit_fashion               # 285 s of training, then the 10,000 test images
    python -m benchmarks.vit_fashion --seconds 60 --data-root DIR --augment

Target (issue 5): at least 88% test accuracy on Fashion-MNIST within 5 minutes on 2 CPU cores,
everything included (loading, training, testing). The default budget leaves 15 s of the 5 minutes
for loading and for scoring the test set; the last line printed reports the total wall time.

Data comes from ``course_utils.images.load_images`` (the Debian package ``dataset-fashion-mnist``
or ``--data-root``). Without Fashion-MNIST it falls back to scikit-learn's 8x8 digits and says so
loudly: the target is then not measured.

The recipe (``RECIPE``): ``course_utils.vit.ViT`` with 4x4 patches (49 tokens + CLS), width 64,
4 Pre-LN layers, 4 heads, MLP ratio 2, PyTorch's default initialisation of the Linear layers;
AdamW (lr 2e-3, weight decay 0.05 on matrices), linear warm-up over the first 3% of the budget,
then cosine decay to zero, driven by elapsed time so that it ends exactly when the budget does;
batch 128; gradient clipping at 1. Each choice was measured at this budget (docs/benchmarks.md): ViT's std-0.02
initialisation reached 87.6% instead of 89.7%, and augmentation (``--augment``: random shifts of
up to 2 pixels and horizontal flips, ``course_utils.images.shift_and_flip``) together with label
smoothing 0.1 cost 4 points in a 6.4-epoch run (82.2% against 86.2%), so the recipe trains on the
plain images.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import torch
import torch.nn.functional as F

from benchmarks.budget import train_for_budget
from benchmarks.machine import machine_line
from course_utils.images import channel_stats, load_images, shift_and_flip, standardize
from course_utils.taming import warmup_cosine, weight_decay_groups
from course_utils.vit import ViT, ViTConfig


@dataclass
class Recipe:
    model: dict = field(
        default_factory=lambda: dict(patch_size=4, d_model=64, num_layers=4, num_heads=4, mlp_ratio=2.0, init="default")
    )
    batch_size: int = 128
    lr: float = 2e-3
    weight_decay: float = 0.05
    warmup: float = 0.03  # fraction of the budget
    label_smoothing: float = 0.0
    grad_clip: float = 1.0
    augment: bool = False


RECIPE = Recipe()


@torch.no_grad()
def accuracy(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor, batch_size: int = 1000) -> float:
    """Fraction of ``images (N, C, H, W)`` whose arg-max logit equals ``labels (N,)``."""
    model.eval()
    correct = sum(
        (model(images[i : i + batch_size]).argmax(-1) == labels[i : i + batch_size]).sum().item()
        for i in range(0, len(labels), batch_size)
    )
    model.train()
    return correct / len(labels)


def make_optimizer(model: torch.nn.Module, recipe: Recipe) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only: not on biases and norms, and not on the CLS token and
    position embeddings, which are parameters to learn freely rather than maps to keep small."""
    groups = weight_decay_groups(model, recipe.weight_decay, no_decay=("cls_token", "pos_embedding"))
    return torch.optim.AdamW(groups, lr=recipe.lr)


def lr_at(recipe: Recipe, progress: float) -> float:
    """Linear warm-up over the first ``recipe.warmup`` of the budget, then cosine decay to zero at its end
    (``course_utils.taming.warmup_cosine`` read on the continuous clock of the budget fraction)."""
    return recipe.lr * warmup_cosine(progress, recipe.warmup, 1.0, offset=0.0)


def epoch_batches(
    images: torch.Tensor, labels: torch.Tensor, recipe: Recipe, generator: torch.Generator
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Endless batches ``(B, C, H, W), (B,)`` from ``images (N, C, H, W)`` and ``labels (N,)``: each epoch a new
    random order, the last incomplete batch of an epoch dropped; shifted and flipped if ``recipe.augment``."""
    order, cursor = torch.randperm(len(labels), generator=generator), 0
    while True:
        if cursor + recipe.batch_size > len(labels):  # a new epoch
            order, cursor = torch.randperm(len(labels), generator=generator), 0
        index = order[cursor : cursor + recipe.batch_size]
        cursor += recipe.batch_size
        x, y = images[index], labels[index]  # (B, C, H, W), (B,)
        if recipe.augment:
            x = shift_and_flip(x, padding=2, flip=True, generator=generator)
        yield x, y


def train(
    model: ViT,
    recipe: Recipe,
    images: torch.Tensor,
    labels: torch.Tensor,
    seconds: float,
    steps: int | None = None,
    seed: int = 0,
    log_every: float = 30.0,
) -> dict:
    """Train on ``images (N, C, H, W)`` and ``labels (N,)`` for ``seconds`` of wall time (or exactly ``steps``
    steps), printing the training loss every ``log_every`` s (every 500 steps). Returns the step count,
    images seen and seconds spent."""
    batches = epoch_batches(images, labels, recipe, torch.Generator().manual_seed(seed))

    def log(step: int, elapsed: float, loss: float, seen: int) -> None:
        print(f"  {elapsed:5.0f} s  step {step:6d}  epoch {seen / len(labels):5.2f}  loss {loss:.3f}", flush=True)

    run = train_for_budget(
        model,
        make_optimizer(model, recipe),
        lambda: next(batches),
        lambda x, y: F.cross_entropy(model(x), y, label_smoothing=recipe.label_smoothing),
        lambda step, progress: lr_at(recipe, progress),
        seconds,
        steps=steps,
        grad_clip=recipe.grad_clip,
        report=log,
        report_every=log_every,
    )
    return {"steps": run.steps, "images": run.samples, "seconds": run.seconds}


def main(argv: list[str] | None = None) -> dict:
    wall = time.perf_counter()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=285.0, help="training wall-time budget (default 285)")
    parser.add_argument("--steps", type=int, help="train exactly this many steps instead (a smoke test)")
    parser.add_argument("--data-root", help="folder with Fashion-MNIST's four *-ubyte.gz files")
    parser.add_argument("--dataset", default="fashion_mnist", choices=["fashion_mnist", "digits"])
    parser.add_argument("--augment", action="store_true", help="random shifts and flips (off in the recipe)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.seconds <= 0:
        parser.error("--seconds must be positive")
    if args.steps is not None and args.steps < 1:
        parser.error("--steps must be at least 1")

    print(machine_line(), flush=True)
    torch.manual_seed(args.seed)
    data = load_images(args.dataset, root=args.data_root)
    fallback = data.name != "fashion_mnist"
    if fallback:
        print(
            "!" * 78
            + "\n!!! NOT Fashion-MNIST: the benchmark's target (88% on Fashion-MNIST) is not measured\n"
            + "!" * 78,
            flush=True,
        )
    mean, std = channel_stats(data.train_images)
    train_x, test_x = standardize(data.train_images, mean, std), standardize(data.test_images, mean, std)
    C, H, W = data.image_shape
    recipe = replace(RECIPE, augment=True) if args.augment else RECIPE
    model_fields = dict(recipe.model)
    if H < 4 * model_fields["patch_size"]:  # the 8x8 digits: 2x2 patches
        model_fields["patch_size"] = 2
    model = ViT(ViTConfig(image_size=H, in_channels=C, num_classes=len(data.classes), **model_fields))
    print(
        f"data: {data}; model: ViT {model_fields}, {model.num_parameters():,} parameters; "
        f"{f'{args.steps} steps' if args.steps else f'{args.seconds:g} s'} of training",
        flush=True,
    )

    stats = train(model, recipe, train_x, data.train_labels, args.seconds, args.steps, args.seed)
    test_accuracy = accuracy(model, test_x, data.test_labels)
    total = time.perf_counter() - wall
    print(
        f"trained {stats['steps']} steps, {stats['images'] / len(data.train_labels):.2f} epochs "
        f"in {stats['seconds']:.0f} s ({stats['images'] / stats['seconds']:.0f} images/s)"
    )
    print(
        f"dataset={data.name} test_accuracy={test_accuracy:.4f} total_seconds={total:.0f}"
        + (" (fallback data: target not measured)" if fallback else "")
    )
    return {"dataset": data.name, "test_accuracy": test_accuracy, "total_seconds": total, **stats}


if __name__ == "__main__":
    main()
