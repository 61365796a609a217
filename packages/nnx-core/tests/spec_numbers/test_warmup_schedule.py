"""The spec's worked warm-up (§2.5 Scheduler clocks): with a base LR of 0.12,
warmup_steps=3 and total_steps=8 the first four updates train at 0.04, 0.08, 0.12, 0.12,
built alone and inside the loop."""

from __future__ import annotations

import itertools

import pytest
from _nnx_core_tiny import sgd
from _support.enums import lrs_over
from _support.schedule_clocks import TrainedAt, loader, make_model
from torch import nn

from nnx import (
    LinearWarmupDecayLR,
    LRMonitor,
    NNOptimParams,
    NNSchedulerParams,
    NNTrainParams,
    Schedulers,
    build_optimizer,
)


def test_linear_warmup_worked_numbers():
    # Base LR 0.12, warmup_steps=3, total_steps=8: the first four updates train at
    # 0.04, 0.08, 0.12, 0.12.
    net = nn.Linear(1, 1)
    opt = build_optimizer(net, NNOptimParams.builder().sgd(max_lr=0.12).build())
    params = NNSchedulerParams.builder().linear_warmup_decay(warmup_steps=3, total_steps=8).build()
    sched = Schedulers.LINEAR_WARMUP_DECAY(opt, params, n_epochs=8)
    assert isinstance(sched, LinearWarmupDecayLR)
    lrs = lrs_over(sched, opt, 9)
    assert lrs[:4] == pytest.approx([0.04, 0.08, 0.12, 0.12], abs=1e-15)
    assert lrs[8] == pytest.approx(0.0, abs=1e-15)  # decays to min_lr at total_steps
    assert all(a >= b for a, b in itertools.pairwise(lrs[3:]))


def test_warmup_trains_the_first_four_updates_at_004_008_012_012(tmp_path):
    schedule = NNSchedulerParams.builder().linear_warmup_decay(
        warmup_steps=3, total_steps=8).clock("optimizer_update").build()
    assert schedule.clock == "optimizer_update"
    probe, monitor = TrainedAt(), LRMonitor()
    params = NNTrainParams(n_epochs=2, train_loader=loader(4), optim=sgd(0.12), scheduler=schedule)
    run = make_model().train(params, callbacks=[probe, monitor], root=tmp_path / "runs",
                             verbose=False)

    assert len(probe.lrs) == 8  # exactly total_steps updates: the run fits its budget
    assert probe.lrs[:4] == pytest.approx([0.04, 0.08, 0.12, 0.12], abs=1e-12)
    # After the warm-up the rate decays linearly to min_lr=0 at total_steps.
    assert probe.lrs[4:] == pytest.approx([0.12 * (1 - k / 5) for k in range(1, 5)], abs=1e-12)

    # LRMonitor.update_history holds (update index, LR after that update's scheduler step):
    # each entry is the rate the *next* update trains at.
    indices = [i for i, _ in monitor.update_history]
    after = [lr for _, lr in monitor.update_history]
    assert indices == list(range(1, 9))
    assert after[:7] == pytest.approx(probe.lrs[1:], abs=1e-12)
    assert after[:3] == pytest.approx([0.08, 0.12, 0.12], abs=1e-12)
    # The idps' lr column is the rate each batch's update trained at, not the next one's.
    assert [i.lr for i in run.idps] == pytest.approx(probe.lrs, abs=1e-12)
    assert [i.lr for i in run.idps][:4] == pytest.approx([0.04, 0.08, 0.12, 0.12], abs=1e-12)
    # LRMonitor.history: one rate per epoch, whatever the clock.
    assert monitor.history == pytest.approx([after[3], after[7]], abs=1e-12)
