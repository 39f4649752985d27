"""Assertions for exercise tests whose failures say *what* is wrong.

Every helper raises ``AssertionError`` with a message that names the value, the expectation
and, where it helps, the likely mistake (``hint``). They check types strictly
(``type(x) is torch.Tensor``), since a custom object can fake ``==``.

    check_type(out, torch.Tensor, "masked_softmax(...)")
    check_shape(out, (2, 5), "masked_softmax(...)")
    check_close(out, reference, "masked_softmax(...)", hint="did you softmax over dim=-1?")
    check_sums_to_one(out, dim=-1, name="attention weights")
    with forbid(F.scaled_dot_product_attention, course_attention.MultiHeadAttention), watch_work() as work:
        student_attention(q, k, v)
    check_method(work.largest < seq_len * seq_len, "student_attention", "it built the (T, T) matrix")

``forbid`` is the call guard of ``course_utils.testing.guard`` (refusing also the test cell's own functions) and
``watch_work`` the work watch of ``course_utils.testing.work``, re-exported here for test cells. ``check_method`` is
the one assertion about *how* a result was computed (work, memory, rounds, dtypes), as opposed to its value.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import torch

from . import guard as _guard
from .guard import ForbiddenCall  # noqa: F401 - re-exported for test cells
from .work import Work, watch_work  # noqa: F401 - re-exported for test cells

# The call guard as test cells use it: it also refuses the functions the test cell defines (its references),
# which the student's code could otherwise reach through its callers' frames (see guard.forbid, own_cell).
forbid = functools.partial(_guard.forbid, own_cell=True)


def _fail(name: str, problem: str, hint: str | None) -> None:
    message = f"{name}: {problem}"
    if hint:
        message += f"\nHint: {hint}"
    raise AssertionError(message)


def check_type(value: Any, expected: type | tuple[type, ...], name: str, hint: str | None = None) -> None:
    """Assert ``type(value)`` is exactly ``expected`` (or one of a tuple); subclasses do not count."""
    allowed = expected if isinstance(expected, tuple) else (expected,)
    if type(value) not in allowed:
        wanted = " or ".join(t.__name__ for t in allowed)
        _fail(name, f"expected type {wanted}, got {type(value).__name__}", hint)


def check_shape(tensor: torch.Tensor, shape: Sequence[int], name: str, hint: str | None = None) -> None:
    """Assert ``tensor`` is a ``torch.Tensor`` of exactly ``shape``."""
    check_type(tensor, torch.Tensor, name)
    if tuple(tensor.shape) != tuple(shape):
        _fail(name, f"expected shape {tuple(shape)}, got {tuple(tensor.shape)}", hint)


def check_dtype(tensor: torch.Tensor, dtype: torch.dtype, name: str, hint: str | None = None) -> None:
    """Assert ``tensor.dtype == dtype``."""
    check_type(tensor, torch.Tensor, name)
    if tensor.dtype != dtype:
        _fail(name, f"expected dtype {dtype}, got {tensor.dtype}", hint)


def check_close(
    actual: Any,
    expected: Any,
    name: str,
    atol: float = 1e-6,
    rtol: float = 1e-5,
    hint: str | None = None,
) -> None:
    """Assert ``actual`` matches ``expected`` within ``atol + rtol * |expected|``.

    Tensors must agree in type, shape and values; the message gives the worst entry.
    Python numbers are compared the same way (``actual`` may be an int or float, not a
    tensor, when ``expected`` is a number).
    """
    if isinstance(expected, torch.Tensor):
        check_shape(actual, expected.shape, name, hint)
        a = actual.detach().to("cpu", torch.float64)
        e = expected.detach().to("cpu", torch.float64)
        if not torch.isfinite(a).all() and not torch.equal(torch.isfinite(a), torch.isfinite(e)):
            _fail(name, "contains NaN or inf where the reference is finite", hint)
        diff = (a - e).abs()
        bad = diff > atol + rtol * e.abs()
        if bad.any():
            idx = tuple(int(i) for i in torch.nonzero(bad)[0])
            _fail(
                name,
                f"{int(bad.sum())} of {bad.numel()} entries differ from the reference; "
                f"first at index {idx}: got {a[idx].item():.6g}, expected {e[idx].item():.6g}",
                hint,
            )
        return
    if isinstance(actual, bool) or not isinstance(actual, (int, float)):
        _fail(name, f"expected a number, got {type(actual).__name__}", hint)
    if math.isnan(actual) or abs(actual - expected) > atol + rtol * abs(expected):
        _fail(name, f"got {actual:.6g}, expected {expected:.6g}", hint)


def check_equal(actual: Any, expected: Any, name: str, hint: str | None = None) -> None:
    """Assert exact equality of plain Python values (lists, dicts, strings, ints).

    Types must match exactly first, at every level of a list, tuple, dict or set, so an object
    that overrides ``__eq__`` cannot pass, not even inside a container.
    """
    check_type(actual, type(expected), name, hint)
    where = _type_mismatch(actual, expected, name)
    if where:
        _fail(where[0], f"expected type {where[1]}, got {where[2]}", hint)
    if actual != expected:
        _fail(name, f"got {_short(actual)}, expected {_short(expected)}", hint)


def _type_mismatch(actual: Any, expected: Any, path: str) -> tuple[str, str, str] | None:
    """The first place (path, expected type, actual type) where ``actual`` differs in type, or None."""
    if type(actual) is not type(expected):
        return path, type(expected).__name__, type(actual).__name__
    if isinstance(expected, (list, tuple)):
        for i, (a, e) in enumerate(zip(actual, expected)):
            found = _type_mismatch(a, e, f"{path}[{i}]")
            if found:
                return found
    elif isinstance(expected, dict):
        by_key = expected
        for key, value in actual.items():
            if type(key) not in {type(k) for k in by_key}:
                return (
                    f"{path} key {_short(key, 40)}",
                    "|".join(sorted({type(k).__name__ for k in by_key})),
                    type(key).__name__,
                )
            if key in by_key:
                found = _type_mismatch(value, by_key[key], f"{path}[{_short(key, 40)}]")
                if found:
                    return found
    elif isinstance(expected, (set, frozenset)):
        allowed = {type(e) for e in expected}
        for item in actual:
            if expected and type(item) not in allowed:
                return f"{path} element", "|".join(sorted(t.__name__ for t in allowed)), type(item).__name__
    return None


class WrongMethod(AssertionError):
    """The right values, reached by another method than the one the part teaches (see ``check_method``)."""


def check_method(ok: bool, name: str, problem: str, hint: str | None = None) -> None:
    """Assert that the method a part teaches was used: ``ok`` is a fact measured about the work.

    ``problem`` says what was measured when ``ok`` is false ("its operations grew 40x when the hidden size
    grew 8x"); ``hint`` names the method. Every test assertion about how a value was computed goes through
    this function, so that the mistake banks can prove that a wrong-method answer would earn the points
    without it (``tests/banks/notebook_cells.py``, ``checks_off``).
    """
    if type(ok) is not bool:
        raise TypeError(f"check_method: ok must be a bool, got {type(ok).__name__}")
    if not ok:
        message = f"{name}: {problem}" + (f"\nHint: {hint}" if hint else "")
        raise WrongMethod(message)


def check_sums_to_one(tensor: torch.Tensor, dim: int, name: str, atol: float = 1e-5, hint: str | None = None) -> None:
    """Assert that ``tensor`` sums to 1 along ``dim`` (rows of probabilities or attention)."""
    check_type(tensor, torch.Tensor, name)
    sums = tensor.detach().double().sum(dim=dim)
    bad = (sums - 1).abs() > atol
    if bad.any():
        idx = tuple(int(i) for i in torch.nonzero(bad)[0])
        _fail(name, f"must sum to 1 along dim {dim}; entry {idx} sums to {sums[idx].item():.4g}", hint)


def _short(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
