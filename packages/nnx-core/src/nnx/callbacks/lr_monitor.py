"""LRMonitor (spec §5, §4.5): the primary optimizer's learning rate per epoch, and per update."""

from __future__ import annotations

from nnx.callbacks.base import Callback, CallbackContext

__all__ = ["LRMonitor"]


class LRMonitor(Callback):
    """``history``: one LR per epoch. ``update_history``: (update index, LR after that
    update's scheduler step) pairs, recorded on the ``optimizer_update`` clock only.

    In a run with a HistoryJournal, ``history`` is bounded like the record window:
    it keeps the LRs of the last ``retention`` epochs. ``bounded=False`` keeps every
    epoch. Without a journal nothing is bounded, as ``ctx.idps`` is not.
    """

    def __init__(self, bounded: bool = True) -> None:
        if not isinstance(bounded, bool):
            raise ValueError(f"LRMonitor.bounded must be a bool; got {bounded!r}")
        self.bounded = bounded
        self.history: list[float] = []
        self.update_history: list[tuple[int, float]] = []
        self._keep: int | None = None  # this run's bound on history (None: every epoch)

    def _lr(self, ctx: CallbackContext) -> float:
        assert ctx.optimizer is not None
        return float(ctx.optimizer.param_groups[0]["lr"])

    def on_train_begin(self, ctx: CallbackContext) -> None:
        self.history = []
        self.update_history = []
        # The loop opens the run's history before the reset hooks, so a journal run
        # already carries its HistoryJournal here: its retention is the bound.
        journal = getattr(ctx.run, "journal", None)
        self._keep = journal.retention if self.bounded and journal is not None else None
        # Called after each step NNx gives the primary optimizer's update-clock schedule.
        ctx.clock_listeners.append(self._on_update)

    def _on_update(self, ctx: CallbackContext) -> None:
        self.update_history.append((ctx.committed_updates, self._lr(ctx)))

    def on_epoch_end(self, ctx: CallbackContext) -> None:
        self.history.append(self._lr(ctx))
        if self._keep is not None and len(self.history) > self._keep:
            del self.history[:-self._keep]  # a list still, trimmed to the last epochs
