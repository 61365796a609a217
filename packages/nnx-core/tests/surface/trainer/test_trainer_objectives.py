"""Objective runs under the Trainer (spec §8, §6.5): every optimizer steps once per commit
with one event each, and uneven accumulation equals the full-batch update."""

from __future__ import annotations

from typing import Any

import torch
from _nnx_core_tiny import tiny_batches, tiny_model
from _support.trainer import (
    Probe,
    _halving,
    _lr,
    same_weights,
    weights,
)

from nnx import (
    Callback,
    NNOptimParams,
    NNParamGroupSpec,
    NNTrainerParams,
    NNTrainParams,
    Trainer,
    supervised_objective,
)


class Events(Callback):
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def on_optimizer_update(self, ctx, event):
        lrs = tuple(_lr(optimizer) for optimizer in ctx.optimizers.values())
        self.events.append((event.optimizer, event.update_index, event.update_count,
                            event.epoch, event.batch_idx, event.microbatches, lrs))


def test_an_objective_run_steps_every_optimizer_once_per_commit_with_one_event_each(tmp_path):
    probe, events = Probe(), Events()
    params = (NNTrainerParams.builder().n_epochs(2).train_loader(tiny_batches(3)).seed(0)
              .optimizer("first", NNOptimParams.builder().adam(max_lr=0.1).accumulate_grad(2)
                         .param_groups([NNParamGroupSpec(name_pattern="layers.0.*")]).build())
              .optimizer("second", NNOptimParams.builder().adam(max_lr=0.1).accumulate_grad(2)
                         .param_groups([NNParamGroupSpec(name_pattern="layers.1.*")]).build())
              .scheduler("first", _halving("optimizer_update"))
              .scheduler("second", _halving("optimizer_update"))
              .build())
    run = Trainer(tiny_model()).train(params, objective=supervised_objective(),
                                      callbacks=[probe, events], verbose=False, root=tmp_path)
    # 3 microbatches per epoch in windows of 2 + 1: commits close on batches 1 and 2.
    commits = [(0, 1, 2), (0, 2, 1), (1, 1, 2), (1, 2, 1)]
    expected = []
    for k, (epoch, batch_idx, microbatches) in enumerate(commits, start=1):
        for name in ("first", "second"):  # both events fire before either schedule steps
            lr = 0.1 * 0.5 ** (k - 1)
            expected.append((name, k, k, epoch, batch_idx, microbatches, (lr, lr)))
    assert events.events == expected
    for name in ("first", "second"):
        optimizer = probe.optimizers[name]
        assert _lr(optimizer) == 0.1 * 0.5 ** 4
        assert [int(s["step"]) for s in optimizer.state.values()] == [4, 4]
    assert [i.update_count for i in run.idps] == [0, 1, 2, 2, 3, 4]


# == 7. accumulation through the engine equals the full batch ================================
def _uneven() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(4)
    x, y = torch.randn(10, 4, generator=g), torch.randint(0, 3, (10,), generator=g)
    return [(x[:3], y[:3]), (x[3:8], y[3:8]), (x[8:], y[8:])]


def test_accumulating_uneven_microbatches_equals_the_full_batch_update(tmp_path):
    batches = _uneven()
    optim = (NNOptimParams.builder().sgd(max_lr=0.1, momentum=0.9).accumulate_grad(2)
             .param_groups([NNParamGroupSpec(name_pattern="*")]).build())
    engine = tiny_model()
    Trainer(engine).train(
        NNTrainerParams.builder().n_epochs(2).train_loader(batches).optimizer("net", optim)
        .build(), objective=supervised_objective(), verbose=False, root=tmp_path / "trainer")

    # The windows are batches 0 + 1 (3 + 5 rows) and batch 2 (2 rows): each one full batch.
    full_batches = [(torch.cat([batches[0][0], batches[1][0]]),
                     torch.cat([batches[0][1], batches[1][1]])), batches[2]]
    reference = tiny_model()
    reference.train(NNTrainParams(n_epochs=2, train_loader=full_batches, scheduler=None,
                                  optim=NNOptimParams.builder().sgd(max_lr=0.1, momentum=0.9)
                                  .build()), verbose=False, root=tmp_path / "model")
    a, b = weights(engine), weights(reference)
    assert not same_weights(a, weights(tiny_model()))
    assert a.keys() == b.keys()
    for key in a:
        assert torch.allclose(a[key], b[key], atol=1e-6), key
