"""benchmarks.budget.train_for_budget on a fake clock and a one-parameter model, and benchmarks.machine."""

import math
import re

import pytest
import torch

from benchmarks.budget import BudgetRun, train_for_budget
from benchmarks.machine import machine_line


class FakeClock:
    """Each call returns the previous reading plus ``tick`` seconds (the first call returns 0)."""

    def __init__(self, tick: float = 1.0):
        self.tick, self.now = tick, -tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


def run(seconds=5.0, batch_size=3, **kwargs):
    """One weight ``w`` fitted to ``y = 2 x``; returns the BudgetRun, the ``(step, progress)`` pairs the
    schedule saw, the learning rates the optimizer held at each step and the model."""
    torch.manual_seed(0)
    model = torch.nn.Linear(1, 1, bias=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    seen, lrs = [], []

    def next_batch():
        x = torch.randn(batch_size, 1)  # (B, 1)
        return x, 2 * x

    def loss_fn(x, y):
        lrs.append(optimizer.param_groups[0]["lr"])
        return torch.nn.functional.mse_loss(model(x), y)

    def lr_at(step, progress):
        seen.append((step, progress))
        return 0.1 * (1 - progress)

    result = train_for_budget(model, optimizer, next_batch, loss_fn, lr_at, seconds, **kwargs)
    return result, seen, lrs, model


def test_stops_when_the_budget_is_spent():
    # the clock is read once before the loop and once before each step: 1, 2, 3, 4 s start a step, 5 s stops
    result, seen, lrs, _ = run(seconds=5.0, clock=FakeClock(1.0))
    assert isinstance(result, BudgetRun) and result.steps == 4 and result.samples == 12
    assert seen == [(0, 0.2), (1, 0.4), (2, 0.6), (3, 0.8)]
    assert lrs == pytest.approx([0.08, 0.06, 0.04, 0.02])  # the schedule's rate is in the group before the step
    assert result.seconds >= 0 and math.isfinite(result.last_loss)


def test_fixed_steps_ignore_the_clock():
    result, seen, _, _ = run(seconds=1e-9, steps=4, clock=FakeClock(100.0))
    assert result.steps == 4
    assert seen == [(0, 0.0), (1, 0.25), (2, 0.5), (3, 0.75)]


def test_the_loss_goes_down_and_clipping_bounds_the_update():
    free, _, _, model = run(steps=30)
    assert free.last_loss < 0.01 and model.weight.item() == pytest.approx(2.0, abs=0.1)
    torch.manual_seed(0)
    w0 = torch.nn.Linear(1, 1, bias=False).weight.item()
    _, _, _, model = run(steps=30, grad_clip=1e-3)
    # each SGD step moves w by at most lr * 1e-3 <= 1e-4
    assert 0 < model.weight.item() - w0 <= 30 * 1e-4 + 1e-7


def test_report_cadence_on_the_clock_and_in_steps():
    calls = []

    def report(step, elapsed, loss, samples):
        calls.append((step, elapsed, samples))
        assert math.isfinite(loss)

    run(seconds=10.0, clock=FakeClock(1.0), report=report, report_every=3.0)
    assert calls == [(3, 3.0, 9), (6, 6.0, 18), (9, 9.0, 27)]
    calls.clear()
    run(steps=7, report=report, report_every_steps=3)
    assert [step for step, _, _ in calls] == [3, 6]


def test_bad_budgets_raise():
    with pytest.raises(ValueError, match="seconds"):
        run(seconds=0.0)
    with pytest.raises(ValueError, match="steps"):
        run(steps=0)


def test_no_step_when_the_budget_is_gone_at_once():
    result, seen, _, _ = run(seconds=0.5, clock=FakeClock(1.0))
    assert result.steps == 0 and seen == [] and math.isnan(result.last_loss)


def test_machine_line_names_cpu_isa_threads_and_torch():
    line = machine_line()
    assert re.fullmatch(r"machine: CPU .+, \d+ cores, \d+ threads, ATen CPU capability \S+, torch \S+", line)
    assert f"{torch.get_num_threads()} threads" in line and torch.__version__ in line


def test_vit_schedule_warms_up_then_decays_to_zero_over_the_budget():
    from benchmarks.vit_fashion import RECIPE, lr_at

    assert lr_at(RECIPE, 0.0) == 0.0
    assert lr_at(RECIPE, RECIPE.warmup) == pytest.approx(RECIPE.lr)
    assert lr_at(RECIPE, 1.0) == pytest.approx(0.0, abs=1e-12)
