"""The one update window (nnx._engine.update_window): its named steps on a real optimizer."""

from __future__ import annotations

import torch

from nnx._engine.update_window import WindowStepper


def _stepper(clip=None):
    param = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    reports: list[list[int]] = []
    opt = torch.optim.SGD([param], lr=1.0)
    stepper = WindowStepper((opt,), (clip,), None, report=lambda s: reports.append(list(s)))
    return param, stepper, reports


def test_a_window_without_gradients_neither_steps_nor_reports():
    param, stepper, reports = _stepper()
    assert stepper.close(takes_update=True) == "no update"
    assert reports == [] and torch.equal(param.detach(), torch.tensor([1.0, -2.0]))


def test_a_dropped_window_is_zeroed_and_never_steps():
    param, stepper, reports = _stepper()
    param.grad = torch.tensor([3.0, 3.0])
    assert stepper.close(takes_update=False) == "no update"
    assert param.grad is None and reports == []
    assert torch.equal(param.detach(), torch.tensor([1.0, -2.0]))


def test_the_coefficient_normalizes_before_the_clip_and_the_step_reports():
    param, stepper, reports = _stepper(clip=1.0)
    param.grad = torch.tensor([6.0, 8.0])  # × 0.5 → [3, 4] (norm 5) → clipped to norm 1
    assert stepper.close(takes_update=True, coefficient=0.5) == "stepped"
    assert reports == [[0]] and param.grad is None
    assert torch.allclose(param.detach(), torch.tensor([1.0 - 0.6, -2.0 - 0.8]))
