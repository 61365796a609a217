"""Gradient accumulation in the supervised loop (spec §6.1, §6.3): 2-2-1 windows, uneven
microbatches equal to one full batch, and a fully masked window that takes no update."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from _nnx_core_tiny import sgd
from _support.training_loop import chunks, data, make_model, weights
from torch import nn

from nnx import (
    Callback,
    NNCheckpoint,
    NNModel,
    NNRun,
    NNSchedulerParams,
    NNTrainParams,
)

# -- accumulation windows ---------------------------------------------------------------


def test_two_epochs_of_five_microbatches_accumulating_two_make_2_2_1_windows(tmp_path):
    x, y = data(20)
    loader = chunks(x, y, [4] * 5)
    model = make_model()
    steps: list[int] = []
    seen: dict[str, object] = {}

    class CountSteps(Callback):
        def on_train_begin(self, ctx):
            ctx.optimizer.register_step_post_hook(lambda *_: steps.append(ctx.epoch))
            seen["schedule"] = ctx.scheduler

    # A cosine schedule on the update clock with the default budget: the planned
    # horizon is n_epochs x ceil(5 / 2) = 6 updates.
    schedule = NNSchedulerParams.builder().cosine_annealing().clock("optimizer_update").build()
    params = NNTrainParams(n_epochs=2, train_loader=loader, optim=sgd(0.1, accumulate=2),
                           scheduler=schedule)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no update reaches past T_max
        run = model.train(params, callbacks=[CountSteps()], root=tmp_path / "runs", verbose=False)

    assert [i.update_count for i in run.idps] == [0, 1, 1, 2, 3, 3, 4, 4, 5, 6]
    assert [(i.epoch, i.batch_idx) for i in run.idps] == [(e, b) for e in (0, 1) for b in range(5)]
    assert steps == [0, 0, 0, 1, 1, 1]  # three optimizer steps per epoch
    scheduler = seen["schedule"]  # ctx.scheduler: the torch scheduler itself (§14.3)
    assert isinstance(scheduler, torch.optim.lr_scheduler.CosineAnnealingLR)
    saved = NNCheckpoint.load_training_state(run.id, root=tmp_path / "runs")["schedule"]
    assert saved["horizon"] == 6 and saved["steps"] == 6
    assert scheduler.last_epoch == 6
    assert model.net.training is True
    # The cosine reached its floor exactly at the sixth update; the last record shows the
    # rate that sixth update trained at, one cosine step above the floor.
    assert scheduler.get_last_lr()[0] == pytest.approx(0.0, abs=1e-12)
    assert run.idps[-1].lr == pytest.approx(0.1 * (1 + math.cos(5 * math.pi / 6)) / 2,
                                            abs=1e-12)
    assert NNRun.load(run.id, root=tmp_path / "runs").idps[-1].update_count == 6


def _reference_step(model: NNModel, x: torch.Tensor, y: torch.Tensor, lr: float,
                    loss_fn: nn.Module) -> dict[str, torch.Tensor]:
    """One plain-torch SGD step on the whole batch from the model's current weights."""
    torch.manual_seed(0)
    net = type(model.net)(model.net_params)
    net.load_state_dict(model.net.state_dict())
    loss = loss_fn(net(x), y)
    loss.backward()
    with torch.no_grad():
        for p in net.parameters():
            p -= lr * p.grad
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def _mean_of_means_step(model: NNModel, parts, lr: float, loss_fn: nn.Module):
    """What a naive accumulation (average of per-microbatch means) would do."""
    net = type(model.net)(model.net_params)
    net.load_state_dict(model.net.state_dict())
    for bx, by in parts:
        (loss_fn(net(bx), by) / len(parts)).backward()
    with torch.no_grad():
        for p in net.parameters():
            p -= lr * p.grad
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def _close(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return all(torch.allclose(a[k], b[k], atol=1e-6, rtol=1e-5) for k in a)


@pytest.mark.parametrize("masked", [False, True], ids=["plain", "ignore_index+class_weights"])
def test_uneven_microbatches_in_one_window_equal_one_full_batch(tmp_path, masked):
    x, y = data(10, seed=1)
    loss_fn: nn.Module = nn.CrossEntropyLoss()
    if masked:
        y = y.clone()
        y[[0, 4, 5, 8, 9]] = -1  # the last microbatch is entirely masked
        # The live loss object is authoritative: its class weights and ignore_index.
        loss_fn = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 3.0, 0.5]), ignore_index=-1)
    parts = chunks(x, y, [3, 5, 2])
    lr = 0.5

    accumulated = make_model(seed=7)
    accumulated.loss_fn = loss_fn
    reference = _reference_step(accumulated, x, y, lr, loss_fn)
    naive = _mean_of_means_step(accumulated, parts, lr, loss_fn)
    assert not _close(reference, naive)  # the batch split matters for a naive mean

    run = accumulated.train(
        NNTrainParams(n_epochs=1, train_loader=parts, optim=sgd(lr, accumulate=3), scheduler=None),
        root=tmp_path / "acc", verbose=False)
    assert [i.update_count for i in run.idps] == [0, 0, 1]  # one window, one update
    got = weights(accumulated)
    for key in reference:
        torch.testing.assert_close(got[key], reference[key], atol=1e-6, rtol=1e-5)

    # The same model trained on the single full batch lands on the same weights.
    full = make_model(seed=7)
    full.loss_fn = loss_fn
    full.train(NNTrainParams(n_epochs=1, train_loader=[(x, y)], optim=sgd(lr), scheduler=None),
               root=tmp_path / "full", verbose=False)
    for key, value in weights(full).items():
        torch.testing.assert_close(got[key], value, atol=1e-6, rtol=1e-5)


def test_a_window_whose_every_target_is_masked_takes_no_update(tmp_path):
    x, y = data(9, seed=2)
    y = y.clone()
    y[3:6] = -100
    model = make_model()
    steps: list[int] = []

    class CountSteps(Callback):
        def on_train_begin(self, ctx):
            ctx.optimizer.register_step_post_hook(lambda *_: steps.append(1))

    run = model.train(NNTrainParams(n_epochs=1, train_loader=chunks(x, y, [3, 3, 3]),
                                    optim=sgd(), scheduler=None),
                      callbacks=[CountSteps()], root=tmp_path / "runs", verbose=False)
    assert [i.update_count for i in run.idps] == [1, 1, 2]
    assert len(steps) == 2
    assert run.idps[1].train_edp.loss is None  # no valid target: no loss value
