"""TensorBoardCallback (spec §5, §6.3, §6.4): the epoch's records as TensorBoard scalars.

Needs the ``tensorboard`` extra (``pip install "nnx-core[tensorboard]"``).
Construction checks that it is installed; ``torch.utils.tensorboard`` is
imported only when the run begins, so importing this module costs nothing.

Every epoch end writes one scalar per key of
:func:`nnx.callbacks._scalars.epoch_scalars` at ``step = epoch``:
``train/<field>`` (the epoch's last batch), ``val/<field>``,
``train_epoch/<field>`` (the whole-epoch summary, when the run declares
metrics or a monitor), ``<split>/metrics/<name>``, ``<split>/extra/<name>``,
``lr``, and with a named monitor ``monitor/<split>.<metric>`` and
``monitor/improved`` (1.0 / 0.0). Only fields a record carries are written:
a regression run has no accuracy or error tags. Scalars are stored as
float32, as TensorBoard stores every simple scalar.

``log_every_n_batches=n`` also writes every n-th training batch of each
epoch (batch index 0, n, 2n, …) under ``train_batch/…`` at
``step = iter_idx`` (the run-wide microbatch count). The callback bus has
no per-batch hook, so those are written at the epoch's end from
``ctx.idps``; a partial epoch that is discarded is not written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nnx._foundation.extras import import_extra, require_extra
from nnx._foundation.validation import check_count
from nnx.callbacks._scalars import batch_scalars, epoch_scalars
from nnx.callbacks.base import Callback, CallbackContext

if TYPE_CHECKING:
    from nnx._foundation.records import NNIterationDataPoint

__all__ = ["TensorBoardCallback"]

_OWNER = "TensorBoardCallback"


class TensorBoardCallback(Callback):
    """Write each epoch's scalars to TensorBoard event files.

    ``log_dir`` defaults to ``<run dir>/tensorboard``; ``path`` is the
    directory this run's events went to (set when the run begins).
    """

    def __init__(self, log_dir: str | os.PathLike[str] | None = None, *,
                 log_every_n_batches: int | None = None) -> None:
        require_extra(_OWNER, "tensorboard", "tensorboard")
        if log_dir is not None and not isinstance(log_dir, (str, os.PathLike)):
            raise TypeError(f"{_OWNER}.log_dir must be a path or None; got "
                            f"{type(log_dir).__name__}")
        self.log_dir = None if log_dir is None else Path(log_dir)
        self.log_every_n_batches = None if log_every_n_batches is None else check_count(
            f"{_OWNER}.log_every_n_batches", log_every_n_batches)
        self.path: Path | None = None
        self._writer: Any = None

    def on_train_begin(self, ctx: CallbackContext) -> None:
        if ctx.rank != 0:
            return  # under DDP only rank 0 writes
        module = import_extra(_OWNER, "torch.utils.tensorboard", "tensorboard",
                              package="tensorboard")
        self._close()  # a writer a failed earlier run left open
        self.path = self.log_dir if self.log_dir is not None else (
            Path(ctx.run.path) / "tensorboard")
        self._writer = module.SummaryWriter(log_dir=str(self.path))

    def on_epoch_end(self, ctx: CallbackContext) -> None:
        writer = self._writer
        if writer is None:
            return
        if self.log_every_n_batches is not None:
            for idp in self._epoch_batches(ctx):
                if idp.batch_idx % self.log_every_n_batches == 0:
                    for tag, value in batch_scalars(idp).items():
                        writer.add_scalar(tag, value, global_step=idp.iter_idx)
        for tag, value in epoch_scalars(ctx).items():
            writer.add_scalar(tag, value, global_step=ctx.epoch)
        writer.flush()

    def on_train_end(self, ctx: CallbackContext) -> None:
        self._close()

    @staticmethod
    def _epoch_batches(ctx: CallbackContext) -> list[NNIterationDataPoint]:
        """This epoch's records from the running history, in order."""
        batches: list[NNIterationDataPoint] = []
        for idp in reversed(ctx.idps):
            if idp.epoch != ctx.epoch:
                break
            batches.append(idp)
        batches.reverse()
        return batches

    def _close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
