"""LRMonitor (spec §5): the primary optimizer's learning rate per epoch, and per update."""

from __future__ import annotations

from nnx.callbacks.base import Callback, CallbackContext

__all__ = ["LRMonitor"]


class LRMonitor(Callback):
    """``history``: one LR per epoch. ``update_history``: (update index, LR after that
    update's scheduler step) pairs, recorded on the ``optimizer_update`` clock only."""

    def __init__(self) -> None:
        self.history: list[float] = []
        self.update_history: list[tuple[int, float]] = []

    def _lr(self, ctx: CallbackContext) -> float:
        assert ctx.optimizer is not None
        return float(ctx.optimizer.param_groups[0]["lr"])

    def on_train_begin(self, ctx: CallbackContext) -> None:
        self.history = []
        self.update_history = []
        # Called after each step NNx gives the primary optimizer's update-clock schedule.
        ctx.clock_listeners.append(self._on_update)

    def _on_update(self, ctx: CallbackContext) -> None:
        self.update_history.append((ctx.committed_updates, self._lr(ctx)))

    def on_epoch_end(self, ctx: CallbackContext) -> None:
        self.history.append(self._lr(ctx))
