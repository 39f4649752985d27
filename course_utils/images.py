"""Image classification data for unit 09: real images with no download, more when online.

Where the images come from, in order:

1. ``root=`` a folder you pass, holding torchvision's layout (``FashionMNIST/raw/...``) or the
   four ``*-ubyte.gz`` files themselves;
2. the Debian package ``dataset-fashion-mnist`` (``/usr/share/datasets/fashion-mnist``), which
   ``make test`` installs where it can;
3. torchvision's download, only with ``download=True`` (needs the internet);
4. otherwise scikit-learn's bundled 8x8 digits (1,797 images), announced with a loud line, or
   ``DataUnavailable`` with ``fallback=False``.

Everything is returned as tensors: ``images (N, C, H, W)`` float32 in ``[0, 1]`` and ``labels (N,)``
int64, split into train and test sets (Fashion-MNIST's own 60,000 / 10,000 split).

    data = load_images("fashion_mnist")
    data.train_images.shape          # torch.Size([60000, 1, 28, 28])
    train = TensorImageDataset(data.train_images, data.train_labels, transform=augmentation())
"""

from __future__ import annotations

import gzip
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils.data import Dataset

from .data import DataUnavailable

DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
_IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
_TORCHVISION = {"fashion_mnist": "FashionMNIST", "mnist": "MNIST", "cifar10": "CIFAR10"}
NAMES = (*_TORCHVISION, "digits")


@dataclass
class ImageData:
    """A labelled image dataset held in memory.

    ``train_images (N, C, H, W)`` and ``test_images (M, C, H, W)`` float32 in ``[0, 1]``;
    ``train_labels (N,)`` and ``test_labels (M,)`` int64 class indices into ``classes``."""

    train_images: torch.Tensor
    train_labels: torch.Tensor
    test_images: torch.Tensor
    test_labels: torch.Tensor
    classes: tuple[str, ...]
    name: str

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)`` of one image."""
        return tuple(self.train_images.shape[1:])

    def __repr__(self) -> str:
        c, h, w = self.image_shape
        return (
            f"ImageData({self.name}: {len(self.train_labels)} train / {len(self.test_labels)} test, "
            f"{c}x{h}x{w}, {len(self.classes)} classes)"
        )


def cache_dir() -> Path:
    """Where decompressed or downloaded files go: ``$COURSE_DATA_DIR`` or ``~/.cache/course_utils``."""
    return Path(os.environ.get("COURSE_DATA_DIR") or Path.home() / ".cache" / "course_utils")


def _find_idx_gz(folder: Path) -> Path | None:
    """The folder among ``folder``, ``folder/raw`` and ``folder/FashionMNIST/raw`` with the four
    ``*-ubyte.gz`` files (or already decompressed ``*-ubyte``), else None."""
    for candidate in (folder, folder / "raw", folder / "FashionMNIST" / "raw"):
        if all((candidate / f).exists() or (candidate / f"{f}.gz").exists() for f in _IDX_FILES):
            return candidate
    return None


def fashion_mnist_available(root: str | os.PathLike | None = None) -> bool:
    """Whether ``load_images("fashion_mnist", root)`` finds Fashion-MNIST without downloading."""
    folders = [Path(root)] if root is not None else [cache_dir(), DEBIAN_FASHION_MNIST]
    return any(_find_idx_gz(folder) is not None for folder in folders)


def _torchvision_root(source: Path) -> Path:
    """A root in torchvision's layout (``FashionMNIST/raw/<name>-ubyte``) built from ``source``:
    decompressed once into the cache. Each file is written to a temporary name and then renamed, so
    two processes doing this at once cannot see half a file."""
    if source.name == "raw" and source.parent.name == "FashionMNIST" and all((source / f).exists() for f in _IDX_FILES):
        return source.parent.parent
    root = cache_dir()
    raw = root / "FashionMNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for name in _IDX_FILES:
        target = raw / name
        if target.exists():
            continue
        plain, packed = source / name, source / f"{name}.gz"
        with tempfile.NamedTemporaryFile(dir=raw, delete=False) as tmp:
            with open(plain, "rb") if plain.exists() else gzip.open(packed, "rb") as src:
                shutil.copyfileobj(src, tmp)
        os.replace(tmp.name, target)
    return root


def _from_torchvision(name: str, root: Path, download: bool) -> ImageData:
    import torchvision

    cls = getattr(torchvision.datasets, _TORCHVISION[name])
    splits = [cls(root=str(root), train=train, download=download) for train in (True, False)]

    def tensors(ds) -> tuple[torch.Tensor, torch.Tensor]:
        data = torch.as_tensor(ds.data)
        if data.ndim == 3:  # (N, H, W) grey
            data = data.unsqueeze(1)  # (N, 1, H, W)
        else:  # CIFAR: (N, H, W, C)
            data = data.permute(0, 3, 1, 2)  # (N, C, H, W)
        return data.float().div(255.0).contiguous(), torch.as_tensor(ds.targets, dtype=torch.long)

    (xtr, ytr), (xte, yte) = tensors(splits[0]), tensors(splits[1])
    return ImageData(xtr, ytr, xte, yte, tuple(splits[0].classes), name)


def load_digits(test_fraction: float = 0.2, seed: int = 0) -> ImageData:
    """scikit-learn's 8x8 handwritten digits (ships with scikit-learn, no download): 1,797 images
    ``(N, 1, 8, 8)`` in ``[0, 1]``, split by a seeded permutation into train and test."""
    from sklearn.datasets import load_digits as sk_digits

    bunch = sk_digits()
    images = torch.tensor(bunch.images, dtype=torch.float32).div(16.0).unsqueeze(1)  # (N, 1, 8, 8)
    labels = torch.tensor(bunch.target, dtype=torch.long)  # (N,)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))
    num_test = int(round(test_fraction * len(labels)))
    test, train = order[:num_test], order[num_test:]
    return ImageData(
        images[train], labels[train], images[test], labels[test], tuple(str(d) for d in range(10)), "digits"
    )


def load_images(
    name: str = "fashion_mnist", root: str | os.PathLike | None = None, download: bool = False, fallback: bool = True
) -> ImageData:
    """Load ``name`` (one of ``NAMES``) as an ``ImageData``; see the module docstring for the order
    in which sources are tried. With ``fallback=True`` a dataset that cannot be had here is replaced
    by the 8x8 digits and a line saying so is printed; with ``fallback=False`` it raises
    ``DataUnavailable``. ``name="digits"`` always works."""
    if name not in NAMES:
        raise ValueError(f"unknown image dataset {name!r}; choose one of {NAMES}")
    if name == "digits":
        return load_digits()
    reason = ""
    try:
        if name == "fashion_mnist" and not download:
            folders = [Path(root)] if root is not None else [cache_dir(), DEBIAN_FASHION_MNIST]
            for folder in folders:
                source = _find_idx_gz(folder)
                if source is not None:
                    return _from_torchvision(name, _torchvision_root(source), download=False)
            reason = (
                f"no Fashion-MNIST files in {folders[0]}"
                if root is not None
                else "Fashion-MNIST is not installed (Debian: apt-get install dataset-fashion-mnist)"
            )
            if root is not None:
                raise DataUnavailable(reason)
        else:
            return _from_torchvision(name, Path(root) if root is not None else cache_dir(), download=download)
    except (RuntimeError, OSError) as err:  # torchvision: "Dataset not found"; download errors
        if isinstance(err, DataUnavailable) and not fallback:
            raise
        reason = reason or f"{name} could not be loaded ({type(err).__name__}: {str(err).splitlines()[0][:120]})"
    if not fallback:
        raise DataUnavailable(reason)
    print(f"*** {reason}: using scikit-learn's 8x8 digits instead ***")
    return load_digits()


def channel_stats(images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean and std of ``images (N, C, H, W)``, each of shape ``(C,)``."""
    if images.ndim != 4:
        raise ValueError(f"images must be (N, C, H, W), got shape {tuple(images.shape)}")
    return images.mean(dim=(0, 2, 3)), images.std(dim=(0, 2, 3))


def standardize(
    images: torch.Tensor, mean: torch.Tensor | None = None, std: torch.Tensor | None = None
) -> torch.Tensor:
    """``(images - mean) / std`` per channel for ``images (N, C, H, W)`` (or one ``(C, H, W)``);
    ``mean, std (C,)`` default to the statistics of ``images`` themselves. Same shape out."""
    if images.ndim not in (3, 4):
        raise ValueError(f"images must be (N, C, H, W) or (C, H, W), got shape {tuple(images.shape)}")
    if mean is None or std is None:
        batch = images if images.ndim == 4 else images.unsqueeze(0)
        mean, std = channel_stats(batch)
    return (images - mean.view(-1, 1, 1)) / std.view(-1, 1, 1)


def subset(data: ImageData, num_train: int, num_test: int | None = None, seed: int = 0) -> ImageData:
    """A smaller ``ImageData``: ``num_train`` training and ``num_test`` test images (all if None),
    taken by a seeded random permutation (so every class appears in proportion, in expectation)."""
    if num_train > len(data.train_labels) or (num_test is not None and num_test > len(data.test_labels)):
        raise ValueError(f"asked for {num_train}/{num_test} images from {data}")
    g = torch.Generator().manual_seed(seed)
    tr = torch.randperm(len(data.train_labels), generator=g)[:num_train]
    te = torch.randperm(len(data.test_labels), generator=g)[:num_test] if num_test is not None else slice(None)
    return ImageData(
        data.train_images[tr],
        data.train_labels[tr],
        data.test_images[te],
        data.test_labels[te],
        data.classes,
        data.name,
    )


def augmentation(image_size: int = 28, padding: int = 2, flip: bool = True):
    """Per-image training augmentation with torchvision's transforms v2: a random crop of the image
    padded by ``padding`` pixels (a shift of up to ``padding`` in each direction) and, when ``flip``,
    a horizontal flip with probability 1/2. Takes and returns one ``(C, H, W)`` tensor."""
    from torchvision.transforms import v2

    steps = [v2.RandomCrop(image_size, padding=padding)]
    if flip:
        steps.append(v2.RandomHorizontalFlip())
    return v2.Compose(steps)


def shift_and_flip(
    images: torch.Tensor, padding: int = 2, flip: bool = True, generator: torch.Generator | None = None
) -> torch.Tensor:
    """``augmentation()`` for a whole batch at once, with tensor operations instead of a Python
    call per image (about 100x less overhead, for training loops where that matters): each image of
    ``images (B, C, H, W)`` is zero-padded by ``padding``, cropped back to ``H x W`` at its own random
    offset, and mirrored left-right with probability 1/2 when ``flip``. Returns ``(B, C, H, W)``."""
    if images.ndim != 4:
        raise ValueError(f"images must be (B, C, H, W), got shape {tuple(images.shape)}")
    B, C, H, W = images.shape
    padded = torch.nn.functional.pad(images, (padding,) * 4)  # (B, C, H+2p, W+2p)
    dy, dx = torch.randint(0, 2 * padding + 1, (2, B, 1), generator=generator)  # (B, 1) each
    rows = (dy + torch.arange(H)).view(B, 1, H, 1).expand(B, C, H, W + 2 * padding)  # (B, C, H, W+2p)
    out = padded.gather(2, rows)  # (B, C, H, W+2p)
    cols = dx + torch.arange(W)  # (B, W)
    if flip:
        mirror = torch.rand(B, 1, generator=generator) < 0.5  # (B, 1)
        cols = torch.where(mirror, cols.flip(-1), cols)
    return out.gather(3, cols.view(B, 1, 1, W).expand(B, C, H, W))  # (B, C, H, W)


class TensorImageDataset(Dataset):
    """``images (N, C, H, W)`` and ``labels (N,)`` as a map-style dataset; ``transform`` (if given)
    is applied to each ``(C, H, W)`` image as it is fetched."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, transform=None):
        if images.ndim != 4 or labels.ndim != 1 or len(images) != len(labels):
            raise ValueError(
                f"need images (N, C, H, W) and labels (N,), got {tuple(images.shape)} and {tuple(labels.shape)}"
            )
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        image = self.images[index]
        return (self.transform(image) if self.transform is not None else image), self.labels[index]
