"""course_utils.primitives: the masks, pooling, checks and counts every other module builds on, and the
promise that small modules reach them without importing the models."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn

import course_utils
from course_utils.primitives import (
    causal_mask,
    check_mask,
    check_qkv,
    count_parameters,
    lengths_to_mask,
    masked_pool,
    masked_softmax,
    padding_mask,
    trainable_parameters,
)

# --------------------------------------------------------------------------- masks


def test_causal_mask_values_and_diagonals():
    assert torch.equal(causal_mask(3), torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]], dtype=torch.bool))
    assert torch.equal(causal_mask(3, diagonal=-1), torch.tensor([[0, 0, 0], [1, 0, 0], [1, 1, 0]], dtype=torch.bool))
    assert causal_mask(0).shape == (0, 0)
    assert causal_mask(4, device="cpu").dtype == torch.bool


@pytest.mark.parametrize("bad", [2.5, "3", -1])
def test_causal_mask_rejects_a_bad_length(bad):
    with pytest.raises(ValueError, match="seq_len"):
        causal_mask(bad)


def test_lengths_to_mask_and_padding_mask_are_one_concept():
    lengths = torch.tensor([2, 0, 3])
    mask = lengths_to_mask(lengths)  # (3, 3): T is the longest length
    assert torch.equal(mask, torch.tensor([[1, 1, 0], [0, 0, 0], [1, 1, 1]], dtype=torch.bool))
    assert lengths_to_mask(lengths, 5).shape == (3, 5)
    key_mask = padding_mask(lengths, 5)
    assert key_mask.shape == (3, 1, 1, 5)
    assert torch.equal(key_mask[:, 0, 0], lengths_to_mask(lengths, 5))


@pytest.mark.parametrize("bad", [torch.tensor([1.0, 2.0]), torch.tensor([[1, 2]]), [1, 2]])
def test_lengths_to_mask_rejects_bad_lengths(bad):
    with pytest.raises(ValueError, match="lengths must be a 1-D integer tensor"):
        lengths_to_mask(bad)


def test_masked_softmax_zeroes_masked_keys_and_empty_rows():
    scores = torch.tensor([[1.0, 2.0, 3.0], [0.5, 0.5, 0.5]])
    mask = torch.tensor([[True, True, False], [False, False, False]])
    weights = masked_softmax(scores, mask)
    assert torch.allclose(weights[0, :2], torch.tensor([1.0, 2.0]).softmax(-1))
    assert weights[0, 2] == 0 and torch.equal(weights[1], torch.zeros(3))
    assert torch.allclose(masked_softmax(scores), scores.softmax(-1))


def test_masked_softmax_rejects_a_bad_mask():
    scores = torch.zeros(2, 3, 4)
    with pytest.raises(ValueError, match="bool"):
        masked_softmax(scores, torch.ones(2, 3, 4))
    with pytest.raises(ValueError, match=r"shape \(2, 5\) does not broadcast"):
        masked_softmax(scores, torch.ones(2, 5, dtype=torch.bool))
    check_mask(None, scores)  # no mask is a valid mask


# --------------------------------------------------------------------------- pooling


def test_masked_pool_last_mean_max():
    outputs = torch.tensor([[[1.0], [2.0], [9.0]], [[4.0], [-1.0], [0.5]]])  # (2, 3, 1)
    mask = lengths_to_mask(torch.tensor([2, 3]), 3)
    assert masked_pool(outputs, mask, "last").tolist() == [[2.0], [0.5]]
    assert torch.allclose(masked_pool(outputs, mask, "mean"), torch.tensor([[1.5], [3.5 / 3]]))
    assert masked_pool(outputs, mask, "max").tolist() == [[2.0], [4.0]]  # the padded 9 never wins


def test_masked_pool_rejects_bad_input():
    outputs = torch.zeros(2, 3, 4)
    with pytest.raises(ValueError, match="how must be one of"):
        masked_pool(outputs, torch.ones(2, 3, dtype=torch.bool), "median")
    with pytest.raises(ValueError, match=r"outputs must be \(B, T, H\)"):
        masked_pool(torch.zeros(2, 3), torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"mask must be a bool tensor of shape \(2, 3\)"):
        masked_pool(outputs, torch.ones(2, 3))
    with pytest.raises(ValueError, match="at least one True"):
        masked_pool(outputs, torch.tensor([[True, False, False], [False, False, False]]))


# --------------------------------------------------------------------------- checks and counts


def test_check_qkv_accepts_fitting_tensors_and_names_what_does_not_fit():
    q, k, v = torch.zeros(2, 3, 5, 4), torch.zeros(2, 3, 5, 4), torch.zeros(2, 3, 5, 6)
    check_qkv(q, k, v)
    check_qkv(q[:, :, :2], k, v, same_length=False)
    with pytest.raises(ValueError, match=r"q must be a 4-D floating tensor \(B, H, T, d\), got \(3, 5, 4\)"):
        check_qkv(q[0], k, v)
    with pytest.raises(ValueError, match="torch.int64"):
        check_qkv(q, k.long(), v)
    with pytest.raises(ValueError, match="shapes do not fit"):
        check_qkv(q, torch.zeros(2, 3, 5, 7), v)
    with pytest.raises(ValueError, match="as many queries as keys"):
        check_qkv(q[:, :, :2], k, v)
    with pytest.raises(ValueError, match="share a dtype"):
        check_qkv(q, k, v.double())


def test_count_parameters():
    assert count_parameters(nn.Linear(3, 4)) == 3 * 4 + 4
    assert count_parameters(nn.Sequential(nn.Linear(2, 2, bias=False), nn.ReLU())) == 4
    with pytest.raises(ValueError, match="nn.Module"):
        count_parameters(torch.zeros(3))


def test_trainable_parameters_counts_what_requires_grad():
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    model[0].weight.requires_grad_(False)
    assert trainable_parameters(model) == 4 + 4 * 2 + 2
    assert count_parameters(model) == 3 * 4 + 4 + 4 * 2 + 2
    with pytest.raises(ValueError, match="nn.Module"):
        trainable_parameters([torch.zeros(3)])


# --------------------------------------------------------------------------- one definition, short floors


def test_old_import_paths_give_the_same_objects():
    from course_utils import attention, gated, lora, primitives, recall, text, transformer

    assert attention.causal_mask is transformer.causal_mask is primitives.causal_mask
    assert attention.masked_softmax is primitives.masked_softmax
    assert gated.masked_pool is transformer.masked_pool is primitives.masked_pool
    assert gated.count_parameters is primitives.count_parameters
    assert gated.lengths_to_mask is text.lengths_to_mask is primitives.lengths_to_mask
    assert transformer.padding_mask is primitives.padding_mask
    assert lora.trainable_parameters is recall.parameter_count is primitives.trainable_parameters


def _floor(module: str) -> set[str]:
    """Every ``course_utils`` module that importing ``course_utils.<module>`` loads, read from the import
    statements of the sources (relative imports at any depth of the file, followed transitively)."""
    root = Path(course_utils.__file__).parent
    seen, todo = set(), [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for node in ast.walk(ast.parse((root / f"{name}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                todo += [node.module] if node.module else [alias.name for alias in node.names]
    return seen - {module}


FLOORS = {
    "primitives": set(),
    "rwkv": {"primitives"},
    "linear_attention": {"primitives"},
    "reformer": {"primitives"},
    "xlstm": {"primitives", "linear_attention"},
    "taming": {"primitives"},
}


@pytest.mark.parametrize("module", sorted(FLOORS))
def test_small_modules_stand_on_the_ground_floor(module):
    assert _floor(module) == FLOORS[module]
    assert not _floor(module) & {"gated", "seq2seq", "attention", "gpt", "transformer"}


def test_importing_linear_attention_loads_only_the_ground_floor():
    """The same promise measured in a fresh interpreter, once (it pays for importing torch)."""
    code = "import sys, course_utils.linear_attention; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = {name for name in out.split() if name.startswith("course_utils.")}
    assert loaded == {"course_utils.linear_attention", "course_utils.primitives"}
