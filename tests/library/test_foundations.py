"""Unit tests of course_utils' foundations: device, seeding, checks, training, plotting."""

from __future__ import annotations

import random

import matplotlib
import nbformat
import numpy as np
import pytest
import torch
import torch.nn.functional as F

matplotlib.use("Agg")

from course_utils import get_device, seed_everything  # noqa: E402
from course_utils.device import describe, native_bf16  # noqa: E402
from course_utils.plotting import plot_heatmap, plot_history  # noqa: E402
from course_utils.progress import progress, summary_line  # noqa: E402
from course_utils.testing import checks  # noqa: E402
from course_utils.training import History, evaluate_loss, fit, to_device  # noqa: E402

# ----------------------------------------------------------------------------- device


def test_get_device_prefers_cuda_when_present_else_cpu(monkeypatch):
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    expected = "cuda" if torch.cuda.is_available() else ("mps" if torch.backends.mps.is_available() else "cpu")
    assert get_device().type == expected


def test_get_device_respects_override(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    assert get_device() == torch.device("cpu")
    assert get_device(prefer="cpu").type == "cpu"
    assert describe(torch.device("cpu")) == "cpu"


def test_get_device_rejects_unknown_and_absent(monkeypatch):
    with pytest.raises(ValueError, match="one of"):
        get_device(prefer="tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="cuda"):
            get_device(prefer="cuda")


def test_native_bf16_follows_the_hardware(monkeypatch):
    import course_utils.device as device_module

    assert native_bf16("meta") is False
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    monkeypatch.setattr(device_module, "_cpu_flags", lambda: {"avx512_bf16", "amx_bf16"})
    assert native_bf16("cpu") is False  # AVX2 kernels (an AVX2 CPU, or ATEN_CPU_CAPABILITY=avx2)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    assert native_bf16("cpu") is True
    monkeypatch.setattr(device_module, "_cpu_flags", lambda: {"avx512f", "avx512bw"})
    assert native_bf16("cpu") is False  # AVX-512 without BF16: emulated


# ----------------------------------------------------------------------------- progress bars


def test_progress_outside_a_notebook_is_a_text_bar_that_counts():
    seen = list(progress(range(5), desc="counting", unit="step"))
    assert seen == [0, 1, 2, 3, 4]
    bar = progress(total=3, desc="manual", unit="batch")
    bar.update(3)
    bar.set_postfix(loss="0.25")
    line = summary_line(bar)
    bar.close()
    assert line.startswith("manual: 3/3 batch in ") and line.endswith(" s, loss=0.25"), line


def test_progress_in_a_notebook_leaves_one_line_and_no_widget(tmp_path):
    # Executed by a real kernel, as `make lectures` does: the saved output is the summary line only.
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "from course_utils.progress import progress\n"
            "for _ in progress(range(4), desc='epoch', unit='step'):\n    pass\nprint('after')"
        )
    ]
    NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        store_widget_state=False,
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    outputs = nb.cells[0].outputs
    texts = [o.get("data", {}).get("text/plain", o.get("text", "")) for o in outputs]
    assert not any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs), outputs
    assert texts[0].startswith("epoch: 4/4 step in ") and texts[1] == "after\n", texts
    assert "widgets" not in nb.metadata


# ----------------------------------------------------------------------------- seeding


def test_seed_everything_repeats_all_generators():
    gen = seed_everything(123)
    first = (random.random(), np.random.rand(), torch.rand(3), torch.rand(2, generator=gen))
    gen = seed_everything(123)
    second = (random.random(), np.random.rand(), torch.rand(3), torch.rand(2, generator=gen))
    assert first[0] == second[0] and first[1] == second[1]
    assert torch.equal(first[2], second[2]) and torch.equal(first[3], second[3])


@pytest.mark.parametrize("bad", [-1, 1.5, "0", True])
def test_seed_everything_rejects_bad_seeds(bad):
    with pytest.raises(ValueError, match="seed"):
        seed_everything(bad)


# ----------------------------------------------------------------------------- checks


def test_check_type_is_strict():
    class FakeTensor(torch.Tensor):
        pass

    checks.check_type(torch.zeros(1), torch.Tensor, "x")
    with pytest.raises(AssertionError, match="expected type Tensor, got FakeTensor"):
        checks.check_type(torch.zeros(1).as_subclass(FakeTensor), torch.Tensor, "x")
    with pytest.raises(AssertionError, match="expected type int or float, got str"):
        checks.check_type("1", (int, float), "x")


def test_check_shape_and_dtype_messages():
    with pytest.raises(AssertionError, match=r"out: expected shape \(2, 3\), got \(3, 2\)"):
        checks.check_shape(torch.zeros(3, 2), (2, 3), "out")
    with pytest.raises(AssertionError, match="expected dtype torch.int64"):
        checks.check_dtype(torch.zeros(2), torch.long, "ids")


def test_check_close_reports_first_bad_entry_and_hint():
    expected = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    checks.check_close(expected + 1e-9, expected, "y")
    actual = expected.clone()
    actual[1, 0] = 3.5
    with pytest.raises(AssertionError) as info:
        checks.check_close(actual, expected, "y", hint="softmax over the wrong axis?")
    message = str(info.value)
    assert "1 of 4 entries differ" in message and "(1, 0)" in message and "got 3.5" in message
    assert "Hint: softmax over the wrong axis?" in message


def test_check_close_numbers():
    checks.check_close(0.5 + 1e-9, 0.5, "p")
    with pytest.raises(AssertionError, match="got 0.6, expected 0.5"):
        checks.check_close(0.6, 0.5, "p")
    with pytest.raises(AssertionError, match="expected a number"):
        checks.check_close(torch.tensor(0.5), 0.5, "p")
    with pytest.raises(AssertionError):
        checks.check_close(float("nan"), 0.5, "p")


def test_check_equal_rejects_type_tricks():
    class AlwaysEqual(list):
        def __eq__(self, other):
            return True

    checks.check_equal([1, 2], [1, 2], "ids")
    with pytest.raises(AssertionError, match="expected type list, got AlwaysEqual"):
        checks.check_equal(AlwaysEqual([9]), [1, 2], "ids")
    with pytest.raises(AssertionError, match=r"got \[2, 1\], expected \[1, 2\]"):
        checks.check_equal([2, 1], [1, 2], "ids")


class _Yes(str):
    """A string that equals anything: the trick one level down, inside a container."""

    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


@pytest.mark.parametrize(
    "actual, expected, where",
    [
        ([_Yes("x"), "b"], ["a", "b"], r"ids\[0\]: expected type str, got _Yes"),
        ((1, [2, _Yes("y")]), (1, [2, "z"]), r"ids\[1\]\[1\]: expected type str, got _Yes"),
        ({"a": _Yes("q")}, {"a": "b"}, r"ids\['a'\]: expected type str, got _Yes"),
        ({_Yes("k"): 1}, {"a": 1}, r"ids key 'k': expected type str, got _Yes"),
        ({_Yes("s")}, {"t"}, r"ids element: expected type str, got _Yes"),
    ],
)
def test_check_equal_checks_types_inside_containers(actual, expected, where):
    with pytest.raises(AssertionError, match=where):
        checks.check_equal(actual, expected, "ids")
    checks.check_equal(expected, expected, "ids")


def test_check_sums_to_one_names_the_row():
    weights = torch.tensor([[0.5, 0.5], [0.73, 0.0]])
    with pytest.raises(AssertionError, match=r"entry \(1,\) sums to 0.73"):
        checks.check_sums_to_one(weights, dim=-1, name="attention weights")
    checks.check_sums_to_one(torch.softmax(torch.randn(3, 4), dim=-1), dim=-1, name="w")


# ----------------------------------------------------------------------------- training


def _regression_data(n=64):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(n, 3, generator=gen)
    y = x @ torch.tensor([1.0, -2.0, 0.5]) + 0.3
    return [(x[i : i + 16], y[i : i + 16]) for i in range(0, n, 16)]


def _mse(model, batch):
    x, y = batch
    return F.mse_loss(model(x).squeeze(-1), y)


def test_fit_reduces_loss_and_records_history():
    seed_everything(0)
    model = torch.nn.Linear(3, 1)
    data = _regression_data()
    before = evaluate_loss(model, data, _mse, "cpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5)
    history = fit(model, data, _mse, opt, epochs=5, val_loader=data, scheduler=sched, clip_norm=10.0, progress=False)
    assert len(history.step_loss) == 20 and len(history.train_loss) == 5 and len(history.val_loss) == 5
    assert history.lr[0] == 0.1 and history.lr[4] == 0.05
    assert history.val_loss[-1] < 0.1 * before


def test_fit_rejects_empty_loader_and_nan_loss():
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="no batches"):
        fit(model, [], _mse, opt, progress=False)
    with pytest.raises(ValueError, match="epochs"):
        fit(model, _regression_data(), _mse, opt, epochs=0, progress=False)
    with pytest.raises(FloatingPointError, match="nan"):
        fit(model, _regression_data(), lambda m, b: torch.tensor(float("nan"), requires_grad=True), opt, progress=False)


def test_to_device_handles_nested_batches():
    batch = {"x": torch.zeros(2), "pair": (torch.ones(1), [torch.ones(1)]), "n": 3}
    moved = to_device(batch, "cpu")
    assert moved["n"] == 3 and isinstance(moved["pair"], tuple) and isinstance(moved["pair"][1], list)


# ----------------------------------------------------------------------------- plotting


def test_plot_history_draws_curves():
    history = History(step_loss=[3.0, 2.0, 1.5, 1.0], train_loss=[2.5, 1.25], val_loss=[2.0, 1.1])
    ax = plot_history(history)
    assert len(ax.lines) == 3 and ax.get_xlabel() == "step"
    with pytest.raises(ValueError, match="empty"):
        plot_history(History())


def test_plot_heatmap_checks_dimensions():
    ax = plot_heatmap(torch.rand(2, 3), x_labels=list("abc"), y_labels=["p", "q"])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    with pytest.raises(ValueError, match="2-D"):
        plot_heatmap(torch.rand(2, 3, 4))
