"""course_utils.images (loading, fallback, augmentation) and the ViT benchmark's smoke run.

The Fashion-MNIST files are faked here in the IDX format (tiny, random), so these tests need
neither the Debian package nor the network."""

import gzip
import struct

import pytest
import torch

from course_utils.data import DataUnavailable
from course_utils.images import (
    TensorImageDataset,
    augmentation,
    channel_stats,
    load_images,
    shift_and_flip,
    standardize,
    subset,
)


def _write_idx(path, array: torch.Tensor) -> None:
    dims = tuple(array.shape)
    header = struct.pack(">I", 0x0800 + len(dims)) + b"".join(struct.pack(">I", d) for d in dims)
    with gzip.open(path, "wb") as f:
        f.write(header + array.to(torch.uint8).numpy().tobytes())


@pytest.fixture
def fake_fashion(tmp_path, monkeypatch):
    """A folder laid out like the Debian package (four *-ubyte.gz files), 40 train / 10 test images."""
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "fashion"
    folder.mkdir()
    g = torch.Generator().manual_seed(0)
    for split, n in (("train", 40), ("t10k", 10)):
        _write_idx(folder / f"{split}-images-idx3-ubyte.gz", torch.randint(0, 256, (n, 28, 28), generator=g))
        _write_idx(folder / f"{split}-labels-idx1-ubyte.gz", torch.arange(n) % 10)
    return folder


def test_load_fashion_mnist_from_a_folder(fake_fashion, tmp_path):
    data = load_images("fashion_mnist", root=fake_fashion)
    assert data.name == "fashion_mnist" and data.classes[0] == "T-shirt/top"
    assert data.train_images.shape == (40, 1, 28, 28) and data.test_images.shape == (10, 1, 28, 28)
    assert data.train_images.dtype == torch.float32 and 0 <= data.train_images.min() and data.train_images.max() <= 1
    assert data.train_labels.tolist() == [i % 10 for i in range(40)]
    with gzip.open(fake_fashion / "t10k-images-idx3-ubyte.gz") as f:  # pixel values survive the trip
        raw = torch.frombuffer(bytearray(f.read()[16:]), dtype=torch.uint8).view(10, 28, 28)
    torch.testing.assert_close(data.test_images[:, 0], raw.float() / 255)
    assert (tmp_path / "cache" / "FashionMNIST" / "raw" / "train-images-idx3-ubyte").exists()


def test_missing_data_falls_back_loudly_or_raises(tmp_path, capsys):
    data = load_images("fashion_mnist", root=tmp_path)
    assert data.name == "digits" and data.image_shape == (1, 8, 8)
    assert "using scikit-learn's 8x8 digits" in capsys.readouterr().out
    with pytest.raises(DataUnavailable, match="no Fashion-MNIST files"):
        load_images("fashion_mnist", root=tmp_path, fallback=False)
    with pytest.raises(DataUnavailable):
        load_images("cifar10", root=tmp_path, fallback=False)
    with pytest.raises(ValueError, match="unknown image dataset"):
        load_images("imagenet")


def test_digits_split_is_deterministic_and_disjoint():
    a, b = load_images("digits"), load_images("digits")
    torch.testing.assert_close(a.test_images, b.test_images)
    assert len(a.train_labels) + len(a.test_labels) == 1797
    assert set(a.train_labels.tolist()) == set(range(10))


def test_shift_and_flip_crops_the_padded_image():
    torch.manual_seed(0)
    images = torch.rand(64, 2, 6, 5)
    out = shift_and_flip(images, padding=2, flip=True, generator=torch.Generator().manual_seed(3))
    assert out.shape == images.shape
    padded = torch.nn.functional.pad(images, (2, 2, 2, 2))
    flipped = 0
    for i in range(64):  # every output is one of the 5 x 5 x 2 crops of its padded input
        crops = [
            c
            for dy in range(5)
            for dx in range(5)
            for c in (padded[i, :, dy : dy + 6, dx : dx + 5], padded[i, :, dy : dy + 6, dx : dx + 5].flip(-1))
        ]
        matches = [j for j, c in enumerate(crops) if torch.equal(c, out[i])]
        assert matches, f"image {i} is not a shifted (and maybe flipped) copy"
        flipped += all(j % 2 for j in matches)
    assert 10 < flipped < 54  # about half are mirrored
    assert torch.equal(shift_and_flip(images, padding=0, flip=False), images)


def test_augmentation_dataset_and_statistics():
    images, labels = torch.rand(10, 1, 28, 28), torch.arange(10)
    dataset = TensorImageDataset(images, labels, transform=augmentation())
    image, label = dataset[3]
    assert image.shape == (1, 28, 28) and label.item() == 3
    with pytest.raises(ValueError, match="labels"):
        TensorImageDataset(images, labels[:5])
    mean, std = channel_stats(images)
    z = standardize(images, mean, std)
    torch.testing.assert_close(channel_stats(z)[0], torch.zeros(1), atol=1e-5, rtol=0)
    torch.testing.assert_close(channel_stats(z)[1], torch.ones(1), atol=1e-5, rtol=0)


def test_subset_is_seeded():
    data = load_images("digits")
    a, b = subset(data, 100, 50, seed=1), subset(data, 100, 50, seed=1)
    assert len(a.train_labels) == 100 and len(a.test_labels) == 50
    torch.testing.assert_close(a.train_images, b.train_images)
    with pytest.raises(ValueError):
        subset(data, 10_000)


def test_vit_benchmark_smoke(fake_fashion, capsys):
    from benchmarks import vit_fashion as vit

    result = vit.main(["--data-root", str(fake_fashion), "--steps", "2"])
    out = capsys.readouterr().out
    assert result["dataset"] == "fashion_mnist" and result["steps"] == 2
    assert "test_accuracy=" in out and "NOT Fashion-MNIST" not in out
    result = vit.main(["--dataset", "digits", "--steps", "2", "--augment"])
    assert result["dataset"] == "digits" and "NOT Fashion-MNIST" in capsys.readouterr().out
