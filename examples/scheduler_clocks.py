"""Scheduler clocks: an epoch clock, an optimizer-update clock, and a resume (spec §2.5).

``NNSchedulerParams.clock`` says what one scheduler step counts. The default
``"epoch"`` steps once per completed epoch; ``"optimizer_update"`` steps once
per committed optimizer update, so warm-up and decay lengths count updates.
This script prints

1. the warm-up from the spec: a base LR of 0.12, ``warmup_steps=3`` and
   ``total_steps=8`` train the first four updates at 0.04, 0.08, 0.12, 0.12;
2. the same schedule's step count under accumulation (two epochs of five
   microbatches, ``accumulate_grad_batches=2``: windows of 2 + 2 + 1, six
   updates);
3. an epoch-clock step schedule (one step per epoch);
4. a stateful resume at an epoch boundary that continues the update-clock
   LR sequence exactly (the clock, its budget and the scheduler's position
   are checkpointed with the training state), and the refusal of a resume
   whose budget differs from the checkpoint's.

    uv run python examples/scheduler_clocks.py
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import torch

from nnx import (
    Callback,
    ComponentRestoreError,
    Devices,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNSchedulerParams,
    NNTrainParams,
)


def batches(n: int, size: int = 8) -> list[tuple[torch.Tensor, ...]]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n * size, 4, generator=g)
    y = torch.randint(0, 3, (n * size,), generator=g)
    return [(x[i:i + size], y[i:i + size]) for i in range(0, len(x), size)]


def model() -> NNModel:
    torch.manual_seed(0)
    return NNModel(net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=(8,)),
                   params=NNModelParams(device=Devices.CPU))


class TrainedAt(Callback):
    """Records the LR each optimizer step trains at (read just before the step)."""

    def __init__(self) -> None:
        self.lrs: list[float] = []

    def on_train_begin(self, ctx: Any) -> None:
        ctx.optimizer.register_step_pre_hook(
            lambda opt, *_: self.lrs.append(opt.param_groups[0]["lr"]))


class StopAfter(Callback):
    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def on_epoch_end(self, ctx: Any) -> None:
        ctx.should_stop = ctx.epoch == self.epoch


def sgd(lr: float, accumulate: int = 1) -> NNOptimParams:
    return NNOptimParams.builder().sgd(max_lr=lr).accumulate_grad(accumulate).build()


def fmt(lrs: list[float]) -> str:
    return ", ".join(f"{lr:.4g}" for lr in lrs)


def close(a: list[float], b: list[float]) -> bool:
    if len(a) != len(b):
        return False
    return all(math.isclose(x, y, abs_tol=1e-12) for x, y in zip(a, b, strict=True))


def main() -> None:
    warmup = (NNSchedulerParams.builder().linear_warmup_decay(warmup_steps=3, total_steps=8)
              .clock("optimizer_update").build())
    assert warmup.state()["clock"] == "optimizer_update"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)

        # 1. Update clock: 2 epochs x 4 batches = the 8 updates of the budget.
        probe = TrainedAt()
        model().train(NNTrainParams(n_epochs=2, train_loader=batches(4), optim=sgd(0.12),
                                    scheduler=warmup),
                      callbacks=[probe], verbose=False, root=root / "warmup")
        print(f"update clock, warm-up 3 of 8, base 0.12: {fmt(probe.lrs)}")
        assert close(probe.lrs[:4], [0.04, 0.08, 0.12, 0.12]), probe.lrs
        straight = probe.lrs

        # 2. Under accumulation a step is a committed update, never a microbatch.
        probe = TrainedAt()
        default_budget = (NNSchedulerParams.builder().linear_warmup_decay(warmup_steps=2)
                          .clock("optimizer_update").build())
        model().train(NNTrainParams(n_epochs=2, train_loader=batches(5), optim=sgd(0.1, 2),
                                    scheduler=default_budget),
                      callbacks=[probe], verbose=False, root=root / "accumulate")
        print(f"5 microbatches x 2 epochs, accumulate 2: {len(probe.lrs)} updates "
              f"(the default budget is 2 x ceil(5 / 2) = 6): {fmt(probe.lrs)}")
        assert len(probe.lrs) == 6

        # 3. The epoch clock (the default, omitted from state()): one step per epoch.
        probe = TrainedAt()
        halving = NNSchedulerParams.builder().step(step_size=1, factor=0.5).build()
        assert "clock" not in halving.state()
        model().train(NNTrainParams(n_epochs=3, train_loader=batches(2), optim=sgd(0.2),
                                    scheduler=halving),
                      callbacks=[probe], verbose=False, root=root / "epoch")
        print(f"epoch clock, halving per epoch, 2 batches an epoch: {fmt(probe.lrs)}")
        assert close(probe.lrs, [0.2, 0.2, 0.1, 0.1, 0.05, 0.05])

        # 4. Stop after epoch 0, resume statefully: the LR sequence continues where it stopped.
        plan = NNTrainParams(n_epochs=2, train_loader=batches(4), optim=sgd(0.12),
                             scheduler=warmup)
        first_half, second_half = TrainedAt(), TrainedAt()
        first = model().train(plan, callbacks=[first_half, StopAfter(0)], verbose=False,
                              root=root / "split")
        rest = model().train(NNTrainParams(
            n_epochs=2, train_loader=batches(4), optim=sgd(0.12), scheduler=warmup,
            resume_from_run_id=first.id, resume_mode="stateful", resume_epochs="planned"),
            callbacks=[second_half], verbose=False, root=root / "split")
        assert rest.resume_status is not None and rest.resume_status.mode == "stateful"
        print(f"split at epoch 0 and resumed: {fmt(first_half.lrs)} | {fmt(second_half.lrs)}")
        assert close(first_half.lrs + second_half.lrs, straight)
        print("the resumed run trains at the uninterrupted run's rates")

        # A resume whose budget differs from the checkpoint's is refused before anything
        # is restored or written.
        longer = (NNSchedulerParams.builder().linear_warmup_decay(warmup_steps=3, total_steps=12)
                  .clock("optimizer_update").build())
        runs_before = sorted(p.name for p in (root / "split").iterdir())
        try:
            model().train(NNTrainParams(n_epochs=1, train_loader=batches(4), optim=sgd(0.12),
                                        scheduler=longer, resume_from_run_id=first.id),
                          verbose=False, root=root / "split")
        except ComponentRestoreError as exc:
            print(f"refused: {exc}")
        else:
            raise AssertionError("a resume with another budget was accepted")
        assert sorted(p.name for p in (root / "split").iterdir()) == runs_before


if __name__ == "__main__":
    main()
