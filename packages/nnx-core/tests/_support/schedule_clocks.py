"""Helpers shared by the tests split out of engine/test_schedule_clocks.py."""

from __future__ import annotations

from _nnx_core_tiny import tiny_batches, tiny_model

from nnx import Callback

# -- helpers ----------------------------------------------------------------------------


loader = tiny_batches


make_model = tiny_model


class TrainedAt(Callback):
    """Records the LR each optimizer step actually trains at (a step pre-hook)."""

    def __init__(self) -> None:
        self.lrs: list[float] = []
        self.schedule = None

    def on_train_begin(self, ctx):
        self.schedule = ctx.scheduler
        ctx.optimizer.register_step_pre_hook(
            lambda opt, *_: self.lrs.append(opt.param_groups[0]["lr"]))
